"""The DQN / M-DQN baselines' settings (App. C.4) as a typed config, apart from `agents.dqn` so
that reading and checking a configuration imports neither Acme nor jax."""
import dataclasses
from typing import Tuple

ALGORITHMS = ('dqn', 'mdqn')


@dataclasses.dataclass(frozen=True)
class DQNConfig:
  """One DQN / M-DQN agent. Defaults: App. C.4, except where marked 'ours'."""
  algorithm: str = 'dqn'                  # 'dqn' (Mnih et al. 2015) or 'mdqn' (Vieillard et al.)
  hidden_sizes: Tuple[int, ...] = (512, 512)
  learning_rate: float = 1e-3
  discount: float = 0.99
  batch_size: int = 128
  replay_size: int = 50_000
  update_every: int = 4                   # env steps per gradient step
  target_update_every: int = 400          # env steps between target network copies
  munchausen_alpha: float = 0.9
  munchausen_tau: float = 0.03
  # The lower clip of the Munchausen term tau * log pi(a|s): Vieillard et al.'s l0 = -1. Acme
  # 0.4.0's loss defaults to -1000; with it M-DQN diverged here (loss ~5e6 at 140k steps, NaN
  # at 155k).
  munchausen_clip: float = -1.0
  # Ours (not in the paper): gradient steps start once this many transitions are stored, and
  # epsilon-greedy exploration decays linearly from epsilon_start to epsilon_end.
  min_replay_size: int = 1_000
  epsilon_start: float = 1.0
  epsilon_end: float = 0.01
  epsilon_decay_steps: int = 50_000

  def __post_init__(self):
    if self.algorithm not in ALGORITHMS:
      raise ValueError(f'algorithm must be one of {", ".join(ALGORITHMS)}, got {self.algorithm!r}')
    if not self.hidden_sizes or any(int(h) < 1 for h in self.hidden_sizes):
      raise ValueError(f'hidden sizes must be >= 1, got {list(self.hidden_sizes)}')
    for name in ('batch_size', 'replay_size', 'update_every', 'target_update_every',
                 'min_replay_size'):
      if getattr(self, name) < 1:
        raise ValueError(f'{name} must be >= 1, got {getattr(self, name)}')
    if self.target_update_every % self.update_every:
      # Acme's learner counts its own steps: the target period is a whole number of them.
      raise ValueError(f'target_update_every ({self.target_update_every}) must be a multiple of '
                       f'update_every ({self.update_every})')
    if self.min_replay_size > self.replay_size:
      raise ValueError(f'min_replay_size ({self.min_replay_size}) exceeds replay_size '
                       f'({self.replay_size})')
    if self.learning_rate <= 0:
      raise ValueError(f'learning_rate must be > 0, got {self.learning_rate}')
    if not 0 <= self.discount <= 1:
      raise ValueError(f'discount must be in [0, 1], got {self.discount}')
    if not (0 <= self.epsilon_end <= 1 and 0 <= self.epsilon_start <= 1):
      raise ValueError('epsilon_start and epsilon_end must be in [0, 1]')
    if self.epsilon_decay_steps < 0:
      raise ValueError(f'epsilon_decay_steps must be >= 0, got {self.epsilon_decay_steps}')
    if self.munchausen_clip >= 0:
      raise ValueError(f'munchausen_clip must be < 0, got {self.munchausen_clip}')
    if self.munchausen_tau <= 0:
      raise ValueError(f'munchausen_tau must be > 0, got {self.munchausen_tau}')

  @property
  def learner_target_period(self) -> int:
    """The target period in learner steps (Acme's unit), from the paper's env steps."""
    return self.target_update_every // self.update_every

  def epsilon(self, env_steps: int) -> float:
    if self.epsilon_decay_steps == 0:
      return self.epsilon_end
    frac = min(1.0, env_steps / self.epsilon_decay_steps)
    return self.epsilon_start + frac * (self.epsilon_end - self.epsilon_start)

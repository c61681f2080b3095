"""The DQN / M-DQN baselines' settings (App. C.4) as a typed config, apart from `agents.dqn` so
that reading and checking a configuration imports neither Acme nor jax. Each field's help is its
flag's in `launch.train_dqn` (envs.cli's field flags)."""
import dataclasses
from typing import Tuple

from envs.cli import field as _field

ALGORITHMS = ('dqn', 'mdqn')


@dataclasses.dataclass(frozen=True)
class DQNConfig:
  """One DQN / M-DQN agent. Defaults: App. C.4, except where marked 'ours'."""
  algorithm: str = _field('dqn', 'DQN (Mnih et al. 2015) or M-DQN (Vieillard et al. 2020).',
                          choices=ALGORITHMS)
  hidden_sizes: Tuple[int, ...] = _field((512, 512), 'Q-network hidden layers (App. C.4).')
  learning_rate: float = _field(1e-3, 'Adam learning rate (App. C.4).')
  discount: float = _field(0.99, 'Discount gamma (App. C.4).')
  batch_size: int = _field(128, 'Transitions per gradient step (App. C.4).')
  replay_size: int = _field(50_000, 'Replay buffer size in transitions (App. C.4).')
  update_every: int = _field(4, 'Env steps per gradient step (App. C.4).')
  target_update_every: int = _field(400, 'Env steps between target copies (App. C.4).')
  munchausen_alpha: float = _field(0.9, 'M-DQN alpha (App. C.4).')
  munchausen_tau: float = _field(0.03, 'M-DQN tau (App. C.4).')
  munchausen_clip: float = _field(
      -1.0, "M-DQN's lower clip l0 of tau * log pi (Vieillard et al.: -1; with Acme 0.4.0's "
      'default, -1000, M-DQN diverged).')
  min_replay_size: int = _field(
      1_000, 'Transitions stored before the first gradient step (ours; not in the paper).')
  epsilon_start: float = _field(1.0, 'Exploration epsilon at step 0 (ours).')
  epsilon_end: float = _field(0.01, 'Exploration epsilon after the decay (ours).')
  epsilon_decay_steps: int = _field(50_000, 'Env steps of the linear epsilon decay (ours).')

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

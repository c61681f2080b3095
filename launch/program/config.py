"""Typed run configuration, built once from command-line flags and passed to every node."""
import dataclasses
import math
import os
from typing import Any, Dict, Optional

from agents.acting import ReversibilityConfig
from agents.policy_net import PolicyNetConfig
from estimators.networks import EstimatorNetConfig
from estimators.training import TrainConfig as EstimatorTrainConfig

AGENTS = ('impala', 'random')


def documented(default, help_text: str):
  """A config field with its documentation, which is also its flag's help
  (launch.program.run_flags)."""
  return dataclasses.field(default=default, metadata={'help': help_text})


def _at_least(config, low, *names) -> None:
  """ValueError naming the first of the fields `names` of `config` below `low`."""
  for name in names:
    if getattr(config, name) < low:
      raise ValueError(f'{name} must be >= {low}, got {getattr(config, name)}')


# cluster: many hosts through Launchpad's CLUSTER_SPEC runtime (launch.cluster); vertex_ai:
# Launchpad's own Vertex AI launcher.
LAUNCH_TYPES = ('local_mp', 'local_mt', 'test_mt', 'cluster', 'vertex_ai')


@dataclasses.dataclass(frozen=True)
class ImpalaConfig:
  """IMPALA hyperparameters (feed-forward nets; the Acme/Sokoban-appendix layout of options).
  Per-environment values: the environment's preset (envs.presets)."""
  batch_size: int = documented(16, 'IMPALA batch: sequences per learner update.')
  sequence_length: int = documented(20, 'IMPALA unroll length, steps per sequence.')
  learning_rate: float = documented(1e-3, 'IMPALA Adam learning rate.')
  adam_b1: float = documented(0.9, 'IMPALA Adam first-moment decay.')
  adam_b2: float = documented(0.999, 'IMPALA Adam second-moment decay.')
  adam_eps: float = documented(1e-8, "IMPALA Adam's epsilon (added to the second moment's root).")
  learning_rate_decay_steps: int = documented(
      0, 'Env steps over which the IMPALA learning rate falls linearly to 0 (counted in Adam '
      'steps: the env steps each one trains on at one sample per sequence, times the reuse); '
      'past them it stays 0. 0: a constant learning rate.')
  minibatches: int = documented(
      1, 'Minibatches per sampled batch: batch_size sequences are split into this many slices '
      'of equal size and the learner takes one Adam step on each, in order, each slice once.')
  vtrace_lambda: float = documented(
      1.0, "V-trace's lambda (Espeholt et al. 2018, Remark 2): 1 is IMPALA's; below 1 the "
      'targets lean more on the value of the next state.')
  logit_l2_cost: float = documented(
      0.0, "Weight of an L2 term on the policy's logits: the sum of their squares over a "
      "sequence's steps and actions, averaged over the batch's sequences.")
  weight_l2_cost: float = documented(0.0, "Weight of an L2 term on the policy network's "
                                     'parameters (the sum of their squares).')
  discount: float = documented(0.99, 'IMPALA discount.')
  entropy_cost: float = documented(0.01, 'IMPALA entropy cost.')
  baseline_cost: float = documented(0.5, 'IMPALA value-loss weight.')
  max_gradient_norm: float = documented(40.0, 'IMPALA global gradient-norm clip.')
  max_queue_size: Optional[int] = documented(
      None, 'Items the IMPALA queue holds (> batch_size + 1); unset: max(160, 2 x batch_size).')
  policy_update_period: int = documented(100, 'Actor steps between policy parameter fetches.')
  # Reverb's SampleToInsertRatio holds the actors back when the learner falls behind, so the
  # ratio holds at any speed; V-trace corrects for the policy lag the reuse adds.
  samples_per_insert: float = documented(
      0.0, "Sequence reuse. 0: the IMPALA table is a queue (each sequence trained on once); "
      '> 0: a replay of the last replay_size sequences, sampled uniformly, each sequence '
      'sampled this many times on average.')
  replay_size: int = documented(256, 'Sequences the replay keeps (samples_per_insert > 0).')
  self_imitation_updates: int = documented(
      0, 'Self-imitation (Oh et al., 2018; agents.self_imitation): after each V-trace update, '
      'this many updates on steps of the best terminated episodes seen, imitating an action '
      "only where its return beat the value. 0: none (the paper's IMPALA).")
  self_imitation_batch: int = documented(256, 'Steps per self-imitation update.')
  self_imitation_episodes: int = documented(
      64, 'Best episodes each actor keeps forwarding to the self-imitation table.')
  self_imitation_steps: int = documented(
      8192, 'Steps the self-imitation table keeps (lowest episode return out first).')
  self_imitation_value_cost: float = documented(
      0.01, "Oh et al.'s beta: the weight of self-imitation's value term.")
  updates_per_call: int = documented(
      1, 'V-trace updates per jitted learner call, on as many batches sampled together: the '
      'same updates in the same order, one dispatch. Faster on a GPU, slower on a CPU (keep 1 '
      'there): BUILD_NOTES.md, "On a GPU". One learner device only.')

  def __post_init__(self):
    _at_least(self, 1, 'batch_size', 'self_imitation_batch', 'self_imitation_episodes',
              'self_imitation_steps', 'updates_per_call', 'minibatches')
    _at_least(self, 0, 'entropy_cost', 'self_imitation_value_cost', 'learning_rate_decay_steps',
              'logit_l2_cost', 'weight_l2_cost')
    if self.batch_size % self.minibatches:
      raise ValueError(f'batch_size {self.batch_size} does not split into {self.minibatches} '
                       'minibatches of equal size')
    if not 0 <= self.vtrace_lambda <= 1:
      raise ValueError(f'vtrace_lambda must lie in [0, 1], got {self.vtrace_lambda}')
    if not self.adam_eps > 0:
      raise ValueError(f'adam_eps must be > 0, got {self.adam_eps}')
    if self.max_queue_size is None:
      object.__setattr__(self, 'max_queue_size', max(160, 2 * self.batch_size))
    if self.sequence_length < 2:
      raise ValueError(f'sequence_length must be >= 2 (V-trace bootstraps from the last step), '
                       f'got {self.sequence_length}')
    if self.learning_rate <= 0:
      raise ValueError(f'IMPALA learning_rate must be > 0, got {self.learning_rate}')
    if not (0 <= self.adam_b1 < 1 and 0 <= self.adam_b2 < 1):
      raise ValueError(f'Adam decays must lie in [0, 1), got b1={self.adam_b1}, b2={self.adam_b2}')
    if not 0 <= self.discount <= 1:
      raise ValueError(f'discount must lie in [0, 1], got {self.discount}')
    if self.max_queue_size <= self.batch_size + 1:
      raise ValueError(f'max_queue_size ({self.max_queue_size}) must exceed batch_size + 1')
    if self.max_gradient_norm <= 0:
      raise ValueError(f'max_gradient_norm must be > 0, got {self.max_gradient_norm}')
    if self.samples_per_insert < 0:
      raise ValueError(f'samples_per_insert must be >= 0 (0: a queue), got {self.samples_per_insert}')
    if self.samples_per_insert > 0 and self.replay_size < 2 * self.batch_size:
      raise ValueError(f'replay_size ({self.replay_size}) must be at least twice batch_size '
                       f'({self.batch_size})')
    if self.self_imitation_updates < 0:
      raise ValueError(f'self_imitation_updates must be >= 0 (0: none), got '
                       f'{self.self_imitation_updates}')

  @property
  def uses_replay(self) -> bool:
    return self.samples_per_insert > 0

  @property
  def minibatch_size(self) -> int:
    return self.batch_size // self.minibatches

  @property
  def learning_rate_decay_updates(self) -> int:
    """Adam steps over which the learning rate decays (0: none): learning_rate_decay_steps over
    the env steps one step trains on, a sequence's T - 1 new ones (Acme's adders overlap one)
    each sampled max(1, samples_per_insert) times."""
    if not self.learning_rate_decay_steps:
      return 0
    env_steps_per_update = (self.minibatch_size * (self.sequence_length - 1)
                            / max(1.0, self.samples_per_insert))
    return max(1, int(math.ceil(self.learning_rate_decay_steps / env_steps_per_update)))

  @property
  def uses_self_imitation(self) -> bool:
    return self.self_imitation_updates > 0


@dataclasses.dataclass(frozen=True)
class PrecedenceConfig:
  """The precedence-learner node: what it samples and how often it trains."""
  # Each Reverb sample of `window_batch` windows serves `updates_per_sample` updates, each
  # drawing its own pairs (BUILD_NOTES.md, "Precedence learner").
  window_batch: int = documented(64, 'Windows the precedence learner samples from Reverb at once.')
  updates_per_sample: int = documented(
      4, 'psi (and phi) updates made on each sample of windows, each with its own pairs; 1: a '
      'fresh sample per update.')
  # The paper: one per 500 env steps; ours per env in envs.presets (BUILD_NOTES.md).
  env_steps_per_update: int = documented(
      50, 'Throttle of the precedence learner: one psi (and phi) update per this many env steps.')
  table_max_windows: int = documented(
      20_000, 'Size of the precedence table, in windows of 2w steps.')
  min_windows: int = documented(8, 'Windows the precedence table must hold before psi trains.')
  estimator_update_period: int = documented(
      100, 'Actor steps between psi/phi parameter fetches.')

  def __post_init__(self):
    if not 1 <= self.min_windows <= self.table_max_windows:
      raise ValueError(f'min_windows must lie in [1, {self.table_max_windows}] (the table '
                       f'size), got {self.min_windows}')
    _at_least(self, 1, 'env_steps_per_update')
    if self.window_batch < 1 or self.updates_per_sample < 1:
      raise ValueError(f'window_batch ({self.window_batch}) and updates_per_sample '
                       f'({self.updates_per_sample}) must be >= 1')


@dataclasses.dataclass(frozen=True)
class RunConfig:
  env: str = documented('cartpole', 'Environment name (envs.make).')
  env_options: Dict[str, Any] = dataclasses.field(default_factory=dict)
  agent: str = documented('impala', f'Policy: {" or ".join(AGENTS)} (uniform random).')
  num_actors: int = documented(2, 'Number of actor nodes.')
  envs_per_actor: int = documented(
      1, 'Environments each actor steps together, with one batched inference call per step.')
  vectorised_env: bool = documented(
      True, "Step each actor's environments with the environment's vectorised batch where it "
      'has one (sokoban: numpy over the K rooms, the same episodes as K single environments); '
      'False steps them one by one (the reference).')
  max_steps: int = documented(100_000, 'Total actor (environment) steps; the run stops there.')
  seed: int = documented(0, 'Random seed.')
  run_dir: str = documented('runs/default', 'Output directory.')
  launch_type: str = documented(
      'local_mp', f'Launchpad launch type, one of {", ".join(LAUNCH_TYPES)}. cluster: the hosts '
      "of --cluster_description through Launchpad's CLUSTER_SPEC runtime (launch.cluster); "
      "vertex_ai: Launchpad's own Vertex AI launcher (needs xmanager, Docker, a GCP project).")
  reversibility: ReversibilityConfig = ReversibilityConfig()
  impala: ImpalaConfig = ImpalaConfig()
  precedence: PrecedenceConfig = PrecedenceConfig()
  estimator_train: EstimatorTrainConfig = EstimatorTrainConfig()
  # psi's and phi's network.
  estimator_network: EstimatorNetConfig = EstimatorNetConfig()
  # The policy network (IMPALA's policy and value heads); None: the environment's default
  # (agents.policy_net.default_policy_config). launch.train always records it.
  policy_network: Optional[PolicyNetConfig] = None
  estimator_checkpoint: Optional[str] = documented(
      None, 'Frozen psi/phi checkpoint (offline RAE/RAC) instead of the online precedence learner.')
  # Supervision (launch.runtime.supervisor).
  max_node_failures: int = documented(
      3, 'A node process that dies is restarted; this many deaths of one node within '
      'node_failure_window_s stop the run.')
  checkpoint_period_s: float = documented(
      300.0, 'Seconds between learner checkpoints (they also save when the run ends or is stopped).')
  node_failure_window_s: float = documented(60.0, 'Seconds over which max_node_failures count.')
  # Written by the coordinator (launch.program.replay); a restarted replay node loses what came
  # after the last one.
  replay_checkpoint_period_s: float = documented(
      120.0, "Seconds between checkpoints of the replay's tables (RUN_DIR/checkpoints/replay; also "
      'written when the run ends or is stopped): what a --resume or a restarted replay node '
      'starts from.')
  # Faults that do not kill a process (launch.runtime.hangs, launch.program.checkpointing,
  # estimators.updates).
  hang_timeout_s: float = documented(
      120.0, 'A node stopped this long, or a worker (actor, learner) whose CPU time stands still '
      'this long while another works, is killed and restarted; a second hang stops the run. '
      '0: hangs are not looked for.')
  checkpoints_kept: int = documented(
      3, 'Learner checkpoints kept per learner; a restore takes the newest valid one, so a '
      'corrupt newest costs one checkpoint period.')
  max_skipped_updates: int = documented(
      100, 'Updates in a row with a non-finite loss or gradient (each one dropped and counted) '
      'after which a learner stops the run.')
  # launch.program.devices (threads).
  actor_threads: int = documented(
      0, "XLA threads per actor process (local launches): 1, or 0 for XLA's default, one per core.")
  # launch.program.devices: where the learners run (every other node runs on the CPU).
  learner_device: str = documented(
      'auto', 'Where the IMPALA learner runs: auto (the GPU when the host has one and jax its '
      'CUDA plugin, else the CPU), cpu or gpu (an error where it cannot).')
  learner_host_devices: int = documented(
      0, 'On the CPU, the XLA host devices the learner splits each batch over (one per core '
      "it uses); 0: its share of the host's cores beside the actors "
      '(launch.runtime.host_preset), a count that divides its batch sizes.')
  learner_chunk_sequences: int = documented(
      16, 'On a CPU learner of one device: the gradient of each batch taken over chunks of this '
      'many sequences, one call each, and summed (the same update up to rounding; a chunk\'s '
      'activations stay in the core\'s cache); 0: the whole batch in one call.')
  precedence_device: str = documented(
      'cpu', 'Where the precedence (psi/phi) learner runs: cpu, gpu or auto.')

  def __post_init__(self):
    if self.agent not in AGENTS:
      raise ValueError(f'unknown agent {self.agent!r}; expected one of {AGENTS}')
    if self.launch_type not in LAUNCH_TYPES:
      raise ValueError(f'unknown launch type {self.launch_type!r}; expected one of {LAUNCH_TYPES}')
    _at_least(self, 1, 'num_actors', 'envs_per_actor', 'max_steps', 'checkpoints_kept',
              'max_skipped_updates')
    if self.checkpoint_period_s <= 0:
      raise ValueError(f'checkpoint period must be > 0 s, got {self.checkpoint_period_s}')
    if self.replay_checkpoint_period_s <= 0:
      raise ValueError(f'replay checkpoint period must be > 0 s, got {self.replay_checkpoint_period_s}')
    if self.actor_threads not in (0, 1):
      raise ValueError(f'actor_threads must be 0 (XLA default) or 1, got {self.actor_threads}')
    for name in ('learner_device', 'precedence_device'):
      if getattr(self, name) not in ('auto', 'cpu', 'gpu'):
        raise ValueError(f'{name} must be auto, cpu or gpu, got {getattr(self, name)!r}')
    if self.learner_chunk_sequences < 0:
      raise ValueError('learner_chunk_sequences must be >= 0 (0: the whole batch at once), got '
                       f'{self.learner_chunk_sequences}')
    if self.learner_host_devices < 0:
      raise ValueError(f'learner_host_devices must be >= 0 (0: auto), got {self.learner_host_devices}')
    if self.learner_host_devices and any(
        b % self.learner_host_devices for b in self.learner_batch_sizes):
      raise ValueError(f'learner_host_devices {self.learner_host_devices} must divide the '
                       f'learner\'s batch sizes {self.learner_batch_sizes}')
    if self.hang_timeout_s < 0:
      raise ValueError(f'hang_timeout_s must be >= 0 (0: off), got {self.hang_timeout_s}')
    if self.max_node_failures < 1 or self.node_failure_window_s <= 0:
      raise ValueError('max_node_failures must be >= 1 and node_failure_window_s > 0')
    if self.estimator_checkpoint and not os.path.exists(self.estimator_checkpoint):
      raise ValueError(f'estimator checkpoint not found: {self.estimator_checkpoint}')

  @property
  def learner_batch_sizes(self):
    """The batch sizes the IMPALA learner splits over its devices."""
    sizes = [self.impala.minibatch_size]
    if self.impala.uses_self_imitation:
      sizes.append(self.impala.self_imitation_batch)
    return sizes

  @property
  def uses_estimators(self) -> bool:
    return self.reversibility.uses_estimators

  @property
  def online_estimators(self) -> bool:
    """Whether a precedence-learner node trains psi/phi during the run."""
    return self.uses_estimators and not self.estimator_checkpoint

  @property
  def window(self) -> int:
    return self.estimator_train.window

"""What the agent is, wherever it runs: the run's environments and their spec, the policy
networks, estimators and optimiser, the Reverb tables and adders, and the IMPALA learner,
precedence learner and actor built from them (Acme's builder). Where each part runs, and the
replay client, variable sources, counter and logger it is handed, is the layout's business
(launch.program.layout); nothing here knows of Launchpad, nodes or the run directory."""
import math
import time
from typing import Callable, Iterator, List, Optional

import dm_env
import numpy as np
import optax
import reverb
from acme import specs, wrappers
from acme.jax import variable_utils
from acme.utils import counting, loggers

import envs
from agents import acting, adders, host_devices, learning, policy_inference, self_imitation
from agents import loop as loop_lib
from agents import networks as agent_networks
from envs import batch as env_batch
from estimators import checkpoint as est_checkpoint
from estimators import folding
from estimators import networks as est_nets
from launch.program.config import RunConfig
from launch.program.precedence_learner import PrecedenceLearner

IMPALA_TABLE = adders.IMPALA_TABLE


# Environments ----------------------------------------------------------------------------------

def make_environment(cfg: RunConfig, seed: int) -> dm_env.Environment:
  # float32 rewards/discounts to match the Reverb signatures.
  return wrappers.SinglePrecisionWrapper(envs.make(cfg.env, seed=seed, **cfg.env_options))


def make_environments(cfg: RunConfig, seeds: List[int]) -> env_batch.BatchedEnvironment:
  """An actor's K environments (one per seed): the environment's vectorised batch when it has
  one and `cfg.vectorised_env`, else K single environments stepped one by one."""
  if cfg.vectorised_env and envs.has_batch(cfg.env):
    return envs.make_batch(cfg.env, seeds, **cfg.env_options)
  return env_batch.EnvironmentList([make_environment(cfg, s) for s in seeds])


def environment_spec(cfg: RunConfig) -> specs.EnvironmentSpec:
  return specs.make_environment_spec(make_environment(cfg, 0))


def actor_seeds(cfg: RunConfig, actor_id: int) -> List[int]:
  """Seeds of an actor's environments (and of their action keys), distinct across the run:
  seed * 1000 + actor_id * K + i + 1 for its K environments."""
  k = cfg.envs_per_actor
  return [cfg.seed * 1000 + actor_id * k + i + 1 for i in range(k)]


# Networks and optimiser ------------------------------------------------------------------------

def policy_config(cfg: RunConfig, spec: specs.EnvironmentSpec) -> agent_networks.PolicyNetConfig:
  """The run's policy network: its recorded one, else the env's default."""
  return cfg.policy_network or agent_networks.default_policy_config(
      cfg.env, agent_networks.is_image_spec(spec))


def policy_networks(cfg: RunConfig, spec: specs.EnvironmentSpec):
  """The IMPALA networks of the run."""
  return agent_networks.make_networks(spec, policy_config(cfg, spec))


def make_estimators(cfg: RunConfig, spec: specs.EnvironmentSpec) -> est_nets.Estimators:
  return est_nets.make_estimators(cfg.estimator_network, spec.actions.num_values)


def make_optimizer(impala) -> optax.GradientTransformation:
  """The IMPALA learner's optimiser (its state is checkpointed: evaluation rebuilds it)."""
  learning_rate = impala.learning_rate
  if impala.learning_rate_decay_updates:
    learning_rate = optax.linear_schedule(impala.learning_rate, 0.0,
                                          impala.learning_rate_decay_updates)
  return optax.chain(optax.clip_by_global_norm(impala.max_gradient_norm),
                     optax.adam(learning_rate, b1=impala.adam_b1, b2=impala.adam_b2,
                                eps=impala.adam_eps))


# Reverb tables and adders ----------------------------------------------------------------------

def rooms_per_item(cfg: RunConfig) -> int:
  """G, the rooms of one table item (agents.adders): a divisor of both the actor's rooms and the
  IMPALA batch, so that a batch is whole items. 1 where a table is sampled uniformly (the replay,
  psi's windows): a block puts G rooms' same steps of one actor into each draw, and the preset
  learned measurably slower with it (BUILD_NOTES.md, "One room per item ...")."""
  if cfg.online_estimators or (cfg.agent == 'impala' and cfg.impala.uses_replay):
    return 1
  return math.gcd(cfg.envs_per_actor, cfg.impala.batch_size if cfg.agent == 'impala' else 0)


def make_tables(cfg: RunConfig) -> List[reverb.Table]:
  """The tables the run's learners sample: IMPALA's (and its self-imitation steps') and the
  precedence learner's trajectory windows. Sizes given in sequences and windows count items of
  `rooms_per_item` of them (rounded up)."""
  spec, rooms = environment_spec(cfg), rooms_per_item(cfg)
  tables = []
  if cfg.agent == 'impala':
    tables.append(make_impala_table(cfg.impala, rooms, adders.impala_signature(
        spec, cfg.impala.sequence_length, rooms)))
    if cfg.impala.uses_self_imitation:
      tables.append(make_self_imitation_table(cfg.impala.self_imitation_steps,
                                              adders.self_imitation_signature(spec)))
  if cfg.online_estimators:
    items = lambda windows: -(-windows // rooms)   # noqa: E731
    tables.append(reverb.Table(
        adders.PRECEDENCE_TABLE, sampler=reverb.selectors.Uniform(),
        remover=reverb.selectors.Fifo(), max_size=items(cfg.precedence.table_max_windows),
        rate_limiter=reverb.rate_limiters.MinSize(items(cfg.precedence.min_windows)),
        signature=adders.precedence_signature(spec, cfg.window, rooms)))
  return tables


def make_impala_table(impala, rooms: int, signature) -> reverb.Table:
  """The queue (each sequence trained on once), or with samples_per_insert > 0 a FIFO replay of
  `replay_size` sequences sampled uniformly, each `samples_per_insert` times on average; in
  items of `rooms` sequences, each sampled whole, so the ratio holds per sequence."""
  batch = impala.batch_size // rooms
  if not impala.uses_replay:
    return reverb.Table.queue(IMPALA_TABLE, max_size=max(-(-impala.max_queue_size // rooms),
                                                         batch + 2), signature=signature)
  # The learner may run ahead of (or behind) the ratio by one batch (Reverb's minimum is
  # 2 x samples_per_insert): ahead, it would resample the sequences already there.
  error_buffer = float(max(batch, 2 * impala.samples_per_insert))
  return reverb.Table(
      IMPALA_TABLE, sampler=reverb.selectors.Uniform(), remover=reverb.selectors.Fifo(),
      max_size=impala.replay_size // rooms, max_times_sampled=0,
      rate_limiter=reverb.rate_limiters.SampleToInsertRatio(
          samples_per_insert=impala.samples_per_insert,
          min_size_to_sample=2 * batch, error_buffer=error_buffer),
      signature=signature)


def make_self_imitation_table(max_steps: int, signature) -> reverb.Table:
  """The best terminated episodes' steps, sampled uniformly; a MinHeap remover: when full, the
  steps of the lowest-return episode (their priority) go first."""
  return reverb.Table(
      adders.SELF_IMITATION_TABLE, sampler=reverb.selectors.Uniform(),
      remover=reverb.selectors.MinHeap(), max_size=max_steps,
      rate_limiter=reverb.rate_limiters.MinSize(1), signature=signature)


def make_actor_writer(cfg: RunConfig, replay: reverb.Client, num_envs: int,
                      max_in_flight_items: Optional[int] = None):
  """An actor's writer of its rooms' rows (agents.adders.ActorWriter): IMPALA unrolls, and
  precedence windows when a precedence learner trains online; with self-imitation it also offers
  their terminated episodes to the self-imitation table. max_in_flight_items: items sent but
  not yet accepted (None: 1 with the replay, where at 4 items queued in the actors and reached
  the table tens of updates late; else 4. 0: each in its table before the next row)."""
  if max_in_flight_items is None:
    max_in_flight_items = 1 if cfg.agent == 'impala' and cfg.impala.uses_replay else 4
  # A writer gives up on the replay after 3 s, and the replay's server may still be starting
  # (or restarting): server_info() without a timeout waits for it.
  replay.server_info()
  writer = adders.ActorWriter(
      replay, num_envs, impala_sequence=cfg.impala.sequence_length if cfg.agent == 'impala'
      else None, window=cfg.window if cfg.online_estimators else None,
      rooms_per_item=rooms_per_item(cfg), max_in_flight_items=max_in_flight_items)
  if cfg.agent == 'impala' and cfg.impala.uses_self_imitation:
    writer = adders.SelfImitationRows(
        writer, replay.trajectory_writer(num_keep_alive_refs=1),
        self_imitation.TopReturns(cfg.impala.self_imitation_episodes).admit, cfg.impala.discount)
  return writer


# Learners and actor ----------------------------------------------------------------------------

def _throttled(check, period_s: float):
  """`check` called at most every period_s seconds (False in between) until it returns True."""
  last = [-float('inf')]

  def throttled() -> bool:
    if time.time() - last[0] < period_s:
      return False
    last[0] = time.time()
    return bool(check())
  return throttled


def impala_batches(replay: reverb.Client, batch_size: int, rooms: int) -> Iterator:
  """The IMPALA learner's input: batches of `batch_size` sequences, items of `rooms` each sampled
  from `replay`'s 'impala' table (in the order they were written when the table is a queue),
  each the Trajectory the loss reads."""
  items = batch_size // rooms
  dataset = reverb.TrajectoryDataset.from_table_signature(
      server_address=replay.server_address, table=IMPALA_TABLE,
      max_in_flight_samples_per_worker=2 * items)
  # Items hold packed rows (agents.adders): unpacked per batch into the Trajectory the loss reads.
  return adders.unpacked(dataset.batch(items, drop_remainder=True).as_numpy_iterator(),
                         adders.unpack_impala)


def imitation_batches(replay: reverb.Client, batch_size: int) -> Iterator:
  """Self-imitation's input: batches of `batch_size` steps sampled uniformly from `replay`'s
  self-imitation table (sampling waits while the table is empty)."""
  dataset = reverb.TrajectoryDataset.from_table_signature(
      server_address=replay.server_address, table=adders.SELF_IMITATION_TABLE,
      max_in_flight_samples_per_worker=2 * batch_size)
  return adders.unpacked(dataset.batch(batch_size, drop_remainder=True).as_numpy_iterator(),
                         adders.unpack_self_imitation)


def make_learner(cfg: RunConfig, random_key, replay: reverb.Client, counter: counting.Counter,
                 logger: loggers.Logger) -> learning.IMPALALearner:
  """The IMPALA learner, sampling batches of sequences (and self-imitation steps) from `replay`."""
  spec = environment_spec(cfg)
  networks = policy_networks(cfg, spec)
  imitation, imitation_ready = None, None
  if cfg.impala.uses_self_imitation:
    # Items leave the table only to make room, so once it holds one it never empties. Asked at
    # most every 5 s: on the 1k set the first solved episode may take 100k env steps.
    imitation_ready = _throttled(
        lambda: replay.server_info()[adders.SELF_IMITATION_TABLE].current_size > 0, 5.0)
    imitation = imitation_batches(replay, cfg.impala.self_imitation_batch)
  devices = host_devices.learner_devices(cfg.learner_batch_sizes)
  one_cpu = len(devices) == 1 and devices[0].platform == 'cpu'
  return learning.IMPALALearner(
      networks, impala_batches(replay, cfg.impala.batch_size, rooms_per_item(cfg)), make_optimizer(cfg.impala),
      random_key, discount=cfg.impala.discount,
      entropy_cost=cfg.impala.entropy_cost, baseline_cost=cfg.impala.baseline_cost,
      self_imitation_value_cost=cfg.impala.self_imitation_value_cost,
      shield_mask=cfg.reversibility.learner_mask, vtrace_lambda=cfg.impala.vtrace_lambda,
      logit_l2_cost=cfg.impala.logit_l2_cost, weight_l2_cost=cfg.impala.weight_l2_cost,
      minibatches=cfg.impala.minibatches,
      imitation_iterator=imitation, imitation_updates=cfg.impala.self_imitation_updates,
      imitation_ready=imitation_ready, counter=counter, logger=logger,
      max_consecutive_skips=cfg.max_skipped_updates,
      devices=devices, updates_per_call=cfg.impala.updates_per_call,
      chunk_sequences=cfg.learner_chunk_sequences if one_cpu else 0)


def make_precedence_learner(cfg: RunConfig, replay: reverb.Client, counter: counting.Counter,
                            logger: loggers.Logger) -> PrecedenceLearner:
  """The precedence learner: psi (and phi) trained on trajectory windows sampled from `replay`."""
  spec = environment_spec(cfg)
  obs_example = np.zeros(spec.observations.shape, spec.observations.dtype)
  return PrecedenceLearner(
      make_estimators(cfg, spec), cfg.estimator_train, period=cfg.window,
      iterator=adders.precedence_windows(replay, cfg.precedence.window_batch,
                                         rooms_per_item(cfg)),
      obs_example=obs_example, env_steps_per_update=cfg.precedence.env_steps_per_update,
      updates_per_sample=cfg.precedence.updates_per_sample, counter=counter, logger=logger,
      max_consecutive_skips=cfg.max_skipped_updates)


def make_actor(cfg: RunConfig, actor_id: int, replay: Optional[reverb.Client], learner,
               precedence, counter: counting.Counter, logger: loggers.Logger,
               should_stop: Optional[Callable[[], bool]] = None
               ) -> loop_lib.BatchedEnvironmentLoop:
  """Actor `actor_id`'s loop over its environments: the policy from `learner`'s variables (IMPALA),
  the estimators from `precedence`'s or from the run's frozen checkpoint; it writes to `replay`
  when there is one, until the run's `max_steps` or until `should_stop()`."""
  seeds = actor_seeds(cfg, actor_id)
  environments = make_environments(cfg, seeds)
  spec = specs.make_environment_spec(environments)
  # Acme's VariableClient counts update() calls; the loop calls it once per K env steps.
  calls = lambda period: max(1, period // cfg.envs_per_actor)
  forward, policy_source, folded_policy = None, None, None
  if cfg.agent == 'impala':
    forward = policy_networks(cfg, spec).forward_fn
    folded_policy = policy_inference.policy_inference(policy_config(cfg, spec),
                                                      spec.observations.shape)
    policy_source = acting.PolicyClient(learner, calls(cfg.impala.policy_update_period))
  estimators, estimator_source = None, None
  if cfg.uses_estimators:
    if cfg.estimator_checkpoint:
      ckpt = est_checkpoint.load(cfg.estimator_checkpoint)
      estimators = ckpt.estimators
      estimator_source = acting.FixedParams((ckpt.psi_params, ckpt.phi_params))
    else:
      estimators = make_estimators(cfg, spec)
      estimator_source = variable_utils.VariableClient(
          precedence, key=['psi', 'phi'],
          update_period=calls(cfg.precedence.estimator_update_period), device='cpu')
  writer = make_actor_writer(cfg, replay, environments.num_envs) if replay is not None else None
  folded_psi = (folding.psi_inference(estimators.config, spec.observations.shape)
                if cfg.reversibility.mode == 'rae' else None)
  actor = acting.BatchedActor(
      spec.actions.num_values, cfg.reversibility, seeds, policy_forward=forward,
      policy_source=policy_source, estimators=estimators, estimator_source=estimator_source,
      policy_inference=folded_policy, psi_inference=folded_psi)
  return loop_lib.BatchedEnvironmentLoop(
      environments, actor, cfg.reversibility.mode, writer, counter, logger,
      track_estimators=cfg.online_estimators, total_steps_limit=cfg.max_steps,
      should_stop=should_stop)

"""Builds the Launchpad program: Reverb, counter, step limiter, IMPALA learner, precedence
learner and N actors. Nodes talk only through Reverb tables and variable sources.

Over 300 lines for now: the node factories and the layout stay in one file while the Sokoban
learning work edits it (issue 20 leaves splitting factories / coordinator / layout for after)."""
import csv
import functools
import os
import time
from typing import Any, Dict, List, Optional

import dm_env
import jax
import launchpad as lp
import numpy as np
import optax
import reverb
from acme import specs, wrappers
from acme.jax import variable_utils
from acme.utils import counting, loggers
from acme.utils.loggers import tf_summary

import envs
from envs import batch as env_batch
from agents import acting, adders, learning, self_imitation
from agents import loop as loop_lib
from agents import networks as agent_networks
from estimators import checkpoint as est_checkpoint
from estimators import networks as est_nets
from launch.program import checkpointing
from launch.program import replay as replay_lib
from launch.runtime import run_state
from launch.runtime import supervisor
from launch.program.config import RunConfig
from launch.program.precedence_learner import PrecedenceLearner, make_window_iterator

IMPALA_TABLE = adders.IMPALA_TABLE
# The IMPALA learner adds its updates to the counter node at most this often. Syncing at every
# update made each update wait for an RPC round trip to the counter's process: 14% of the learner
# thread's time on the busy 2-core machine (py-spy, BUILD_NOTES.md "Sokoban throughput"). Its log
# rows then place themselves on env steps read up to this long ago.
LEARNER_COUNTS_SYNC_S = 0.5


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


def policy_networks(cfg: RunConfig, spec: specs.EnvironmentSpec):
  """The IMPALA networks of the run: its recorded policy network, else the env's default."""
  return agent_networks.make_networks(spec, cfg.policy_network or agent_networks.default_policy_config(
      cfg.env, agent_networks.is_image_spec(spec)))


class AppendingCSVLogger(loggers.CSVLogger):
  """Acme's CSV logger takes its columns from the first row it writes; a node restarted or
  resumed onto an existing log would write rows whose columns do not match the file's header.
  This one keeps the header already in the file."""

  def write(self, data):
    if self._writer is None and self._file.tell() > 0:
      with open(self.file_path) as f:
        header = next(csv.reader(f), None)
      if header:
        self._writer = csv.DictWriter(self._file, fieldnames=header, extrasaction='ignore')
    super().write(data)


# Node label -> the counter that is its x axis in TensorBoard.
_TB_STEPS = {'learner': 'learner_steps', 'precedence': 'precedence_steps'}


def make_logger(cfg: RunConfig, label: str, time_delta: float = 0.0) -> loggers.Logger:
  """CSV (every row) and TensorBoard event files (at most one row a second per node, so
  actors with short episodes do not pay for it) under RUN_DIR/logs/<label>/."""
  logger = AppendingCSVLogger(cfg.run_dir, label=label, add_uid=False,
                              time_delta=time_delta, flush_every=1)
  tensorboard = tf_summary.TFSummaryLogger(os.path.join(cfg.run_dir, 'logs', label), label=label,
                                        steps_key=_TB_STEPS.get(label, 'actor_steps'))
  return loggers.NoneFilter(loggers.Dispatcher(
      [logger, loggers.TimeFilter(tensorboard, max(1.0, time_delta))]))


def make_tables(cfg: RunConfig) -> List[reverb.Table]:
  supervisor.write_pid(cfg.run_dir, 'replay')
  spec = environment_spec(cfg)
  tables = []
  if cfg.agent == 'impala':
    tables.append(make_impala_table(cfg.impala, adders.impala_signature(spec, cfg.impala.sequence_length)))
    if cfg.impala.uses_self_imitation:
      tables.append(make_self_imitation_table(cfg.impala.self_imitation_steps,
                                              adders.self_imitation_signature(spec)))
  if cfg.online_estimators:
    tables.append(reverb.Table(
        adders.PRECEDENCE_TABLE, sampler=reverb.selectors.Uniform(),
        remover=reverb.selectors.Fifo(), max_size=cfg.precedence.table_max_windows,
        rate_limiter=reverb.rate_limiters.MinSize(cfg.precedence.min_windows),
        signature=adders.precedence_signature(spec)))
  return tables


def make_impala_table(impala, signature) -> reverb.Table:
  """The queue (each sequence trained on once), or with samples_per_insert > 0 a FIFO replay of
  `replay_size` sequences sampled uniformly, each `samples_per_insert` times on average."""
  if not impala.uses_replay:
    return reverb.Table.queue(IMPALA_TABLE, max_size=impala.max_queue_size, signature=signature)
  # The learner may run ahead of (or behind) the ratio by one batch (Reverb's minimum is
  # 2 x samples_per_insert): ahead, it would resample the sequences already there.
  error_buffer = float(max(impala.batch_size, 2 * impala.samples_per_insert))
  return reverb.Table(
      IMPALA_TABLE, sampler=reverb.selectors.Uniform(), remover=reverb.selectors.Fifo(),
      max_size=impala.replay_size, max_times_sampled=0,
      rate_limiter=reverb.rate_limiters.SampleToInsertRatio(
          samples_per_insert=impala.samples_per_insert,
          min_size_to_sample=2 * impala.batch_size, error_buffer=error_buffer),
      signature=signature)


def make_self_imitation_table(max_steps: int, signature) -> reverb.Table:
  """The best terminated episodes' steps, sampled uniformly; a MinHeap remover: when full, the
  steps of the lowest-return episode (their priority) go first."""
  return reverb.Table(
      adders.SELF_IMITATION_TABLE, sampler=reverb.selectors.Uniform(),
      remover=reverb.selectors.MinHeap(), max_size=max_steps,
      rate_limiter=reverb.rate_limiters.MinSize(1), signature=signature)


def make_estimators(cfg: RunConfig, spec: specs.EnvironmentSpec) -> est_nets.Estimators:
  return est_nets.make_estimators(cfg.network, spec.actions.num_values)


class Counter(counting.Counter):
  """The counter node: an Acme counter that starts from the run's saved counts (on --resume,
  and when its supervisor restarts it: the counts since the coordinator last saved them, at
  most `counts_every_s` ago, are lost)."""

  def __init__(self, run_dir: str):
    super().__init__()
    supervisor.write_pid(run_dir, 'counter')
    self._counts.update(run_state.load_counts(run_dir))


class Coordinator:
  """Ends the run: at `max_steps` actor steps, or when the CLI asks (stop_request.json).

  Polls every 0.25 s (Acme's StepsLimiter polls every 10 s, overshooting by ~20k steps at 2k
  steps/s) and keeps counts.json up to date for --resume; checkpoints the replay's tables every
  `replay_checkpoint_s` (launch.program.replay). To end, it asks the learners to stop stepping
  and save (their final checkpoint is their last step), checkpoints the tables, records the
  final counts and tables, then stops the program. It keeps no state of its own, so its
  supervisor may restart it (a restarted one that finds the run at its end finishes it again).
  """

  def __init__(self, counter, replay: Optional[reverb.Client], learners: Dict[str, Any],
               max_steps: int, run_dir: str, replay_checkpoint_s: float = 120.0,
               poll_s: float = 0.25, counts_every_s: float = 2.0, finish_timeout_s: float = 90.0):
    self._counter, self._replay, self._learners = counter, replay, learners
    self._max_steps, self._run_dir, self._poll_s = max_steps, run_dir, poll_s
    self._counts_every_s, self._finish_timeout_s = counts_every_s, finish_timeout_s
    supervisor.write_pid(run_dir, 'coordinator')
    self._checkpoints = None
    if replay is not None:
      self._checkpoints = replay_lib.Checkpoints(replay, run_dir, replay_checkpoint_s).start()

  def run(self):
    last_saved = 0.0
    while True:
      counts = self._counter.get_counts()
      status = None
      if counts.get('actor_steps', 0) >= self._max_steps:
        status = run_state.COMPLETED
      elif run_state.stop_requested(self._run_dir):
        status = run_state.stop_requested(self._run_dir)
      if status is not None:
        self._finish(status)
        lp.stop()
        return
      if time.time() - last_saved >= self._counts_every_s:
        run_state.save_counts(self._run_dir, counts)
        last_saved = time.time()
      time.sleep(self._poll_s)

  def _finish(self, status: str):
    pending = {name: handle.futures.finish() for name, handle in self._learners.items()}
    checkpoints = {}
    for name, future in pending.items():
      try:
        checkpoints[name] = {'steps': future.result(timeout=self._finish_timeout_s)}
      except Exception as e:  # a dead or stuck learner: its last periodic checkpoint stands
        checkpoints[name] = {'error': f'{type(e).__name__}: {e}'[:300]}
    # The learners have stopped: the precedence table's checkpoint is what psi last trained on.
    replay_checkpoint = self._checkpoints.final() if self._checkpoints is not None else None
    counts = self._counter.get_counts()
    run_state.save_counts(self._run_dir, counts)
    tables = {}
    if self._replay is not None:
      try:
        tables = {name: {'current_size': info.current_size, 'num_inserts':
                         info.rate_limiter_info.insert_stats.completed,
                         'num_samples': info.rate_limiter_info.sample_stats.completed}
                  for name, info in self._replay.server_info().items()}
      except Exception as e:  # the replay node is down (restarting): the run still ends
        tables = {'error': f'{type(e).__name__}: {e}'[:300]}
    run_state.write_json(os.path.join(self._run_dir, 'final_state.json'),
                         {'status': status, 'counts': counts, 'tables': tables,
                          'checkpoints': checkpoints, 'replay_checkpoint': replay_checkpoint})


def make_optimizer(impala) -> optax.GradientTransformation:
  """The IMPALA learner's optimiser (its state is checkpointed: evaluation rebuilds it)."""
  return optax.chain(optax.clip_by_global_norm(impala.max_gradient_norm),
                     optax.adam(impala.learning_rate, b1=impala.adam_b1, b2=impala.adam_b2))


def _throttled(check, period_s: float):
  """`check` called at most every period_s seconds (False in between) until it returns True."""
  last = [-float('inf')]

  def throttled() -> bool:
    if time.time() - last[0] < period_s:
      return False
    last[0] = time.time()
    return bool(check())
  return throttled


def make_learner(cfg: RunConfig, random_key, replay: reverb.Client, counter):
  supervisor.write_pid(cfg.run_dir, 'learner')
  spec = environment_spec(cfg)
  networks = policy_networks(cfg, spec)
  dataset = reverb.TrajectoryDataset.from_table_signature(
      server_address=replay.server_address, table=IMPALA_TABLE,
      max_in_flight_samples_per_worker=2 * cfg.impala.batch_size)
  # Items hold packed rows (agents.adders): unpacked per batch into the Trajectory the loss reads.
  iterator = adders.unpacked(
      dataset.batch(cfg.impala.batch_size, drop_remainder=True).as_numpy_iterator(),
      adders.unpack_impala)
  imitation, imitation_ready = None, None
  if cfg.impala.uses_self_imitation:
    # Items leave the table only to make room, so once it holds one it never empties. Asked at
    # most every 5 s: on the 1k set the first solved episode may take 100k env steps.
    imitation_ready = _throttled(
        lambda: replay.server_info()[adders.SELF_IMITATION_TABLE].current_size > 0, 5.0)
    imitation = adders.unpacked(reverb.TrajectoryDataset.from_table_signature(
        server_address=replay.server_address, table=adders.SELF_IMITATION_TABLE,
        max_in_flight_samples_per_worker=2 * cfg.impala.self_imitation_batch
    ).batch(cfg.impala.self_imitation_batch, drop_remainder=True).as_numpy_iterator(),
        adders.unpack_self_imitation)
  optimizer = make_optimizer(cfg.impala)
  learner = learning.IMPALALearner(
      networks, iterator, optimizer, random_key, discount=cfg.impala.discount,
      entropy_cost=cfg.impala.entropy_cost, baseline_cost=cfg.impala.baseline_cost,
      self_imitation_value_cost=cfg.impala.self_imitation_value_cost,
      imitation_iterator=imitation, imitation_updates=cfg.impala.self_imitation_updates,
      imitation_ready=imitation_ready,
      counter=counting.Counter(counter, 'learner', time_delta=LEARNER_COUNTS_SYNC_S),
      logger=make_logger(cfg, 'learner', 1.0))
  return checkpointing.CheckpointedLearner(
      learner, os.path.join(cfg.run_dir, 'checkpoints', 'learner'), period_s=cfg.checkpoint_period_s)


def make_precedence_learner(cfg: RunConfig, replay: reverb.Client, counter):
  supervisor.write_pid(cfg.run_dir, 'precedence_learner')
  spec = environment_spec(cfg)
  obs_example = np.zeros(spec.observations.shape, spec.observations.dtype)
  learner = PrecedenceLearner(
      make_estimators(cfg, spec), cfg.estimator_train, period=cfg.window,
      iterator=make_window_iterator(replay, cfg.precedence.window_batch, 2 * cfg.window),
      obs_example=obs_example, env_steps_per_update=cfg.precedence.env_steps_per_update,
      updates_per_sample=cfg.precedence.updates_per_sample,
      counter=counting.Counter(counter, 'precedence', time_delta=0.0), logger=make_logger(cfg, 'precedence', 1.0))
  return checkpointing.CheckpointedLearner(
      learner, os.path.join(cfg.run_dir, 'checkpoints', 'precedence_learner'), period_s=cfg.checkpoint_period_s)


def actor_seeds(cfg: RunConfig, actor_id: int) -> List[int]:
  """Seeds of an actor's environments (and of their action keys): distinct across the run and,
  with one environment per actor, those of earlier versions (seed * 1000 + actor_id + 1)."""
  k = cfg.envs_per_actor
  return [cfg.seed * 1000 + actor_id * k + i + 1 for i in range(k)]


def make_actor(cfg: RunConfig, actor_id: int, replay: Optional[reverb.Client], learner,
               precedence, counter, evaluator: bool = False):
  supervisor.write_pid(cfg.run_dir, f'actor_{actor_id}')
  seeds = actor_seeds(cfg, actor_id)
  environments = make_environments(cfg, seeds)
  spec = specs.make_environment_spec(environments)
  # Acme's VariableClient counts update() calls; the loop calls it once per K env steps.
  calls = lambda period: max(1, period // cfg.envs_per_actor)
  forward, policy_source = None, None
  if cfg.agent == 'impala':
    forward = policy_networks(cfg, spec).forward_fn
    policy_source = acting.VersionedPolicy(variable_utils.VariableClient(
        learner, key=['policy', learning.POLICY_VERSION],
        update_period=calls(cfg.impala.policy_update_period), device='cpu'))
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
  env_adders = None
  if replay is not None and not evaluator:
    # A writer gives up on the replay after 3 s, and the replay node may still be starting (or
    # restarting): server_info() without a timeout waits for it.
    replay.server_info()
    env_adders = [make_adder(cfg, replay) for _ in range(environments.num_envs)]
    if cfg.agent == 'impala' and cfg.impala.uses_self_imitation:
      writer = replay.trajectory_writer(num_keep_alive_refs=1)
      admit = self_imitation.TopReturns(cfg.impala.self_imitation_episodes).admit
      env_adders = [adders.SelfImitationAdder(a, writer, admit, cfg.impala.discount)
                    for a in env_adders]
  actor = acting.BatchedActor(
      spec.actions.num_values, cfg.reversibility, seeds, policy_forward=forward,
      policy_source=policy_source, estimators=estimators, estimator_source=estimator_source)
  label = 'evaluator' if evaluator else f'actor_{actor_id}'
  # The actor's view of the run-wide step count is refreshed at most every 0.1 s.
  return loop_lib.BatchedEnvironmentLoop(
      environments, actor, cfg.reversibility.mode, env_adders,
      counting.Counter(counter, 'actor', time_delta=0.1), make_logger(cfg, label),
      track_estimators=cfg.online_estimators,
      total_steps_limit=None if evaluator else cfg.max_steps)


def make_adder(cfg: RunConfig, replay: reverb.Client) -> adders.TrajectoryAdder:
  """One environment's writes: IMPALA unrolls and/or precedence windows, from one writer."""
  # With the replay, each environment's writer holds at most one item not yet accepted by the
  # rate limiter: at 4 it was up to 4 x (number of environments) items queued in the actors, so
  # each sequence reached the table ~20 updates late (policy lag ~35 updates, |log rho| ~1).
  return adders.TrajectoryAdder(
      replay, impala_sequence=cfg.impala.sequence_length if cfg.agent == 'impala' else None,
      window=cfg.window if cfg.online_estimators else None,
      max_in_flight_items=1 if cfg.agent == 'impala' and cfg.impala.uses_replay else 4)


def build_program(cfg: RunConfig) -> lp.Program:
  program = lp.Program(name='noturningback')
  key = jax.random.PRNGKey(cfg.seed)

  def supervised(node, name):
    # Every node is restarted when its process dies (launch.runtime.supervisor), on the same
    # address: the replay from its last checkpoint, the counter from counts.json, the learners
    # from theirs.
    return supervisor.SupervisedNode(node, name, cfg.run_dir, max_failures=cfg.max_node_failures,
                                     window_s=cfg.node_failure_window_s)

  replay = None
  if cfg.agent == 'impala' or cfg.online_estimators:  # otherwise no node writes or samples data
    with program.group('replay'):
      replay = program.add_node(supervised(
          replay_lib.ReplayNode(functools.partial(make_tables, cfg), cfg.run_dir), 'replay'))
  with program.group('counter'):
    counter = program.add_node(supervised(lp.CourierNode(Counter, cfg.run_dir), 'counter'))
  learners = {}
  learner = None
  if cfg.agent == 'impala':
    learner_key, key = jax.random.split(key)
    with program.group('learner'):
      learner = program.add_node(supervised(
          lp.CourierNode(make_learner, cfg, learner_key, replay, counter), 'learner'))
    learners['learner'] = learner
  precedence = None
  if cfg.online_estimators:
    with program.group('precedence_learner'):
      precedence = program.add_node(supervised(
          lp.CourierNode(make_precedence_learner, cfg, replay, counter), 'precedence_learner'))
    learners['precedence_learner'] = precedence
  with program.group('coordinator'):
    program.add_node(supervised(lp.CourierNode(
        Coordinator, counter, replay, learners, cfg.max_steps, cfg.run_dir,
        cfg.replay_checkpoint_period_s), 'coordinator'))
  with program.group('actor'):
    for actor_id in range(cfg.num_actors):
      program.add_node(supervised(
          lp.CourierNode(make_actor, cfg, actor_id, replay, learner, precedence, counter),
          f'actor_{actor_id}'))
  return program

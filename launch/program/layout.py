"""How the agent is distributed: the Launchpad program of Reverb, the counter, the coordinator,
the IMPALA learner, the precedence learner and N actors, each node supervised (restarted when
its process dies, launch.runtime.supervisor). Nodes talk only through Reverb tables and variable
sources.

Each node's function records its process (RUN_DIR/pids/), hands the builder's part
(launch.program.builder: what the agent is) its replay client, variable sources, counter and
logger, and checkpoints the learners. A node is given the run directory's path (its arguments
reach its process pickled) and builds the run's records (run_state.RunRecords) where it starts:
the counter and the coordinator in their constructors, the replay in `run`, a supervisor in
`_supervise`."""
import functools
import os
import threading

import jax
import launchpad as lp
from acme.utils import counting

from launch.program import builder, checkpointing
from launch.program import replay as replay_lib
from launch.program.config import RunConfig
from launch.program.coordinator import Coordinator
from launch.program.loggers import make_logger
from launch.runtime import run_state, supervisor

# The IMPALA learner adds its updates to the counter node at most this often: syncing at every
# update made each one wait for an RPC round trip (BUILD_NOTES.md, "Sokoban throughput"). Its
# log rows then place themselves on env steps read up to this long ago.
LEARNER_COUNTS_SYNC_S = 0.5
# An actor sends the counts of the episodes that ended at one step of its loop to the counter
# node before it logs them (no sync period): a logged episode is then always counted (the
# counter node saves every increment), and a process killed between the two loses at most those
# episodes, for one call to the counter per loop step that ends any.
ACTOR_COUNTS_SYNC_S = 0.0


def replay_tables(cfg: RunConfig):
  """The replay node's tables (what ReplayNode serves and restores from its checkpoint)."""
  supervisor.write_pid(cfg.run_dir, 'replay')
  return builder.make_tables(cfg)


class Counter(counting.Counter):
  """The counter node: an Acme counter that starts from the run's saved counts (on --resume, and
  when its supervisor restarts it) and saves them (counts.json) at every increment, so a killed
  counter loses none of what reached it; an increment it cannot save fails and is not counted.
  It is also where the coordinator tells the actors to stop acting (`stop_acting`; each actor
  asks `acting_stopped`), so that the counts it saves at a run's end are final."""

  def __init__(self, run_dir: str):
    super().__init__()
    supervisor.write_pid(run_dir, 'counter')
    self._records = run_state.RunRecords(run_dir)
    self.restore({'counts': self._records.load_counts(), 'cache': {}})   # no parent: no cache
    self._save_lock = threading.Lock()
    self._stop_acting = False

  def increment(self, **counts):
    with self._save_lock:   # saved in the order counted: the file never goes back
      before = dict(self._counts)
      result = super().increment(**counts)
      try:
        self._records.save_counts(result)
      except OSError:
        # Not saved (a full disk), so not counted: the caller fails with the error before it
        # logs what it counted, and no episode is logged that counts.json lacks (a node's
        # counts kept here would die with it when the full disk stops the run).
        self._counts = before
        raise
    return result

  def stop_acting(self) -> None:
    self._stop_acting = True

  def acting_stopped(self) -> bool:
    return self._stop_acting


def _checkpointed(cfg: RunConfig, learner, name: str) -> checkpointing.CheckpointedLearner:
  # A restarted or resumed learner node continues from its last checkpoint.
  return checkpointing.CheckpointedLearner(
      learner, os.path.join(cfg.run_dir, 'checkpoints', name), period_s=cfg.checkpoint_period_s,
      keep=cfg.checkpoints_kept)


def learner_node(cfg: RunConfig, random_key, replay, counter):
  supervisor.write_pid(cfg.run_dir, 'learner')
  learner = builder.make_learner(
      cfg, random_key, replay,
      counting.Counter(counter, 'learner', time_delta=LEARNER_COUNTS_SYNC_S),
      make_logger(cfg, 'learner', 1.0))
  return _checkpointed(cfg, learner, 'learner')


def precedence_learner_node(cfg: RunConfig, replay, counter):
  supervisor.write_pid(cfg.run_dir, 'precedence_learner')
  learner = builder.make_precedence_learner(
      cfg, replay, counting.Counter(counter, 'precedence', time_delta=0.0),
      make_logger(cfg, 'precedence', 1.0))
  return _checkpointed(cfg, learner, 'precedence_learner')


def _acting_stopped(counter) -> bool:
  try:
    return bool(counter.acting_stopped())
  except Exception:  # pylint: disable=broad-except
    return False   # the counter node restarting: its supervisor brings it back; ask again later


def actor_node(cfg: RunConfig, actor_id: int, replay, learner, precedence, counter):
  label = f'actor_{actor_id}'
  supervisor.write_pid(cfg.run_dir, label)
  return builder.make_actor(
      cfg, actor_id, replay, learner, precedence,
      counting.Counter(counter, 'actor', time_delta=ACTOR_COUNTS_SYNC_S), make_logger(cfg, label),
      should_stop=functools.partial(_acting_stopped, counter))


def build_program(cfg: RunConfig) -> lp.Program:
  program = lp.Program(name='noturningback')
  key = jax.random.PRNGKey(cfg.seed)

  def supervised(node, name):
    # Every node is restarted when its process dies, on the same address: the replay from its
    # last checkpoint, the counter from counts.json, the learners from theirs.
    return supervisor.SupervisedNode(node, name, cfg.run_dir, max_failures=cfg.max_node_failures,
                                     window_s=cfg.node_failure_window_s,
                                     hang_timeout_s=cfg.hang_timeout_s)

  replay = None
  if cfg.agent == 'impala' or cfg.online_estimators:  # otherwise no node writes or samples data
    with program.group('replay'):
      replay = program.add_node(supervised(
          replay_lib.ReplayNode(functools.partial(replay_tables, cfg), cfg.run_dir), 'replay'))
  with program.group('counter'):
    counter = program.add_node(supervised(lp.CourierNode(Counter, cfg.run_dir), 'counter'))
  learners = {}
  learner = None
  if cfg.agent == 'impala':
    learner_key, key = jax.random.split(key)
    with program.group('learner'):
      learner = program.add_node(supervised(
          lp.CourierNode(learner_node, cfg, learner_key, replay, counter), 'learner'))
    learners['learner'] = learner
  precedence = None
  if cfg.online_estimators:
    with program.group('precedence_learner'):
      precedence = program.add_node(supervised(
          lp.CourierNode(precedence_learner_node, cfg, replay, counter), 'precedence_learner'))
    learners['precedence_learner'] = precedence
  with program.group('coordinator'):
    program.add_node(supervised(lp.CourierNode(
        Coordinator, counter, replay, learners, cfg.max_steps, cfg.run_dir,
        cfg.replay_checkpoint_period_s), 'coordinator'))
  with program.group('actor'):
    for actor_id in range(cfg.num_actors):
      program.add_node(supervised(
          lp.CourierNode(actor_node, cfg, actor_id, replay, learner, precedence, counter),
          f'actor_{actor_id}'))
  return program

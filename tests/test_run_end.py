"""A run's end leaves its counts final: the counter node saves counts.json at every increment
(a restarted counter loses nothing that reached it), and the coordinator stops the actors before
it records the counts, so that no episode is logged that the saved counts do not hold. Real
actor loops on Cartpole in threads, the real counter node and coordinator (no Launchpad)."""
import json
import threading
import time

import launchpad as lp
import pytest
from acme import wrappers
from acme.utils import counting, loggers

import envs
from agents import acting
from agents import loop as loop_lib
from launch.program import coordinator as coordinator_lib
from launch.program import layout
from launch.runtime import run_state


@pytest.fixture(autouse=True)
def _stop_handlers_from_the_main_thread():
  # The loop registers Launchpad's stop handler; the first registration installs its signal
  # dispatchers, which only the main thread may do (the actors here are threads).
  lp.register_stop_handler(_no_op)
  lp.unregister_stop_handler(_no_op)


def _no_op():
  pass


def _actor_loop(counter, logger, seed, should_stop):
  environments = [wrappers.SinglePrecisionWrapper(envs.make('cartpole', seed=seed + k))
                  for k in range(2)]
  actor = acting.BatchedActor(2, acting.ReversibilityConfig(mode='none'), [seed, seed + 1])
  return loop_lib.BatchedEnvironmentLoop(
      environments, actor, 'none',
      counter=counting.Counter(counter, 'actor', time_delta=layout.ACTOR_COUNTS_SYNC_S),
      logger=logger, should_stop=should_stop)


class Actors:
  """Two actor loops in threads; `should_stop` as a distributed actor's (the counter's
  `acting_stopped`) or, for the race without it, only the test's own end."""

  def __init__(self, counter, n=2, stop_with_the_counter=True):
    self.logs = [loggers.InMemoryLogger() for _ in range(n)]
    self._end = threading.Event()
    stops = (lambda: counter.acting_stopped() or self._end.is_set()) if stop_with_the_counter \
        else self._end.is_set
    # A step budget, so a stopped loop returns instead of waiting for a program to stop it.
    self._threads = [threading.Thread(target=_actor_loop(counter, log, 10 * i, stops).run,
                                      kwargs=dict(num_steps=10**9)) for i, log in enumerate(self.logs)]
    for thread in self._threads:
      thread.start()

  def end(self):
    self._end.set()
    for thread in self._threads:
      thread.join(timeout=30)


@pytest.fixture
def actors():
  started = []

  def start(counter, **kwargs):
    started.append(Actors(counter, **kwargs))
    return started[-1]
  yield start
  for a in started:
    a.end()


def _logged_steps(actors):
  return sum(row['episode_length'] for log in actors.logs for row in log.data)


def test_the_counter_node_saves_every_increment_and_a_restarted_one_goes_on_from_it(tmp_path):
  records = run_state.RunRecords(str(tmp_path))
  counter = layout.Counter(records.run_dir)
  counter.increment(actor_steps=120, actor_episodes=1)
  assert records.load_counts() == {'actor_steps': 120, 'actor_episodes': 1}
  counter.increment(actor_steps=30, actor_episodes=1, learner_steps=2)
  assert records.load_counts()['actor_steps'] == 150
  restarted = layout.Counter(records.run_dir)   # as after kill -9: nothing else was saved
  assert restarted.get_counts() == {'actor_steps': 150, 'actor_episodes': 2, 'learner_steps': 2}
  assert not restarted.acting_stopped()


def test_a_stopped_actor_loop_logs_no_episode_its_counts_do_not_hold(tmp_path, actors):
  counter = layout.Counter(str(tmp_path))
  logs = actors(counter)
  while counter.get_counts().get('actor_episodes', 0) < 20:
    time.sleep(0.05)
  counter.stop_acting()
  time.sleep(loop_lib.STOP_CHECK_S + 1.5)   # stopped, and the last counts sent
  counts = counter.get_counts()
  assert counts['actor_steps'] == _logged_steps(logs)
  time.sleep(1.0)   # and nothing moves afterwards
  assert counter.get_counts() == counts
  assert _logged_steps(logs) == counts['actor_steps']


def test_the_coordinator_records_final_counts_only_once_the_actors_have_stopped(tmp_path, actors):
  records = run_state.RunRecords(str(tmp_path))
  counter = layout.Counter(records.run_dir)
  logs = actors(counter)
  while counter.get_counts().get('actor_episodes', 0) < 20:
    time.sleep(0.05)
  coordinator = coordinator_lib.Coordinator(counter, None, {}, max_steps=10**9,
                                            run_dir=records.run_dir,
                                            poll_s=0.05, quiet_s=1.5, finish_timeout_s=30.0)
  coordinator._finish(run_state.STOPPED)   # what run() does before lp.stop()
  saved = records.load_counts()
  with open(records.path(run_state.FINAL_STATE)) as f:
    final = json.load(f)
  assert final['status'] == run_state.STOPPED and final['counts'] == saved
  # Every logged episode is in the counts, and (the actors stopped) none is logged after them:
  # a resumed run's logs go on from exactly where the counter restarts.
  assert saved['actor_steps'] == _logged_steps(logs)
  time.sleep(1.0)
  assert _logged_steps(logs) == saved['actor_steps']
  assert records.load_counts() == saved


def test_without_the_stop_the_actors_log_past_the_counts_the_coordinator_recorded(tmp_path, actors):
  # The race the stop closes: actors that go on after the counts are recorded log episodes
  # the resumed counter never saw (their logs then go back at the resume).
  records = run_state.RunRecords(str(tmp_path))
  counter = layout.Counter(records.run_dir)
  logs = actors(counter, stop_with_the_counter=False)
  while counter.get_counts().get('actor_episodes', 0) < 20:
    time.sleep(0.05)
  coordinator = coordinator_lib.Coordinator(counter, None, {}, max_steps=10**9,
                                            run_dir=records.run_dir,
                                            poll_s=0.05, quiet_s=1.5, finish_timeout_s=3.0)
  coordinator._finish(run_state.STOPPED)
  with open(records.path(run_state.FINAL_STATE)) as f:
    recorded = json.load(f)['counts']['actor_steps']
  time.sleep(1.0)
  assert _logged_steps(logs) > recorded

"""The coordinator node: ends the run at its step limit or when the CLI asks, and keeps the run
directory's counts and the replay's checkpoints up to date meanwhile."""
import time
from typing import Any, Dict, Optional

import launchpad as lp
import reverb

from launch.program import replay as replay_lib
from launch.runtime import run_state, supervisor

# The actors' counts unchanged this long means every actor has stopped and sent its last counts
# (each stops within agents.loop.STOP_CHECK_S and, stopped, syncs its counter every second).
ACTORS_QUIET_S = 2.5


class Coordinator:
  """Ends the run: at `max_steps` actor steps, or when the CLI asks (stop_request.json).

  Polls every 0.25 s (Acme's StepsLimiter polls every 10 s, overshooting by ~20k steps at 2k
  steps/s); checkpoints the replay's tables every `replay_checkpoint_s` (launch.program.replay).
  The counter node keeps counts.json itself. To end, it tells the actors to stop acting and asks
  the learners to stop stepping and save (their final checkpoint is their last step), waits
  until the actors' counts have stopped moving (so that no episode is logged after the counts
  are final, and a resumed run's logs go on from where they stood), checkpoints the tables,
  records the final counts and tables, then stops the program. It keeps no state of its own, so
  its supervisor may restart it (a restarted one that finds the run at its end finishes it
  again).
  """

  def __init__(self, counter, replay: Optional[reverb.Client], learners: Dict[str, Any],
               max_steps: int, run_dir: str, replay_checkpoint_s: float = 120.0,
               poll_s: float = 0.25, finish_timeout_s: float = 90.0,
               quiet_s: float = ACTORS_QUIET_S):
    self._counter, self._replay, self._learners = counter, replay, learners
    self._max_steps, self._poll_s = max_steps, poll_s
    self._finish_timeout_s, self._quiet_s = finish_timeout_s, quiet_s
    supervisor.write_pid(run_dir, 'coordinator')
    self._records = run_state.RunRecords(run_dir)   # the node's process starts here
    self._checkpoints = None
    if replay is not None:
      self._checkpoints = replay_lib.Checkpoints(replay, self._records, replay_checkpoint_s).start()

  def run(self):
    while True:
      counts = self._counter.get_counts()
      if counts.get('actor_steps', 0) >= self._max_steps:
        status = run_state.COMPLETED
      else:
        status = self._records.stop_requested()   # None: go on
      if status is not None:
        self._finish(status)
        lp.stop()
        return
      time.sleep(self._poll_s)

  def _wait_for_actors(self) -> None:
    """Tells the actors to stop and returns once their steps have not moved for `quiet_s` (an
    actor stops within agents.loop.STOP_CHECK_S and sends its last counts within a second), or
    after `finish_timeout_s`."""
    deadline = time.time() + self._finish_timeout_s
    steps, since = None, time.time()
    while time.time() < deadline and time.time() - since < self._quiet_s:
      try:
        self._counter.stop_acting()   # every time: a restarted counter node starts without it
        now = self._counter.get_counts().get('actor_steps')
      except Exception:  # pylint: disable=broad-except
        now = None       # the counter node restarting
      if now is None or now != steps:
        steps, since = now, time.time()
      time.sleep(self._poll_s)

  def _finish(self, status: str):
    pending = {name: handle.futures.finish() for name, handle in self._learners.items()}
    self._wait_for_actors()
    checkpoints = {}
    for name, future in pending.items():
      try:
        checkpoints[name] = {'steps': future.result(timeout=self._finish_timeout_s)}
      except Exception as e:  # a dead or stuck learner: its last periodic checkpoint stands
        checkpoints[name] = {'error': f'{type(e).__name__}: {e}'[:300]}
    # The learners have stopped: the precedence table's checkpoint is what psi last trained on.
    replay_checkpoint = self._checkpoints.final() if self._checkpoints is not None else None
    counts = self._counter.get_counts()   # final: the counter node has saved them
    tables = {}
    if self._replay is not None:
      try:
        tables = {name: {'current_size': info.current_size, 'num_inserts':
                         info.rate_limiter_info.insert_stats.completed,
                         'num_samples': info.rate_limiter_info.sample_stats.completed}
                  for name, info in self._replay.server_info().items()}
      except Exception as e:  # the replay node is down (restarting): the run still ends
        tables = {'error': f'{type(e).__name__}: {e}'[:300]}
    self._records.write(run_state.FINAL_STATE,
                        {'status': status, 'counts': counts, 'tables': tables,
                         'checkpoints': checkpoints, 'replay_checkpoint': replay_checkpoint})

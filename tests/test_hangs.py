"""launch.runtime.hangs: when a node is judged hung, on hand-made samples and on a real process."""
import signal
import subprocess
import sys
import time

from launch.runtime import hangs
from launch.runtime.hangs import Sample


def _feed(watch, own, peers=None, every=5.0, steps=30, reported=lambda t: True):
  """Feeds `steps` samples `every` s apart: own(t) -> (stopped, cpu); peers: name -> cpu(t);
  reported(t): whether the node has written its log by then."""
  verdicts = []
  for i in range(steps):
    t = i * every
    stopped, cpu = own(t)
    peer_samples = {(name, 1): Sample(t, False, f(t)) for name, f in (peers or {}).items()}
    verdicts.append((t, watch.observe(Sample(t, stopped, cpu), peer_samples, reported(t))))
  return verdicts


def _first(verdicts):
  return next(((t, v) for t, v in verdicts if v), (None, None))


def test_a_stopped_node_is_hung_after_the_timeout_whatever_it_is_for():
  for name in ('replay', 'coordinator', 'learner'):
    t, verdict = _first(_feed(hangs.HangWatch(name, 60.0), lambda t: (t >= 20, 1.0)))
    assert t == 80 and 'stopped (SIGSTOP) for 60 s' in verdict and name in verdict


def test_a_worker_without_progress_is_hung_only_while_a_peer_works():
  idle = lambda t: (False, 3.0 + 0.001 * t)   # a few ticks of background threads
  busy = {'actor_0': lambda t: 0.9 * t}
  t, verdict = _first(_feed(hangs.HangWatch('learner', 60.0), idle, busy))
  assert t == 60 and 'no progress for 60 s' in verdict and 'actor_0' in verdict
  # Everyone waits (held back by a hung peer): nobody is blamed for it.
  waiting = {'actor_0': lambda t: 1.0 + 0.002 * t}
  assert _first(_feed(hangs.HangWatch('learner', 60.0), idle, waiting)) == (None, None)
  # A working worker is never hung.
  assert _first(_feed(hangs.HangWatch('actor_1', 60.0), lambda t: (False, 0.5 * t), busy)) == (None, None)
  # The replay waits by design: no progress is asked of it.
  assert _first(_feed(hangs.HangWatch('replay', 60.0), idle, busy)) == (None, None)


def test_a_restarted_worker_waiting_for_its_start_is_not_taken_for_hung_again():
  # A learner restarted under load: it waits (no CPU) before its first log row, while the
  # actors work. With a 20 s timeout it is judged only from its first row at 75 s ...
  idle_then_working = lambda t: (False, 2.0 + (0.8 * (t - 75) if t >= 75 else 0.001 * t))
  busy = {'actor_0': lambda t: 0.9 * t}
  first_row = lambda t: t >= 75
  watch = hangs.HangWatch('learner', 20.0, startup_s=120.0)
  assert _first(_feed(watch, idle_then_working, busy, steps=60, reported=first_row)) == (None, None)
  # ... and one that stalls after its first row is found a timeout later, as any worker.
  stalls = lambda t: (False, 2.0 + (0.8 * (t - 75) if 75 <= t < 100 else 20.0 if t >= 100 else 0))
  t, verdict = _first(_feed(hangs.HangWatch('learner', 20.0, startup_s=120.0), stalls, busy,
                            steps=60, reported=first_row))
  assert t == 120 and 'no progress for 20 s' in verdict
  # One that never writes a row is judged once its start-up time is over: 120 s + 20 s.
  t, verdict = _first(_feed(hangs.HangWatch('learner', 20.0, startup_s=120.0),
                            lambda t: (False, 2.0), busy, steps=60, reported=lambda t: False))
  assert t == 140 and 'no progress' in verdict
  # The SIGSTOP rule does not wait for the start.
  t, verdict = _first(_feed(hangs.HangWatch('learner', 20.0, startup_s=120.0),
                            lambda t: (t >= 10, 2.0), busy, reported=lambda t: False))
  assert t == 30 and 'SIGSTOP' in verdict


def test_the_start_up_time_is_never_shorter_than_a_few_timeouts():
  assert hangs.startup_grace_s(20.0) == hangs.STARTUP_S
  assert hangs.startup_grace_s(120.0) == 360.0


def test_a_node_has_reported_once_its_log_is_written_after_its_start(tmp_path):
  log = tmp_path / 'logs' / 'learner' / 'logs.csv'
  assert not hangs.log_written_since(str(tmp_path), 'learner', 0.0)
  log.parent.mkdir(parents=True)
  log.write_text('learner_steps\n1\n')
  began = log.stat().st_mtime
  assert hangs.log_written_since(str(tmp_path), 'learner', began)
  assert not hangs.log_written_since(str(tmp_path), 'learner', began + 1.0)   # an earlier run's


def test_a_stopped_then_continued_node_starts_counting_again():
  own = lambda t: (20 <= t < 60 or t >= 90, 1.0 + (0.5 * t if 60 <= t < 90 else 0.0))
  t, verdict = _first(_feed(hangs.HangWatch('counter', 50.0), own))
  assert t == 140 and 'for 50 s' in verdict


def test_samples_of_a_real_process_see_it_stopped_and_its_cpu():
  proc = subprocess.Popen([sys.executable, '-c', 'while True: pass'])
  try:
    time.sleep(0.5)
    first = hangs.sample(proc.pid, time.time())
    assert not first.stopped and first.cpu_s > 0
    proc.send_signal(signal.SIGSTOP)
    time.sleep(0.3)
    stopped = hangs.sample(proc.pid, time.time())
    assert stopped.stopped
    time.sleep(0.5)
    assert hangs.sample(proc.pid, time.time()).cpu_s == stopped.cpu_s
  finally:
    proc.kill()
    proc.wait()
  assert hangs.sample(proc.pid, time.time()) is None


def test_peers_are_the_other_workers_of_the_run(tmp_path):
  (tmp_path / 'pids').mkdir()
  for name, pid in (('actor_0', 11), ('learner', 12), ('replay', 13), ('counter', 14)):
    (tmp_path / 'pids' / f'{name}.pid').write_text(str(pid))
  assert hangs.peer_pids(str(tmp_path), 'learner') == {'actor_0': 11}
  assert hangs.peer_pids(str(tmp_path), 'replay') == {'actor_0': 11, 'learner': 12}
  (tmp_path / 'pids' / 'precedence_learner.pid').write_text('15')
  assert hangs.peer_pids(str(tmp_path), 'learner') == {'actor_0': 11}
  assert hangs.peer_pids(str(tmp_path / 'none'), 'learner') == {}

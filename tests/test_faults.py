"""Fault injection on real runs (local_mp: Reverb, counter, coordinator, IMPALA learner,
precedence learner, 2 actors, reward-free Cartpole RAE): processes killed, the CLI signalled,
a run stopped and resumed. Each test launches the whole program; `make test-slow` runs them.

The README's "what survives what" table is these tests' outcomes."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from launch.program import checkpointing
from launch.runtime import launcher, summary

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))
pytestmark = pytest.mark.slow


def _start(run_dir, max_steps, *extra):
  cmd = [sys.executable, '-m', 'launch.train', '--env', 'cartpole', '--reward_free', '--mode', 'rae',
         '--num_actors', '2', '--max_steps', str(max_steps), '--run_dir', str(run_dir),
         '--env_steps_per_psi_update', '10', *extra]
  return subprocess.Popen(cmd, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)


def _counts(run_dir):
  try:
    return json.loads((run_dir / 'counts.json').read_text())
  except (OSError, ValueError):
    return {}


def _wait(predicate, timeout, proc=None, what=''):
  deadline = time.time() + timeout
  while time.time() < deadline:
    if predicate():
      return
    if proc is not None and proc.poll() is not None:
      raise AssertionError(f'run ended while waiting for {what}: {proc.stderr.read()[-2000:]}')
    time.sleep(0.5)
  raise AssertionError(f'timed out waiting for {what}')


def _pid(run_dir, node):
  return int((run_dir / 'pids' / f'{node}.pid').read_text())


def _ckpt_steps(run_dir, node='learner'):
  header = checkpointing.read_header(str(run_dir / 'checkpoints' / node))
  return -1 if header is None else header['steps']


def _session_empty_within(run_dir, seconds):
  session = int((run_dir / 'launcher_session.txt').read_text())
  deadline = time.time() + seconds
  while time.time() < deadline:
    if not launcher.leftover_processes(session):
      return True
    time.sleep(0.5)
  return False


def test_killed_actor_and_learner_are_restarted_and_the_run_completes(tmp_path):
  run_dir = tmp_path / 'run'
  proc = _start(run_dir, 80_000, '--checkpoint_every_s', '3')
  _wait(lambda: _counts(run_dir).get('actor_steps', 0) > 5000, 240, proc, 'first steps')
  actor_pid = _pid(run_dir, 'actor_0')
  os.kill(actor_pid, signal.SIGKILL)
  _wait(lambda: _ckpt_steps(run_dir) > 0, 60, proc, 'a learner checkpoint')
  before_kill = _ckpt_steps(run_dir)
  os.kill(_pid(run_dir, 'learner'), signal.SIGKILL)
  stdout, stderr = proc.communicate(timeout=600)
  assert proc.returncode == 0, stdout[-2000:] + stderr[-2000:]

  s = json.loads((run_dir / 'summary.json').read_text())
  assert s['status'] == 'completed', s
  assert s['restarts_actor_0'] == 1 and s['restarts_learner'] == 1, s
  assert _pid(run_dir, 'actor_0') != actor_pid
  # The new learner process started from the checkpoint it found, and went on from there.
  log = (run_dir / 'node_logs' / 'learner.log').read_text()
  restored = [int(line.rsplit(' ', 1)[1]) for line in log.splitlines()
              if 'restored learner checkpoint' in line]
  assert restored and restored[-1] >= before_kill > 0, (restored, before_kill)
  final = json.loads((run_dir / 'final_state.json').read_text())
  assert final['checkpoints']['learner']['steps'] == _ckpt_steps(run_dir) > restored[-1]
  assert final['counts']['actor_steps'] >= 80_000
  assert _session_empty_within(run_dir, 20)


def test_sigterm_then_resume_continues_counters_and_logs(tmp_path):
  run_dir = tmp_path / 'run'
  proc = _start(run_dir, 1_000_000)
  _wait(lambda: _counts(run_dir).get('actor_steps', 0) > 8000, 240, proc, 'first steps')
  proc.send_signal(signal.SIGTERM)
  stdout, stderr = proc.communicate(timeout=200)
  assert proc.returncode == 130, stdout[-2000:] + stderr[-2000:]
  assert '--resume' in stdout
  first = json.loads((run_dir / 'final_state.json').read_text())
  assert first['status'] == 'stopped by user'
  stopped_at = first['counts']['actor_steps']
  learner_at = first['counts']['learner_steps']
  assert _ckpt_steps(run_dir) == learner_at > 0

  target = stopped_at + 10_000
  proc = _start(run_dir, target, '--resume')
  stdout, stderr = proc.communicate(timeout=600)
  assert proc.returncode == 0, stdout[-2000:] + stderr[-2000:]
  assert 'resuming' in stdout
  final = json.loads((run_dir / 'final_state.json').read_text())
  assert final['status'] == 'completed'
  # Counters went on from the stop (± the episodes in flight when the budget was reached).
  assert target <= final['counts']['actor_steps'] < target + 2000, final['counts']
  assert final['counts']['learner_steps'] > learner_at
  assert final['checkpoints']['learner']['steps'] == final['counts']['learner_steps']
  # One log per node for the whole run: the step axis is not reset by the resume (an actor's
  # view of the run-wide count may lag its last sync by a few steps, hence the tolerance).
  for label in ('learner', 'actor_0', 'actor_1'):
    steps = [r.get('learner_steps' if label == 'learner' else 'actor_steps', 0)
             for r in summary.read_log(str(run_dir), label)]
    assert all(b >= a - 200 for a, b in zip(steps, steps[1:])), label
    assert steps[-1] > stopped_at if label != 'learner' else steps[-1] > learner_at, label
  s = json.loads((run_dir / 'summary.json').read_text())
  assert s['launches'] == 2 and s['status'] == 'completed', s
  assert _session_empty_within(run_dir, 20)


@pytest.mark.parametrize('sig', [signal.SIGHUP, signal.SIGKILL])
def test_cli_death_leaves_no_process(tmp_path, sig):
  run_dir = tmp_path / 'run'
  proc = _start(run_dir, 1_000_000)
  _wait(lambda: _counts(run_dir).get('actor_steps', 0) > 2000, 240, proc, 'first steps')
  proc.send_signal(sig)
  proc.communicate(timeout=200)
  # SIGHUP: a graceful stop (final checkpoints); SIGKILL: the launcher hears of its parent's
  # death (PR_SET_PDEATHSIG) and stops the program.
  assert _session_empty_within(run_dir, 30), 'node processes left behind'
  if sig == signal.SIGHUP:
    assert json.loads((run_dir / 'final_state.json').read_text())['status'] == 'stopped by user'


def test_a_node_that_keeps_dying_stops_the_run_naming_it(tmp_path):
  run_dir = tmp_path / 'run'
  proc = _start(run_dir, 1_000_000)
  _wait(lambda: _counts(run_dir).get('actor_steps', 0) > 1000, 240, proc, 'first steps')
  killed = set()
  deadline = time.time() + 120
  while proc.poll() is None and time.time() < deadline:
    try:
      pid = _pid(run_dir, 'actor_1')
    except (OSError, ValueError):
      pid = None
    if pid and pid not in killed:
      try:
        os.kill(pid, signal.SIGKILL)
        killed.add(pid)
      except ProcessLookupError:
        pass
    time.sleep(0.2)
  stdout, stderr = proc.communicate(timeout=200)
  assert proc.returncode == 1, stdout[-2000:] + stderr[-2000:]
  last = stderr.strip().splitlines()[-1]
  assert 'actor_1' in last and 'failed 3 times' in last and 'exit code -9' in last, last
  s = json.loads((run_dir / 'summary.json').read_text())
  assert s['status'].startswith('failed: node actor_1'), s
  assert _session_empty_within(run_dir, 20)

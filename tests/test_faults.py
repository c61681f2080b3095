"""Fault injection on real runs (local_mp: Reverb, counter, coordinator, IMPALA learner,
precedence learner, 2 actors, reward-free Cartpole RAE): processes killed, the CLI signalled,
a run stopped and resumed (with its replay's tables). Each test launches the whole program;
`make test-slow` runs them.

The "what survives what" table of docs/runs.md is these tests' outcomes."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from launch.program import checkpointing, replay
from launch.runtime import processes, run_state, summary, supervisor

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))
pytestmark = pytest.mark.slow


_STARTED = []


@pytest.fixture(autouse=True)
def _no_run_left_behind():
  """A test that fails while its run goes on (a wait timed out) stops that run: kill -9 of the
  CLI stops the program (PR_SET_PDEATHSIG), as test_cli_death_leaves_no_process checks."""
  yield
  while _STARTED:
    proc = _STARTED.pop()
    if proc.poll() is None:
      proc.kill()
      proc.communicate(timeout=60)


def _start(run_dir, max_steps, *extra):
  cmd = [sys.executable, '-m', 'launch.train', '--env', 'cartpole', '--reward_free', '--mode', 'rae',
         '--num_actors', '2', '--max_steps', str(max_steps), '--run_dir', str(run_dir),
         '--precedence_env_steps_per_update', '10', *extra]
  proc = subprocess.Popen(cmd, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
  _STARTED.append(proc)
  return proc


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


def _record(test, **figures):
  """Appends a test's measured outcome (times in seconds) to $FAULTS_RECORD, a JSON-lines file,
  when it is set: the figures a docs/runs.md row and a closing note quote come from a run."""
  path = os.environ.get('FAULTS_RECORD')
  if path:
    with open(path, 'a') as f:
      f.write(json.dumps({'test': test, 'time': time.time(), **figures}) + '\n')


def _event_time(run_dir, event, node=None, after=0.0):
  return min((e['time'] for e in supervisor.read_events(run_state.RunRecords(str(run_dir)))
              if e['event'] == event and (node is None or e['node'] == node) and
              e['time'] > after), default=None)


def _pid(run_dir, node):
  return int((run_dir / 'pids' / f'{node}.pid').read_text())


def _ckpt_steps(run_dir, node='learner'):
  header = checkpointing.read_header(str(run_dir / 'checkpoints' / node))
  return -1 if header is None else header['steps']


def _replay_records(run_dir, event):
  return [r for r in replay.read_records(run_state.RunRecords(str(run_dir))) if r['event'] == event]


def _session_empty_within(run_dir, seconds):
  session = int((run_dir / 'launcher_session.txt').read_text())
  deadline = time.time() + seconds
  while time.time() < deadline:
    if not processes.leftover_processes(session):
      return True
    time.sleep(0.5)
  return False


def test_killed_actor_and_learner_are_restarted_and_the_run_completes(tmp_path):
  run_dir = tmp_path / 'run'
  proc = _start(run_dir, 80_000, '--checkpoint_period_s', '3')
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


@pytest.mark.parametrize('with_cli', [True, False])
def test_launcher_killed_leaves_no_process(tmp_path, with_cli):
  """kill -9 of the launcher, alone (the CLI then stops what is left) or with the CLI (as the
  OOM killer does): every node's supervisor sees its session's leader gone and ends the node."""
  run_dir = tmp_path / 'run'
  proc = _start(run_dir, 1_000_000)
  _wait(lambda: _counts(run_dir).get('actor_steps', 0) > 2000, 240, proc, 'first steps')
  launcher_pid = int((run_dir / 'launcher_session.txt').read_text())
  if with_cli:
    proc.kill()
  os.kill(launcher_pid, signal.SIGKILL)
  proc.communicate(timeout=200)
  assert _session_empty_within(run_dir, 40), 'node processes left behind'


def test_launcher_killed_while_it_starts_the_nodes_leaves_no_process(tmp_path):
  """The launcher and the CLI killed as the first node process appears: a node that looks for
  its session's leader only after it is gone ends too, rather than running on for good."""
  run_dir = tmp_path / 'run'
  proc = _start(run_dir, 1_000_000)
  sessions = run_dir / 'launcher_session.txt'
  _wait(lambda: sessions.exists() and sessions.read_text().strip(), 240, proc, 'the launcher')
  launcher_pid = int(sessions.read_text())
  _wait(lambda: processes.node_processes(launcher_pid, min_age_s=0.0), 240, proc, 'a node process')
  proc.kill()
  os.kill(launcher_pid, signal.SIGKILL)
  proc.communicate(timeout=200)
  assert _session_empty_within(run_dir, 60), 'node processes left behind'


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


def test_killed_replay_node_comes_back_from_its_checkpoint_and_the_run_completes(tmp_path):
  run_dir = tmp_path / 'run'
  period = 5
  proc = _start(run_dir, 60_000, '--replay_checkpoint_period_s', str(period))
  _wait(lambda: _counts(run_dir).get('actor_steps', 0) > 8000 and any(
      r['sizes'].get('precedence') for r in _replay_records(run_dir, 'checkpoint')),
      600, proc, 'first steps and a replay checkpoint with windows')
  at_kill = _counts(run_dir)
  replay_pid = _pid(run_dir, 'replay')
  os.kill(replay_pid, signal.SIGKILL)
  killed_at = time.time()
  stdout, stderr = proc.communicate(timeout=600)
  assert proc.returncode == 0, stdout[-2000:] + stderr[-2000:]

  s = json.loads((run_dir / 'summary.json').read_text())
  assert s['status'] == 'completed' and s['restarts_replay'] == 1, s
  assert _pid(run_dir, 'replay') != replay_pid
  # The new replay node restored the last checkpoint written before the kill (its tables lie
  # between the sizes measured just before and after that save); the IMPALA queue came back empty.
  start = _replay_records(run_dir, 'start')
  assert len(start) == 2 and start[0]['checkpoint'] is None, start
  saved = [r for r in _replay_records(run_dir, 'checkpoint') if r['path'] == start[1]['checkpoint']]
  assert saved, (start, _replay_records(run_dir, 'checkpoint')[-5:])
  assert killed_at - period - 5 < saved[0]['time'] < killed_at + 1, (killed_at, saved)
  restored = start[1]['restored']
  assert saved[0]['sizes_before']['precedence'] <= restored['precedence'] <= saved[0]['sizes']['precedence']
  assert restored['precedence'] > 0
  assert start[1]['dropped'].get('impala', 0) == restored['impala'], start[1]
  # Actors, learners and the precedence learner went on with the new server.
  final = json.loads((run_dir / 'final_state.json').read_text())
  assert final['counts']['actor_steps'] >= 60_000
  assert final['counts']['learner_steps'] > at_kill['learner_steps']
  assert final['counts']['precedence_steps'] > at_kill['precedence_steps']
  assert final['tables']['precedence']['current_size'] > restored['precedence']
  assert final['replay_checkpoint']['reason'] == 'final'
  assert _session_empty_within(run_dir, 20)


def test_stop_then_resume_restores_the_precedence_table(tmp_path):
  """The precedence table needs --precedence_min_windows windows before psi trains. After the
  resume it trains before the actors could have written that many: it sampled the restored
  table."""
  run_dir = tmp_path / 'run'
  min_windows = 2000
  proc = _start(run_dir, 1_000_000, '--precedence_min_windows', str(min_windows),
                '--replay_checkpoint_period_s', '10')
  _wait(lambda: _counts(run_dir).get('precedence_steps', 0) > 20, 900, proc, 'psi training')
  proc.send_signal(signal.SIGTERM)
  stdout, stderr = proc.communicate(timeout=200)
  assert proc.returncode == 130, stdout[-2000:] + stderr[-2000:]
  first = json.loads((run_dir / 'final_state.json').read_text())
  saved = first['replay_checkpoint']
  assert saved['reason'] == 'final' and saved['sizes_before']['precedence'] >= min_windows, saved
  at_stop = first['counts']

  proc = _start(run_dir, at_stop['actor_steps'] + 10_000, '--resume')
  stdout, stderr = proc.communicate(timeout=600)
  assert proc.returncode == 0, stdout[-2000:] + stderr[-2000:]
  start = _replay_records(run_dir, 'start')
  assert [r['checkpoint'] for r in start] == [None, saved['path']], start
  restored = start[1]['restored']['precedence']
  # The size at the stop, give or take the windows written while the final save ran.
  assert saved['sizes_before']['precedence'] <= restored <= saved['sizes']['precedence']
  assert abs(restored - first['tables']['precedence']['current_size']) <= 50, (restored, first)
  # psi's first update after the resume: the windows written since the resume are at most one
  # per w = 200 steps plus one per episode end (agents.adders), too few to train on.
  after = [r for r in summary.read_log(str(run_dir), 'precedence')
           if r['precedence_steps'] > at_stop['precedence_steps']]
  assert after, 'psi did not train after the resume'
  new_steps = after[0]['actor_steps'] - at_stop['actor_steps']
  new_episodes = after[0]['actor_episodes'] - at_stop['actor_episodes']
  assert new_steps / 200 + new_episodes < min_windows, (new_steps, new_episodes)
  final = json.loads((run_dir / 'final_state.json').read_text())
  assert final['status'] == 'completed'
  assert final['counts']['precedence_steps'] > at_stop['precedence_steps']
  assert _session_empty_within(run_dir, 20)


def test_killed_counter_and_coordinator_are_restarted_and_the_run_completes(tmp_path):
  run_dir = tmp_path / 'run'
  proc = _start(run_dir, 60_000, '--replay_checkpoint_period_s', '5')
  _wait(lambda: _counts(run_dir).get('actor_steps', 0) > 8000, 600, proc, 'first steps')
  saved_before = _counts(run_dir)   # counts.json: what a restarted counter starts from
  counter_pid = _pid(run_dir, 'counter')
  os.kill(counter_pid, signal.SIGKILL)
  _wait(lambda: _counts(run_dir).get('actor_steps', 0) > saved_before['actor_steps'] + 5000, 300,
        proc, 'steps counted by the new counter')
  assert _pid(run_dir, 'counter') != counter_pid
  coordinator_pid = _pid(run_dir, 'coordinator')
  os.kill(coordinator_pid, signal.SIGKILL)
  killed_at = time.time()
  stdout, stderr = proc.communicate(timeout=600)
  assert proc.returncode == 0, stdout[-2000:] + stderr[-2000:]

  s = json.loads((run_dir / 'summary.json').read_text())
  assert s['status'] == 'completed', s
  assert s['restarts_counter'] == 1 and s['restarts_coordinator'] == 1, s
  assert _pid(run_dir, 'coordinator') != coordinator_pid
  final = json.loads((run_dir / 'final_state.json').read_text())
  # The new coordinator ended the run at its budget, counted on from counts.json, with the
  # learners' and the replay's final checkpoints.
  assert 60_000 <= final['counts']['actor_steps'] < 62_000, final['counts']
  assert final['counts']['learner_steps'] > saved_before['learner_steps']
  assert final['checkpoints']['learner']['steps'] == _ckpt_steps(run_dir)
  assert final['replay_checkpoint']['reason'] == 'final'
  assert final['replay_checkpoint']['time'] > killed_at
  assert _session_empty_within(run_dir, 20)


def test_a_diverging_learner_stops_the_run_naming_its_step_and_last_finite_checkpoint(tmp_path):
  run_dir = tmp_path / 'run'
  t0 = time.time()
  proc = _start(run_dir, 2_000_000, '--noreward_free', '--learning_rate', '10000',
                '--checkpoint_period_s', '2')
  stdout, stderr = proc.communicate(timeout=600)
  assert proc.returncode == 1, stdout[-2000:] + stderr[-2000:]
  last = stderr.strip().splitlines()[-1]
  _record('divergence', launch_to_stop_s=time.time() - t0, last_line=last)
  assert 'node learner failed' in last and 'not restarted' in last, last
  assert 'DivergenceError' in last and 'updates in a row' in last, last
  assert 'last finite checkpoint' in last, last
  s = json.loads((run_dir / 'summary.json').read_text())
  assert s['status'].startswith('failed: node learner'), s
  # Restarting it would only diverge again: one failure, no restart.
  failures = [e for e in supervisor.read_events(run_state.RunRecords(str(run_dir))) if e['event'] == 'failure']
  assert [e['node'] for e in failures] == ['learner'], failures
  header = checkpointing.read_header(str(run_dir / 'checkpoints' / 'learner'))
  assert header is None or header['steps'] >= 0   # whatever was saved reads whole
  assert _session_empty_within(run_dir, 20)


@pytest.mark.parametrize('how', ['truncate', 'bitflip'])
def test_a_corrupt_newest_checkpoint_resumes_from_the_one_before(tmp_path, how):
  run_dir = tmp_path / 'run'
  proc = _start(run_dir, 1_000_000, '--checkpoint_period_s', '2')
  _wait(lambda: len(checkpointing.checkpoint_files(str(run_dir / 'checkpoints' / 'learner'))) >= 2,
        300, proc, 'two learner checkpoints')
  proc.send_signal(signal.SIGTERM)
  proc.communicate(timeout=200)
  ckpt_dir = str(run_dir / 'checkpoints' / 'learner')
  newest, before = checkpointing.checkpoint_files(ckpt_dir)[:2]
  fallback_steps = int(os.path.basename(before)[len('state-'):-len('.npz')])
  with open(newest, 'rb') as f:
    data = bytearray(f.read())
  if how == 'truncate':
    data = data[:len(data) // 2]
  else:
    data[data.find(b'leaf_0.npy') + 200] ^= 0x10
  with open(newest, 'wb') as f:
    f.write(bytes(data))
  t0 = time.time()
  proc = _start(run_dir, 1_000_000, '--resume')
  _wait(lambda: any(e['event'] == 'start' and e['node'] == 'learner'
                    for e in supervisor.read_events(run_state.RunRecords(str(run_dir)))[-20:]) and
        _ckpt_steps(run_dir) > fallback_steps, 300, proc, 'a checkpoint after the fallback')
  _record(f'corrupt checkpoint ({how})', resume_to_next_checkpoint_s=time.time() - t0,
          fell_back_to_steps=fallback_steps)
  log = (run_dir / 'node_logs' / 'learner.log').read_text()
  assert 'skipped' in log and os.path.basename(newest) in log and 'corrupt' in log
  assert os.path.exists(newest + '.corrupt')   # kept to look at, no longer a candidate
  assert 'restored learner checkpoint' in log and f'at step {fallback_steps}' in log
  proc.send_signal(signal.SIGTERM)
  proc.communicate(timeout=200)
  failures = [e for e in supervisor.read_events(run_state.RunRecords(str(run_dir))) if e['event'] == 'failure']
  assert not failures, failures


def test_a_full_disk_stops_the_run_in_one_line_and_resume_continues_once_space_is_freed(
    tmp_path, small_tmpfs):
  small = small_tmpfs('6m')
  run_dir = small / 'run'
  proc = _start(run_dir, 2_000_000)
  stdout, stderr = proc.communicate(timeout=900)
  t_exit = time.time()
  assert proc.returncode == 1, stdout[-2000:] + stderr[-2000:]
  lines = stderr.strip().splitlines()
  assert any(l.startswith('warning: ') and 'MB free' in l for l in lines), stderr[-2000:]
  last = lines[-1]
  assert 'disk full' in last and str(run_dir) in last and 'MB free' in last, last
  # Not restarted into the same full disk: once a node failed, no node starts again (other
  # nodes may fail too while the program stops: their writes meet the same disk). The first
  # failure need not name ENOSPC (a peer that died of it, a library's write), and the first
  # to meet the full disk may be the launcher's own records, the one line then naming it
  # and no node failed.
  events = supervisor.read_events(run_state.RunRecords(str(run_dir)))
  failures = [e['time'] for e in events if e['event'] == 'failure']
  assert failures or 'node launcher' in last, (last, events)
  first = min(failures, default=t_exit)
  assert not [e for e in events if e['event'] == 'start' and e['time'] > first], events
  _record('full disk', first_failure_to_exit_s=t_exit - first, last_line=last)
  big = tmp_path / 'run'
  subprocess.run(['cp', '-a', str(run_dir), str(big)], check=True)
  steps = _counts(big).get('actor_steps', 0)
  # Every file is still valid: the copy resumes and goes 20,000 steps further.
  t0 = time.time()
  proc = _start(big, int(steps) + 20_000, '--resume')
  stdout, stderr = proc.communicate(timeout=600)
  assert proc.returncode == 0, stdout[-2000:] + stderr[-2000:]
  assert _counts(big)['actor_steps'] >= steps + 20_000
  _record('full disk, resume of the copy', resumed_from_steps=steps,
          resume_20k_steps_s=time.time() - t0)


@pytest.mark.parametrize('node', ['learner', 'actor_1'])
def test_a_stopped_node_is_found_restarted_and_the_run_completes(tmp_path, node):
  run_dir = tmp_path / 'run'
  proc = _start(run_dir, 60_000, '--hang_timeout_s', '20')
  _wait(lambda: _counts(run_dir).get('actor_steps', 0) > 2000, 240, proc, 'first steps')
  stopped = _pid(run_dir, node)
  t_stop = time.time()
  os.kill(stopped, signal.SIGSTOP)
  _wait(lambda: any(e['event'] == 'hung' and e['node'] == node
                    for e in supervisor.read_events(run_state.RunRecords(str(run_dir)))), 180, proc, f'{node} found hung')
  hung_at = _event_time(run_dir, 'hung', node)
  _record(f'hung {node} (--hang_timeout_s 20)', stop_to_found_s=hung_at - t_stop,
          stop_to_restarted_s=(_event_time(run_dir, 'start', node, after=hung_at) or
                               float('nan')) - t_stop)
  stdout, stderr = proc.communicate(timeout=600)
  assert proc.returncode == 0, stdout[-2000:] + stderr[-2000:]
  (hung,) = [e for e in supervisor.read_events(run_state.RunRecords(str(run_dir))) if e['event'] == 'hung']
  assert hung['node'] == node and ('stopped (SIGSTOP)' in hung['reason'] or
                                   'no progress' in hung['reason']), hung
  assert _pid(run_dir, node) != stopped
  s = json.loads((run_dir / 'summary.json').read_text())
  assert s['status'] == 'completed' and s['actor_steps'] >= 60_000, s


def test_a_second_launch_on_a_live_run_dir_is_refused_naming_the_first(tmp_path):
  import socket
  run_dir = tmp_path / 'run'
  first = _start(run_dir, 1_000_000)
  _wait(lambda: _counts(run_dir).get('actor_steps', 0) > 1000, 240, first, 'first steps')
  for extra in (('--resume',), ()):
    t0 = time.time()
    second = _start(run_dir, 1_000_000, *extra)
    stdout, stderr = second.communicate(timeout=300)
    _record(f'second launch {" ".join(extra)}'.strip(), refused_in_s=time.time() - t0,
            line=stderr.strip()[-300:])
    assert second.returncode == 2, stdout[-2000:] + stderr[-2000:]
    lines = [l for l in stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith('error: '), stderr
    if extra:   # without --resume the directory is refused before the lock is asked
      assert f'pid {first.pid}' in lines[0] and socket.gethostname() in lines[0], lines[0]
  assert first.poll() is None   # the live launch goes on untouched
  first.send_signal(signal.SIGTERM)
  first.communicate(timeout=200)
  # Its lock died with it: a resume now is accepted.
  again = _start(run_dir, int(_counts(run_dir)['actor_steps']) + 2000, '--resume')
  stdout, stderr = again.communicate(timeout=600)
  assert again.returncode == 0, stdout[-2000:] + stderr[-2000:]

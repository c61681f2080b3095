"""What the node supervisor records and decides, as the chaos soak (bench.soak) meets it: a node's
failure is judged by the output of its own start (its log holds every earlier start's, the run's
earlier launches' too), so a kill -9 after an earlier full disk is restarted, not taken for a full
disk; and a launch's first start of a node is its only attempt 1 (a hang's restart is not), which
the soak's records check counts launches by. A real supervisor runs a one-node Launchpad program
(local_mt) whose node's child is a real process."""
import errno
import os
import subprocess
import sys
import textwrap

import pytest

from bench import soak
from launch.runtime import disk, processes, run_state, supervisor

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))

# The node's first start does what `how` says; its second prints a line and exits 0, which ends
# the program. The hang poll is shortened so that a stopped node is found within a few seconds.
_PROGRAM = textwrap.dedent('''
    import os, signal, sys
    import launchpad as lp
    from launchpad.nodes.python import node as python
    from launch.runtime import supervisor

    run_dir, how = sys.argv[1], sys.argv[2]
    supervisor.HANG_POLL_S = 0.5

    def body():
      marker = os.path.join(run_dir, 'started_once')
      if not os.path.exists(marker):
        open(marker, 'w').close()
        if how == 'kill':
          os.kill(os.getpid(), signal.SIGKILL)
        elif how == 'stop':
          os.kill(os.getpid(), signal.SIGSTOP)
        print(how, flush=True)
        sys.exit(1)
      print('second start', flush=True)

    program = lp.Program('one_node')
    program.add_node(supervisor.SupervisedNode(
        python.PyNode(body), 'flaky', run_dir, max_failures=3, window_s=60.0,
        hang_timeout_s=1.0 if how == 'stop' else 0.0), label='flaky')
    lp.launch(program, launch_type='local_mt', serialize_py_nodes=False).wait()
''')

ENOSPC_LINE = "OSError: [Errno 28] No space left on device: '/run/logs/flaky/logs.csv'"


def _run(run_dir, how, earlier_output='', prepare=lambda: None):
  """Runs the one-node program in `run_dir` (its node's log already holding `earlier_output`,
  `prepare()` called just before); returns the supervisor's events."""
  os.makedirs(run_dir / 'node_logs')
  (run_dir / 'node_logs' / 'flaky.log').write_text(earlier_output)
  script = run_dir.parent / 'program.py'   # beside the run: its disk may be full
  script.write_text(_PROGRAM)
  prepare()
  proc = subprocess.run([sys.executable, str(script), str(run_dir), how], cwd=ROOT,
                        env=dict(os.environ, PYTHONPATH=ROOT), capture_output=True, text=True,
                        timeout=120)
  assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
  return supervisor.read_events(run_state.RunRecords(str(run_dir)))


def _failure(run_dir):
  return run_state.RunRecords(str(run_dir)).read(run_state.FAILURE)


def test_a_killed_node_whose_log_holds_an_earlier_full_disk_is_restarted(tmp_path):
  earlier = f'Traceback (most recent call last):\n  File "x.py", line 1\n{ENOSPC_LINE}\n'
  events = _run(tmp_path / 'run', 'kill', earlier)
  assert _failure(tmp_path / 'run') is None, _failure(tmp_path / 'run')
  failure, = [e for e in events if e['event'] == 'failure']
  assert failure['exit_code'] == -9 and failure['error'] == '', failure
  assert [e['attempt'] for e in events if e['event'] == 'start'] == [1, 2]


def test_a_node_that_fails_on_a_full_disk_stops_the_run_as_a_full_disk(tmp_path):
  events = _run(tmp_path / 'run', ENOSPC_LINE, 'ValueError: an earlier start\n')
  reason = _failure(tmp_path / 'run')['reason']
  assert reason.startswith('disk full: node flaky could not write'), reason
  assert [e['event'] for e in events] == ['start', 'failure', 'gave_up']


@pytest.mark.skipif(os.geteuid() != 0, reason='the full disk is a tmpfs (root)')
def test_a_node_failing_on_a_disk_with_no_room_left_stops_the_run_saying_so(tmp_path):
  """Nothing more fits, the supervisor's own records neither: the space its launcher set aside
  takes why the run stops, and the program is stopped all the same."""
  mount = tmp_path / 'disk'
  mount.mkdir()
  subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=2m', 'tmpfs', str(mount)], check=True)
  try:
    run_dir = mount / 'run'

    def fill():
      disk.set_aside(str(run_dir))
      soak.fill_disk(str(mount / 'filler'))
    events = _run(run_dir, ENOSPC_LINE, prepare=fill)
    reason = (_failure(run_dir) or {}).get('reason', '')
    assert reason.startswith('disk full: node flaky could not write') and '0 MB free' in reason, (
        reason, events)
  finally:
    subprocess.run(['umount', '-l', str(mount)], check=False)


def test_a_hung_node_s_restart_is_its_second_attempt(tmp_path):
  events = _run(tmp_path / 'run', 'stop')
  assert [(e['event'], e.get('attempt')) for e in events] == [
      ('start', 1), ('hung', None), ('start', 2)], events


def test_the_last_error_line_is_read_after_where_the_process_began(tmp_path):
  log = tmp_path / 'node.log'
  log.write_text(f'{ENOSPC_LINE}\n')
  since = processes.log_size(str(log))
  assert processes.last_error_line(str(log), since=since) == ''
  with open(log, 'a') as f:
    f.write('starting\nValueError: bad value\nbye\n')
  assert processes.last_error_line(str(log), since=since) == 'ValueError: bad value'
  assert processes.last_error_line(str(log)) == 'ValueError: bad value'
  assert processes.log_size(str(tmp_path / 'missing.log')) == 0


@pytest.mark.parametrize('code', [errno.ENOSPC, errno.EDQUOT])
def test_no_space_and_a_spent_quota_are_a_full_disk_and_nothing_else_is(code):
  assert disk.is_disk_full(str(OSError(code, os.strerror(code), '/run/counts.json')))
  assert disk.is_disk_full(os.strerror(code))
  for line in ('', 'ValueError: something else', 'OSError: [Errno 5] Input/output error',
               'the launcher (pid 2880) is gone: stopping'):
    assert not disk.is_disk_full(line), line

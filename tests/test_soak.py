"""The chaos soak (bench.soak): its schedule is its seed's, and (slow) ten minutes of random,
overlapping faults against a real Cartpole run leave every invariant holding."""
import dataclasses
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from bench import soak, soak_check


def test_a_schedule_is_its_seed_s_and_draws_every_kind():
  a = soak.schedule(3, 7200.0, 90.0, soak.KINDS)
  assert a == soak.schedule(3, 7200.0, 90.0, soak.KINDS)
  assert a != soak.schedule(4, 7200.0, 90.0, soak.KINDS)
  assert 60 <= len(a) <= 110 and {f.kind for f in a} == set(soak.KINDS)
  assert all(0 < f.time < 7200.0 for f in a) and [f.time for f in a] == sorted(f.time for f in a)


def test_the_steps_bound_is_one_unroll_per_actor_per_fault_that_can_lose_counts():
  config = {'impala': {'sequence_length': 20}, 'envs_per_actor': 8, 'num_actors': 2}
  faults = [{'kind': 'kill_node', 'applied': True}, {'kind': 'sigterm_cli', 'applied': True},
            {'kind': 'kill_cli', 'applied': True}, {'kind': 'kill_node', 'applied': False}]
  assert soak_check.steps_bound(config, faults) == 2 * 20 * 8 * 2


def test_logs_that_go_back_or_repeat_a_row_are_caught(tmp_path):
  log = tmp_path / 'logs' / 'actor_0'
  log.mkdir(parents=True)
  rows = 'actor_steps,episode_length,unix_time\n100,100,1.0\n250,150,2.0\n'
  (log / 'logs.csv').write_text(rows)
  assert soak_check.logs_never_go_back(str(tmp_path), 0)['held']
  (log / 'logs.csv').write_text(rows + '200,20,3.0\n')   # back by 50
  got = soak_check.logs_never_go_back(str(tmp_path), 40)
  assert not got['held'] and got['most_steps_back'] == 50
  assert soak_check.logs_never_go_back(str(tmp_path), 50)['held']
  (log / 'logs.csv').write_text(rows + '250,150,2.0\n')   # a row logged twice
  assert soak_check.logs_never_go_back(str(tmp_path), 1000)['duplicate_rows'] == 1


@pytest.mark.skipif(os.geteuid() != 0, reason='the full disk needs a tmpfs (root)')
def test_a_full_disk_is_full_and_grown_back_to_its_first_size_beyond_the_run(tmp_path):
  s = soak.Soak(str(tmp_path), 'cartpole', 20.0, 20.0, tmpfs_mb=16, seed=0)
  try:
    os.makedirs(s.run_dir)
    with open(os.path.join(s.run_dir, 'held'), 'wb') as f:
      f.write(b'x' * 6 * 2 ** 20)
    for _ in range(3):       # a fill every time, and the tmpfs never doubling away
      fault = soak.Fault(1.0, 'disk_full')
      s._disk_full(fault)
      assert fault.applied and s._free_bytes() < 2 ** 20, fault.detail
      s.free_disk()
      assert s.tmpfs_mb == 16 + 6 and s._free_bytes() > 15 * 2 ** 20
  finally:
    s.close()


def test_a_disk_fill_holds_while_the_run_writes(tmp_path):
  """The filler takes the space in chunks, so a run that writes while the disk is filled leaves
  it full, not empty (one allocation of all the free space fails whole)."""
  s = soak.Soak(str(tmp_path), 'cartpole', 20.0, 20.0, tmpfs_mb=64, seed=0)
  if not s.tmpfs:
    s.close()
    pytest.skip('the tmpfs needs root')
  try:
    os.makedirs(s.run_dir)
    stop = threading.Event()

    def write():
      with open(os.path.join(s.run_dir, 'log'), 'ab') as f:
        while not stop.is_set():
          try:
            f.write(b'x' * 65536)
            f.flush()
          except OSError:
            pass
    writer = threading.Thread(target=write)
    writer.start()
    try:
      fault = soak.Fault(1.0, 'disk_full')
      s._disk_full(fault)
    finally:
      stop.set()
      writer.join()
    assert fault.applied and s._free_bytes() < 2 ** 20, fault.detail
  finally:
    s.close()


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason='the full disk needs a tmpfs (root)')
def test_ten_minutes_of_faults_leave_every_invariant_holding(tmp_path):
  record = soak.run(600.0, seed=0, mean_gap_s=35.0, workdir=str(tmp_path / 'soak'),
                    out=str(tmp_path / 'soak.json'))
  assert 'aborted' not in record, record['aborted']
  failed = {k: v for k, v in record['invariants'].items() if not v['held']}
  assert not failed, failed
  assert record['summary']['faults_applied'] >= 8, record['summary']


@pytest.mark.skipif(os.geteuid() != 0, reason='the soak\'s run directory is a tmpfs (root)')
def test_a_launcher_gone_before_its_kill_is_put_off_not_a_crash(tmp_path):
  """kill_launcher while a stop is in progress: the launcher has ended, the CLI not yet."""
  s = soak.Soak(str(tmp_path), 'cartpole', 20.0, 20.0, tmpfs_mb=16, seed=0)
  gone = subprocess.Popen(['true'])
  gone.wait()
  try:
    os.makedirs(s.run_dir)
    with open(os.path.join(s.run_dir, 'launcher_session.txt'), 'w') as f:
      f.write(str(gone.pid))
    s.proc = subprocess.Popen(['sleep', '60'])
    s.entry = {'pid': s.proc.pid}
    s.launches.append(s.entry)
    fault = soak.Fault(1.0, 'kill_launcher')
    s.inject(fault)
    assert not fault.applied and fault.detail == 'launcher gone already'
    assert s.proc.poll() is None   # the CLI untouched: the fault is tried again later
  finally:
    if s.proc is not None:
      s.proc.kill()
    s.close()


def test_a_second_launch_that_took_the_run_is_a_launch_and_one_that_did_neither_is_caught():
  refused = {'kind': 'second_launch', 'applied': True, 'refused': True, 'took_run': False,
             'time': 10.0}
  took = {'kind': 'second_launch', 'applied': True, 'refused': False, 'took_run': True,
          'time': 20.0}
  put_off = {'kind': 'second_launch', 'applied': False, 'refused': None, 'took_run': False,
             'time': 30.0}
  got = soak_check.second_launches([refused, took, put_off], [])
  assert got['held'] and got['refused'] == 1 and got['took_the_run'] == 1, got
  ran_beside = {**took, 'took_run': False, 'time': 40.0}   # exit 1, say, and never held the lock
  got = soak_check.second_launches([refused, ran_beside], [])
  assert not got['held'] and got['neither_refused_nor_took_the_run'] == [40.0], got
  assert not soak_check.second_launches([took], [{'time': 5.0, 'pids': [1, 2]}])['held']


# A stand-in for launch.train's start: the real run lock taken after `delay` s (the CLI's imports),
# refused in launch.train's one line, held until the process ends (or dropped at once: `drop`).
_LAUNCH = '''
import sys, time
from launch.runtime import run_lock
run_dir, delay, drop = sys.argv[1], float(sys.argv[2]), sys.argv[3] == 'drop'
time.sleep(delay)
try:
  run_lock.acquire(run_dir)
except run_lock.RunDirInUse as e:
  print(f'error: {e}', file=sys.stderr)
  sys.exit(2)
print(f'resuming: {run_dir}', flush=True)
if drop:
  run_lock.release(run_dir)
time.sleep(120)
'''


class _LockOnlySoak(soak.Soak):
  """The soak's launches, each the stand-in above (its delay and whether it drops the lock set
  before it starts)."""
  delay, drop = 0.0, False

  def _cmd(self, max_steps, resume):
    return [sys.executable, '-c', _LAUNCH, self.run_dir, str(self.delay),
            'drop' if self.drop else 'hold']


def _until(predicate, timeout=20.0):
  deadline = time.time() + timeout
  while time.time() < deadline:
    if predicate():
      return
    time.sleep(0.1)
  raise AssertionError('timed out')


def _holder_is(s, proc):
  s.watch_lock()
  return bool(s.holders) and s.holders[-1][0] == proc.pid


def test_a_second_launch_is_refused_beside_a_live_one_and_takes_the_run_once_it_ended(tmp_path):
  s = _LockOnlySoak(str(tmp_path), 'cartpole', 20.0, 20.0, tmpfs_mb=16, seed=0)
  try:
    os.makedirs(s.run_dir, exist_ok=True)
    s.launch(10**9)
    first = s.proc
    _until(lambda: _holder_is(s, first))
    refused = soak.Fault(1.0, 'second_launch')
    s.inject(refused)
    _until(lambda: (s.watch_second(), s.second is None)[1])
    assert refused.refused and not refused.took_run, refused.detail
    assert f'pid {first.pid}' in refused.detail and len(s.launches) == 1
    # Another second launch, whose lock request comes after the launch beside it was killed.
    s.delay = 1.0
    took = soak.Fault(2.0, 'second_launch')
    s.inject(took)
    s.stop_launch(signal.SIGKILL)
    assert s.proc is None
    _until(lambda: (s.watch_second(), s.proc is not None)[1])
    assert took.took_run and not took.refused and s.second is None, took.detail
    assert s.launches[-1]['second_launch'] and s.launches[-1]['pid'] == s.proc.pid
    assert _holder_is(s, s.proc) and not s.held_at_once
  finally:
    s.close()


def test_two_launches_holding_the_run_at_once_are_seen(tmp_path):
  s = _LockOnlySoak(str(tmp_path), 'cartpole', 20.0, 20.0, tmpfs_mb=16, seed=0)
  try:
    os.makedirs(s.run_dir, exist_ok=True)
    s.drop = True   # the first launch lets go of its lock while it lives on
    s.launch(10**9)
    first = s.proc
    _until(lambda: _holder_is(s, first))
    s.drop = False
    second = soak.Fault(1.0, 'second_launch')
    s.inject(second)
    _until(lambda: (s.watch_second(), bool(s.held_at_once))[1])
    assert s.held_at_once[0]['pids'] == [first.pid, s.second.pid], s.held_at_once
    assert not soak_check.second_launches([dataclasses.asdict(second)], s.held_at_once)['held']
  finally:
    s.close()

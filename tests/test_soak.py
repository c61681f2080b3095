"""The chaos soak (bench.soak): its schedule is its seed's, and (slow) ten minutes of random,
overlapping faults against a real Cartpole run leave every invariant holding."""
import os
import subprocess
import threading

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
    s.launches.append({'pid': s.proc.pid})
    fault = soak.Fault(1.0, 'kill_launcher')
    s.inject(fault)
    assert not fault.applied and fault.detail == 'launcher gone already'
    assert s.proc.poll() is None   # the CLI untouched: the fault is tried again later
  finally:
    if s.proc is not None:
      s.proc.kill()
    s.close()

"""launch.runtime.run_lock: one live launch per run directory; a dead one never blocks."""
import os
import signal
import socket
import subprocess
import sys

import pytest

from launch.runtime import run_lock

HOLD = ('import sys, time; from launch.runtime import run_lock; run_lock.acquire(sys.argv[1]); '
        'print("held", flush=True); time.sleep(600)')


def _holder_process(run_dir):
  proc = subprocess.Popen([sys.executable, '-c', HOLD, str(run_dir)], stdout=subprocess.PIPE,
                          text=True, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  assert proc.stdout.readline().strip() == 'held'
  return proc


def test_a_second_launch_is_refused_naming_the_live_one_and_a_dead_one_never_blocks(tmp_path):
  run_dir = tmp_path / 'run'
  proc = _holder_process(run_dir)
  try:
    with pytest.raises(run_lock.RunDirInUse) as e:
      run_lock.acquire(str(run_dir))
    message = str(e.value)
    assert '\n' not in message and f'pid {proc.pid}' in message
    assert socket.gethostname() in message and str(run_dir) in message
  finally:
    proc.send_signal(signal.SIGKILL)   # died without releasing anything
    proc.wait()
  run_lock.acquire(str(run_dir))     # the kernel dropped its lock
  try:
    assert run_lock.holder(str(run_dir))['pid'] == os.getpid()
    run_lock.acquire(str(run_dir))   # again in the same process: still ours
  finally:
    run_lock.release(str(run_dir))
  proc = _holder_process(run_dir)    # released: another process takes it at once
  proc.kill()
  proc.wait()


def test_the_lock_creates_a_missing_run_dir(tmp_path):
  run_dir = tmp_path / 'a' / 'b'
  run_lock.acquire(str(run_dir))
  try:
    assert (run_dir / run_lock.LOCK_FILE).exists()
  finally:
    run_lock.release(str(run_dir))


def test_check_free_refuses_a_live_holder_and_takes_nothing(tmp_path):
  run_dir = tmp_path / 'run'
  run_lock.check_free(str(run_dir))                # a missing run dir is free, and stays missing
  assert not run_dir.exists()
  proc = _holder_process(run_dir)
  try:
    with pytest.raises(run_lock.RunDirInUse) as e:
      run_lock.check_free(str(run_dir))
    assert '\n' not in str(e.value) and f'pid {proc.pid}' in str(e.value)
  finally:
    proc.kill()
    proc.wait()
  before = (run_dir / run_lock.LOCK_FILE).read_text()
  run_lock.check_free(str(run_dir))                # the holder died: free
  assert (run_dir / run_lock.LOCK_FILE).read_text() == before   # the probe wrote nothing
  proc = _holder_process(run_dir)                  # and held nothing
  proc.kill()
  proc.wait()
  run_lock.acquire(str(run_dir), launch='L', job='J')
  try:
    run_lock.check_free(str(run_dir))              # this process's own lock
    run_lock.annotate(str(run_dir), job='K')
    assert run_lock.holder(str(run_dir)) == dict(run_lock.holder(str(run_dir)), pid=os.getpid(),
                                                 launch='L', job='K')
  finally:
    run_lock.release(str(run_dir))

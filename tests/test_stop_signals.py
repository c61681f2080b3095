"""The CLI's TensorBoard progress writer (launch.runtime.progress.TensorBoard) under what a long run
meets: stop signals landing in the middle of TensorFlow's eager calls
(launch.runtime.termination.stop_signals_deferred), and a full disk. Every stop must still reach
the CLI as a KeyboardInterrupt, and neither may break the writer or end the CLI otherwise."""
import os
import subprocess
import sys
import textwrap

import pytest

from launch.runtime import progress

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# SIGTERMs every 0.5-20 ms, as the CLI turns them into KeyboardInterrupt, against a loop of
# writes. Without the deferral a TypeError ("Was eager Context initialized?") came in some such
# runs (once after 2,217 writes and 320 stops), not in all: this catches that bug by chance only.
# A signal may also land in the loop's own except clause (more often on a loaded machine): the
# outer loop counts that one too.
STORM = textwrap.dedent('''
  import os, random, signal, sys, threading, time
  from launch.runtime import progress, termination
  termination.stop_like_ctrl_c_on_termination()
  board = progress.TensorBoard(sys.argv[1])
  rng = random.Random(0)
  def storm():
    while True:
      time.sleep(rng.uniform(0.0005, 0.02))
      os.kill(os.getpid(), signal.SIGTERM)
  threading.Thread(target=storm, daemon=True).start()
  writes = stops = 0
  deadline = time.time() + float(sys.argv[2])
  while time.time() < deadline:
    try:
      while time.time() < deadline:
        try:
          writes += 1
          board.write({'env_steps': writes, 'episode_return': 1.0, 'env_steps_per_s': 2.0})
        except KeyboardInterrupt:
          stops += 1
    except KeyboardInterrupt:
      stops += 1
  signal.signal(signal.SIGTERM, signal.SIG_IGN)
  print(writes, stops)
''')


def test_stop_signals_inside_tensorboard_writes_all_arrive_and_never_break_the_writer(tmp_path):
  out = subprocess.run([sys.executable, '-c', STORM, str(tmp_path), '5'], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
  assert out.returncode == 0, out.stderr[-3000:]
  writes, stops = map(int, out.stdout.split()[-2:])
  assert writes > 500, out.stdout
  assert stops > 50, out.stdout   # deferred, not lost


@pytest.mark.skipif(os.geteuid() != 0, reason='mounting a tmpfs needs root')
def test_a_full_disk_under_the_progress_writer_warns_once_and_the_cli_goes_on(tmp_path, capsys):
  small = tmp_path / 'small'
  small.mkdir()
  subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', str(small)], check=True)
  try:
    board = progress.TensorBoard(str(small))
    board.write({'env_steps': 1, 'episode_return': 1.0})
    with open(small / 'filler', 'wb', buffering=0) as f:
      for chunk in (65536, 4096, 1):   # to the last byte
        try:
          while True:
            f.write(b'\0' * chunk)
        except OSError:
          pass
    for step in range(2, 500):   # past the page the events file already holds
      board.write({'env_steps': step, 'episode_return': float(step)})
    board.close()
    out = capsys.readouterr().out
    assert out.count('warning: progress not written to TensorBoard') == 1, out
    assert 'No space left on device' in out, out
  finally:
    subprocess.run(['umount', '-l', str(small)], check=False)

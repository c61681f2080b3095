"""One launch per run directory for cluster launches (launch.cluster.replica): the coordinator
replica's wrapper holds RUN_DIR's lock for its job, a second job's coordinator is refused in one
line and its other replicas give up, all without writing into the run directory; packaging
never replaces a live job's files. Real wrapper processes (`python -m launch.cluster node`) on
a hand-written launch file; the program itself is never started (tests/test_slurm_lock.py runs
two real Slurm jobs)."""
import json
import os
import signal
import subprocess
import sys
import time
import types

import pytest

from launch.cluster import package, replica
from launch.runtime import run_lock, run_state

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOLD = ('import json, sys, time; from launch.runtime import run_lock; '
        'run_lock.acquire(sys.argv[1], **json.loads(sys.argv[2])); print("held", flush=True); '
        'time.sleep(600)')
SPEC = {'cluster': {'coordinator': ['127.0.0.1:1'], 'actor': ['127.0.0.1:2']}}


def _hold(run_dir, **record):
  """Another process holding RUN_DIR's lock, as a live launch does."""
  proc = subprocess.Popen([sys.executable, '-c', HOLD, str(run_dir), json.dumps(record)],
                          stdout=subprocess.PIPE, text=True, cwd=ROOT)
  assert proc.stdout.readline().strip() == 'held'
  return proc


def _end(proc):
  proc.send_signal(signal.SIGKILL)
  proc.wait()


def _launch(run_dir, launch_id='L1'):
  """A packaged launch's launch file (what the wrapper reads before anything else)."""
  directory = run_dir / 'cluster'
  directory.mkdir(parents=True)
  launch = {'launch_id': launch_id, 'stop_file': str(directory / f'stopped-{launch_id}.json'),
            'run_dir': str(run_dir), 'code_dir': ROOT, 'python': sys.executable,
            'groups': {'coordinator': 1, 'actor': 1}, 'replicas': []}
  (directory / 'launch.json').write_text(json.dumps(launch))
  return launch


def _files(run_dir):
  return sorted(str(p.relative_to(run_dir)) for p in run_dir.rglob('*')
                if p.name != run_lock.LOCK_FILE)


def test_a_second_jobs_coordinator_is_refused_in_one_line_writing_nothing(tmp_path):
  run_dir = tmp_path / 'run'
  _launch(run_dir)
  before = _files(run_dir)
  holder = _hold(run_dir, launch='L1', job='slurm-1')   # the first job's coordinator
  try:
    env = dict(os.environ, CLUSTER_SPEC=json.dumps(dict(SPEC, task={'type': 'coordinator',
                                                                    'index': 0})),
               SLURM_JOB_ID='2', PYTHONPATH=ROOT)
    start = time.time()
    r = subprocess.run([sys.executable, '-m', 'launch.cluster', 'node', '--run_dir', str(run_dir)],
                       env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    took = time.time() - start
  finally:
    _end(holder)
  lines = r.stderr.strip().splitlines()
  assert r.returncode == 2 and len(lines) == 1, (r.returncode, r.stdout, r.stderr)
  assert lines[0].startswith('error: ') and f'pid {holder.pid}' in lines[0], lines
  assert str(run_dir) in lines[0] and 'in use by a live launch' in lines[0]
  # No failure record, stop file, run record or node log: the first job's files are its own.
  assert _files(run_dir) == before
  print(f'coordinator refused in {took:.1f} s')


def test_the_other_replicas_of_a_refused_job_give_up_writing_nothing(tmp_path, monkeypatch):
  run_dir = tmp_path / 'run'
  _launch(run_dir)
  before = _files(run_dir)
  holder = _hold(run_dir, launch='L1', job='slurm-1')
  monkeypatch.setattr(replica, 'COORDINATOR_LOCK_WAIT_S', 1.0)
  monkeypatch.setenv('CLUSTER_SPEC', json.dumps(dict(SPEC, task={'type': 'actor', 'index': 0})))
  monkeypatch.setenv('SLURM_JOB_ID', '2')
  try:
    with pytest.raises(run_lock.RunDirInUse) as e:
      replica.node_main(str(run_dir))
  finally:
    _end(holder)
  message = str(e.value)
  assert '\n' not in message and 'actor-0 not started' in message and 'job slurm-1' in message
  assert _files(run_dir) == before


def test_replicas_start_under_their_own_coordinator_or_launcher(tmp_path):
  run_dir = str(tmp_path / 'run')
  # The job's coordinator took the lock: its replicas go on at once.
  run_lock.acquire(run_dir, launch='L1', job='slurm-7')
  try:
    replica.wait_for_coordinator(run_dir, 'L1', 'slurm-7', 'actor-0', timeout_s=0)
  finally:
    run_lock.release(run_dir)
  # launch.train --cluster_start holds it for the job it started (launch.cluster.start): that
  # job's coordinator runs without it, any other job's is refused.
  holder = _hold(run_dir, launch='L1', job='launcher-1@h')
  try:
    replica.hold_run_dir(run_dir, 'L1', 'launcher-1@h')
    for launch_id, job in (('L1', 'slurm-8'), ('L1', None), ('L0', 'launcher-1@h')):
      with pytest.raises(run_lock.RunDirInUse):
        replica.hold_run_dir(run_dir, launch_id, job)
  finally:
    _end(holder)
  replica.hold_run_dir(run_dir, 'L1', 'slurm-8')   # its holder died: the lock is free
  try:
    assert run_lock.holder(run_dir)['job'] == 'slurm-8'
  finally:
    run_lock.release(run_dir)


def test_a_killed_coordinator_never_blocks_the_next_job(tmp_path):
  run_dir = tmp_path / 'run'
  _launch(run_dir)
  # A coordinator's wrapper holds the lock as long as it lives; here it is SIGKILLed (a node
  # crash, a plain `scancel`): nothing is released by hand.
  proc = subprocess.Popen([sys.executable, '-c',
                           'import sys, time; from launch.cluster import replica; '
                           'replica.hold_run_dir(sys.argv[1], "L1", "slurm-3"); '
                           'print("held", flush=True); time.sleep(600)', str(run_dir)],
                          cwd=ROOT, stdout=subprocess.PIPE, text=True)
  assert proc.stdout.readline().strip() == 'held'
  with pytest.raises(run_lock.RunDirInUse):
    run_lock.check_free(str(run_dir))
  _end(proc)
  run_lock.check_free(str(run_dir))   # the kernel dropped it with the process


def test_packaging_refuses_a_run_dir_in_use_before_writing(tmp_path):
  run_dir = tmp_path / 'run'
  launch = _launch(run_dir)
  before = {p: (run_dir / p).read_bytes() for p in _files(run_dir) if (run_dir / p).is_file()}
  holder = _hold(run_dir, launch='L1', job='slurm-1')
  try:
    cfg = types.SimpleNamespace(run_dir=str(run_dir))   # refused before the program is built
    with pytest.raises(run_lock.RunDirInUse) as e:
      package.package(cfg, desc=None)
  finally:
    _end(holder)
  assert '\n' not in str(e.value) and f'pid {holder.pid}' in str(e.value)
  assert {p: (run_dir / p).read_bytes() for p in _files(run_dir)
          if (run_dir / p).is_file()} == before
  assert not os.path.exists(launch['stop_file'])
  assert run_state.read_json(str(run_dir / 'cluster' / 'launch.json'))['launch_id'] == 'L1'


def test_a_refused_slurm_jobs_graceful_stop_leaves_the_live_run_alone(tmp_path, monkeypatch,
                                                                      capsys):
  """`scancel --batch --signal=TERM` of the refused job runs `launch.cluster stop` in its batch
  shell (launch.cluster.files.slurm_files): that must not stop the job that holds the run."""
  from launch.cluster.__main__ import stop_main
  run_dir = tmp_path / 'run'
  _launch(run_dir)
  holder = _hold(run_dir, launch='L1', job='slurm-1')
  try:
    monkeypatch.setenv('SLURM_JOB_ID', '2')
    assert stop_main(str(run_dir)) == 0
    assert 'nothing of this job to stop' in capsys.readouterr().out
    assert not (run_dir / run_state.STOP_REQUEST).exists()
    monkeypatch.setenv('SLURM_JOB_ID', '1')   # the holding job's own batch shell stops it
    assert stop_main(str(run_dir)) == 0
    assert (run_dir / run_state.STOP_REQUEST).exists()
  finally:
    _end(holder)

"""One launch per run directory under a real Slurm (`make test-slurm`'s throwaway cluster,
tests/slurm_local.py, here with a fourth node d): job A, packaged by `launch.train
--launch_type cluster` for nodes a, b, c, runs; job B, the same package submitted on node d
(its own copy of the job script: a user resubmitting a run that seemed stuck), is a second job on
the same run directory. B's coordinator is refused in one line naming A's coordinator (pid,
host), B's other replicas give up without starting their nodes, B writes nothing into the run
directory; packaging the run again while A runs is refused too; A completes untouched and its
lock is gone with it."""
import json
import os
import re
import socket
import subprocess
import sys
import time

import cluster_checks
import pytest
import slurm_local
from test_slurm import _alive, _ended, _print_summary, _running

from launch.cluster import replica
from launch.runtime import run_lock, run_state

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))
pytestmark = pytest.mark.slow
NODES = (*cluster_checks.HOSTS, 'd')
MAX_STEPS = 10000
REFUSED_WITHIN_S = 120        # B's start (a light wrapper) and refusal, on a loaded machine


@pytest.fixture(scope='module')
def slurm():
  why = slurm_local.unavailable_reason()
  if why:
    pytest.skip(f'no local Slurm cluster: {why}')
  cluster = slurm_local.LocalSlurm(list(NODES))
  cluster.start()
  daemons = cluster.daemon_pids()
  try:
    yield cluster
  finally:
    cluster.stop()
  assert not [pid for pid in daemons.values() if _alive(pid)], 'Slurm daemons left running'


def _train(*args):
  return subprocess.run([sys.executable, '-m', 'launch.train', *args], cwd=ROOT,
                        capture_output=True, text=True, timeout=900)


def _package(tmp_path, slurm, run_dir):
  description = tmp_path / 'cluster.json'
  description.write_text(json.dumps({
      'name': 'locktest', 'hosts': {h: slurm.address(h) for h in cluster_checks.HOSTS},
      'groups': cluster_checks.GROUPS, 'slurm': {'time': '01:00:00'}}))
  args = [*cluster_checks.train_args(run_dir, MAX_STEPS), '--launch_type', 'cluster',
          '--cluster_description', str(description)]
  r = _train(*args)
  assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]


def _job_on_node_d(run_dir, directory):
  """A copy of the packaged job for node d alone: every replica's task script (the same
  multi_prog.conf) on d; the job's own output outside the run directory."""
  slurm_dir = run_dir / 'cluster' / 'slurm'
  directory.mkdir()
  replicas = len((slurm_dir / 'hostfile').read_text().split())
  (directory / 'hostfile').write_text('d\n' * replicas)
  text = (slurm_dir / 'job.sbatch').read_text()
  text = re.sub(r'#SBATCH --nodes=\d+', '#SBATCH --nodes=1', text)
  text = re.sub(r'#SBATCH --nodelist=\S+', '#SBATCH --nodelist=d', text)
  text = text.replace(str(slurm_dir / 'hostfile'), str(directory / 'hostfile'))
  assert text.count('--nodelist=d') == 1 and str(directory / 'hostfile') in text
  (directory / 'job.sbatch').write_text(text)
  return str(directory / 'job.sbatch')


def _package_files(run_dir):
  """The package a second job must leave alone (A's own stop file and logs left out)."""
  return {str(p.relative_to(run_dir)): p.read_bytes() for p in (run_dir / 'cluster').rglob('*')
          if p.is_file() and 'logs' not in p.parts and not p.name.startswith('stopped-')}


def test_a_second_slurm_job_on_a_run_dir_in_use_is_refused(tmp_path, slurm):
  run_dir = tmp_path / 'run'
  _package(tmp_path, slurm, run_dir)
  job_a = slurm.submit(str(run_dir / 'cluster' / 'slurm' / 'job.sbatch'), cwd=str(run_dir))
  launch = json.loads((run_dir / 'cluster' / 'launch.json').read_text())
  # A's coordinator holds the run directory once its wrapper starts.
  deadline = time.time() + REFUSED_WITHIN_S
  while (run_lock.holder(str(run_dir)) or {}).get('job') != f'slurm-{job_a}':
    assert time.time() < deadline and _running(slurm, job_a)(), run_lock.holder(str(run_dir))
    time.sleep(1.0)
  holder = run_lock.holder(str(run_dir))
  assert holder['launch'] == launch['launch_id'] and holder['host'] == socket.gethostname()
  package_before = _package_files(run_dir)

  # Packaging a new launch of this run (--resume) is refused before it writes anything.
  r = _train('--run_dir', str(run_dir), '--resume')
  assert r.returncode == 2 and f'pid {holder["pid"]}' in r.stderr, r.stdout + r.stderr
  assert len(r.stderr.strip().splitlines()) == 1, r.stderr

  b_dir = tmp_path / 'job_b'
  submitted = time.time()
  job_b = slurm.submit(_job_on_node_d(run_dir, b_dir), f'--output={b_dir}/slurm-%j.out')
  out_b = b_dir / f'slurm-{job_b}.out'
  refusal = None
  while refusal is None:
    text = out_b.read_text() if out_b.exists() else ''
    refusal = next((l for l in text.splitlines() if 'in use by a live launch' in l), None)
    assert time.time() - submitted < REFUSED_WITHIN_S, text
    time.sleep(0.5)
  refused_s = time.time() - submitted
  print(f'\njob B {job_b} refused {refused_s:.1f} s after sbatch: {refusal}', flush=True)
  assert _running(slurm, job_a)(), 'A ended before B was refused: the test proves nothing'
  assert refusal.startswith('error: ') and f'pid {holder["pid"]} on {socket.gethostname()}' in refusal
  fields_b = slurm.wait(job_b, replica.COORDINATOR_LOCK_WAIT_S + REFUSED_WITHIN_S)
  ended_s = time.time() - submitted
  text_b = out_b.read_text()
  print(f'job B {job_b}: JobState={fields_b.get("JobState")} ExitCode={fields_b.get("ExitCode")} '
        f'{ended_s:.0f} s after sbatch', flush=True)
  assert fields_b.get('JobState') == 'FAILED', (fields_b, text_b)
  for task in cluster_checks.PLACED:
    if task != 'coordinator-0':
      assert f'{task} not started' in text_b, text_b
  assert 'listening on' not in text_b, text_b     # no node of B started
  # B wrote nothing of A's: the package as it was, no failure record (one segment: below).
  assert _package_files(run_dir) == package_before
  assert not (run_dir / run_state.FAILURE).exists()

  _ended(slurm, run_dir, job_a)
  _print_summary(run_dir)
  cluster_checks.check_learned(run_dir, 'completed', MAX_STEPS, psi_changed=False)
  assert not (run_dir / run_state.FAILURE).exists()
  segments = run_state.RunRecords(str(run_dir)).segments()
  assert len(segments) == 1 and segments[0]['status'] == 'completed', segments
  run_lock.check_free(str(run_dir))   # A's coordinator is gone, and so is its lock

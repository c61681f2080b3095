"""The generated Slurm job under a real Slurm (`make test-slurm`): a throwaway cluster on this
machine (tests/slurm_local.py: munged and slurmctld in one network namespace, a slurmd per
node namespace a, b, c), the run packaged by `launch.train --launch_type cluster` and submitted
with `sbatch RUN_DIR/cluster/slurm/job.sbatch`, as a user would. Checks what the namespace test
checks (tests/cluster_checks.py), that the job ended COMPLETED, and that nothing is left: no
process of the job on any node, and after the cluster's teardown no daemon and no namespace.

The job's key lines (job id, node list, run summary) are printed: `pytest -s` shows them."""
import json
import os
import subprocess
import sys
import time

import cluster_checks
import pytest
import slurm_local

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))
pytestmark = pytest.mark.slow
MAX_STEPS = 30000
JOB_TIMEOUT_S = 3600        # a loaded 2-core machine has needed 20 minutes to start a program
SLURM_DAEMONS = {'slurmd', 'slurmstepd', 'srun', 'slurmctld', 'munged'}


@pytest.fixture(scope='module')
def slurm():
  why = slurm_local.unavailable_reason()
  if why:
    pytest.skip(f'no local Slurm cluster: {why}')
  cluster = slurm_local.LocalSlurm(list(cluster_checks.HOSTS))
  cluster.start()
  print(f'\n{slurm_local.slurm_version()}: nodes '
        + ', '.join(f'{n}={cluster.address(n)}' for n in cluster.nodes), flush=True)
  daemons = cluster.daemon_pids()
  try:
    yield cluster
  finally:
    cluster.stop()
  left = [f'{name} (pid {pid})' for name, pid in daemons.items() if _alive(pid)]
  assert not left, f'Slurm daemons left running: {left}'
  assert not cluster.hosts.exists(), 'namespaces left behind'
  assert not os.path.exists(cluster.directory), cluster.directory


def _alive(pid: int) -> bool:
  try:
    with open(f'/proc/{pid}/stat') as f:
      return f.read().split(') ', 1)[1][0] != 'Z'
  except OSError:
    return False


def _package(tmp_path, slurm, max_steps):
  """launch.train --launch_type cluster (nothing started): the Slurm job for the nodes a, b, c."""
  run_dir = tmp_path / 'run'
  description = tmp_path / 'cluster.json'
  description.write_text(json.dumps({
      'name': 'slurmtest', 'hosts': {h: slurm.address(h) for h in cluster_checks.HOSTS},
      'groups': cluster_checks.GROUPS, 'slurm': {'time': '01:00:00'}}))
  _train(*cluster_checks.train_args(run_dir, max_steps), '--launch_type', 'cluster',
         '--cluster_description', str(description))
  return run_dir


def _train(*args):
  r = subprocess.run([sys.executable, '-m', 'launch.train', *args], cwd=ROOT, capture_output=True,
                     text=True, timeout=900)
  assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
  assert 'sbatch ' in r.stdout, r.stdout


def _submit(slurm, run_dir) -> str:
  job = slurm.submit(str(run_dir / 'cluster' / 'slurm' / 'job.sbatch'), cwd=str(run_dir))
  print(f'submitted batch job {job}', flush=True)
  return job


def _running(slurm, job):
  return lambda: slurm.job(job).get('JobState') not in slurm_local.FINAL_STATES


def _ended(slurm, run_dir, job) -> dict:
  """Waits for the job; it must have COMPLETED with exit code 0 and left nothing on its nodes."""
  fields = slurm.wait(job, JOB_TIMEOUT_S)
  out = run_dir / 'cluster' / 'logs' / f'slurm-{job}.out'
  text = out.read_text() if out.exists() else '(no output file)'
  print(f'job {job}: JobState={fields.get("JobState")} ExitCode={fields.get("ExitCode")} '
        f'NodeList={fields.get("NodeList")} BatchHost={fields.get("BatchHost")} '
        f'RunTime={fields.get("RunTime")}', flush=True)
  assert fields.get('JobState') == 'COMPLETED' and fields.get('ExitCode') == '0:0', (fields, text)
  assert fields.get('NodeList') == ','.join(cluster_checks.HOSTS), fields
  # Nothing of the job left on its nodes: each namespace holds its slurmd only.
  deadline = time.time() + 60   # slurmstepd exits just after the job is marked complete
  while True:
    left = {h: [p for p in slurm.hosts.pids(h) if p != slurm.daemon_pids()[f'slurmd-{h}']]
            for h in cluster_checks.HOSTS}
    if not any(left.values()) or time.time() > deadline:
      break
    time.sleep(1.0)
  assert not any(left.values()), {h: [_cmdline(p) for p in pids] for h, pids in left.items()}
  return fields


def _cmdline(pid: int) -> str:
  try:
    with open(f'/proc/{pid}/cmdline', 'rb') as f:
      return f.read().replace(b'\0', b' ').decode(errors='replace').strip()
  except OSError:
    return f'{pid} (gone)'


def _print_summary(run_dir) -> None:
  s = json.loads((run_dir / 'summary.json').read_text())
  print('run summary: ' + ', '.join(f'{k} {s[k]}' for k in (
      'status', 'actor_steps', 'episodes', 'learner_steps', 'precedence_steps', 'wall_time_s',
      'launches') if k in s), flush=True)


def test_rae_program_as_a_slurm_job(tmp_path, slurm):
  run_dir = _package(tmp_path, slurm, MAX_STEPS)
  job = _submit(slurm, run_dir)
  listening = cluster_checks.sample_listeners(slurm.hosts, run_dir, _running(slurm, job))
  _ended(slurm, run_dir, job)
  _print_summary(run_dir)
  cluster_checks.check_own_addresses(slurm.hosts, listening, ignore=SLURM_DAEMONS)
  cluster_checks.check_placement(run_dir)
  cluster_checks.check_learned(run_dir, 'completed', MAX_STEPS)
  # Slurm placed each task on its host: the replicas' own lines in the job's output.
  out = (run_dir / 'cluster' / 'logs' / f'slurm-{job}.out').read_text()
  for task in cluster_checks.PLACED:
    assert f'{task}: node exited' in out, out


def test_graceful_scancel_then_resume(tmp_path, slurm):
  """`scancel --batch --signal=TERM` ends the run gracefully (final checkpoints, status 'stopped
  by user', the job COMPLETED); `launch.train --resume` packages a second launch, whose job
  continues from those checkpoints to the end."""
  run_dir = _package(tmp_path, slurm, MAX_STEPS)
  job = _submit(slurm, run_dir)
  running = _running(slurm, job)
  while running():
    counts = json.loads((run_dir / 'counts.json').read_text()) if (run_dir / 'counts.json').exists() else {}
    if counts.get('learner_steps', 0) > 0 and counts.get('precedence_steps', 0) > 0:
      break
    time.sleep(2.0)
  slurm.client('scancel', '--batch', '--signal=TERM', job)
  print(f'scancel --batch --signal=TERM {job}', flush=True)
  _ended(slurm, run_dir, job)
  _print_summary(run_dir)
  stopped = cluster_checks.check_learned(run_dir, 'stopped by user', 1, psi_changed=False)
  assert stopped['counts']['actor_steps'] < MAX_STEPS, stopped['counts']

  _train('--run_dir', str(run_dir), '--resume')
  job = _submit(slurm, run_dir)
  _ended(slurm, run_dir, job)
  _print_summary(run_dir)
  final = cluster_checks.check_learned(run_dir, 'completed', MAX_STEPS)
  for count in ('learner_steps', 'precedence_steps'):
    assert final['counts'][count] > stopped['counts'][count], (count, stopped, final)
  assert json.loads((run_dir / 'summary.json').read_text())['launches'] == 2

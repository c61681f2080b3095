"""The program across hosts: network namespaces stand in for machines (bench.netns_hosts), the
run directory on the one filesystem stands in for shared storage. Replay, counter and
coordinator on host A, the two learners on host B, two actors on host C; the launch is
`launch.train --launch_type cluster --cluster_start`, which starts each host's replicas through
`ip netns exec` and CLUSTER_SPEC (Launchpad's own process entry). Checks what the local
integration test checks, and that every node listened only on its own host's address."""
import json
import os
import subprocess
import sys

import cluster_checks
import pytest

from bench import netns_hosts
from launch.runtime import processes, run_lock

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))
pytestmark = pytest.mark.slow


@pytest.fixture
def hosts():
  why = netns_hosts.unavailable_reason()
  if why:
    pytest.skip(f'network namespaces cannot be created here: {why}')
  h = netns_hosts.NetnsHosts(list(cluster_checks.HOSTS))
  h.create()
  yield h
  h.kill_processes()
  h.delete()
  assert not h.exists(), 'namespaces left behind'


def test_rae_program_across_network_namespaces(tmp_path, hosts):
  run_dir = tmp_path / 'run'
  description = tmp_path / 'cluster.json'
  description.write_text(json.dumps({
      'name': 'nstest',
      'hosts': {h: {'address': hosts.address(h), 'start': hosts.start_prefix(h)}
                for h in cluster_checks.HOSTS},
      'groups': cluster_checks.GROUPS}))
  cmd = [sys.executable, '-m', 'launch.train', *cluster_checks.train_args(run_dir, 30000),
         '--launch_type', 'cluster', '--cluster_start', '--cluster_description', str(description)]
  proc = subprocess.Popen(cmd, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
  listening = cluster_checks.sample_listeners(hosts, run_dir, lambda: proc.poll() is None)
  stdout, stderr = proc.communicate(timeout=3600)
  assert proc.returncode == 0, stdout[-3000:] + stderr[-3000:]
  assert 'run summary' in stdout
  cluster_checks.check_own_addresses(hosts, listening)
  cluster_checks.check_placement(run_dir)
  cluster_checks.check_learned(run_dir, 'completed', 30000)

  # No process left: not in any namespace, not in the host launchers' sessions.
  for h in cluster_checks.HOSTS:
    assert hosts.pids(h) == [], (h, hosts.pids(h))
  for session in (run_dir / 'launcher_session.txt').read_text().split():
    assert processes.leftover_processes(int(session)) == []


def test_a_replica_on_the_wrong_host_is_one_line(tmp_path, hosts):
  """A task started where its CLUSTER_SPEC address does not live stops with one line (and
  records the failure, so the other hosts stop too)."""
  run_dir = tmp_path / 'run'
  (run_dir / 'cluster').mkdir(parents=True)
  spec = {'cluster': {'counter': [f'{hosts.address("b")}:17100']}, 'task': {'type': 'counter', 'index': 0}}
  (run_dir / 'cluster' / 'launch.json').write_text(json.dumps({
      'launch_id': 'x', 'stop_file': str(run_dir / 'cluster' / 'stopped-x.json'),
      'groups': {'counter': 1}, 'code_dir': ROOT, 'replicas': []}))
  # A replica starts once its job's coordinator holds the run directory: here, this process.
  run_lock.acquire(str(run_dir), launch='x', job=None)
  try:
    r = subprocess.run(hosts.start_prefix('a') + [sys.executable, '-m', 'launch.cluster', 'node',
                                                  '--run_dir', str(run_dir)],
                       env=dict(os.environ, CLUSTER_SPEC=json.dumps(spec)), cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
  finally:
    run_lock.release(str(run_dir))
  assert r.returncode == 2
  last = r.stderr.strip().splitlines()[-1]
  assert 'is not an address of this machine' in last and hosts.address('b') in last, r.stderr
  assert (run_dir / 'cluster' / 'stopped-x.json').exists()
  assert 'counter-0 could not start' in json.loads((run_dir / 'failure.json').read_text())['reason']


@pytest.mark.parametrize('description, args, message', [
    (None, [], '--launch_type cluster needs --cluster_description FILE'),
    ({'hosts': {'a': '10.0.0.1'}, 'groups': {'replay': 'a', 'learners': 'a'}}, [],
     "unknown node group 'learners'"),
    ({'hosts': {'a': '10.0.0.1'}, 'groups': {'replay': 'a'}}, [],
     'node group counter of the program has no host'),
    ({'hosts': {'a': '10.0.0.1'}, 'groups': {'replay': {'host': 'a', 'port': 9000}, 'counter': 'a',
      'coordinator': 'a', 'learner': {'host': 'a', 'port': 9000}, 'precedence_learner': 'a',
      'actor': 'a'}}, [], 'port clash: replay-0 and learner-0'),
])
def test_cli_refuses_bad_cluster_input_in_one_line_before_writing(tmp_path, description, args, message):
  run_dir = tmp_path / 'run'
  cmd = [sys.executable, '-m', 'launch.train', '--launch_type', 'cluster', '--run_dir', str(run_dir),
         *args]
  if description is not None:
    (tmp_path / 'c.json').write_text(json.dumps(description))
    cmd += ['--cluster_description', str(tmp_path / 'c.json')]
  r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
  assert r.returncode == 2
  last = r.stderr.strip().splitlines()[-1]
  assert last.startswith('error: ') and message in last, r.stderr[-2000:]
  assert not run_dir.exists()

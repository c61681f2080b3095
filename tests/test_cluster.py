"""The program across hosts: network namespaces stand in for machines (launch.cluster.netns_hosts), the
run directory on the one filesystem stands in for shared storage. Replay, counter and
coordinator on host A, the two learners on host B, two actors on host C; the launch is
`launch.train --launch_type cluster --cluster_start`, which starts each host's replicas through
`ip netns exec` and CLUSTER_SPEC (Launchpad's own process entry). Checks what the local
integration test checks, and that every node listened only on its own host's address."""
import json
import os
import subprocess
import sys
import time

import pytest

from launch.program import checkpointing
from launch.cluster import netns_hosts
from launch.runtime import launcher, summary

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))
pytestmark = pytest.mark.slow


@pytest.fixture
def hosts():
  why = netns_hosts.unavailable_reason()
  if why:
    pytest.skip(f'network namespaces cannot be created here: {why}')
  h = netns_hosts.NetnsHosts(['a', 'b', 'c'])
  h.create()
  yield h
  h.kill_processes()
  h.delete()
  assert not h.exists(), 'namespaces left behind'


def _listening(hosts, host):
  """(pid, local ip) of every TCP socket listening in a host's namespace."""
  r = subprocess.run(hosts.start_prefix(host) + ['ss', '-Hltnp'], capture_output=True, text=True)
  out = []
  for line in r.stdout.splitlines():
    fields = line.split()
    local = fields[3]
    ip = local.rsplit(':', 1)[0].strip('[]')
    for part in line.split('pid=')[1:]:
      out.append((int(part.split(',')[0]), ip))
  return out


def test_rae_program_across_network_namespaces(tmp_path, hosts):
  run_dir = tmp_path / 'run'
  description = tmp_path / 'cluster.json'
  description.write_text(json.dumps({
      'name': 'nstest',
      'hosts': {h: {'address': hosts.address(h), 'start': hosts.start_prefix(h)} for h in 'abc'},
      'groups': {'replay': 'a', 'counter': 'a', 'coordinator': 'a', 'learner': 'b',
                 'precedence_learner': 'b', 'actor': {'hosts': ['c']}}}))
  cmd = [sys.executable, '-m', 'launch.train', '--env', 'cartpole', '--reward_free', '--mode', 'rae',
         '--num_actors', '2', '--max_steps', '30000', '--run_dir', str(run_dir),
         '--env_steps_per_psi_update', '10', '--launch_type', 'cluster', '--cluster_start',
         '--cluster_description', str(description)]
  proc = subprocess.Popen(cmd, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
  # While it runs: who listens where, in each namespace.
  # No deadline of its own: on a loaded machine start-up alone has taken over 20 minutes, and the
  # run bounds this loop (it ends by itself, or fails).
  listening = {}
  while proc.poll() is None:
    counts = run_dir / 'counts.json'
    if counts.exists() and json.loads(counts.read_text()).get('actor_steps', 0) > 0:
      time.sleep(2.0)  # every node is up once actors step and the counter syncs
      listening = {h: _listening(hosts, h) for h in 'abc'}
      break
    time.sleep(1.0)
  stdout, stderr = proc.communicate(timeout=3600)
  assert proc.returncode == 0, stdout[-3000:] + stderr[-3000:]
  assert 'run summary' in stdout
  assert listening, 'the run ended before its listening sockets were sampled'

  # Each node listened on its own host's address only: replay, counter, coordinator on A;
  # learner and precedence learner on B; the actors on C.
  for host, nodes in (('a', 3), ('b', 2), ('c', 2)):
    own = {hosts.address(host), f'::ffff:{hosts.address(host)}'}
    assert len({pid for pid, _ in listening[host]}) == nodes, (host, listening)
    assert {ip for _, ip in listening[host]} <= own, (host, listening[host])
  launch = json.loads((run_dir / 'cluster' / 'launch.json').read_text())
  placed = {r['task']: r['host'] for r in launch['replicas']}
  assert placed == {'replay-0': 'a', 'counter-0': 'a', 'coordinator-0': 'a', 'learner-0': 'b',
                    'precedence_learner-0': 'b', 'actor-0': 'c', 'actor-1': 'c'}

  final = json.loads((run_dir / 'final_state.json').read_text())
  assert final['status'] == 'completed'
  assert final['counts']['actor_steps'] >= 30000
  assert final['tables']['impala']['num_inserts'] > 0
  assert final['tables']['precedence']['num_inserts'] > 0
  s = json.loads((run_dir / 'summary.json').read_text())
  assert s['learner_steps'] > 0 and s['precedence_steps'] > 0, s
  assert s['status'] == 'completed', s
  for name, count in (('learner', 'learner_steps'), ('precedence_learner', 'precedence_steps')):
    header = checkpointing.read_header(str(run_dir / 'checkpoints' / name))
    assert header['steps'] == final['checkpoints'][name]['steps'] == final['counts'][count]
  for actor in ('actor_0', 'actor_1'):
    rows = summary.read_log(str(run_dir), actor)
    assert rows, f'{actor} logged no episode'
    assert max(r.get('psi_change', 0.0) for r in rows) > 0.0, actor

  # No process left: not in any namespace, not in the host launchers' sessions.
  for h in 'abc':
    assert hosts.pids(h) == [], (h, hosts.pids(h))
  for session in (run_dir / 'launcher_session.txt').read_text().split():
    assert launcher.leftover_processes(int(session)) == []


def test_a_replica_on_the_wrong_host_is_one_line(tmp_path, hosts):
  """A task started where its CLUSTER_SPEC address does not live stops with one line (and
  records the failure, so the other hosts stop too)."""
  run_dir = tmp_path / 'run'
  (run_dir / 'cluster').mkdir(parents=True)
  spec = {'cluster': {'counter': [f'{hosts.address("b")}:17100']}, 'task': {'type': 'counter', 'index': 0}}
  (run_dir / 'cluster' / 'launch.json').write_text(json.dumps({
      'launch_id': 'x', 'stop_file': str(run_dir / 'cluster' / 'stopped-x.json'),
      'groups': {'counter': 1}, 'code_dir': ROOT, 'replicas': []}))
  r = subprocess.run(hosts.start_prefix('a') + [sys.executable, '-m', 'launch.cluster', 'node',
                                                '--run_dir', str(run_dir)],
                     env=dict(os.environ, CLUSTER_SPEC=json.dumps(spec)), cwd=ROOT,
                     capture_output=True, text=True, timeout=120)
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

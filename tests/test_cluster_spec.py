"""Cluster descriptions, CLUSTER_SPEC and the launch files generated from them (fast: no
program is built, nothing is launched). The Slurm and Kubernetes files are parsed back and every
replica's CLUSTER_SPEC in them is checked against the description."""
import json
import os
import shlex
import shutil
import subprocess
import sys

import pytest

from launch.cluster import description as cluster_spec
from launch.cluster import files as cluster_launchers
from launch.cluster import placement
from launch.cluster.description import ClusterSpecError

SIZES = {'replay': 1, 'counter': 1, 'learner': 1, 'precedence_learner': 1, 'coordinator': 1,
         'actor': 4}


def _desc(**overrides):
  raw = {
      'name': 'ntb',
      'hosts': {'a': '10.1.0.1', 'b': {'address': '10.1.0.2', 'start': ['ssh', 'b']},
                'c': '10.1.0.3'},
      'base_port': 7000,
      'groups': {'replay': {'host': 'a', 'port': 7000}, 'counter': 'a', 'coordinator': 'a',
                 'learner': 'b', 'precedence_learner': {'host': 'b'},
                 'actor': {'hosts': ['c', 'b']}},
  }
  raw.update(overrides)
  return raw


def test_placement_ports_and_cluster_spec():
  desc = cluster_spec.parse_description(_desc())
  replicas = placement.place(desc, SIZES)
  by_task = {r.task: r for r in replicas}
  assert [r.task for r in replicas] == ['replay-0', 'counter-0', 'learner-0', 'precedence_learner-0',
                                        'coordinator-0', 'actor-0', 'actor-1', 'actor-2', 'actor-3']
  # Explicit port first; automatic ports skip it, per address.
  assert by_task['replay-0'].endpoint == '10.1.0.1:7000'
  assert by_task['counter-0'].endpoint == '10.1.0.1:7001'
  assert by_task['coordinator-0'].endpoint == '10.1.0.1:7002'
  assert by_task['learner-0'].endpoint == '10.1.0.2:7000'
  # Actors round-robin over their hosts, in order.
  assert [by_task[f'actor-{i}'].host for i in range(4)] == ['c', 'b', 'c', 'b']
  assert by_task['actor-1'].endpoint == '10.1.0.2:7002'
  spec = placement.task_spec(replicas, 'actor', 2)
  assert spec['task'] == {'type': 'actor', 'index': 2}
  assert spec['cluster']['actor'] == [by_task[f'actor-{i}'].endpoint for i in range(4)]
  assert set(spec['cluster']) == set(SIZES)
  cluster, group, index = placement.parse_cluster_spec(json.dumps(spec))
  assert (group, index) == ('actor', 2) and cluster == spec['cluster']


def test_explicit_port_ranges_and_lists():
  desc = cluster_spec.parse_description(_desc(groups={
      'replay': 'a', 'counter': 'a', 'coordinator': 'a', 'learner': 'b', 'precedence_learner': 'b',
      'actor': {'hosts': ['c'], 'port': 9000}}))
  replicas = placement.place(desc, SIZES)
  assert [r.port for r in replicas if r.group == 'actor'] == [9000, 9001, 9002, 9003]
  desc = cluster_spec.parse_description(_desc(groups={
      'replay': 'a', 'counter': 'a', 'coordinator': 'a', 'learner': 'b', 'precedence_learner': 'b',
      'actor': {'hosts': ['c'], 'ports': [9005, 9003, 9100, 9004]}}))
  assert [r.port for r in placement.place(desc, SIZES) if r.group == 'actor'] == [9005, 9003, 9100, 9004]


@pytest.mark.parametrize('raw, message', [
    ([], 'must be an object'),
    ({'groups': {'replay': 'a'}}, 'needs "hosts"'),
    (_desc(hosts={'a b': '10.0.0.1'}), "host name 'a b'"),
    (_desc(hosts={'a': ''}), 'host a address'),
    (_desc(groups={'replayer': 'a'}), "unknown node group 'replayer'"),
    (_desc(groups={'actors': 'a'}), "unknown node group 'actors'"),
    (_desc(groups={'learner': 'z'}), "node group learner: unknown host 'z'"),
    (_desc(groups={'learner': {'host': 'a', 'port': 70000}}), 'port must be an integer in 1..65535'),
    (_desc(groups={'learner': {'host': 'a', 'hosts': ['a']}}), 'exactly one of "host" or "hosts"'),
    (_desc(groups={'learner': {'host': 'a', 'gpu': 1}}), "unknown key 'gpu' in node group learner"),
    (_desc(extra=1), "unknown key 'extra'"),
    (_desc(name='Bad_Name'), 'DNS label'),
    (_desc(slurm={'partitions': 'x'}), "unknown key 'partitions' in slurm"),
    (_desc(code_dir='relative/path'), 'code_dir must be an absolute path'),
])
def test_malformed_descriptions_are_one_line_errors(raw, message):
  with pytest.raises(ClusterSpecError) as e:
    cluster_spec.parse_description(raw)
  assert message in str(e.value) and '\n' not in str(e.value), str(e.value)


def test_placement_errors_name_the_problem():
  clash = cluster_spec.parse_description(_desc(groups={
      'replay': {'host': 'a', 'port': 7000}, 'counter': {'host': 'a', 'port': 7000},
      'coordinator': 'a', 'learner': 'b', 'precedence_learner': 'b', 'actor': 'c'}))
  with pytest.raises(ClusterSpecError, match=r'port clash: replay-0 and counter-0 both listen on '
                                             r'10\.1\.0\.1:7000 \(host a\)'):
    placement.place(clash, SIZES)
  # Two host names with one address share its ports.
  shared = cluster_spec.parse_description(_desc(
      hosts={'a': '10.1.0.1', 'a2': '10.1.0.1'},
      groups={'replay': {'host': 'a', 'port': 7000}, 'counter': 'a', 'coordinator': 'a',
              'learner': {'host': 'a2', 'port': 7000}, 'precedence_learner': 'a', 'actor': 'a'}))
  with pytest.raises(ClusterSpecError, match='port clash: replay-0 and learner-0'):
    placement.place(shared, SIZES)
  missing = cluster_spec.parse_description(_desc(groups={'replay': 'a'}))
  with pytest.raises(ClusterSpecError, match='node group counter of the program has no host'):
    placement.place(missing, SIZES)
  wrong_count = cluster_spec.parse_description(_desc(groups={
      'replay': 'a', 'counter': 'a', 'coordinator': 'a', 'learner': 'b', 'precedence_learner': 'b',
      'actor': {'hosts': ['c'], 'ports': [1, 2]}}))
  with pytest.raises(ClusterSpecError, match='4 replicas in this program but 2 ports'):
    placement.place(wrong_count, SIZES)


@pytest.mark.parametrize('text, message', [
    (None, 'CLUSTER_SPEC is not set'),
    ('{not json', 'CLUSTER_SPEC is malformed'),
    ('{"cluster": {"actor": ["h:1"]}}', 'CLUSTER_SPEC is malformed'),
    ('{"cluster": {"actor": ["h:1"]}, "task": {"type": "learner", "index": 0}}', 'not a pool'),
    ('{"cluster": {"actor": ["h:1"]}, "task": {"type": "actor", "index": 1}}', 'out of range'),
])
def test_bad_cluster_spec_values(text, message):
  with pytest.raises(ClusterSpecError, match=message):
    placement.parse_cluster_spec(text)


def test_description_files(tmp_path):
  path = tmp_path / 'hosts.json'
  path.write_text(json.dumps(_desc()))
  assert cluster_spec.load_description(str(path)).groups['actor'].hosts == ('c', 'b')
  path.write_text('{"hosts": ')
  with pytest.raises(ClusterSpecError, match='is not valid JSON'):
    cluster_spec.load_description(str(path))
  with pytest.raises(ClusterSpecError, match='cannot read cluster description'):
    cluster_spec.load_description(str(tmp_path / 'missing.json'))


def _generated(tmp_path):
  desc = cluster_spec.parse_description(_desc())
  replicas = placement.place(desc, SIZES)
  run_dir, pkg = '/shared/runs/r1', '/shared/runs/r1/cluster'
  files = {}
  for r in replicas:
    files[f'tasks/{r.task}.sh'] = cluster_launchers.task_script(
        r, placement.task_spec(replicas, r.group, r.index), run_dir, '/opt/ntb', '/opt/ntb/.venv/bin/python')
  for name, text in cluster_launchers.slurm_files(desc, replicas, run_dir, pkg, '/opt/ntb',
                                                           '/opt/ntb/.venv/bin/python').items():
    files[f'slurm/{name}'] = text
  files['kubernetes.yaml'] = cluster_launchers.kubernetes_manifests(
      desc, SIZES, run_dir, '/opt/ntb', '/opt/ntb/.venv/bin/python')
  for rel, text in files.items():
    (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / rel).write_text(text)
  return desc, replicas, files


def _exported_spec(script: str) -> dict:
  for line in script.splitlines():
    if line.startswith('export CLUSTER_SPEC='):
      return json.loads(shlex.split(line)[1].split('=', 1)[1])
  raise AssertionError('no CLUSTER_SPEC in the script')


def test_task_scripts_and_slurm_job(tmp_path):
  desc, replicas, files = _generated(tmp_path)
  for rel in files:
    if rel.endswith(('.sh', '.sbatch')):
      r = subprocess.run(['bash', '-n', str(tmp_path / rel)], capture_output=True, text=True)
      assert r.returncode == 0, (rel, r.stderr)
  sbatch = files['slurm/job.sbatch']
  directives = dict(l[len('#SBATCH '):].split('=', 1) for l in sbatch.splitlines()
                    if l.startswith('#SBATCH ') and '=' in l)
  assert directives['--ntasks'] == str(len(replicas))
  assert directives['--nodelist'] == 'a,b,c' and directives['--nodes'] == '3'
  assert 'srun --distribution=arbitrary' in sbatch and '--multi-prog' in sbatch
  # Whole nodes, and a graceful stop before the time limit: SIGTERM to the batch shell only,
  # whose trap asks the run to stop while srun (in the background) keeps running.
  assert '#SBATCH --exclusive' in sbatch.splitlines()
  assert directives['--signal'] == f'B:TERM@{cluster_launchers.SLURM_STOP_BEFORE_LIMIT_S}'
  stop = ' '.join(cluster_launchers.stop_command('/opt/ntb/.venv/bin/python', '/shared/runs/r1'))
  assert f'graceful_stop() {{ {stop}; }}' in sbatch and 'trap graceful_stop TERM' in sbatch
  assert [l for l in sbatch.splitlines() if l.startswith('srun ')][0].endswith(' &')
  # multi-prog: rank r runs replica r's script, and the hostfile puts rank r on its host.
  conf = [l.split(None, 1) for l in files['slurm/multi_prog.conf'].splitlines()
          if l.strip() and not l.startswith('#')]
  hostfile = files['slurm/hostfile'].split()
  assert len(conf) == len(hostfile) == len(replicas)
  for rank, ((r_text, command), host, replica) in enumerate(zip(conf, hostfile, replicas)):
    assert int(r_text) == rank and host == replica.host
    script = os.path.basename(shlex.split(command)[1])
    assert script == f'{replica.task}.sh'
    spec = _exported_spec(files[f'tasks/{script}'])
    assert spec == placement.task_spec(replicas, replica.group, replica.index)
    # Against the description itself: the task's endpoint is its host's address.
    assert spec['cluster'][replica.group][replica.index].split(':')[0] == desc.hosts[host].address


def test_stop_command_asks_the_launch_for_a_graceful_stop(tmp_path):
  """`python -m launch.cluster stop` (the Slurm job's trap) writes the run's stop request, which
  the coordinator ends the run on; one line where there is no launch or it has stopped."""
  run_dir = tmp_path / 'run'
  stop = [sys.executable, '-m', 'launch.cluster', 'stop', '--run_dir', str(run_dir)]
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  r = subprocess.run(stop, cwd=root, capture_output=True, text=True, timeout=120)
  assert r.returncode == 2 and r.stderr.strip().startswith('error: ') and 'launch.json not found' \
      in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
  (run_dir / 'cluster').mkdir(parents=True)
  stop_file = run_dir / 'cluster' / 'stopped-x.json'
  (run_dir / 'cluster' / 'launch.json').write_text(json.dumps({
      'launch_id': 'x', 'stop_file': str(stop_file), 'groups': {}, 'replicas': []}))
  r = subprocess.run(stop, cwd=root, capture_output=True, text=True, timeout=120)
  assert r.returncode == 0 and 'asked launch x' in r.stdout, r.stderr
  assert json.loads((run_dir / 'stop_request.json').read_text())['reason'] == 'stopped by user'
  (run_dir / 'stop_request.json').unlink()
  stop_file.write_text('{}')
  r = subprocess.run(stop, cwd=root, capture_output=True, text=True, timeout=120)
  assert r.returncode == 0 and 'has already stopped' in r.stdout
  assert not (run_dir / 'stop_request.json').exists()


def _yaml_documents(text):
  """Each document, parsed as JSON (the generator writes JSON syntax, which is YAML)."""
  docs = [d for d in text.split('\n---\n') if d.strip() and not d.lstrip().startswith('#')]
  body = text[text.index('---\n') + 4:]
  return [json.loads(d) for d in body.split('---\n') if d.strip()], docs


def test_kubernetes_manifests(tmp_path):
  desc, _, files = _generated(tmp_path)
  docs, _ = _yaml_documents(files['kubernetes.yaml'])
  service = [d for d in docs if d['kind'] == 'Service']
  jobs = {d['metadata']['name']: d for d in docs if d['kind'] == 'Job'}
  assert len(service) == 1 and service[0]['spec']['clusterIP'] == 'None'
  assert set(jobs) == {cluster_launchers.kubernetes_job_name(desc, g) for g in SIZES}
  pods = cluster_launchers.kubernetes_replicas(desc, SIZES)
  expected_cluster = placement.cluster_of(pods)
  for group, size in SIZES.items():
    job = jobs[cluster_launchers.kubernetes_job_name(desc, group)]
    assert job['spec']['completionMode'] == 'Indexed' and job['spec']['completions'] == size
    pod = job['spec']['template']['spec']
    assert pod['subdomain'] == service[0]['metadata']['name']
    # Every pod matches the Service's selector (stable DNS names: JOB-i.SERVICE).
    labels = job['spec']['template']['metadata']['labels']
    assert all(labels.get(k) == v for k, v in service[0]['spec']['selector'].items())
    env = {e['name']: e for e in pod['containers'][0]['env']}
    names = [e['name'] for e in pod['containers'][0]['env']]
    assert names.index('TASK_INDEX') < names.index('CLUSTER_SPEC')  # $(VAR) needs it defined first
    assert 'job-completion-index' in env['TASK_INDEX']['valueFrom']['fieldRef']['fieldPath']
    for i in range(size):
      # What Kubernetes makes of the value in pod i.
      value = env['CLUSTER_SPEC']['value'].replace(f'$({cluster_launchers.INDEX_ENV})', str(i))
      spec = json.loads(value)
      assert spec == {'cluster': expected_cluster, 'task': {'type': group, 'index': i}}
      host = spec['cluster'][group][i].split(':')[0]
      assert host == f'{job["metadata"]["name"]}-{i}.{service[0]["metadata"]["name"]}'
    assert pod['containers'][0]['command'][-2:] == ['--run_dir', '/shared/runs/r1']


def test_kubernetes_manifests_are_yaml(tmp_path):
  """The same file through a real YAML parser: PyYAML in this venv if present, else a system
  python3 that has it; skipped where neither exists."""
  _, _, files = _generated(tmp_path)
  path = tmp_path / 'kubernetes.yaml'
  expected, _ = _yaml_documents(files['kubernetes.yaml'])
  code = ('import json, sys, yaml; print(json.dumps(list(yaml.safe_load_all(open(sys.argv[1])))))')
  for python in (sys.executable, shutil.which('python3')):
    if python is None:
      continue
    r = subprocess.run([python, '-c', code, str(path)], capture_output=True, text=True)
    if r.returncode == 0:
      assert json.loads(r.stdout) == expected
      return
  pytest.skip('no YAML parser (PyYAML) in this venv or a system python3')


def test_kubectl_reads_the_manifests(tmp_path):
  """kubectl's own decoder, offline (`--local`: no cluster needed); skipped without kubectl."""
  kubectl = shutil.which('kubectl')
  if kubectl is None:
    pytest.skip('kubectl is not installed')
  desc, _, _ = _generated(tmp_path)
  r = subprocess.run([kubectl, 'label', '--local', '-f', str(tmp_path / 'kubernetes.yaml'),
                      'checked=yes', '-o', 'name'], capture_output=True, text=True, timeout=60)
  assert r.returncode == 0, r.stderr
  expected = [f'service/{desc.name}'] + [
      f'job.batch/{cluster_launchers.kubernetes_job_name(desc, g)}' for g in SIZES]
  assert r.stdout.split() == expected

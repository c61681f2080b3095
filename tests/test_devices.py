"""launch.program.devices: where each node runs (the learner on a GPU where there is one, on the
host's cores as XLA host devices where there is not, everything else on the CPU), the one-line
errors of a request that cannot be met, --show_config's placement, and the cluster's scripts
and Slurm lines for a GPU host."""
import json
import os
import shlex
import subprocess
import sys

import pytest

from launch.cluster import description as cluster_spec
from launch.cluster import files as cluster_launchers
from launch.cluster import package, placement
from launch.program import devices
from launch.program.config import ImpalaConfig, RunConfig

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))
GPU_HOST = devices.Host(gpus=1, cuda_plugin=True, cores=16)
CPU_HOST = devices.Host(gpus=0, cuda_plugin=False, cores=2)
NO_PLUGIN = devices.Host(gpus=1, cuda_plugin=False, cores=16)


def test_auto_takes_the_gpu_only_with_a_gpu_and_the_cuda_plugin():
  assert devices.resolve('auto', GPU_HOST) == 'gpu'
  assert devices.resolve('auto', CPU_HOST) == 'cpu'
  assert devices.resolve('auto', NO_PLUGIN) == 'cpu'
  assert devices.resolve('cpu', GPU_HOST) == 'cpu'
  assert devices.resolve('gpu', GPU_HOST) == 'gpu'


@pytest.mark.parametrize('host, message', [
    (CPU_HOST, r'^--learner_device gpu: no GPU on this host \(no /dev/nvidia\* device\)'),
    (NO_PLUGIN, r"^--learner_device gpu: jax's CUDA plugin is not installed \(jax-cuda12-plugin\)"),
])
def test_an_unusable_gpu_request_is_one_line_naming_what_is_missing(host, message):
  with pytest.raises(ValueError, match=message) as e:
    devices.resolve('gpu', host)
  assert '\n' not in str(e.value)


def test_only_the_learners_leave_the_cpu():
  cfg = RunConfig(env='sokoban')
  env = devices.node_environment(cfg, GPU_HOST)
  assert env['learner'] == devices.ON_GPU
  for group in ('replay', 'counter', 'coordinator', 'actor'):
    assert env[group]['JAX_PLATFORMS'] == 'cpu' and env[group]['CUDA_VISIBLE_DEVICES'] == ''
  assert devices.plan(cfg, GPU_HOST)['learner'] == 'gpu'


def test_a_cpu_learner_splits_its_batch_over_the_hosts_cores():
  cfg = RunConfig(env='sokoban', impala=ImpalaConfig(batch_size=16))
  env = devices.node_environment(cfg, devices.Host(0, False, cores=12))
  assert env['learner']['JAX_PLATFORMS'] == 'cpu'
  assert env['learner']['XLA_FLAGS'] == '--xla_force_host_platform_device_count=8'   # 8 of 12
  assert devices.plan(cfg, CPU_HOST)['learner'] == 'cpu (1 XLA host device)'   # actors share 2
  assert devices.plan(cfg, devices.Host(0, False, 64))['learner'] == 'cpu (16 XLA host devices)'
  one = RunConfig(env='sokoban', learner_host_devices=1)
  assert devices.node_environment(one, CPU_HOST)['learner']['XLA_FLAGS'].endswith('=1')
  with pytest.raises(ValueError, match='learner_host_devices 3 must divide'):
    RunConfig(learner_host_devices=3)


def test_single_threaded_actors_stay_on_the_cpu():
  assert 'XLA_FLAGS' not in devices.node_environment(RunConfig(actor_threads=0), CPU_HOST)['actor']
  env = devices.node_environment(RunConfig(actor_threads=1), CPU_HOST)
  assert env['actor']['JAX_PLATFORMS'] == 'cpu'
  flags = env['actor']['XLA_FLAGS']
  assert '--xla_cpu_multi_thread_eigen=false' in flags and 'intra_op_parallelism_threads=1' in flags
  # The learner keeps XLA's pool: a second core speeds it up.
  assert 'eigen' not in env['learner'].get('XLA_FLAGS', '')
  with pytest.raises(ValueError, match='actor_threads must be 0'):
    RunConfig(actor_threads=2)


def test_the_precedence_learner_goes_where_it_is_asked():
  from agents.acting import ReversibilityConfig
  cfg = RunConfig(env='sokoban', reversibility=ReversibilityConfig(mode='rae'),
                  precedence_device='gpu')
  assert devices.node_environment(cfg, GPU_HOST)['precedence_learner'] == devices.ON_GPU
  with pytest.raises(ValueError, match='^--precedence_device gpu: no GPU'):
    devices.plan(cfg, CPU_HOST)
  assert devices.plan(RunConfig(reversibility=ReversibilityConfig(mode='rae')),
                      GPU_HOST)['precedence_learner'] == 'cpu'


def _train(*args):
  env = dict(os.environ, JAX_PLATFORMS='cpu', TF_CPP_MIN_LOG_LEVEL='3')
  return subprocess.run([sys.executable, '-m', 'launch.train', *args], cwd=ROOT, env=env,
                        capture_output=True, text=True, timeout=300)


@pytest.mark.skipif(bool(devices.probe_host().gpus), reason='this host has a GPU')
def test_show_config_prints_where_each_node_runs_and_gpu_without_one_is_one_line():
  out = _train('--env=sokoban', '--show_config')
  assert out.returncode == 0, out.stderr[-2000:]
  where = json.loads(out.stdout)['placement']
  assert where['learner'].startswith('cpu (') and where['actor'].startswith('cpu')
  assert where['replay'] == where['counter'] == where['coordinator'] == 'cpu'
  out = _train('--env=sokoban', '--show_config', '--learner_device=gpu')
  assert out.returncode == 2
  assert out.stderr.strip().splitlines()[-1] == (
      'error: --learner_device gpu: no GPU on this host (no /dev/nvidia* device); use '
      '--learner_device cpu or auto')


def _description(gpus_on_b=1, only_b=False):
  hosts = {'b': {'address': '10.0.0.2', 'gpus': gpus_on_b}} if only_b else {
      'a': '10.0.0.1', 'b': {'address': '10.0.0.2', 'gpus': gpus_on_b}}
  groups = {g: {'host': 'b' if only_b else 'a'} for g in ('replay', 'counter', 'coordinator')}
  groups.update(learner={'host': 'b'}, actor={'hosts': ['b'] if only_b else ['a', 'b']})
  return cluster_spec.parse_description({'hosts': hosts, 'groups': groups})


def _cluster_files(cfg, desc):
  sizes = {'replay': 1, 'counter': 1, 'learner': 1, 'coordinator': 1, 'actor': cfg.num_actors}
  replicas = placement.place(desc, sizes)
  env = package.node_environments(cfg, desc)
  scripts = {r.task: cluster_launchers.task_script(
      r, placement.task_spec(replicas, r.group, r.index), '/runs/r', '/opt/ntb', 'python',
      env.get(r.group, {})) for r in replicas}
  sbatch = cluster_launchers.slurm_files(desc, replicas, '/runs/r', '/runs/r/cluster', '/opt/ntb',
                                         'python', package.gpu_hosts(cfg, desc))['job.sbatch']
  return scripts, sbatch


def _exports(script):
  out = subprocess.run(['bash', '-c', script.split('export CLUSTER_SPEC')[0] + '\nenv'],
                       capture_output=True, text=True, check=True).stdout
  return dict(line.split('=', 1) for line in out.splitlines() if '=' in line)


def test_slurm_asks_for_a_gpu_for_the_learners_host():
  cfg = RunConfig(env='sokoban')
  scripts, sbatch = _cluster_files(cfg, _description(only_b=True))
  assert '#SBATCH --gres=gpu:1' in sbatch.splitlines()
  assert _exports(scripts['learner-0'])['JAX_PLATFORMS'] == 'cuda'
  for task in ('replay-0', 'counter-0', 'coordinator-0', 'actor-0'):
    exported = _exports(scripts[task])
    assert exported['JAX_PLATFORMS'] == 'cpu' and exported['CUDA_VISIBLE_DEVICES'] == ''
  # Two hosts, one with a GPU: --gres counts per node, so the job asks for one GPU in all.
  _, sbatch = _cluster_files(cfg, _description())
  assert [l.split()[1] for l in sbatch.splitlines() if l.startswith('#SBATCH --g')] == ['--gpus=1']
  for rel in (sbatch,):
    assert subprocess.run(['bash', '-n'], input=rel, text=True).returncode == 0


def test_a_cluster_without_gpus_asks_for_none_and_counts_the_learners_cores_where_it_starts():
  cfg = RunConfig(env='sokoban')
  scripts, sbatch = _cluster_files(cfg, _description(gpus_on_b=0))
  assert 'gpu' not in sbatch
  line = [l for l in scripts['learner-0'].splitlines() if 'XLA_FLAGS' in l][0]
  assert _exports(scripts['learner-0'])['XLA_FLAGS'] == (
      f'--xla_force_host_platform_device_count={os.cpu_count()}'), shlex.split(line)
  assert package.node_placement(cfg, _description(gpus_on_b=0))['learner'] == (
      "cpu (XLA host devices: its host's cores)")
  with pytest.raises(cluster_spec.ClusterSpecError, match='^--learner_device gpu: no GPU'):
    package.node_placement(RunConfig(env='sokoban', learner_device='gpu'),
                           _description(gpus_on_b=0))


def test_a_hosts_gpus_must_be_a_count():
  with pytest.raises(cluster_spec.ClusterSpecError, match='"gpus" must be a whole number'):
    cluster_spec.parse_description({'hosts': {'a': {'address': 'x', 'gpus': 'one'}},
                                    'groups': {'learner': {'host': 'a'}}})


def test_the_launcher_keeps_itself_and_its_child_on_the_cpu():
  # JAX_PLATFORMS=cuda where no GPU is: a launcher that used it would fail to start its backend
  # (and on a GPU host would hold GPU memory for the whole run).
  code = ('import os, jax\n'
          'from launch.program import devices\n'
          'devices.keep_launcher_on_cpu()\n'
          'print(jax.devices()[0].platform, os.environ["JAX_PLATFORMS"])\n')
  out = subprocess.run([sys.executable, '-c', code], cwd=ROOT, capture_output=True, text=True,
                       env=dict(os.environ, JAX_PLATFORMS='cuda', PYTHONPATH=ROOT), timeout=120)
  assert out.returncode == 0, out.stderr[-2000:]
  assert out.stdout.split() == ['cpu', 'cpu']


def test_a_launcher_that_dies_building_the_program_is_a_failure_not_a_stop(tmp_path, monkeypatch):
  from launch.runtime import launcher, run_state
  from launch.runtime.processes import RunFailed
  # The child that builds the program inherits a backend jax cannot start (as jax's CUDA plugin
  # where no GPU is seen): it dies before any node starts.
  monkeypatch.setenv('JAX_PLATFORMS', 'no_such_platform')
  cfg = RunConfig(run_dir=str(tmp_path / 'run'), max_steps=1000)
  with pytest.raises(RunFailed, match=r'^the launcher process exited with code 1: \w+Error: .*'
                                      r'no_such_platform.*\(launchpad\.log\)$'):
    launcher.launch_and_supervise(cfg, run_state.RunRecords(cfg.run_dir))

"""Smoke tests of the benchmarks in bench/, at tiny sizes: each measures what it says on the real
code and returns the fields its JSON carries (learner_bench and sokoban_speed have their own
test files). The whole programs they launch (throughput, program_profile) run under -m slow."""
import json
import os
import subprocess
import sys
import types

import numpy as np
import pytest

from bench import (
  actor_bench,
  cluster_scaling,
  common,
  envs_bench,
  estimators_bench,
  precedence_bench,
  program_profile,
  replay_checkpoint_bench,
  throughput,
)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))


def _write_log(run_dir, node, rows):
  path = os.path.join(run_dir, 'logs', node)
  os.makedirs(path, exist_ok=True)
  keys = list(rows[0])
  with open(os.path.join(path, 'logs.csv'), 'w') as f:
    f.write(','.join(keys) + '\n')
    for row in rows:
      f.write(','.join(str(row[k]) for k in keys) + '\n')


@pytest.fixture
def logged_run(tmp_path):
  """A run directory with two actors' and the learner's CSV logs, as the nodes write them."""
  run_dir = str(tmp_path / 'run')
  for k, first in enumerate((0, 50)):
    _write_log(run_dir, f'actor_{k}', [
        {'actor_steps': first + 100 * i, 'unix_time': 1000.0 + i + k / 2, 'loop_s_env': 0.1 * i,
         'loop_s_inference': 0.2 * i, 'loop_steps': 100 * i} for i in range(1, 5)])
  _write_log(run_dir, 'learner', [
      {'actor_steps': 100 * i, 'learner_steps': 10 * i, 'learner_time_elapsed': 0.5 * i}
      for i in range(1, 5)])
  return run_dir


def test_common_writer_and_loop_timers(tmp_path, logged_run):
  path = str(tmp_path / 'a' / 'b.json')
  common.write_json(path, {'x': [1, 2]})
  common.write_json(path, {'x': [3]})
  assert json.load(open(path)) == {'x': [3]} and os.listdir(tmp_path / 'a') == ['b.json']
  # Two actors' last rows: 0.4 s env and 0.8 s inference each over 400 steps each.
  assert common.actor_loop_us(logged_run) == pytest.approx({'env': 1000.0, 'inference': 2000.0})
  assert common.actor_loop_us(str(tmp_path / 'nothing')) == {}


def test_throughput_reads_rates_from_the_logs(logged_run):
  rows = throughput.timed_episodes(logged_run)
  assert [r['unix_time'] for r in rows] == sorted(r['unix_time'] for r in rows)
  rate = throughput.steps_per_second(rows, warmup=100)
  assert rate['measured_steps'] == 450 - 100 and rate['measured_seconds'] == 4.5 - 1.0
  with pytest.raises(RuntimeError, match='not enough episodes'):
    throughput.steps_per_second(rows, warmup=10_000)
  assert throughput.actor_breakdown(logged_run) == pytest.approx(
      {'us_per_step_env': 1000.0, 'us_per_step_inference': 2000.0})
  cfg = types.SimpleNamespace(impala=types.SimpleNamespace(batch_size=2, sequence_length=5))
  assert throughput.learner_rates(logged_run, cfg) == {
      'learner_steps': 40, 'learner_capacity_frames_per_s': 40 * 10 / 2.0}


def test_program_profile_reads_processes_and_logs(logged_run):
  procs = program_profile.process_tree(os.getpid())
  assert procs and procs[0].pid == os.getpid()
  snap = program_profile.snapshot(procs[:1], {os.getpid(): 'pytest'})
  name, cpu, threads, count = snap[os.getpid()]
  assert name == 'pytest' and cpu > 0 and 'main' in threads and count >= 1
  os.makedirs(os.path.join(logged_run, 'pids'))
  with open(os.path.join(logged_run, 'pids', 'learner.pid'), 'w') as f:
    f.write('123\n')
  assert program_profile.node_names(logged_run) == {123: 'learner'}
  assert program_profile.learner_update_seconds(logged_run, 100, 400) == {
      'updates': 30, 'update_s_mean': 1.5 / 30, 'updates_per_env_step': 30 / 300}


def test_envs_bench_steps_every_environment():
  results = envs_bench.run(seconds=0.02, batch_envs=2)
  for name in ('cartpole', 'turf', 'cliff'):
    assert results[name]['steps_per_s'] > 0 and results[name]['steps'] >= 256
  assert 'reset_ms' in results['sokoban'] or 'skipped' in results['sokoban']
  if 'sokoban_batch' in results:
    assert results['sokoban_batch']['envs'] == 2 and results['sokoban_batch']['ratio'] > 0


def test_actor_bench_measures_each_mode():
  out = actor_bench.measure('cartpole', [2], ['random'], steps=40, repeats=1)
  row = out['results']['random/K=2']
  assert all(row[m]['env_steps_per_s'] > 0 for m in ('none', 'rae', 'rac'))
  assert row['ratio_rac_over_none'] > 0 and row['environments'] == 'EnvironmentList'


def test_estimators_bench_times_the_real_path_and_the_bare_loop():
  flat = estimators_bench.random_flat('cartpole', 20)
  assert len(flat.lengths) == 20 and len(flat.observations) == int(flat.lengths.sum())
  from estimators import networks as nets
  out = estimators_bench.measure_throughput('cartpole_mlp', nets.default_estimator_config('cartpole'), flat,
                                            5, 8, 2, 0.05, 2)
  assert out['real_pairs_per_s'] > 0 and out['bare_pairs_per_s'] > 0
  assert out['ratio_real_to_bare'] == out['real_pairs_per_s'] / out['bare_pairs_per_s']


def test_precedence_bench_times_an_update_on_a_real_table():
  assert precedence_bench.parse_setting('64x4') == (64, 4)
  with pytest.raises(ValueError):
    precedence_bench.parse_setting('64')
  server, client, spec, steps = precedence_bench.fill_table('cartpole', 4, 200)
  try:
    r = precedence_bench.measure(client, spec, 'cartpole', 2, 2, 3, False)
  finally:
    server.stop()
  assert steps > 0 and r['updates'] == 3 and r['cpu_ms_per_update'] > 0
  assert set(r['cpu_ms_per_update_by_part']) == {'sample', 'to_batch', 'update'}


def test_replay_checkpoint_bench_saves_and_restores_a_small_table():
  r = replay_checkpoint_bench.measure('cartpole', 2, 1.2, 1, table_max_windows=20,
                                      insert_seconds=0.1)
  assert r['table_max_windows'] == 20 and r['table_size'] == r['restored_size'] == 20
  assert len(r['save_seconds']) == 2 and r['inserts_per_second_alone'] > 0


def test_cluster_scaling_loopback_costs():
  insert = cluster_scaling.insert_cost(300)
  assert insert['env_steps'] > 250 and sum(insert['items'].values()) > 0
  assert insert['cpu_us_per_item'] > 0
  fetch = cluster_scaling.fetch_cost(2)
  assert fetch['policy']['bytes'] > 0 and fetch['psi_phi']['us_per_fetch'] > 0


def test_the_make_targets_parse_their_flags():
  # `make bench` and `make bench-cluster`: their flags are defined when run as scripts, and
  # their help (envs.cli.parse) exits 0.
  for module in ('bench.throughput', 'bench.cluster_scaling'):
    r = subprocess.run([sys.executable, '-m', module, '--helpshort'], cwd=ROOT,
                       capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, PYTHONPATH=ROOT))
    assert r.returncode == 0 and '--out' in r.stdout and '--workdir' in r.stdout, (
        r.stdout[-2000:] + r.stderr[-2000:])


@pytest.mark.parametrize('module,flag', [
    ('actor_bench', 'steppers'), ('learner_bench', 'canvas_sizes'),
    ('precedence_bench', 'settings'), ('replay_checkpoint_bench', 'fill'),
    ('estimators_bench', 'mlp_steps_per_call'), ('cluster_scaling', 'actors'),
    ('envs_bench', 'batch_envs'), ('gpu_learner_check', 'psi_batch_sizes')])
def test_bench_command_lines(module, flag, capsys):
  """Each bench parses its command line with envs.cli: --help lists its flags and exits 0, a
  bad command line is one line and exit 2, before any measurement."""
  import importlib
  main = importlib.import_module(f'bench.{module}').main
  with pytest.raises(SystemExit) as e:
    main(['--help'])
  assert e.value.code == 0 and f'--{flag}' in capsys.readouterr().out
  with pytest.raises(SystemExit) as e:
    main([f'--{flag}_typo=1'])
  err = capsys.readouterr().err
  assert e.value.code == 2 and err.startswith('error: ') and err.count('\n') == 1, err


@pytest.mark.slow
def test_throughput_runs_the_program(tmp_path):
  out = str(tmp_path / 'throughput.json')
  r = subprocess.run([sys.executable, '-m', 'bench.throughput', '--env', 'cartpole',
                      '--reward_free=false', '--max_steps', '3000', '--warmup_steps', '500',
                      '--modes', 'none,rae', '--estimator_sources', 'frozen', '--ceiling_steps',
                      '200', '--num_actors', '1', '--out', out, '--workdir', str(tmp_path)],
                     cwd=ROOT, capture_output=True, text=True, timeout=900,
                     env=dict(os.environ, PYTHONPATH=ROOT))
  assert r.returncode == 0, r.stderr[-3000:]
  result = json.load(open(out))
  assert set(result['runs']) == {'none', 'rae/frozen'} and result['runs']['none']['env_steps_per_s'] > 0
  assert set(result['ceiling_single_process']) == {'none', 'rae', 'rac'}


@pytest.mark.slow
def test_program_profile_profiles_a_run(tmp_path):
  out = str(tmp_path / 'profile.json')
  r = subprocess.run([sys.executable, '-m', 'bench.program_profile', '--warmup_steps', '500',
                      '--window_s', '3', '--out', out, '--workdir', str(tmp_path), '--',
                      '--env', 'cartpole', '--reward_free=false', '--num_actors', '1'],
                     cwd=ROOT, capture_output=True, text=True, timeout=900,
                     env=dict(os.environ, PYTHONPATH=ROOT))
  assert r.returncode == 0, r.stderr[-3000:]
  result = json.load(open(out))
  assert result['env_steps'] > 0 and result['nodes'] and result['cores_used'] > 0
  assert np.isfinite(result['cpu_us_per_env_step'])


def test_the_actor_side_projection_by_hand():
  from bench import cost_model
  parts = {'environment': {'cpu_us_per_env_step': 10.0},
           'policy_inference': {'cpu_us_per_env_step': 20.0},
           'actor_writes_and_loop': {'cpu_us_per_env_step': 30.0},
           'learner_update': {'cpu_us_per_env_step': 500.0}}   # on the GPU: not the actors'
  got = cost_model.actor_side_projection(parts, cores=16)
  assert got['actor_cores'] == 14 and got['actor_us_per_env_step'] == 60.0
  assert got['env_steps_per_s'] == pytest.approx(14 * 1e6 / 60)
  with_psi = dict(parts, psi_inference={'cpu_us_per_env_step': 40.0})
  assert cost_model.actor_side_projection(with_psi)['actor_us_per_env_step'] == 100.0

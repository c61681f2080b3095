"""The studies of experiments/studies/ (sokoban_gate, sokoban_reuse, single_process, psi_ablation,
turf_coverage, first_policy, level_sets, turf_leak, turf_rac_same_mix; cliff_spread beside
experiments.rac_probe in test_rac_probe.py):
their documented command lines parse as they did with absl flags, the steps they hand the
experiment runner, and the runner's early stop that the gate uses."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from envs import cli, level_stats
from experiments import runner
from experiments.studies import (
  first_policy,
  level_sets,
  psi_ablation,
  single_process,
  sokoban_gate,
  sokoban_reuse,
  turf_coverage,
  turf_leak,
  turf_rac_same_mix,
)
from launch.runtime import run_state


def test_absl_spellings_parse(capsys):
  from absl import flags

  def define(fv):
    flags.DEFINE_bool('stop', True, '', flag_values=fv)
    flags.DEFINE_bool('centre', None, '', flag_values=fv)
    flags.DEFINE_list('levels', ['1'], '', flag_values=fv)

  parse = lambda argv: cli.parse(define, argv, prog='p')[0]  # noqa: E731
  assert parse([]).stop is True and parse([]).centre is None
  assert parse(['--nostop', '--centre']).stop is False
  assert parse(['--stop=false', '--centre=true']).stop is False
  assert parse(['--nocentre']).centre is False
  assert parse(['--levels', '37, 7,1']).levels == ['37', '7', '1']
  assert parse(['--levels=']).levels == []
  for bad in (['--stop=maybe'], ['--nope'], ['positional']):
    with pytest.raises(SystemExit) as e:
      parse(bad)
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith('error: '), err


def test_gate_command_lines_and_steps():
  args = sokoban_gate.parse_args(['--levels', '1', '--mode', 'rae', '--nostop_when_passed',
                                  '--train_arg=--samples_per_insert=0'])
  assert args.levels == [1] and not args.stop_when_passed and args.max_steps == 1_000_000
  assert sokoban_gate.parse_args([]).levels == [37, 7, 1]
  with pytest.raises(SystemExit):
    sokoban_gate.parse_args(['--target', '1.5'])
  step = sokoban_gate.level_step(1, 5000, 3, 2, 16, args.train_arg, 'rae')
  assert step.run_dir == 'level_1' and step.done == os.path.join('level_1', 'done')
  argv = step.argv('/o')
  assert argv[:2] == ['-m', 'launch.train']
  for flag, value in (('--run_dir', '/o/level_1'), ('--max_steps', '5000'), ('--seed', '3'),
                      ('--mode', 'rae'), ('--env_option', 'level_index=1'),
                      ('--estimator_checkpoint', '/o/level_1/psi/psi.ckpt')):
    assert argv[argv.index(flag) + 1] == value, flag
  assert argv[-1] == '--samples_per_insert=0'
  collect, train = sokoban_gate.psi_steps(1, 30, 100, 3)
  assert collect.done == 'level_1/psi/random/noturningback.json' and train.done == 'level_1/psi/psi.ckpt'
  assert '/o/level_1/psi/random' in train.argv('/o')


def test_reuse_runs_live_where_the_committed_ones_are():
  args = sokoban_reuse.parse_args(['--ratios', '0,4', '--level', '1', '--max_steps', '100'])
  assert args.ratios == [0.0, 4.0] and args.milestones == [0.5, 0.9] and args.last_n == 200
  step = sokoban_gate.level_step(1, 100, 0, 2, 16, ['--samples_per_insert=4'],
                                 name='spi_4-level_1', run_path='spi_4/level_1')
  assert step.run_dir == 'spi_4/level_1' and step.name == 'spi_4-level_1'
  with pytest.raises(SystemExit):
    sokoban_reuse.parse_args(['--ratios', '-1'])
  r = {'steps_reached': 100.0, 'learner_updates': 3, 'env_steps_per_s': None,
       'policy_lag_mean': 1.5, 'steps_to_0.5': None, 'wall_s_to_0.5': 60.0, 'solved_last': 0.5,
       'boxes_on_target_last': 1.25, 'boxes_on_target_at_same_wall': None}
  md = sokoban_reuse.markdown({'4': r}, [0.5], 1, 100, 200, 60.0)
  assert '| 4 | 100 | 3 | – | 1.5 | – | 1.0 min | 0.500 | 1.25 | – |' in md


def test_the_runner_stops_a_training_run_when_asked(tmp_path, monkeypatch):
  # A stand-in for a run: it ends when its stop request appears, as the coordinator does.
  run_dir = tmp_path / 'run'
  run_dir.mkdir()
  child = ('import os, sys, time\n'
           'while not os.path.exists(sys.argv[1]): time.sleep(0.02)\n')
  proc = subprocess.Popen([sys.executable, '-c', child,
                           str(run_dir / run_state.STOP_REQUEST)])
  monkeypatch.setattr(runner, 'STOP_POLL_S', 0.05)
  asked = []
  reason = lambda: (asked.append(1), 'passed the gate' if len(asked) >= 3 else None)[1]  # noqa: E731
  try:
    records = run_state.RunRecords(str(run_dir))
    assert runner._wait(proc, records, reason) == 0   # pylint: disable=protected-access
  finally:
    proc.kill()
  assert len(asked) == 3 and records.stop_requested() == 'passed the gate'
  with pytest.raises(ValueError, match='only a training run'):
    runner.run_step(sokoban_gate.psi_steps(1, 1, 1, 0)[0], str(tmp_path), stop_when=reason)


def test_psi_ablation_steps_and_list(capsys):
  v = psi_ablation.VARIANTS['same_w5']
  train, boxoban, levels = psi_ablation.variant_steps(v, 'data', 123, 40, 20, 0.9)
  assert train.done == 'same_w5/psi.ckpt' and boxoban.done == 'same_w5/boxoban/report.json'
  argv = train.argv('/o')
  assert argv[argv.index('--num_pairs') + 1] == '123' and argv[-3:-1] == ['--window', '5']
  assert f'levels={psi_ablation.BOXOBAN_LEVELS}' in boxoban.argv('/o')
  assert '/o/labels' in levels.argv('/o') and 'levels=default' in levels.argv('/o')
  # A variant with its own pair budget keeps it.
  own = psi_ablation.variant_steps(psi_ablation.VARIANTS['paper_1m'], 'data', 123, 40, 20, 0.9)
  assert own[0].argv('/o').count('--num_pairs') == 1
  assert psi_ablation.main(['--list']) == 0 and 'early_same' in capsys.readouterr().out
  assert psi_ablation.main(['--variants', 'nope', '--dataset', 'x']) == 2


def test_single_process_flags():
  args = single_process.parse_args(['--level', '7', '--init', 'lecun', '--padding',
                                    'VALID,VALID,SAME', '--reuse', '1', '--nocentre_on_agent',
                                    '--normalize_advantages', '--envs', '4'])
  assert args.padding == ['VALID', 'VALID', 'SAME'] and args.reuse == 1
  assert args.centre_on_agent is False and args.normalize_advantages is True
  assert single_process.parse_args([]).centre_on_agent is None
  with pytest.raises(SystemExit):
    single_process.parse_args(['--envs', '0'])
  # The run it makes in one process: the Sokoban preset, a queue read in batches of K.
  cfg = single_process.run_config(args)
  assert cfg.env_options == {'level_index': 7} and cfg.envs_per_actor == 4
  assert cfg.impala.batch_size == 4 and not cfg.impala.uses_replay
  assert cfg.policy_network.init == 'lecun' and cfg.policy_network.centre_on == ()
  assert cfg.policy_network.conv_paddings == ('VALID', 'VALID', 'SAME')
  assert single_process.run_config(single_process.parse_args([])).policy_network.centre_on


def _sequences(batch):
  """A batch (agents.adders.unpack_impala of B items) as its B sequences."""
  return [type(batch)(*(None if field is None else
                        {k: v[i] for k, v in field.items()} if isinstance(field, dict) else
                        field[i] for field in batch)) for i in range(len(batch.action))]


def test_single_process_trains_on_the_sequences_a_run_s_actor_writes(tmp_path, monkeypatch):
  """The one-process IMPALA's learner trains, batch after batch, on the sequences that a run's
  Reverb-backed actor (launch.program.builder.make_actor, into the run's tables) writes on the
  same seeds: the same cuts, fillers and episode starts, through the real loop and adders. A
  learning rate too small to move a float32 parameter keeps both acting with one policy."""
  import jax
  import reverb
  from acme.utils import counting, loggers

  from agents import adders, learning
  from launch.program import builder

  trained = []
  impala_batches = builder.impala_batches

  def observed(replay, batch_size, rooms):   # what the learner reads, seen on its way
    for batch in impala_batches(replay, batch_size, rooms):
      trained.extend(_sequences(batch.data))
      yield batch

  monkeypatch.setattr(builder, 'impala_batches', observed)
  out = tmp_path / 'sp.json'
  argv = ['--level', '7', '--envs', '2', '--steps', '300', '--reuse', '2', '--log_every', '100',
          '--learning_rate', '1e-30', '--channels', '4,4,4', '--hidden', '16', '--out', str(out)]
  single_process.main(argv)
  result = json.loads(out.read_text())
  # Both rooms' first episodes end at the 120-step limit, at the same loop step: they are counted
  # together, so both rows carry 240 env steps, and the one record is taken there.
  assert [r['env_steps'] for r in result['records']] == [240]
  assert result['records'][-1]['steps'] == 12   # 6 batches of 2 sequences, each trained twice

  cfg = single_process.run_config(single_process.parse_args(argv))
  spec = builder.environment_spec(cfg)
  initial = learning.IMPALALearner(builder.policy_networks(cfg, spec), iter(()),
                                   builder.make_optimizer(cfg.impala),
                                   jax.random.PRNGKey(cfg.seed))   # the study's, before training
  server = reverb.Server(builder.make_tables(cfg))
  try:
    replay = reverb.Client(f'localhost:{server.port}')
    actor = builder.make_actor(cfg, 0, replay, initial, None, counting.Counter(),
                               loggers.NoOpLogger())
    actor.run(num_steps=300)
    actor.close()
    n = replay.server_info()[adders.IMPALA_TABLE].current_size
    written = [seq for s in replay.sample(adders.IMPALA_TABLE, num_samples=n,
                                          emit_timesteps=False, unpack_as_table_signature=True)
               for seq in _sequences(adders.unpack_impala(
                   {k: np.asarray(v)[None] for k, v in s.data.items()}))]
  finally:
    server.stop()

  # Items are matched by content (the learner's batches need not start at the queue's start).
  key = lambda seq: tuple(np.asarray(x).tobytes() for x in (  # noqa: E731
      seq.observation, seq.action, seq.reward, seq.discount, seq.start_of_episode))
  by_key = {}
  for seq in written:
    by_key.setdefault(key(seq), []).append(seq)
  assert len(trained) >= 12 and any(seq.start_of_episode[1:].any() for seq in trained)
  for seq in trained:
    twin = by_key[key(seq)].pop()
    np.testing.assert_allclose(seq.extras['logits'], twin.extras['logits'], rtol=1e-6)
  # Left over: the sequences of the batch not yet full when the run ended.
  assert 0 <= len(written) - len(trained) < 2 * cfg.impala.batch_size


def test_turf_coverage_counts_clean_steps(tmp_path):
  counts, per_episode = turf_coverage.clean_visits(3, seed=1)
  assert counts.sum() == per_episode.sum() and len(per_episode) == 3
  assert counts[9, 0] >= 3   # every episode starts clean on (9, 0)
  out = str(tmp_path / 'cov' / 'coverage.json')
  turf_coverage.main(['--episodes', '3', '--per_episodes', '6', '--out', out])
  with open(out) as f:
    result = json.load(f)
  np.testing.assert_array_equal(result['clean_steps_per_cell'], 2 * counts)
  assert 'per 6 episodes' in open(out[:-len('json')] + 'md').read()


def test_first_policy_is_uniform_with_ours_and_not_with_haikus_init_on_raw_bytes(tmp_path):
  out = str(tmp_path / 'first_policy.json')
  assert first_policy.main(['--episodes', '2', '--steps', '5', '--seeds', '2', '--out', out]) == 0
  with open(out) as f:
    report = json.load(f)
  assert report['observations'] == 12 and report['seeds'] == 2
  entropy = {name: np.mean([r['entropy'] for r in rows])
             for name, rows in report['variants'].items()}
  assert entropy['preset: orthogonal, centred, bytes / 255'] == pytest.approx(np.log(4), abs=1e-3)
  assert entropy["Haiku's init, as drawn, bytes as they are"] < 1.2
  assert '| network | entropy |' in open(out[:-len('json')] + 'md').read()


def test_level_sets_wilson_interval_by_hand():
  lo, hi = level_stats.wilson(50, 100)
  assert lo == pytest.approx(0.40383, abs=1e-5) and hi == pytest.approx(0.59617, abs=1e-5)
  assert level_stats.wilson(0, 100)[0] == 0.0 and level_stats.wilson(0, 100)[1] > 0.03


def test_level_sets_counts_moves_pushes_and_levels_with_no_solution():
  from envs import levels as levels_lib
  one_push, walk_then_push, dead = levels_lib.parse_levels(
      '; 0\n#####\n#@$.#\n#####\n'
      '; 1\n######\n#@ $.#\n######\n'
      '; 2\n#####\n#$  #\n# @.#\n#####\n', source='<test>')
  report = level_stats.optimal_solutions([one_push, walk_then_push, dead], max_nodes=1000)
  assert report['levels'] == 3 and report['solved'] == 2
  assert report['unsolved'] == {'dead_box': 1}
  assert report['moves_mean'] == 1.5 and report['pushes_mean'] == 1.0


def test_level_sets_writes_both_sets_reports(tmp_path):
  out = str(tmp_path / 'level_sets.json')
  assert level_sets.main(['--solve_levels', '1', '--episodes', '3', '--out', out]) == 0
  with open(out) as f:
    report = json.load(f)
  assert [s['name'] for s in report['sets']] == [name for name, _ in level_sets.LEVEL_SETS]
  for s in report['sets']:
    assert s['size'] == 1000 and s['boxes'] == [4] and s['optimal']['solved'] == 1
    assert s['random']['episodes'] == 3 and 0 <= s['random']['solved_fraction'] <= 1
  assert '| level set | levels |' in open(out[:-len('json')] + 'md').read()


def test_level_sets_rerun_keeps_the_sets_measured_and_remeasures_a_changed_file(tmp_path):
  from envs import levels as levels_lib
  from envs import sokoban
  files = []
  for i, level in enumerate(sokoban.load_level_set('default')[:2]):
    path = tmp_path / f'set{i}.txt'
    levels_lib.save_levels([level], path)
    files.append(str(path))
  out = str(tmp_path / 'sets.json')
  argv = ['--solve_levels', '1', '--episodes', '2', '--out', out] + [
      a for f in files for a in ('--levels', f)]
  assert level_sets.main(argv) == 0
  first = json.load(open(out))
  # Marked by hand: a set kept on the rerun keeps the mark, a set measured again loses it.
  for s in first['sets']:
    s['seconds'] = -1.0
  json.dump(first, open(out, 'w'))
  with open(files[1], 'a') as f:
    f.write('\n')                                   # the second file changed
  assert level_sets.main(argv) == 0
  second = json.load(open(out))
  assert [s['seconds'] for s in second['sets']][0] == -1.0
  assert second['sets'][1]['seconds'] >= 0 and second['sets'][1]['sha256'] != first['sets'][1]['sha256']
  # Other settings measure every set again.
  assert level_sets.main(argv[:3] + ['3'] + argv[4:]) == 0
  assert all(s['seconds'] >= 0 for s in json.load(open(out))['sets'])


# --------------------------------------------------------------------------------------------- #
# turf_leak: the goal-corner leak's probes, on random Turf episodes collected here
# --------------------------------------------------------------------------------------------- #

@pytest.fixture(scope='module')
def turf_episodes(tmp_path_factory):
  """30 random Turf episodes started on random stone cells (so the goal's corner is visited),
  collected by the project's collection (true states kept), and those episodes loaded."""
  from estimators import dataset
  from launch.runtime import collection
  path = str(tmp_path_factory.mktemp('turf_leak') / 'random')
  collection.run('turf', 30, path, env_options={'start': 'stone'}, seed=0, progress=False)
  return path, dataset.load_episodes(path)[0]


def _moves(episodes, a, b, fresh):
  """(x, x') of every step a -> b of the episodes, read from their true states; `fresh`: only
  where b is grass not yet ruined."""
  from envs import turf
  xs, ys = [], []
  for ep in episodes:
    for t in range(len(ep.states) - 1):
      (r0, c0, ruined), (r1, c1, _) = ep.states[t], ep.states[t + 1]
      if (r0, c0) == a and (r1, c1) == b and (not fresh or (
          turf.GRASS_MASK[b] and not ruined >> (b[0] * turf.SIZE + b[1]) & 1)):
        xs.append(ep.observations[t])
        ys.append(ep.observations[t + 1])
  return xs, ys


def test_turf_leak_data_stats_count_fresh_entries_as_the_true_states_do(turf_episodes, tmp_path):
  path, episodes = turf_episodes
  out = str(tmp_path / 'data_stats.json')
  assert turf_leak.main(['--probe', 'data_stats', '--dataset', path, '--out', out]) == 0
  rows = json.load(open(out))['cells']
  entries, from_road_end, pairs = {}, {}, {}
  for ep in episodes:
    end = len(ep.states) - 1
    for t in range(end):
      (r0, c0, ruined), (r1, c1, _) = ep.states[t], ep.states[t + 1]
      if (r1, c1) != (r0, c0) and not ruined >> (r1 * 10 + c1) & 1:
        entries[(r1, c1)] = entries.get((r1, c1), 0) + 1
        from_road_end[(r1, c1)] = from_road_end.get((r1, c1), 0) + ((r0, c0) == (1, 8))
        pairs[(r1, c1)] = pairs.get((r1, c1), 0) + min(end - t - 1, turf_leak.WINDOW)
  assert [tuple(r['cell']) for r in rows] == list(turf_leak.STATS_CELLS)
  for r in rows:
    cell = tuple(r['cell'])
    assert (r['fresh_entries'], r['entries_from_road_end'], r['pairs_from_entries']) == (
        entries.get(cell, 0), from_road_end.get(cell, 0), pairs.get(cell, 0)), cell
  assert sum(r['fresh_entries'] for r in rows) > 0 and any(r['entries_from_road_end'] for r in rows)
  md = open(out[:-len('json')] + 'md').read()
  total = sum(len(ep.observations) for ep in episodes)
  assert md.startswith(f'{path}: {total} observations, 30 episodes\n| cell | fresh entries |')


@pytest.mark.parametrize('probe', ['in_data', 'in_data_stone'])
def test_turf_leak_scores_the_data_s_own_moves(probe, turf_episodes,
                                                untrained_estimator_checkpoint, tmp_path):
  from estimators import checkpoint, predict
  path, episodes = turf_episodes
  ckpt = untrained_estimator_checkpoint('turf', (10, 10, 3), 'uint8')
  moves, fresh = ((turf_leak.GRASS_MOVES, True) if probe == 'in_data' else
                  (turf_leak.STONE_MOVES, False))
  out = str(tmp_path / f'{probe}_x.json')
  assert turf_leak.main(['--probe', probe, '--dataset', path, '--checkpoint', ckpt,
                         '--out', out]) == 0
  result = json.load(open(out))[ckpt]
  pred = predict.Predictor(checkpoint.load(ckpt), batch=256)
  seen = 0
  for a, b in moves:
    xs, ys = _moves(episodes, a, b, fresh)
    if not xs:
      assert f'{a}->{b}' not in result
      continue
    seen += 1
    psi = pred.psi(np.stack(xs), np.stack(ys))
    r = result[f'{a}->{b}']
    assert r['n'] == len(xs) and r['mean'] == pytest.approx(float(psi.mean()), abs=1e-6)
    assert r['above_08'] == pytest.approx(float(np.mean(psi > 0.8)))
  assert seen >= 2   # the episodes hold such moves: the comparison compared something


def test_turf_leak_clean_map_probes_and_the_table_of_them(turf_episodes,
                                                          untrained_estimator_checkpoint,
                                                          tmp_path, capsys):
  from absl import flags

  from estimators import checkpoint, evaluate, predict
  from estimators.cli import options_from_flags
  from experiments.studies import turf_corner
  path, _ = turf_episodes
  ckpt = untrained_estimator_checkpoint('turf', (10, 10, 3), 'uint8')
  # corner_plus: turf_corner's scoring of its own moves, then six more.
  corner = str(tmp_path / 'corner_x.json')
  assert turf_leak.main(['--probe', 'corner_plus', '--checkpoint', ckpt, '--out', corner]) == 0
  rows = json.load(open(corner))[ckpt]
  assert rows[:len(turf_corner.TRANSITIONS)] == turf_corner.score(ckpt)
  assert [r['oracle'] for r in rows[-3:]] == ['irreversible', 'reversible', 'reversible']
  # lateness: B(y) - B(start) read off logit psi(x_start, y), 0 at the start itself.
  late = str(tmp_path / 'lateness.json')
  assert turf_leak.main(['--probe', 'lateness', '--checkpoint', ckpt, '--out', late]) == 0
  grid = np.array(json.load(open(late))[ckpt]['B'])
  import envs
  env = envs.make('turf')
  images = []
  for cell in ((9, 0), (0, 9)):
    env.set_state((*cell, 0))
    images.append(np.asarray(env.observation()))
  psi = predict.Predictor(checkpoint.load(ckpt), batch=8).psi(np.stack([images[0]] * 2),
                                                              np.stack(images))
  logit = np.log(psi) - np.log1p(-psi)
  assert grid.shape == (10, 10) and grid[9, 0] == 0
  assert grid[0, 9] == pytest.approx(logit[1] - logit[0], abs=1e-4)
  # summarize: the clean map's and the data's scores, and the oracle's (estimators.evaluate).
  assert turf_leak.main(['--probe', 'in_data', '--dataset', path, '--checkpoint', ckpt,
                         '--out', str(tmp_path / 'in_data_x.json')]) == 0
  fv = flags.FlagValues()
  evaluate.define_flags(fv)
  fv(['evaluate', f'--checkpoint={ckpt}', '--env=turf', '--transitions=200',
      f'--out={tmp_path / "eval" / "tiny"}'])
  evaluate.run(options_from_flags(evaluate.EvaluateOptions, fv))
  report = json.load(open(tmp_path / 'eval' / 'tiny' / 'report.json'))
  table = str(tmp_path / 'table.json')
  capsys.readouterr()
  assert turf_leak.main(['--probe', 'summarize', '--checkpoint', f'tiny={ckpt}',
                         '--checkpoint', f'{tmp_path}/other.ckpt', '--results_dir',
                         str(tmp_path), '--out', table]) == 0
  lines = open(table[:-len('json')] + 'md').read().splitlines()
  assert capsys.readouterr().out.splitlines() == lines and len(lines) == 4
  by_move = {(tuple(r['cell']), r['action']): r['psi_forward'] for r in rows}
  clean = ' / '.join(f'{by_move[m]:.3f}' for m in turf_leak.TABLE_CORNER)
  assert lines[2].startswith(f'| tiny (`{ckpt}`) | {clean} | ')
  assert lines[2].split(' | ')[3] == f"{report['psi']['auroc']:.3f}"
  assert lines[3] == (f'| other (`{tmp_path}/other.ckpt`) | ' + ' / '.join(['–'] * 7) + ' | '
                      + ' / '.join(['–'] * 4) + ' | – | – | – | – | – |')


def test_turf_leak_refuses_bad_input_in_one_line(tmp_path, capsys):
  ckpt = str(tmp_path / 'x.ckpt')
  open(ckpt, 'w').close()
  for argv, says in (([], '--probe is required'),
                     (['--probe', 'in_data', '--checkpoint', ckpt], 'needs --dataset'),
                     (['--probe', 'lateness', '--dataset', 'd', '--checkpoint', ckpt],
                      'reads no --dataset'),
                     (['--probe', 'data_stats', '--dataset', 'd', '--checkpoint', ckpt],
                      'reads no --checkpoint'),
                     (['--probe', 'corner_plus'], 'needs --checkpoint'),
                     (['--probe', 'corner_plus', '--checkpoint', 'missing.ckpt'], 'no such file'),
                     (['--probe', 'lateness', '--checkpoint', ckpt, '--out', 'x.md'],
                      'must name a .json'),
                     (['--probe', 'summarize', '--checkpoint', 'a=b', '--results_dir',
                       str(tmp_path / 'none')], 'no such directory'),
                     (['--probe', 'data_stats', '--dataset', str(tmp_path / 'none')],
                      'no dataset at'),
                     (['--probe', 'lateness', '--checkpoint', ckpt], 'CheckpointError')):
    with pytest.raises(SystemExit) as e:
      turf_leak.main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1 and err[0].startswith('error: '), (argv, err)
    assert says in err[0], (argv, err)


# --------------------------------------------------------------------------------------------- #
# turf_rac_same_mix: the runs of the old results/turf/rac_same_mix/run.sh, as runner steps
# --------------------------------------------------------------------------------------------- #

# What run.sh ran, in its order: beta 0.2 with the mask over seeds 0-2, then without, then the
# sweep with the mask (seed 0); each `launch.train --run_dir $OUT/runs/NAME --seed S
# --max_steps 500000 --env turf --num_actors 2 --envs_per_actor 8 --mode rac
# --estimator_checkpoint $OUT/../leak/same_mix_phi_s1.ckpt --beta B [--learner_mask] --noprogress`.
RUN_SH = ([('0.2', seed, True) for seed in (0, 1, 2)] + [('0.2', seed, False) for seed in (0, 1, 2)]
          + [(beta, 0, True) for beta in ('0', '0.1', '0.3', '0.4', '0.5')])


def test_turf_rac_same_mix_runs_what_its_script_ran():
  steps = turf_rac_same_mix.rac_steps()
  assert len(steps) == len(RUN_SH)
  for step, (beta, seed, mask) in zip(steps, RUN_SH):
    name = f'impala_rac{"_mask" if mask else ""}-b{beta}-s{seed}'
    assert step.name == name and step.is_training
    assert step.argv('/o') == [
        '-m', 'launch.train', '--run_dir', f'/o/runs/{name}', '--seed', str(seed), '--max_steps',
        '500000', '--env', 'turf', '--num_actors', '2', '--envs_per_actor', '8', '--mode', 'rac',
        '--estimator_checkpoint', '/o/../leak/same_mix_phi_s1.ckpt', '--beta', beta,
        *(['--learner_mask'] if mask else []), '--noprogress']
  # The committed runs' own flags (RUN/csv/flags.json) are those of the step of their name.
  out = os.path.join(os.path.dirname(__file__), '..', 'results', 'turf', 'rac_same_mix')
  by_name = {s.name: s for s in steps}
  committed = sorted(os.listdir(os.path.join(out, 'runs')))
  assert committed == sorted(by_name)
  for name in committed:
    saved = json.load(open(os.path.join(out, 'runs', name, 'csv', 'flags.json')))
    argv = by_name[name].argv(os.path.dirname(os.path.dirname(saved['run_dir'])))
    value = lambda flag: argv[argv.index(flag) + 1]  # noqa: E731
    assert (saved['run_dir'], saved['seed'], saved['max_steps'], saved['beta'],
            saved['learner_mask'], saved['mode'], saved['num_actors'], saved['envs_per_actor'],
            saved['estimator_checkpoint']) == (
        value('--run_dir'), int(value('--seed')), int(value('--max_steps')),
        float(value('--beta')), '--learner_mask' in argv, value('--mode'),
        int(value('--num_actors')), int(value('--envs_per_actor')),
        value('--estimator_checkpoint')), name


def test_turf_rac_same_mix_skips_finished_runs_and_goes_on_with_the_rest(tmp_path, monkeypatch,
                                                                         capsys):
  out = tmp_path / 'rac_same_mix'
  only = ['--out', str(out), '--only', 'impala_rac_mask-b0.2-s*']
  with pytest.raises(SystemExit) as e:   # runs to train and no estimators
    turf_rac_same_mix.main(only)
  assert e.value.code == 2 and 'no estimator checkpoint at' in capsys.readouterr().err
  (tmp_path / 'leak').mkdir()
  (tmp_path / 'leak' / 'same_mix_phi_s1.ckpt').write_bytes(b'')
  # s0 finished before the runner wrote `done` files (its committed export says so); s1 stopped.
  export = out / 'runs' / 'impala_rac_mask-b0.2-s0' / 'csv'
  (export / 'logs').mkdir(parents=True)
  (export / 'summary.json').write_text(json.dumps({'status': 'completed', 'actor_steps': 500_076}))
  (out / 'runs' / 'impala_rac_mask-b0.2-s1').mkdir()
  (out / 'runs' / 'impala_rac_mask-b0.2-s1' / 'config.json').write_text('{}')
  assert turf_rac_same_mix.main(only + ['--list']) == 0
  states = [(line[:8].strip(), line[9:].split()[0])
            for line in capsys.readouterr().out.splitlines()]
  assert states == [('done', 'impala_rac_mask-b0.2-s0'), ('started', 'impala_rac_mask-b0.2-s1'),
                    ('to do', 'impala_rac_mask-b0.2-s2')]
  ran = []
  monkeypatch.setattr(runner, 'run_step', lambda step, o: ran.append((step.name, o)) or 0)
  assert turf_rac_same_mix.main(only) == 0
  assert ran == [('impala_rac_mask-b0.2-s1', str(out)), ('impala_rac_mask-b0.2-s2', str(out))]
  # A larger budget is not reached by the finished run: it goes on too; a failure stops there.
  ran.clear()
  monkeypatch.setattr(runner, 'run_step', lambda step, o: ran.append(step.name) or 3)
  assert turf_rac_same_mix.main(only + ['--max_steps', '600000']) == 1
  assert ran == ['impala_rac_mask-b0.2-s0'] and 'exit code 3' in capsys.readouterr().err
  with pytest.raises(SystemExit) as e:
    turf_rac_same_mix.main(['--only', 'nope'])
  assert e.value.code == 2

"""Learning curves read back from hand-made run directories (experiments.analysis.aggregate) and their PNGs
(experiments.plot): every expected number below is worked out by hand from the rows written."""
import csv
import json
import math
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

from experiments.analysis import aggregate, plot, reference_curves

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))
T975_DF2 = 4.302653  # Student t, 0.975 quantile, 2 degrees of freedom
PNG_MAGIC = b'\x89PNG\r\n\x1a\n'


def write_log(run_dir, label, rows):
  path = os.path.join(run_dir, 'logs', label)
  os.makedirs(path, exist_ok=True)
  header = list(dict.fromkeys(k for row in rows for k in row))
  with open(os.path.join(path, 'logs.csv'), 'w', newline='') as f:
    writer = csv.DictWriter(f, fieldnames=header)
    writer.writeheader()
    writer.writerows(rows)


def write_segments(run_dir, segments):
  with open(os.path.join(run_dir, 'run_state.json'), 'w') as f:
    json.dump({'segments': segments}, f)


def make_run(root, name, episodes, segments=None, precedence=None):
  """episodes: (actor, actor_steps, episode_return[, unix_time]) tuples."""
  run_dir = str(root / name)
  by_actor = {}
  for actor, steps, ret, *unix in episodes:
    row = {'actor_steps': steps, 'episode_length': 5, 'episode_return': ret}
    if unix:
      row['unix_time'] = unix[0]
    by_actor.setdefault(actor, []).append(row)
  for actor, rows in by_actor.items():
    write_log(run_dir, f'actor_{actor}', rows)
  if precedence is not None:
    write_log(run_dir, 'precedence', precedence)
  write_segments(run_dir, segments or [{'start': 0.0, 'end': 1e9}])
  return run_dir


def png_size(path):
  """(width, height) from the PNG's IHDR chunk."""
  data = open(path, 'rb').read(24)
  assert data[:8] == PNG_MAGIC
  return struct.unpack('>II', data[16:24])


# ------------------------------------------------------------------------------- mean_ci --- #

def test_mean_ci_of_three_values():
  mean, half = aggregate.mean_ci([1.0, 2.0, 3.0])
  assert mean == pytest.approx(2.0)
  assert half == pytest.approx(T975_DF2 * 1.0 / math.sqrt(3), rel=1e-6)


def test_mean_ci_ignores_nan_and_needs_two_values():
  values = np.array([[1.0, 2.0, np.nan], [3.0, np.nan, np.nan], [5.0, np.nan, np.nan]])
  mean, half = aggregate.mean_ci(values, axis=0)
  np.testing.assert_allclose(mean, [3.0, 2.0, np.nan])
  assert half[0] == pytest.approx(T975_DF2 * 2.0 / math.sqrt(3), rel=1e-6)
  assert np.isnan(half[1]) and np.isnan(half[2])


# --------------------------------------------------------------------------------- curve --- #

def test_curve_on_env_steps_merges_actors_over_a_trailing_window(tmp_path):
  run = make_run(tmp_path, 'run', [(0, 10, 1.0), (0, 20, 3.0), (1, 25, 5.0), (1, 60, 7.0),
                                   (0, 100, 9.0)])
  xs, ys = aggregate.curve(run, 'episode_return', num_points=5, smooth=0.25)
  np.testing.assert_allclose(xs, [0, 25, 50, 75, 100])
  # Windows of 25 steps, open on the left: (0, 25] holds 1, 3, 5; (25, 50] holds none.
  np.testing.assert_allclose(ys, [np.nan, 3.0, np.nan, 7.0, 9.0])


def test_wall_time_excludes_the_gap_between_launches(tmp_path):
  segments = [{'start': 1000.0, 'end': 1100.0}, {'start': 1500.0, 'end': None}]
  np.testing.assert_allclose(aggregate.wall_time([900, 1050, 1100, 1300, 1550], segments),
                             [0, 50, 100, 100, 150])
  run = make_run(tmp_path, 'run', [(0, 10, 2.0, 1050.0), (0, 20, 4.0, 1100.0),
                                   (1, 30, 6.0, 1550.0), (1, 40, 8.0, 1600.0)], segments)
  xs, ys = aggregate.curve(run, 'episode_return', x='wall_time', num_points=5, smooth=0.25)
  np.testing.assert_allclose(xs, [0, 50, 100, 150, 200])  # 600 s with the gap
  np.testing.assert_allclose(ys, [np.nan, 2.0, 4.0, 6.0, 8.0])


def test_wall_time_needs_the_run_state(tmp_path):
  run = make_run(tmp_path, 'run', [(0, 10, 1.0, 1050.0)])
  os.remove(os.path.join(run, 'run_state.json'))
  with pytest.raises(ValueError, match='wall time is unknown'):
    aggregate.curve(run, 'episode_return', x='wall_time')


def test_precedence_metrics_on_env_steps_or_their_own_steps(tmp_path):
  episodes = [(0, 10, 2.0, 1050.0), (0, 20, 4.0, 1100.0), (1, 30, 6.0, 1550.0),
              (1, 40, 8.0, 1600.0)]
  segments = [{'start': 1000.0, 'end': 1100.0}, {'start': 1500.0, 'end': 1600.0}]
  with_steps = make_run(tmp_path, 'a', episodes, segments, precedence=[
      {'precedence_steps': 1, 'actor_steps': 20, 'psi_accuracy': 0.5},
      {'precedence_steps': 2, 'actor_steps': 35, 'psi_accuracy': 0.75}])
  s = aggregate.series(with_steps, 'psi_accuracy')
  assert s.x_name == 'actor_steps'
  np.testing.assert_allclose(s.xs, [20, 35])
  # No time of day in the precedence log: 35 steps lie halfway between the episodes ending at
  # 30 (150 s) and 40 (200 s).
  np.testing.assert_allclose(aggregate.series(with_steps, 'psi_accuracy', 'wall_time').xs,
                             [100, 175])
  own_steps = make_run(tmp_path, 'b', episodes, segments, precedence=[
      {'precedence_steps': 1, 'psi_accuracy': 0.5}, {'precedence_steps': 3, 'psi_accuracy': 0.9}])
  s = aggregate.series(own_steps, 'psi_accuracy')
  assert s.x_name == 'precedence_steps'
  np.testing.assert_allclose(s.xs, [1, 3])
  np.testing.assert_allclose(s.values, [0.5, 0.9])


# ----------------------------------------------------------------- aggregate / final ------- #

def test_aggregate_curves_truncates_the_grid_to_the_shortest_run(tmp_path):
  # Episodes every 10 steps: run a returns steps / 10, run b twice that, run c always 3.
  a = make_run(tmp_path, 'a', [(0, s, s / 10) for s in range(10, 121, 10)])
  b = make_run(tmp_path, 'b', [(0, s, s / 5) for s in range(10, 101, 10)])
  c = make_run(tmp_path, 'c', [(0, s, 3.0) for s in range(10, 81, 10)])
  agg = aggregate.aggregate_curves([a, b, c], 'episode_return', num_points=5, smooth=0.25)
  np.testing.assert_allclose(agg.xs, [0, 20, 40, 60, 80])
  assert agg.per_seed.shape == (3, 5)
  # Windows of 20 steps: (0, 20] holds steps 10 and 20, (20, 40] steps 30 and 40, ...
  expected = np.array([[np.nan, 1.5, 3.5, 5.5, 7.5],
                       [np.nan, 3.0, 7.0, 11.0, 15.0],
                       [np.nan, 3.0, 3.0, 3.0, 3.0]])
  np.testing.assert_allclose(agg.per_seed, expected)
  np.testing.assert_allclose(agg.mean, [np.nan, 2.5, 13.5 / 3, 6.5, 25.5 / 3])
  assert np.isnan(agg.half_width[0])
  std = np.std(expected[:, 1:], axis=0, ddof=1)
  np.testing.assert_allclose(agg.half_width[1:], T975_DF2 * std / math.sqrt(3), rtol=1e-6)


def test_final_value_averages_the_last_episodes_by_env_steps(tmp_path):
  run = make_run(tmp_path, 'run', [(0, 10, 1.0), (1, 40, 8.0), (0, 30, 6.0), (1, 20, 2.0)])
  assert aggregate.final_value(run, 'episode_return', last_n=2) == pytest.approx(7.0)
  assert aggregate.final_value(run, 'episode_return', last_n=100) == pytest.approx(4.25)
  with pytest.raises(ValueError, match="logs no 'ruined_grass'"):
    aggregate.final_value(run, 'ruined_grass')


# ------------------------------------------------------------------------------- plotting --- #

@pytest.fixture
def runs(tmp_path):
  """Two IMPALA seeds and two IMPALA+RAE seeds (these also log intrinsic_return)."""
  out = {}
  for name, scale in [('impala_s0', 1.0), ('impala_s1', 2.0), ('rae_s0', 3.0), ('rae_s1', 4.0)]:
    run_dir = str(tmp_path / name)
    rows = [{'actor_steps': s, 'episode_length': 10, 'episode_return': scale * s / 100,
             'ruined_grass': s % 3, 'unix_time': 1000.0 + s} for s in range(10, 201, 10)]
    if name.startswith('rae'):
      for row in rows:
        row['intrinsic_return'] = -scale
    write_log(run_dir, 'actor_0', rows)
    write_segments(run_dir, [{'start': 1000.0, 'end': 1300.0}])
    out[name] = run_dir
  return out


def test_plot_runs_one_line_per_group_and_per_run(runs, tmp_path):
  groups = {'IMPALA': [runs['impala_s0'], runs['impala_s1']],
            'IMPALA+RAE': [runs['rae_s0'], runs['rae_s1']]}
  out = str(tmp_path / 'grouped.png')
  drawn = plot.plot_runs(groups, None, 'actor_steps', out, title='turf')
  # intrinsic_return only from the groups that log it.
  assert drawn == {'episode_return': ['IMPALA', 'IMPALA+RAE'],
                   'episode_length': ['IMPALA', 'IMPALA+RAE'], 'intrinsic_return': ['IMPALA+RAE'],
                   'ruined_grass': ['IMPALA', 'IMPALA+RAE']}
  assert png_size(out) == (1200, 600)  # 4 subplots: 3 columns, 2 rows
  drawn = plot.plot_runs({'runs': list(runs.values())}, ['episode_return'], 'wall_time',
                         str(tmp_path / 'overlaid.png'), aggregate=False)
  assert drawn == {'episode_return': ['impala_s0', 'impala_s1', 'rae_s0', 'rae_s1']}


def _panel_colours(runs, groups, metric, aggregate_runs):
  from matplotlib.figure import Figure
  ax = Figure().subplots()
  logs = {d: aggregate.load(d) for ds in groups.values() for d in ds}
  labels = plot._draw_metric(ax, logs, groups, metric, 'actor_steps', aggregate_runs, 20, 0.05)
  return dict(zip(labels, (line.get_color() for line in ax.get_lines())))


@pytest.mark.parametrize('aggregate_runs', [True, False])
def test_a_group_keeps_its_colour_in_a_panel_other_groups_do_not_log(runs, aggregate_runs):
  """intrinsic_return is logged by the RAE runs only: their lines there must keep the colours
  they have in the panels every group logs (they used to take IMPALA's, the first colour)."""
  groups = {'IMPALA': [runs['impala_s0'], runs['impala_s1']],
            'IMPALA+RAE': [runs['rae_s0'], runs['rae_s1']]}
  everyone = _panel_colours(runs, groups, 'episode_return', aggregate_runs)
  rae_only = _panel_colours(runs, groups, 'intrinsic_return', aggregate_runs)
  assert rae_only and all(not label.startswith('IMPALA:') and label != 'IMPALA' for label in rae_only)
  for label, colour in rae_only.items():
    assert colour == everyone[label], (label, colour, everyone)
  assert len(set(everyone.values())) == len(everyone)


def _cli(*args):
  env = dict(os.environ, JAX_PLATFORMS='cpu')
  return subprocess.run([sys.executable, '-m', 'experiments.plot', *map(str, args)], cwd=REPO,
                        env=env, capture_output=True, text=True, timeout=60)


def test_cli_writes_overlaid_and_grouped_pngs(runs, tmp_path):
  overlaid = tmp_path / 'overlaid.png'
  proc = _cli(runs['impala_s0'], runs['rae_s0'], '--out', overlaid,
              '--metrics', 'episode_return,episode_length')
  assert proc.returncode == 0, proc.stderr
  assert png_size(overlaid) == (800, 300)
  assert os.path.getsize(overlaid) > 10_000
  grouped = tmp_path / 'grouped.png'
  proc = _cli('--group', f'IMPALA={runs["impala_s0"]},{runs["impala_s1"]}',
              '--group', f'IMPALA+RAE={runs["rae_s0"]},{runs["rae_s1"]}',
              '--metrics', 'episode_return', '--x', 'wall_time', '--out', grouped)
  assert proc.returncode == 0, proc.stderr
  assert png_size(grouped) == (400, 300)
  assert os.path.getsize(grouped) > 5_000


def _one_line_error(proc, *words):
  assert proc.returncode == 2, proc.stderr
  lines = [line for line in proc.stderr.splitlines() if line.strip()]
  assert len(lines) == 1 and lines[0].startswith('error: '), proc.stderr
  for word in words:
    assert word in lines[0], lines[0]


def test_cli_refuses_bad_input_in_one_line(runs, tmp_path):
  out = tmp_path / 'fig.png'
  empty = tmp_path / 'empty'
  empty.mkdir()
  _one_line_error(_cli(tmp_path / 'missing', '--out', out), 'does not exist')
  _one_line_error(_cli(empty, '--out', out), 'holds no logs')
  _one_line_error(_cli(runs['impala_s0'], '--metrics', 'episode_return,nope', '--out', out),
                  "'nope'")
  _one_line_error(_cli(runs['impala_s0'], '--out', tmp_path / 'no' / 'fig.png'), 'does not exist')
  _one_line_error(_cli(runs['impala_s0'], '--out', tmp_path), 'is a directory')
  _one_line_error(_cli('--group', 'IMPALA', '--out', out), 'LABEL=RUN_DIR')
  _one_line_error(_cli(runs['impala_s0'], '--x', 'episodes', '--out', out), '--x')
  assert not out.exists()


def test_first_reaching_uses_the_trailing_episodes():
  xs = np.arange(1, 11) * 100.0
  solved = np.array([0, 0, 1, 0, 1, 1, 0, 1, 1, 1], float)
  # trailing 4: [.25, .5, .5, .75 (episodes 3-6, x=600), ...]
  assert aggregate.first_reaching(xs, solved, 0.75, 4) == 600.0
  assert aggregate.first_reaching(xs, solved, 1.0, 3) == 1000.0
  assert math.isnan(aggregate.first_reaching(xs, solved, 1.0, 4))
  assert math.isnan(aggregate.first_reaching(xs[:2], solved[:2], 0.0, 4))


def test_window_means_count_each_episode_once_across_a_thinned_stretch():
  xs = np.arange(1, 8) * 100.0
  solved = np.array([0, 1, 1, 0, 1, 1, 1], float)
  weights = np.array([4, 4, 2, 1, 1, 1, 1], float)
  # (50, 300]: rows 0-2, 10 episodes, 6 solved; (450, 700]: rows 4-6, one episode each.
  np.testing.assert_allclose(aggregate.window_means(xs, solved, [300.0, 700.0], 250.0, weights),
                             [(4 + 2) / 10, 1.0])
  np.testing.assert_allclose(aggregate.window_means(xs, solved, [300.0, 700.0], 250.0),
                             [2 / 3, 1.0])


def test_a_curve_across_an_exports_boundary_weighs_thinned_rows_by_their_episodes(tmp_path):
  """A run continued from its export: 100 rows kept of 400 unsolved episodes (every 4th), then
  100 solved episodes logged in full, all within one window: 100 of 500 episodes solved."""
  from launch.runtime import run_export
  run = make_run(tmp_path, 'run', [(0, i + 1, 0.0) for i in range(200)])
  write_log(run, 'actor_0', [{'actor_steps': i + 1, 'solved': float(i >= 100)}
                             for i in range(200)])
  assert aggregate.curve(run, 'solved', num_points=2, smooth=1.0)[1][-1] == 0.5
  run_export.write_thinned_rows(os.path.join(run, 'logs', 'actor_0', 'logs.csv'), [4] * 100)
  assert aggregate.curve(run, 'solved', num_points=2, smooth=1.0)[1][-1] == pytest.approx(0.2)
  assert aggregate.mean_over_budget(run, 'solved', 200.0, num_points=1, smooth=1.0) == \
      pytest.approx(0.2)
  # Milestones and final values stay on the last N rows (the module's docstring says why).
  assert aggregate.final_value(run, 'solved', 100) == 1.0
  assert aggregate.steps_to(run, 'solved', 0.5, 100) == 150.0
  assert 'episodes_per_row' not in aggregate.metric_names(run)


def test_steps_to_and_area_over_a_budget(tmp_path):
  # 100 episodes, one per 10 env steps; solved from episode 50 on.
  run = make_run(tmp_path, 'r', [(0, 10 * (i + 1), 0.0) for i in range(100)])
  rows = [{'actor_steps': 10 * (i + 1), 'episode_length': 5, 'episode_return': 0.0,
           'solved': float(i >= 50)} for i in range(100)]
  write_log(run, 'actor_0', rows)
  assert aggregate.steps_to(run, 'solved', 0.5, 20) == 600.0   # episodes 41-60: 10 of 20
  # The curve is 0 up to 500 steps and 1 after (window 5% of the budget = 50 steps).
  area = aggregate.mean_over_budget(run, 'solved', 1000.0, num_points=100, smooth=0.0)
  assert area == pytest.approx(0.5, abs=0.02)
  assert math.isnan(aggregate.mean_over_budget(run, 'solved', 2000.0))


def test_a_killed_launch_does_not_run_on_through_the_next(tmp_path):
  # The first launch was killed (no end); its last episode at 1100 ends it.
  segments = [{'start': 1000.0, 'end': None}, {'start': 1500.0, 'end': 1600.0}]
  np.testing.assert_allclose(
      aggregate.wall_time([1050, 1100, 1550, 1600], segments), [50, 100, 150, 200])


# ----------------------------------------------------------------------- reference curves --- #

def test_the_committed_fig5b_reading_loads_and_names_its_source():
  from experiments.registry import EXPERIMENTS
  (figure,) = EXPERIMENTS['sokoban'].reference_figures()
  assert figure.metric == 'episode_return' and figure.x == 'actor_steps'
  assert 'sokoban_scores_v2.png' in figure.source
  impala, rae = figure.curves
  assert impala.points[0] == (0.0, -11.5) and rae.points[-1] == (100e6, 10.3)


def test_a_reference_is_clipped_at_the_runs_furthest_step():
  curve = reference_curves.ReferenceCurve('c', ((0.0, 0.0), (10.0, 10.0), (20.0, 0.0)),
                                          band=((10.0, 5.0, 15.0), (20.0, -5.0, 5.0)))
  cut = curve.clipped(15.0)
  assert cut.points == ((0.0, 0.0), (10.0, 10.0), (15.0, 5.0))   # interpolated at the edge
  assert cut.band == ((10.0, 5.0, 15.0),)
  assert curve.clipped(30.0) == curve


def test_plot_draws_a_reference_only_on_its_panel_and_axis(runs, tmp_path):
  figure = reference_curves.ReferenceFigure(
      'Fig. X', 'somewhere', '+/- 1', 'episode_return', 'actor_steps',
      (reference_curves.ReferenceCurve('authors', ((0.0, 0.0), (1000.0, 5.0))),))
  groups = {'IMPALA': [runs['impala_s0'], runs['impala_s1']]}
  drawn = plot.plot_runs(groups, ['episode_return', 'episode_length'], 'actor_steps',
                         str(tmp_path / 'ref.png'), references=[figure])
  assert drawn == {'episode_return': ['IMPALA', 'authors'], 'episode_length': ['IMPALA']}
  drawn = plot.plot_runs(groups, ['episode_return'], 'wall_time', str(tmp_path / 'wall.png'),
                         references=[figure])
  assert drawn == {'episode_return': ['IMPALA']}


@pytest.mark.parametrize('text, words', [
    ('{', ['not JSON']),
    ('{"figure": "f", "source": "s", "accuracy": "a", "metric": "m", "x": "actor_steps"}',
     ['lacks', 'curves']),
    ('{"figure": "f", "source": "s", "accuracy": "a", "metric": "m", "x": "actor_steps", '
     '"curves": [{"label": "c", "points": [[5, 1], [2, 3]]}]}', ['x increasing']),
])
def test_a_bad_reference_file_is_one_line_naming_it(tmp_path, text, words):
  path = tmp_path / 'ref.json'
  path.write_text(text)
  with pytest.raises(ValueError) as e:
    reference_curves.load(str(path))
  message = str(e.value)
  assert '\n' not in message and str(path) in message
  assert all(w in message for w in words)

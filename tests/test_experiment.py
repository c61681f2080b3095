"""The experiment runner: its registry, skip/resume rules, failures, and the report it writes
from run logs (hand-made logs here; the slow test runs the smallest configuration for real)."""
import csv
import glob
import json
import math
import os
import shutil
import subprocess
import sys

import pytest

from experiments import registry, runner, spec
from launch.runtime import run_state

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))


def _cli(*args):
  return subprocess.run([sys.executable, '-m', 'experiments', *args], cwd=ROOT,
                        capture_output=True, text=True, timeout=120)


def test_list_shows_every_step_and_runs_nothing(tmp_path):
  r = _cli('sokoban', '--seeds', '2', '--out', str(tmp_path), '--list')
  assert r.returncode == 0, r.stderr
  lines = r.stdout.strip().splitlines()
  names = [l[9:].split()[0] for l in lines]
  runs = [f'{r}-s{i}' for i in (0, 1)
          for r in ('impala', 'impala_rae', 'impala_rae_paper_psi', 'impala_rae_lam1')]
  psi = ['train_psi{}', 'eval_psi{}_train_levels', 'eval_psi{}_boxoban', 'psi_trace{}']
  evals = ('eval_train', 'eval_boxoban', 'eval_irreversible')
  # Each run is followed by its evaluations.
  assert names == (['collect_random'] + [p.format('') for p in psi] +
                   [p.format('_paper') for p in psi] +
                   [n for r in runs for n in [r] + [f'{r}-{e}' for e in evals]])
  assert all(l.startswith('to do') for l in lines)
  assert '--network_preset sokoban ' in lines[1] and '--network_preset sokoban_paper ' in lines[5]
  run_lines = {name: line for name, line in zip(names, lines) if name in runs}
  assert '--estimator_checkpoint ' + str(tmp_path / 'psi.ckpt') in run_lines['impala_rae-s0']
  assert ('--estimator_checkpoint ' + str(tmp_path / 'psi_paper.ckpt')
          in run_lines['impala_rae_paper_psi-s0'])
  assert '--lam 1.0' in run_lines['impala_rae_lam1-s0']
  assert '--lam' not in run_lines['impala_rae-s0'] + run_lines['impala_rae_paper_psi-s0']
  # Every arm's agent settings are the same.
  agent = lambda line: line[line.index('--env sokoban'):line.index('--mode')]
  assert len({agent(line) for line in run_lines.values()}) == 1
  assert os.listdir(tmp_path) == []


def test_sokoban_long_scale_is_the_small_agent_to_30m_steps_with_two_arms():
  def runs(scale):
    return {st.name: st for st in registry.sokoban_steps(scale, 2) if st.is_training}
  long, small = runs('long'), runs('small')
  assert sorted(long) == ['impala-s0', 'impala-s1', 'impala_rae-s0', 'impala_rae-s1']
  assert all(st.max_steps == 30_000_000 for st in long.values())
  # The arms it keeps have the small scale's flags: the same agent, the same RAE settings.
  assert all(long[name].flags == small[name].flags for name in long)
  names = [st.name for st in registry.sokoban_steps('long', 2)]
  assert 'train_psi' in names and 'train_psi_paper' not in names


def test_the_authors_scale_adds_its_diagnostics_once_each_as_impala_with_one_change_more():
  runs = {st.name: st for st in registry.sokoban_steps('authors', 3) if st.is_training}
  diagnostics = ['impala_drawn-s0', 'impala_drawn_haiku-s0', 'impala_drawn_haiku_bytes-s0']
  assert sorted(runs) == sorted([f'{a}-s{i}' for a in ('impala', 'impala_rae') for i in (0, 1, 2)]
                                + diagnostics + ['impala_timeout_ends-s0'])
  base = runs['impala-s0'].flags
  # Each diagnostic is IMPALA's seed 0 with the flags of the one before it and one change more.
  before = ()
  for name in diagnostics:
    step = runs[name]
    assert step.seed == 0 and step.max_steps == 50_000_000
    assert step.flags[:len(base)] == base
    added = step.flags[len(base):]
    assert added[:len(before)] == before and len(added) > len(before)
    before = added
  assert before == ('--nopolicy_centre_on_agent', '--policy_init', 'lecun',
                    '--policy_pixel_scale', '1')
  # The environment's diagnostic changes only the step limit's discount.
  timeout = runs['impala_timeout_ends-s0']
  assert timeout.seed == 0 and timeout.flags == base + ('--env_option', 'timeout_terminates=true')
  # The other scales run none.
  assert not any('drawn' in st.name for st in registry.sokoban_steps('long', 3))


def test_only_selects_steps_by_pattern_and_list_shows_the_budget(tmp_path):
  r = _cli('sokoban', '--seeds', '2', '--out', str(tmp_path), '--max_steps', '12345',
           '--only', 'impala-s*,psi_trace', '--list')
  assert r.returncode == 0, r.stderr
  lines = r.stdout.strip().splitlines()
  assert [l[9:].split()[0] for l in lines] == ['psi_trace'] + [
      n for i in (0, 1) for n in [f'impala-s{i}'] + [f'impala-s{i}-{e}' for e in (
          'eval_train', 'eval_boxoban', 'eval_irreversible')]]
  assert '--max_steps 12345 ' in lines[1]
  r = _cli('sokoban', '--out', str(tmp_path), '--only', 'impala-x*', '--list')
  assert r.returncode == 2 and r.stderr.strip() == (
      'error: --only impala-x* matches no step (--list shows them)'), r.stderr


@pytest.mark.parametrize('args,message', [
    (('nope',), "unknown experiment 'nope'"),
    (('sokoban', '--seeds', '0'), '--seeds must be >= 1'),
    (('sokoban', '--max_steps', '-5'), '--max_steps must be >= 1'),
])
def test_bad_input_is_one_line(tmp_path, args, message):
  r = _cli(*args, '--out', str(tmp_path / 'x'), '--list')
  assert r.returncode == 2, r.stderr
  last = r.stderr.strip().splitlines()[-1]
  assert last.startswith(f'error: {message}') and 'Traceback' not in r.stderr, r.stderr


def test_done_steps_are_skipped_and_longer_budgets_resume(tmp_path):
  step = [s for s in registry.sokoban_steps('tiny', 1) if s.is_training][0]
  assert step.is_training and not runner.step_done(step, str(tmp_path))
  os.makedirs(tmp_path / step.run_dir)
  run_state.write_json(str(tmp_path / step.done), {'summary': {'actor_steps': 20_400}})
  assert runner.step_done(step, str(tmp_path))
  assert runner.step_done(step, str(tmp_path), max_steps_override=20_000)
  assert not runner.step_done(step, str(tmp_path), max_steps_override=50_000)


def test_eta_counts_only_the_env_steps_a_run_has_left_to_its_budget(tmp_path):
  run = spec.train_step('impala-s0', 'IMPALA', 0, 30_000_000, 12_000)
  other = spec.Step('eval', 'json.tool', (), done='never', est_seconds=50)
  out = str(tmp_path)
  assert runner.seconds_left(run, out) == 12_000                 # nothing run yet
  os.makedirs(tmp_path / run.run_dir)
  run_state.RunRecords(str(tmp_path / run.run_dir)).save_counts({'actor_steps': 10_000_000})
  assert runner.seconds_left(run, out) == pytest.approx(8_000)
  assert runner.seconds_left(run, out, max_steps_override=20_000_000) == pytest.approx(4_000)
  assert runner.seconds_left(run, out, max_steps_override=5_000_000) == 0
  # A rate measured this invocation (seconds per env step) replaces the estimate's.
  measured = {'launch.train': 1 / 2_500, 'json.tool': 7}
  assert runner.seconds_left(run, out, 20_000_000, measured) == pytest.approx(4_000)
  assert runner.seconds_left(other, out, None, measured) == 7
  assert runner.seconds_left(other, out) == 50


def test_each_step_prints_the_eta_of_what_is_left(tmp_path, capsys):
  (tmp_path / 'in.json').write_text('{}')
  steps = [spec.Step(f'copy{i}', 'json.tool', ('{out}/in.json', f'{{out}}/out{i}.json'),
                     done=f'out{i}.json', est_seconds=7_200) for i in range(2)]
  exp = spec.Experiment('t', 'test', 'none', lambda scale, seeds: steps, (), ())
  assert runner.run_experiment(exp, 'tiny', 1, str(tmp_path)) is True
  lines = [l for l in capsys.readouterr().out.splitlines() if 'ETA' in l]
  # Before any step ran: both estimates; then the first step's measured seconds.
  assert lines[0] == '[1/2] copy0 (ETA for what is left: 4h00m)'
  assert lines[1].startswith('[2/2] copy1 (ETA for what is left: 0m0')


def test_a_failing_step_stops_the_experiment_naming_it(tmp_path, capsys):
  failing = spec.Step('broken', 'json.tool', ('{out}/missing.json',), done='never',
                          est_seconds=1)
  after = spec.Step('after', 'json.tool', ('--help',), done='never', est_seconds=1)
  exp = spec.Experiment('t', 'test', 'none', lambda scale, seeds: [failing, after], (), ())
  assert runner.run_experiment(exp, 'tiny', 1, str(tmp_path)) is False
  err = capsys.readouterr().err.strip().splitlines()[-1]
  assert err.startswith('error: step broken failed (exit code 2)')
  assert not (tmp_path / 'logs' / 'after.log').exists()


def _fake_run(run_dir, returns, solved):
  os.makedirs(os.path.join(run_dir, 'logs', 'actor_0'))
  with open(os.path.join(run_dir, 'logs', 'actor_0', 'logs.csv'), 'w') as f:
    f.write('actor_steps,episode_return,solved,boxes_on_target,episode_length,unix_time\n')
    for i, (r, s) in enumerate(zip(returns, solved)):
      f.write(f'{(i + 1) * 100},{r},{s},{s},50,{1000 + i}\n')
  run_state.write_json(os.path.join(run_dir, 'run_state.json'),
                       {'segments': [{'start': 999, 'end': 1000 + len(returns), 'status': 'completed'}]})
  run_state.RunRecords(run_dir).save_counts({'actor_steps': 100 * len(returns)})


def test_report_aggregates_seeds_with_intervals(tmp_path):
  out = str(tmp_path)
  steps = registry.sokoban_steps('tiny', 3)
  finals = {'IMPALA': [1.0, 2.0, 3.0], 'IMPALA+RAE': [4.0, 4.0, 7.0],
            "IMPALA+RAE (paper's psi)": [0.0, 0.0, 0.0], 'IMPALA+RAE (lambda 1)': [1.0, 1.0, 1.0]}
  for step in steps:
    if step.is_training:
      value = finals[step.group][step.seed]
      _fake_run(os.path.join(out, step.run_dir), [value] * 120, [1] * 120)
  table = runner.report(registry.get('sokoban'), 'tiny', 3, out)
  rows = {r['group']: r for r in table['rows']}
  assert rows['IMPALA']['episode_return']['mean'] == pytest.approx(2.0)
  assert rows['IMPALA']['episode_return']['ci95'] == pytest.approx(4.302653 / 3 ** 0.5, rel=1e-5)
  assert rows['IMPALA+RAE']['episode_return']['mean'] == pytest.approx(5.0)
  assert rows['IMPALA']['env_steps'] == [12_000] * 3
  md = (tmp_path / 'table.md').read_text()
  assert '| IMPALA | 3 (0) |' in md and '2.000 ± 2.484' in md
  # 120 episodes per run: no run has the 1,000 a milestone is judged on.
  milestones = md[md.index('## Milestones'):]
  assert '| IMPALA | – (0/3) | – (0/3) | – (0/3) | – (0/3) | – (0/3) | – (0/3) |' in milestones
  assert json.loads((tmp_path / 'table.json').read_text())['rows'] == table['rows']
  for name in ('curves_steps.png', 'curves_wall.png'):
    assert (tmp_path / name).read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'


def test_page_pairs_each_rae_arm_with_impala_of_the_same_seed(tmp_path):
  out = str(tmp_path)
  # Episodes before the first solve; every later one solves. 1,100 episodes, 100 steps each.
  first_solve = {('IMPALA', 0): 1005, ('IMPALA', 1): 1010, ('IMPALA+RAE', 0): 1002,
                 ("IMPALA+RAE (paper's psi)", 0): 1100}
  per_push = {'IMPALA': 0.25, 'IMPALA+RAE': 0.125, "IMPALA+RAE (paper's psi)": 0.5}
  for step in registry.sokoban_steps('tiny', 2):
    k = first_solve.get((step.group, step.seed)) if step.is_training else None
    if k is None:
      continue
    run_dir = os.path.join(out, step.run_dir)
    _fake_run(run_dir, [-1.0] * 1100, [0] * k + [1] * (1100 - k))
    run_state.write_json(os.path.join(run_dir, 'done'), {})
    run_state.write_json(os.path.join(run_dir, 'eval_irreversible.json'), {'policies': {
        'sampled': {'irreversible_per_push': per_push[step.group]}}})
  md = registry.get('sokoban').extra_markdown({'scale': 'tiny', 'seeds': 2}, out)
  rows = md[md.index('## Each RAE arm against IMPALA'):].splitlines()
  assert '| RAE arm | measure | seed 0 | seed 1 | mean difference |' in rows
  # Seed 0 only: RAE's 5% solved (50 of the last 1,000) came 3 episodes (300 steps) sooner.
  assert '| IMPALA+RAE | env steps to 5% solved | -300 | – | -300 |' in rows
  assert not any('10% solved' in row for row in rows)  # neither arm got there
  assert "| IMPALA+RAE (paper's psi) | env steps to 1% solved | IMPALA only | – | – |" in rows
  assert '| IMPALA+RAE | irreversible per push, sampled | -0.125 | – | -0.125 |' in rows
  assert '| IMPALA+RAE | irreversible per push, greedy | – | – | – |' in rows
  # Arms without a completed run are left out.
  assert not any('(lambda 1)' in row for row in rows)


def test_a_diagnostic_on_its_way_leaves_the_arms_area_budget_alone(tmp_path):
  from experiments import sokoban_page
  from experiments.analysis import aggregate
  out = str(tmp_path)
  # The arms' runs log 1,200 episodes (to 120,000 env steps), the diagnostic 600 (to 60,000).
  episodes = {'IMPALA': 1200, 'IMPALA+RAE': 1200, 'IMPALA, room as drawn': 600}
  for step in registry.sokoban_steps('authors', 1):
    if step.is_training and step.group in episodes:
      k = episodes[step.group]
      _fake_run(os.path.join(out, step.run_dir), [-1.0] * k, [0] * (k // 2) + [1] * (k // 2))
  md = sokoban_page.sokoban_milestones_markdown({'scale': 'authors', 'seeds': 1}, out)
  assert 'over the first 120,000 env steps' in md
  rows = {row.split(' | ')[0]: row for row in md.splitlines() if row.startswith('| ')}
  area = aggregate.mean_over_budget(os.path.join(out, 'runs', 'impala-s0'), 'solved', 120_000)
  assert 0.4 < area < 0.6 and rows['| IMPALA'].endswith(f'| {area:.4f} |')
  assert rows['| IMPALA, room as drawn'].endswith('| – |')


def test_the_arms_are_compared_every_5m_steps_on_the_window_logged_by_then(tmp_path):
  from experiments import sokoban_page
  assert sokoban_page._marks(30_000_199) == [5e6, 10e6, 15e6, 20e6, 25e6]
  assert sokoban_page._marks(23_940_000) == [5e6, 10e6, 15e6, 20e6]
  assert sokoban_page._marks(5_000_300) == []   # the final window is the 5M one
  from experiments.analysis import aggregate
  run_dir = str(tmp_path / 'run')
  _fake_run(run_dir, [-1.0] * 1100, [0] * 600 + [1] * 500)   # episode i ends at (i + 1) * 100
  solved = aggregate.series(run_dir, 'solved')
  # By step 80,000: 800 episodes, the last 200 solved; by 100,000: 1,000 of them, 400 solved.
  assert sokoban_page._value_at(solved, 80_000, 1000) == pytest.approx(0.25)
  assert sokoban_page._value_at(solved, 100_000, 1000) == pytest.approx(0.4)
  assert sokoban_page._value_at(solved, 100_050, 100) == pytest.approx(1.0)
  assert math.isnan(sokoban_page._value_at(solved, 110_001, 1000))  # past the log


def test_seed_0_of_every_arm_is_watched_on_the_same_boxoban_level(tmp_path):
  steps = registry.sokoban_steps('tiny', 2)
  watched = {st.name: st.args for st in steps if st.name.endswith('eval_boxoban')}
  for name, args in watched.items():
    assert ('--gif' in args) == ('-s0-' in name), name
    if '--gif' in args:
      assert args[args.index('--gif_levels') + 1] == '0'
  out = str(tmp_path)
  assert registry.get('sokoban').extra_markdown({'scale': 'tiny', 'seeds': 2}, out).find(
      'watched') < 0   # no GIF yet, no section
  gif = os.path.join(out, 'runs', 'impala_rae-s0', 'policy_boxoban.gif')
  os.makedirs(os.path.dirname(gif))
  open(gif, 'wb').close()
  md = registry.get('sokoban').extra_markdown({'scale': 'tiny', 'seeds': 2}, out)
  section = md[md.index('## The final policies, watched'):]
  assert '![IMPALA+RAE on Boxoban level 0](runs/impala_rae-s0/policy_boxoban.gif)' in section
  assert 'IMPALA:' not in section   # only the arms whose GIF exists


@pytest.mark.slow
def test_sokoban_smallest_configuration_runs_end_to_end(tmp_path):
  r = subprocess.run([sys.executable, '-m', 'experiments', 'sokoban', '--scale', 'tiny',
                      '--seeds', '1', '--out', str(tmp_path)], cwd=ROOT, capture_output=True,
                     text=True, timeout=1500)
  assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
  table = json.loads((tmp_path / 'table.json').read_text())
  assert {row['group'] for row in table['rows']} == {
      'IMPALA', 'IMPALA+RAE', "IMPALA+RAE (paper's psi)", 'IMPALA+RAE (lambda 1)'}
  assert all(all(row['completed']) for row in table['rows'])
  # Rerunning skips everything.
  again = subprocess.run([sys.executable, '-m', 'experiments', 'sokoban', '--scale', 'tiny',
                          '--seeds', '1', '--out', str(tmp_path)], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
  assert again.returncode == 0 and '25/25 steps done' in again.stdout


def test_cliff_lays_out_the_papers_grid(tmp_path):
  steps = registry.cliff_steps('small', 1)
  assert len(steps) == 5 * (2 + 1 + 5)
  rac = [s for s in steps if s.group == 'RAC p=0.2 beta=0.3']
  assert len(rac) == 1 and '--estimator_checkpoint' in rac[0].args
  table = {'rows': [{'group': 'random p=0.2', 'episode_return': {'mean': 18.04}},
                    {'group': 'RAC p=0.2 beta=0.3', 'episode_return': {'mean': 91.26}}]}
  md = registry.cliff_grid_markdown(table)
  row = [l for l in md.splitlines() if l.startswith('| 0.2 |')][0]
  assert row.startswith('| 0.2 | 18.0 (18.6) | – (18.7) | – (26.7) | – (29.2) | 91.3 (85.8) |'), row


def test_cliff_seeds_are_estimator_trainings():
  steps = registry.cliff_steps('small', 3)
  est = [s for s in steps if s.module == 'estimators.train' and 'p0.2' in s.name]
  assert [s.name for s in est] == ['estimators_p0.2', 'estimators_p0.2-e1', 'estimators_p0.2-e2']
  assert [s.args[s.args.index('--seed') + 1] for s in est] == ['0', '1', '2']
  assert [s.done for s in est] == ['estimators/p0.2.ckpt', 'estimators/p0.2-e1.ckpt',
                                   'estimators/p0.2-e2.ckpt']
  rac = {s.seed: s for s in steps if s.group == 'RAC p=0.2 beta=0.3'}
  for seed, ckpt in ((0, 'p0.2.ckpt'), (2, 'p0.2-e2.ckpt')):
    flags = rac[seed].args
    assert flags[flags.index('--estimator_checkpoint') + 1] == '{out}/estimators/' + ckpt
  table = {'rows': [{'group': 'RAC p=0.2 beta=0.3',
                     'episode_return': {'mean': 100.0, 'per_seed': [80.0, 100.0, 120.0]}}]}
  md = registry.cliff_grid_markdown(table)
  row = [l for l in md.splitlines() if l.startswith('| 0.2 |')][0]
  assert '| 100.0 [80.0-120.0] (85.8) |' in row, row
  assert 'estimator training k' in md


@pytest.mark.slow
def test_cliff_smallest_configuration_runs_end_to_end(tmp_path):
  r = subprocess.run([sys.executable, '-m', 'experiments', 'cliff', '--scale', 'tiny',
                      '--seeds', '1', '--out', str(tmp_path)], cwd=ROOT, capture_output=True,
                     text=True, timeout=1500)
  assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
  table = json.loads((tmp_path / 'table.json').read_text())
  assert len(table['rows']) == 2 * 3  # 2 winds x (random + 2 thresholds)
  assert '## Tables 1-2' in (tmp_path / 'table.md').read_text()


@pytest.mark.parametrize('value, digits, text', [(-0.0004, 3, '0.000'), (-0.0006, 3, '-0.001'),
                                                 (1234567.4, 0, '1,234,567'), (0.25, 1, '0.2'),
                                                 (float('nan'), 2, '–'), (None, 2, '–')])
def test_page_numbers_round_without_a_negative_zero(value, digits, text):
  from experiments.pages import fmt
  assert fmt(value, digits) == text


@pytest.mark.slow
def test_a_run_lost_with_its_machine_goes_on_from_its_committed_export(tmp_path):
  # A real run to a first budget, exported with its checkpoint into RUN/csv (what is committed),
  # everything else of the run deleted (a new machine), then the same command with a larger
  # budget: the runner restores the run from its export and the learner goes on from there.
  out, run = str(tmp_path), str(tmp_path / 'runs' / 'impala-s0')
  first = subprocess.run([sys.executable, '-m', 'experiments', 'sokoban', '--scale', 'tiny',
                          '--seeds', '1', '--out', out, '--only', 'impala-s0', '--max_steps',
                          '3000'], cwd=ROOT, capture_output=True, text=True, timeout=600)
  assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
  export = subprocess.run([sys.executable, '-m', 'launch.export_logs', run, '--checkpoint',
                           '--actor_every', '2'], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
  assert export.returncode == 0, export.stderr
  records = run_state.RunRecords(run)
  reached = records.saved_actor_steps()
  assert reached >= 3000
  for name in os.listdir(run):
    if name != 'csv':
      path = os.path.join(run, name)
      shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
  second = subprocess.run([sys.executable, '-m', 'experiments', 'sokoban', '--scale', 'tiny',
                           '--seeds', '1', '--out', out, '--only', 'impala-s0', '--max_steps',
                           '6000'], cwd=ROOT, capture_output=True, text=True, timeout=600)
  assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
  assert f'restored {run} from its export {run}/csv' in second.stdout
  segments = records.segments()
  assert segments[-1]['resumed_from_steps'] == reached
  assert segments[-1]['status'] == 'completed' and records.saved_actor_steps() >= 6000
  # The learner went on from the exported checkpoint, not from scratch.
  with open(os.path.join(run, 'logs', 'learner', 'logs.csv')) as f:
    steps = [int(float(row['learner_steps'])) for row in csv.DictReader(f)]
  kept = int(os.path.basename(glob.glob(f'{run}/csv/checkpoints/learner/state-*.npz')[0])[6:-4])
  assert kept > 0 and max(steps) > kept and steps == sorted(steps)


def test_the_authors_scale_draws_our_recipes_committed_runs_beside_its_own(tmp_path, monkeypatch):
  from experiments import sokoban
  committed = sokoban.sokoban_reference_runs('authors')
  assert {label: len(dirs) for label, dirs in committed.items()} == {
      'IMPALA (our recipe, 30M)': 3, 'IMPALA+RAE (our recipe, 30M)': 3}
  assert sokoban.sokoban_reference_runs('tiny') == {}
  # Only exports that hold logs are drawn: here one run of the reference scale.
  ref = str(tmp_path / 'ref')
  monkeypatch.setitem(sokoban.SOKOBAN_REFERENCE_RUNS, 'tiny', ('long', 'earlier', ref))
  _fake_run(os.path.join(ref, 'runs', 'impala-s1', 'csv'), [-5.0] * 20, [0] * 20)
  os.makedirs(os.path.join(ref, 'runs', 'impala-s0', 'csv'))   # an export without logs
  assert sokoban.sokoban_reference_runs('tiny') == {
      'IMPALA (earlier)': [os.path.join(ref, 'runs', 'impala-s1', 'csv')]}
  out = str(tmp_path / 'out')
  for step in registry.sokoban_steps('tiny', 1):
    if step.is_training:
      _fake_run(os.path.join(out, step.run_dir), [-1.0] * 20, [0] * 20)
  table = runner.report(registry.get('sokoban'), 'tiny', 1, out)
  assert 'IMPALA (earlier)' not in {r['group'] for r in table['rows']}   # curves only
  md = open(os.path.join(out, 'table.md')).read()
  assert ('Also on the curves, for reference (not in the table): IMPALA (earlier) (1 run)'
          in md)


def test_a_checkout_with_only_the_exports_redraws_the_page_from_them(tmp_path):
  # A fresh clone has each run's committed export (RUN/csv) and its evaluations (RUN), not the
  # run: the page is drawn from those, not emptied.
  out = str(tmp_path)
  for step in registry.sokoban_steps('tiny', 1):
    if step.is_training:
      run_dir = os.path.join(out, step.run_dir)
      _fake_run(os.path.join(run_dir, 'csv'), [-2.0] * 20, [0] * 20)
      run_state.write_json(os.path.join(run_dir, 'eval_train.json'),
                           {'policies': {'greedy': {'solved_fraction': 0.25}}})
  table = runner.report(registry.get('sokoban'), 'tiny', 1, out)
  rows = {r['group']: r for r in table['rows']}
  assert rows['IMPALA']['episode_return']['mean'] == pytest.approx(-2.0)
  assert rows['IMPALA']['env_steps'] == [2_000]
  assert rows['IMPALA']['solved 1k greedy']['per_seed'] == [0.25]
  assert not os.path.exists(os.path.join(out, 'runs', 'impala-s0', 'logs'))   # nothing restored


def test_page_sets_the_groups_side_by_side_at_equal_learner_updates(tmp_path):
  from experiments import sokoban_page
  out = str(tmp_path)
  # IMPALA: one update per 10 env steps, 2,500 updates; IMPALA+RAE: one per 20, 1,500 updates.
  cost = {'IMPALA': 10, 'IMPALA+RAE': 20}
  updates = {'IMPALA': 2500, 'IMPALA+RAE': 1500}
  for step in registry.sokoban_steps('tiny', 1):
    if not step.is_training or step.group not in cost:
      continue
    run_dir = os.path.join(out, step.run_dir)
    episodes = updates[step.group] * cost[step.group] // 10   # 10-step episodes
    _fake_run(run_dir, [-1.0] * episodes, [0] * episodes)
    with open(os.path.join(run_dir, 'logs', 'actor_0', 'logs.csv'), 'w') as f:
      f.write('actor_steps,episode_return,solved,boxes_on_target,episode_length,unix_time\n')
      for i in range(episodes):   # boxes on target: 1 up to 10,000 env steps, then 3
        f.write(f'{(i + 1) * 10},-1,0,{1 if (i + 1) * 10 <= 10_000 else 3},10,{1000 + i}\n')
    os.makedirs(os.path.join(run_dir, 'logs', 'learner'))
    with open(os.path.join(run_dir, 'logs', 'learner', 'logs.csv'), 'w') as f:
      f.write('actor_steps,learner_steps,policy_entropy\n')
      for u in range(1, updates[step.group] + 1):
        f.write(f'{u * cost[step.group]},{u},{1.0 if u <= 1000 else 0.5}\n')
  md = sokoban_page.sokoban_updates_markdown({'scale': 'tiny', 'seeds': 1}, out)
  rows = md.splitlines()
  assert '| group | measure | 1,000 updates | 2,000 updates |' in rows
  assert '| IMPALA | env steps | 10,000 | 20,000 |' in rows
  assert '| IMPALA | boxes on target | 1.00 | 3.00 |' in rows
  assert '| IMPALA | policy entropy | 1.00 | 0.50 |' in rows
  assert '| IMPALA+RAE | env steps | 20,000 | – |' in rows   # 1,500 updates: not 2,000
  # Its last 1,000 episodes by 20,000 env steps: 1,000 of them after 10,000, boxes 3.
  assert '| IMPALA+RAE | boxes on target | 3.00 | – |' in rows

"""The Cartpole+, reward-free Cartpole and Turf experiments: their steps per scale, the page
sections built from hand-made runs, and (slow) each one's smallest configuration end to end."""
import json
import os
import subprocess
import sys

import pytest

from experiments import cartpole_plus as cp
from experiments import cartpole_reward_free as cprf
from experiments import registry, runner, turf, turf_page
from experiments.spec import train_step
from launch.runtime import run_state

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))
NEW = ('cartpole_plus', 'cartpole_reward_free', 'turf')


@pytest.mark.parametrize('name', NEW)
@pytest.mark.parametrize('scale', ('tiny', 'small', 'paper'))
def test_steps_are_named_once_and_every_run_has_a_group(name, scale):
  steps = registry.get(name).steps(scale, 1)
  names = [s.name for s in steps]
  assert len(names) == len(set(names))
  runs = [s for s in steps if s.is_training]
  assert runs and all(s.group and s.seed is not None and s.done == f'{s.run_dir}/done'
                      for s in runs)


def test_cartpole_plus_seeds_and_dqn_runs_are_training_steps(tmp_path):
  small = cp.cartpole_plus_steps('small', 2)
  groups = {}
  for s in small:
    if s.is_training:
      groups.setdefault(s.group, []).append(s)
  # Fig. 6a's 10 seeds of random + RAC at small scale; --seeds for the DQN baselines.
  assert {g: len(v) for g, v in groups.items()} == {'random': 10, 'random+RAC': 10, 'DQN': 2,
                                                     'M-DQN': 2}
  mdqn = groups['M-DQN'][0]
  assert mdqn.module == 'launch.train_dqn' and '--algorithm' in mdqn.args
  argv = runner.step_argv(mdqn, str(tmp_path), max_steps_override=777)
  assert argv[argv.index('--max_steps') + 1] == '777' and argv[1] == 'launch.train_dqn'
  rac = groups['random+RAC'][0].args
  assert rac[rac.index('--episode_steps') + 1] == '50000' and '--estimator_checkpoint' in rac
  assert len([s for s in cp.cartpole_plus_steps('tiny', 1) if s.is_training]) == 4
  with pytest.raises(ValueError, match='not a training module'):
    train_step('x', 'g', 0, 10, 1, module='launch.collect')


def test_reward_free_and_turf_seed_minimums():
  rf = [s for s in cprf.cartpole_reward_free_steps('small', 1) if s.is_training]
  assert sorted({s.group for s in rf}) == ['IMPALA', 'IMPALA+RAE'] and len(rf) == 10
  assert all('--reward_free=true' in s.args for s in rf)
  budget = {s.group: s.args[s.args.index('--max_steps') + 1] for s in rf}
  assert budget == {'IMPALA+RAE': '600000', 'IMPALA': '150000'}
  t = [s for s in turf.turf_steps('small', 1) if s.is_training]
  counts = {}
  for s in t:
    counts[s.group] = counts.get(s.group, 0) + 1
  rac = {'IMPALA+RAC beta=0.2': 3, 'IMPALA+RAC beta=0': 1, 'IMPALA+RAC beta=0.1': 1,
         'IMPALA+RAC beta=0.3': 1, 'IMPALA+RAC beta=0.4': 1, 'IMPALA+RAC beta=0.5': 1}
  masked = {f'{group}, learner mask': n for group, n in rac.items()}
  assert counts == {'IMPALA': 3, 'IMPALA+RAE': 3, **rac, **masked}
  rae = [s for s in t if s.group == 'IMPALA+RAE'][0].args
  assert '--estimator_checkpoint' not in rae  # RAE learns psi online (Sec. 5.2)


def test_turf_paper_estimators_scale_runs_rac_only_with_the_papers_recipe():
  steps = turf.turf_steps('paper_estimators', 1)
  by_name = {s.name: s for s in steps}
  collect = by_name['collect_random'].args
  assert collect[collect.index('--episodes') + 1] == '100000'
  train = by_name['train_estimators'].args
  assert train[train.index('--num_pairs') + 1] == '3000000'
  assert train[train.index('--phi_transitions') + 1] == '100000'
  evaluate = by_name['eval_estimators'].args
  assert evaluate[evaluate.index('--phi_betas') + 1] == '0.2,0.3,0.4'
  counts = {}
  for s in steps:
    if s.is_training:
      counts[s.group] = counts.get(s.group, 0) + 1
      assert s.max_steps == 500_000 and '--estimator_checkpoint' in s.args
  rac = {'IMPALA+RAC beta=0.2': 3, 'IMPALA+RAC beta=0.1': 1, 'IMPALA+RAC beta=0.3': 1,
         'IMPALA+RAC beta=0.4': 1, 'IMPALA+RAC beta=0.5': 1}
  assert counts == {**rac, **{f'{group}, learner mask': n for group, n in rac.items()}}
  with pytest.raises(ValueError, match="experiment 'cliff' has no scale 'paper_estimators'"):
    registry.get('cliff').steps('paper_estimators', 1)


def test_turf_paper_phi_coverage_scale_retrains_phi_on_a_mixture_with_the_base_psi():
  steps = turf.turf_steps('paper_phi_coverage', 1)
  by_name = {s.name: s for s in steps}
  assert 'collect_random' not in by_name and 'train_estimators' not in by_name
  collect = by_name['collect_stone'].argv('/x/paper_phi_coverage')
  assert 'start=stone' in collect and 'max_steps=20' in collect
  assert collect[collect.index('--out') + 1] == '/x/paper_phi_coverage/data/stone20'
  train = by_name['train_phi'].argv('/x/paper_phi_coverage')
  datasets = [train[i + 1] for i, a in enumerate(train) if a == '--dataset']
  assert datasets == ['/x/paper_phi_coverage/../paper_estimators/data/random',
                      '/x/paper_phi_coverage/data/stone20']
  assert train[train.index('--dataset_weights') + 1] == '0.5,0.5'
  assert train[train.index('--psi_checkpoint') + 1] == \
      '/x/paper_phi_coverage/../paper_estimators/estimators.ckpt'
  assert train[train.index('--phi_transitions') + 1] == '500000' and '--phi' in train
  evaluate = by_name['eval_estimators'].argv('/x/paper_phi_coverage')
  assert evaluate[evaluate.index('--labels_cache') + 1] == \
      '/x/paper_phi_coverage/../paper_estimators/oracle_labels'
  groups = [s.group for s in steps if s.is_training]
  assert groups == [turf.rac_group(0.2, m) for _ in range(3) for m in (0, 1)] + [
      turf.rac_group(b, m) for b in (0.3, 0.4) for m in (0, 1)]
  assert all('/x/paper_phi_coverage/estimators.ckpt' in s.argv('/x/paper_phi_coverage')
             for s in steps if s.is_training)


def test_turf_paper_as_released_scale_trains_as_the_release_with_the_stone_mixture():
  steps = turf.turf_steps('paper_as_released', 1)
  by_name = {s.name: s for s in steps}
  out = '/x/paper_as_released'
  collect = by_name['collect_random'].argv(out)
  assert collect[collect.index('--episodes') + 1] == '4300'   # ~500k transitions
  psi = by_name['train_psi'].argv(out)
  assert '--phi' not in psi and psi[psi.index('--num_pairs') + 1] == '3000000'
  assert '--embedding_relu' in psi and '--exclude_terminal' in psi
  assert [psi[i + 1] for i, a in enumerate(psi) if a == '--dataset'] == [
      f'{out}/data/random', f'{out}/data/stone20']
  phi = by_name['train_phi'].argv(out)
  assert phi[phi.index('--psi_checkpoint') + 1] == f'{out}/psi.ckpt'
  assert phi[phi.index('--phi_transitions') + 1] == str(100_000 * 128)
  assert phi[phi.index('--phi_draw') + 1] == '1024' and '--exclude_terminal' in phi
  assert phi[phi.index('--phi_loss') + 1] == 'bce' and '--embedding_relu' in phi
  probe = by_name['rac_probe'].argv(out)
  assert probe[probe.index('--mode') + 1] == 'replace'
  runs = [s for s in steps if s.is_training]
  assert all(s.flags[s.flags.index('--shield_mode') + 1] == 'replace' for s in runs)
  # Every RAC run beside the same run with the learner's mask.
  assert [s.group for s in runs] == [turf.rac_group(0.2, m) for _ in range(3) for m in (0, 1)] + [
      turf.rac_group(b, m) for b in (0.0, 0.1, 0.3, 0.4, 0.5) for m in (0, 1)]
  assert all(('--learner_mask' in s.flags) == s.name.startswith('impala_rac_mask-') for s in runs)


def test_turf_released_small_scale_is_the_release_at_a_small_budget_with_phi_onto_the_reverse():
  steps = turf.turf_steps('released_small', 1)
  by_name = {s.name: s for s in steps}
  out = '/x/learner_mask_replace'
  psi = by_name['train_psi'].argv(out)
  assert psi[psi.index('--num_pairs') + 1] == '500000' and '--embedding_relu' in psi
  phi = by_name['train_phi'].argv(out)
  assert phi[phi.index('--phi_transitions') + 1] == '500000'   # 3,907 steps of 128
  assert phi[phi.index('--phi_target') + 1] == 'reverse' and '--phi_save_steps' not in phi
  assert phi[phi.index('--seed') + 1] == '1' and '--seed' not in psi
  assert phi[phi.index('--phi_draw') + 1] == '1024' and '--exclude_terminal' in phi
  runs = [s for s in steps if s.is_training]
  assert all(s.flags[s.flags.index('--shield_mode') + 1] == 'replace' for s in runs)
  assert [s.name for s in runs[:2]] == ['impala_rac-b0.2-s0', 'impala_rac_mask-b0.2-s0']
  assert all(s.max_steps == 500_000 for s in runs)


def test_turf_same_mix_scale_is_the_release_data_under_our_estimators_in_same_padding():
  steps = turf.turf_steps('same_mix', 1)
  by_name = {s.name: s for s in steps}
  out = '/x/same_mix'
  psi, phi = by_name['train_psi'].argv(out), by_name['train_phi'].argv(out)
  for argv in (psi, phi):
    assert argv[argv.index('--conv_padding') + 1] == 'SAME'
    assert argv[argv.index('--dataset_weights') + 1] == '0.5,0.5'
    assert '--embedding_relu' not in argv and '--exclude_terminal' not in argv
  assert psi[psi.index('--seed') + 1] == '0' and phi[phi.index('--seed') + 1] == '1'
  assert '--phi_target' not in phi and '--phi_draw' not in phi   # our phi: onto psi(x', x)
  runs = [s for s in steps if s.is_training]
  assert '--shield_mode' not in runs[0].flags   # the paper's rejection shield
  assert [s.name for s in runs[:2]] == ['impala_rac-b0.2-s0', 'impala_rac_mask-b0.2-s0']
  assert len([s for s in runs if '-b0.2-' in s.name]) == 6


def test_turf_comparison_puts_each_beta_of_the_base_beside_this_scale():
  run = lambda total, goal: {'ruined_total': total, 'goal_last': goal}  # noqa: E731
  base = {turf.rac_group(0.2): [run(9593.0, 0.99), run(9916.0, 0.95)],
          turf.rac_group(0.5): [run(0.0, 0.0)]}
  here = {turf.rac_group(0.2): [run(6991.0, 1.0)]}
  probe = lambda ruined: {'results': [{  # noqa: E731
      'beta': 0.2, 'episodes': 1024, 'by_kind': {}, 'episodes_with_ruin': ruined,
      'ruined_grass_total': 2 * ruined, 'episodes_reaching_goal': 90}]}
  md = turf_page.comparison_markdown('paper_estimators', here, base, probe(177), probe(126))
  assert '| 0.2 | 2 / 1 | 9,593, 9,916 | 6,991 | 0.99, 0.95 | 1.00 |' in md
  assert '| 0.5 |' not in md   # no run here at that beta
  assert '| 0.2 | 1,024 / 1,024 | 126 / 177 | 252 / 354 | 90 / 90 |' in md
  assert 'rac_probe' not in turf_page.comparison_markdown('paper_estimators', here, base, None, None)


def test_length_stats_count_the_cap_and_the_unfinished_steps():
  s = cp.length_stats([10, 50_000, 30, 50_000], unfinished_steps=1234, cap=50_000)
  assert s == {'episodes': 4, 'median': 25_015.0, 'mean': 25_010.0, 'max': 50_000.0,
               'capped': 2, 'unfinished_steps': 1234.0}
  empty = cp.length_stats([], 300, 50_000)
  assert empty['episodes'] == 0 and empty['capped'] == 0


def test_length_table_pools_runs_of_a_group():
  stats = {'random+RAC': [cp.length_stats([50_000, 50_000, 20], 7_000, 50_000),
                          cp.length_stats([50_000], 0, 50_000)],
           'random': [cp.length_stats([20, 24], 5, 50_000)]}
  md = cp.length_table_markdown(stats, 50_000)
  rows = [l for l in md.splitlines() if l.startswith('| random')]
  # 4 episodes, 3 at the cap; mean (100000 + 20 + 50000) / 4; median of run medians 50000.
  assert rows[0] == '| random+RAC | 2 | 4 | 50,000 | 37,505.0 | 50,000 | 3 (75%) | 7,000 |'
  assert rows[1] == '| random | 1 | 2 | 22 | 22.0 | 24 | 0 (0%) | 5 |'


def test_dqn_table_against_the_papers_scores():
  md = cp.dqn_table_markdown({'M-DQN': [
      {'max_return': 500.0, 'mean_return': 100.0, 'episodes': 10, 'capped': 0},
      {'max_return': 700.0, 'mean_return': 140.0, 'episodes': 10, 'capped': 2}]}, every=5_000)
  row = [l for l in md.splitlines() if l.startswith('| M-DQN')][0]
  # max: mean 600, t(1 df) 12.706 * std 141.42 / sqrt 2 = 1270.6
  assert row == '| M-DQN | 2 | 500, 700 | 600 ± 1,271 | 120.0 ± 254.1 | 20 | 2 | 2,801 |'
  assert 'a greedy evaluation episode every 5,000 steps' in md
  assert '| DQN |' not in md


def test_reward_free_run_record_reads_the_last_episodes():
  # 3 episodes, last_n 2: lengths 200 (cap) and 50 (the pole fell).
  r = cprf.reward_free_run_record([10, 200, 50], [1, 0, 1], [0, 0, 0], [4, 0, 2], last_n=2)
  assert r == {'last_mean': 125.0, 'ends_angle': 0.5, 'ends_position': 0.0, 'penalised': 1.0,
               'ends_cap': 0.5}
  # A run that logged neither the end reasons nor penalties (plain IMPALA of an older run).
  r = cprf.reward_free_run_record([20, 30], [], [], [])
  assert r['last_mean'] == 25.0 and r['ends_angle'] is None and r['penalised'] is None
  assert r['ends_cap'] == 0.0


def test_reward_free_seeds_table_and_verdict():
  good = cprf.reward_free_run_record([195.5], [0.0], [0.0], [0.5])
  weak = cprf.reward_free_run_record([150.0], [0.0], [1.0], [3.0])
  control = cprf.reward_free_run_record([21.0], [1.0], [0.0], [])
  md = cprf.seeds_markdown([('IMPALA+RAE', 'impala_rae-s0', good, 400_000),
                          ('IMPALA+RAE', 'impala_rae-s1', weak, None),
                          ('IMPALA', 'impala-s0', control, None)])
  assert '| IMPALA+RAE | impala_rae-s0 | 195.5 | 0% / 0% / 0% | 0.50 | 400,000 |' in md
  assert '| IMPALA+RAE | impala_rae-s1 | 150.0 | 0% / 100% / 0% | 3.00 | never |' in md
  assert '| IMPALA | impala-s0 | 21.0 | 100% / 0% / 0% | – | never |' in md
  assert 'IMPALA+RAE: 1 of 2 seeds at or above 190.' in md
  assert 'IMPALA: 0 of 1 seeds at or above 190.' in md


def test_turf_run_record_and_claim():
  rec = turf_page.run_record([0, 0, 1, 1], [0, 0, 0, 0], [100, 200, 300, 400], last_n=2)
  assert rec == {'episodes': 4, 'ruined_total': 0.0, 'episodes_with_ruin': 0, 'goal_last': 1.0,
                 'ruined_last': 0.0, 'first_goal_step': 300.0}
  dirty = turf_page.run_record([0, 1], [3, 1], [50, 90])
  records = {'IMPALA': [dirty], 'IMPALA+RAC beta=0.2': [rec, rec],
             'IMPALA+RAC beta=0.5': [turf_page.run_record([0, 0], [0, 0], [1, 2])]}
  md = turf_page.side_effects_markdown(records)
  assert '| IMPALA | 1 | 2 | 4 | 2 | 0.50 | 2.00 | 90 |' in md
  assert 'beta=0.2: 2 of 2 runs ruined no grass; 2 of 2 reached the goal in at least half' in md
  chance = turf_page.run_record([0] * 97 + [1] * 3, [0] * 100, list(range(100)))   # 3% of the last 100
  md = turf_page.side_effects_markdown({'IMPALA+RAC beta=0.2': [rec, chance]})
  assert '2 of 2 runs ruined no grass; 1 of 2 reached the goal in at least half' in md
  sweep = turf_page.sweep_markdown(records)
  assert '| 0.2 | no | 2 | 1.00 ± 0.00 | 0.0 ± 0.0 | 2 |' in sweep
  assert '| 0.5 | no | 1 | 0.00 | 0.0 | 1 |' in sweep and '| 0.1 |' not in sweep
  masked = turf_page.sweep_markdown({turf.rac_group(0.2, True): [rec]})
  assert '| 0.2 | yes | 1 | 1.00 | 0.0 | 1 |' in masked and '| 0.2 | no |' not in masked
  md = turf_page.side_effects_markdown({turf.rac_group(0.2, True): [rec, chance]})
  assert 'learner mask: 2 of 2 runs ruined no grass; 1 of 2 reached the goal' in md


def _fake_run(run_dir, rows, header, counts):
  os.makedirs(os.path.join(run_dir, 'logs', 'actor_0'))
  with open(os.path.join(run_dir, 'logs', 'actor_0', 'logs.csv'), 'w') as f:
    f.write(','.join(header) + '\n')
    for row in rows:
      f.write(','.join(str(v) for v in row) + '\n')
  run_state.write_json(os.path.join(run_dir, 'run_state.json'),
                       {'segments': [{'start': 0, 'end': 100, 'status': 'completed'}]})
  run_state.RunRecords(run_dir).save_counts({'actor_steps': counts})


def test_cartpole_plus_page_from_hand_made_runs(tmp_path):
  out = str(tmp_path)
  header = ('actor_steps', 'episode_length', 'episode_return', 'unix_time')
  for step in cp.cartpole_plus_steps('tiny', 1):
    if not step.is_training:
      continue
    run_dir = os.path.join(out, step.run_dir)
    if step.group == 'random+RAC':
      _fake_run(run_dir, [(50_000, 50_000, 50_000, 10), (50_020, 20, 20, 20)], header, 60_000)
    else:
      _fake_run(run_dir, [(20, 20, 20, 1), (50, 30, 30, 2)], header, 55)
    if step.group in ('DQN', 'M-DQN'):
      os.makedirs(os.path.join(run_dir, 'logs', 'evaluator'))
      with open(os.path.join(run_dir, 'logs', 'evaluator', 'logs.csv'), 'w') as f:
        # tiny evaluates every 1,000 steps; the row at 1,500 is off that grid and not read.
        f.write('actor_steps,eval_length,eval_return,unix_time\n'
                '1000,9,9,1\n1500,50000,50000,2\n2000,321,321,3\n3000,-32,-32,4\n')
  table = runner.report(registry.get('cartpole_plus'), 'tiny', 1, out)
  assert {r['group'] for r in table['rows']} == {'random', 'random+RAC', 'DQN', 'M-DQN'}
  md = (tmp_path / 'table.md').read_text()
  assert '| random+RAC | 1 | 2 | 25,010 | 25,010.0 | 50,000 | 1 (50%) | 9,980 |' in md
  # (9 + 321 - 32) / 3 = 99.3
  assert '| DQN | 1 | 321 | 321 | 99.3 | 3 | 0 | 1,152 |' in md
  assert (tmp_path / 'episode_lengths.png').read_bytes()[:4] == b'\x89PNG'


def test_turf_page_from_hand_made_runs(tmp_path):
  out = str(tmp_path)
  header = ('actor_steps', 'episode_return', 'ruined_grass', 'episode_length', 'unix_time')
  for step in turf.turf_steps('tiny', 1):
    if step.is_training:
      ruined = 0 if 'RAC' in step.group else 5
      _fake_run(os.path.join(out, step.run_dir),
                [(120 * (i + 1), int(i >= 2), ruined, 120, i) for i in range(4)], header, 480)
  table = runner.report(registry.get('turf'), 'tiny', 1, out)
  rac = {'IMPALA+RAC beta=0.2', 'IMPALA+RAC beta=0'}
  assert {r['group'] for r in table['rows']} == {'IMPALA', 'IMPALA+RAE', *rac,
                                                 *(f'{g}, learner mask' for g in rac)}
  md = (tmp_path / 'table.md').read_text()
  assert 'beta=0.2: 1 of 1 runs ruined no grass; 1 of 1 reached the goal' in md
  assert 'beta=0.2, learner mask: 1 of 1 runs ruined no grass; 1 of 1 reached the goal' in md
  assert '| IMPALA | 1 | 4 | 20 | 4 | 0.50 | 5.00 | 360 |' in md


def _run_tiny(name, tmp_path):
  r = subprocess.run([sys.executable, '-m', 'experiments', name, '--scale', 'tiny',
                      '--seeds', '1', '--out', str(tmp_path)], cwd=ROOT, capture_output=True,
                     text=True, timeout=3600)
  assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
  table = json.loads((tmp_path / 'table.json').read_text())
  assert all(all(row['completed']) for row in table['rows'])
  return table, (tmp_path / 'table.md').read_text()


@pytest.mark.slow
def test_cartpole_plus_smallest_configuration_runs_end_to_end(tmp_path):
  table, md = _run_tiny('cartpole_plus', tmp_path)
  assert {row['group'] for row in table['rows']} == {'random', 'random+RAC', 'DQN', 'M-DQN'}
  dqn_section = md.split('## DQN and M-DQN')[1].split('\n## ')[0]
  dqn_row = [l for l in dqn_section.splitlines() if l.startswith('| DQN | 1 |')]
  assert len(dqn_row) == 1 and '| – |' not in dqn_row[0]   # evaluations were read
  assert '## Episode lengths' in md and '## DQN and M-DQN' in md and '## Fig. 6b/6c' in md
  assert (tmp_path / 'estimator_eval' / 'cartpole_phi_action0.png').exists()


@pytest.mark.slow
def test_cartpole_reward_free_smallest_configuration_runs_end_to_end(tmp_path):
  table, md = _run_tiny('cartpole_reward_free', tmp_path)
  assert {row['group'] for row in table['rows']} == {'IMPALA', 'IMPALA+RAE'}
  assert '## Fig. 3b/3c' in md and (tmp_path / 'psi_eval' / 'cartpole_psi.png').exists()
  # What ended the episodes is read from the runs' own logs (not a '–' for want of a column).
  rae_row = [l for l in md.splitlines() if l.startswith('| IMPALA+RAE | impala_rae-s0')][0]
  assert rae_row.count('%') == 3


@pytest.mark.slow
def test_turf_smallest_configuration_runs_end_to_end(tmp_path):
  table, md = _run_tiny('turf', tmp_path)
  assert [row['group'] for row in table['rows']] == [
      'IMPALA', 'IMPALA+RAE', 'IMPALA+RAC beta=0.2', 'IMPALA+RAC beta=0.2, learner mask',
      'IMPALA+RAC beta=0', 'IMPALA+RAC beta=0, learner mask']
  assert '## RAC threshold sweep' in md and '## Offline psi / phi' in md

"""experiments.rac_probe (a random policy under RAC's shield in one process, acted by the
real actor) on a real, untrained cliff checkpoint: whole episodes per environment, no shield at
beta 0, only fallbacks at beta 1; its command line; and experiments.studies.cliff_spread's table
and command line on untrained checkpoints."""
import json
import os

import numpy as np

from estimators import checkpoint
from experiments import cliff, rac_probe
from experiments.studies import cliff_spread


def test_probe_counts_whole_episodes_and_the_shield(untrained_estimator_checkpoint):
  ckpt = checkpoint.load(untrained_estimator_checkpoint('cliff', (48,), np.float32))
  free = rac_probe.probe(ckpt, 0.0, episodes=10, num_envs=4, env_name='cliff',
                         env_options={'wind': 0.0})
  # ceil(10 / 4) = 3 whole episodes in each of the 4 environments.
  assert free['episodes'] == 12
  assert free['rejected_fraction'] == 0.0 and free['fallback_fraction'] == 0.0
  # The cliff pays 1 per step alive and 0 on the fall: return = length - (share of falls).
  assert free['mean_length'] - 1 <= free['mean_return'] <= free['mean_length']
  # phi < 1 everywhere: every step is the fallback, always argmax phi of the state.
  forced = rac_probe.probe(ckpt, 1.0, episodes=4, num_envs=4, env_name='cliff',
                           env_options={'wind': 0.0})
  assert forced['fallback_fraction'] == 1.0
  # Without wind the fallback walk from the start is deterministic: 4 equal episodes.
  assert forced['return_se'] == 0.0 and 'by_kind' not in forced


def test_probe_sorts_turf_steps_by_kind(untrained_estimator_checkpoint):
  ckpt = checkpoint.load(untrained_estimator_checkpoint('turf', (10, 10, 3), np.uint8))
  r = rac_probe.probe(ckpt, 0.0, episodes=2, num_envs=2)
  assert r['episodes'] == 2 and sum(k['taken'] for k in r['by_kind'].values()) == r['steps']
  # Unshielded random walks of 120 steps from the start ruin grass.
  assert r['episodes_with_ruin'] == 2 and r['by_kind']['enter_fresh_grass']['taken'] > 0
  cell = r['fresh_grass_entered_from'][0]
  assert len(cell['phi_clean_map']) == len(cell['target_clean_map']) == 4
  assert all(0 <= v <= 1 for v in cell['target_clean_map'])
  md = rac_probe.markdown([r], 'turf.ckpt')
  assert '| 0 | 2 | 2 |' in md and 'where fresh grass was entered' in md
  assert f"{cell['phi_clean_map'][0]:.2f} ({cell['target_clean_map'][0]:.2f})" in md


def test_spread_table_gives_mean_range_and_the_check():
  cells = [{'wind': 0.2, 'beta': 0.3, 'mean': 100.0, 'per_training': [90.0, 100.0, 110.0],
            'page_launch_train': 124.9}]
  md = cliff_spread.spread_markdown(cells, [0.2], [0.3], 512)
  assert '| 0.2 | 100.0 [90.0-110.0] (85.8) |' in md
  assert '| 0.2 | 90.0 / 124.9 |' in md


def test_probe_command_writes_json_and_markdown(untrained_estimator_checkpoint, tmp_path):
  path = untrained_estimator_checkpoint('cliff', (48,), np.float32)
  out = str(tmp_path / 'probe' / 'probe.json')
  rac_probe.main(['--env', 'cliff', '--env_option', 'wind=0.1', '--checkpoint', path,
                  '--betas', '0,1', '--episodes', '2', '--num_envs', '2', '--out', out])
  with open(out) as f:
    results = json.load(f)['results']
  assert [r['beta'] for r in results] == [0.0, 1.0] and results[1]['fallback_fraction'] == 1.0
  assert '| 1 | 2 |' in open(str(tmp_path / 'probe' / 'probe.md')).read()


def test_spread_command_over_two_trainings(untrained_estimator_checkpoint, tmp_path):
  cliff_dir = tmp_path / 'cliff'
  for k in range(2):
    path = cliff_dir / cliff.estimator_name('p0.2', k)
    path.parent.mkdir(parents=True, exist_ok=True)
    os.replace(untrained_estimator_checkpoint('cliff', (48,), np.float32), path)
  out = str(tmp_path / 'spread.json')
  cliff_spread.main(['--cliff_dir', str(cliff_dir), '--estimator_seeds', '2', '--winds', '0.2',
                     '--betas', '0,1', '--episodes', '2', '--num_envs', '2', '--out', out])
  with open(out) as f:
    cells = json.load(f)['cells']
  assert [(c['wind'], c['beta'], len(c['per_training'])) for c in cells] == [
      (0.2, 0.0, 2), (0.2, 1.0, 2)]
  assert '| 0.2 |' in open(str(tmp_path / 'spread.md')).read()

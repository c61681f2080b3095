"""The estimator steps of Turf's scales that train on more than the random episodes
(`experiments.turf`'s docstring): `paper_phi_coverage` (phi retrained on a mixture with
start=stone episodes, the base scale's psi) and `paper_as_released`.

`paper_as_released` is the authors' released code's recipe (`rac_turf.py`,
`offline_reversibility.py`): 500k random transitions (the release's default, 4,300 episodes);
psi with a ReLU after its 64-d embedding (`--embedding_relu`) and no episode's final
observation in its pairs (`--exclude_terminal`); phi for 100k steps, each drawing 1,024
transitions and keeping up to 128 non-terminal ones (`--phi_draw 1024`), BCE onto
1 - psi(x, x') (`--phi_target one_minus_forward`: the release regresses its irreversibility onto
psi(x, x')), also written after 3,907 and 25,000 steps (`--phi_save_steps`); its state is saved
every 2,500 steps (`--phi_resume_every`), so that rerunning the scale continues the hours of phi
training where a stopped session left them. Both psi and phi also
see 20,000 random episodes of 20 steps started on a random stone cell, half of their draws, so
that they see the goal's corner with the grass fresh (random walks from the start never do).

`released_small` is the same recipe at a small budget, psi on 500k pairs and phi for 3,907 steps,
with phi onto psi(x', x) (`--phi_target reverse`), phi from seed 1 (`--seed`): seed 0's phi lost
all 64 units of its hidden ReLU layer (none active on any observation of 30 random episodes) and
came out one constant per action (0.40-0.47 everywhere, as the authors' own phi), a shield that
refuses nothing at beta 0.2.

`same_mix` keeps the data (the random episodes and the start=stone ones, half and half) and
drops the rest of the release: our psi and phi with SAME padding in the convolutions
(`--conv_padding SAME`: a border cell is seen as often as an inner one; with VALID padding psi
scored the grass move beside the goal, (1, 8) -> (1, 9), reversible), psi from seed 0 on 500k
pairs, phi onto psi(x', x) for 100k transitions from seed 1, and RAC behind the paper's rejection
shield (results/turf/leak/README.md: the random episodes alone make the fixed start look
irreversible, and the shield then never lets the agent leave it).
"""
import os
from typing import List

from experiments.spec import Step


def phi_mix_steps(s: dict) -> List[Step]:
  """Scale paper_phi_coverage: start=stone episodes, and phi on them and the base scale's
  random episodes, with the base scale's psi."""
  mix = s['phi_mix']
  base = os.path.join('{out}', '..', mix['base'])
  stone = f'data/stone{mix["max_steps"]}'
  return [
      _collect_stone(mix['max_steps'], mix['episodes']),
      Step('train_phi', 'estimators.train',
           ('--dataset', f'{base}/data/random', '--dataset', f'{{out}}/{stone}',
            '--dataset_weights', f'{1 - mix["share"]:g},{mix["share"]:g}', '--psi_checkpoint',
            f'{base}/estimators.ckpt', '--phi', '--phi_transitions', str(s['phi_transitions']),
            '--network_preset', 'turf', '--out', '{out}/estimators.ckpt', '--noprogress'),
           done='estimators.ckpt', est_seconds=600),
  ]


def _collect_stone(max_steps: int, episodes: int) -> Step:
  """Random episodes of `max_steps` started on a random stone cell, into data/stone<max_steps>."""
  stone = f'data/stone{max_steps}'
  return Step('collect_stone', 'launch.collect',
              ('--env', 'turf', '--env_option', 'start=stone', '--env_option',
               f'max_steps={max_steps}', '--episodes', str(episodes), '--out', f'{{out}}/{stone}',
               '--nostore_states', '--resume', '--noprogress', '--seed', '1'),
              done=f'{stone}/noturningback.json', est_seconds=episodes * 0.01)


def released_steps(s: dict) -> List[Step]:
  """Scales paper_as_released, released_small and same_mix: the release's random data and
  start=stone episodes; psi on both, then phi on both with that psi (the authors' options,
  `estimators.train --help`, unless the scale drops them; phi's target and the budgets are the
  scale's)."""
  rel = s['released']
  stone = f'data/stone{rel["stone_steps"]}'
  data = ('--dataset', '{out}/data/random', '--dataset', f'{{out}}/{stone}', '--dataset_weights',
          f'{1 - rel["share"]:g},{rel["share"]:g}', '--network_preset', 'turf') + (
              ('--conv_padding', rel['conv_padding']) if 'conv_padding' in rel else ())
  authors = (('--embedding_relu', '--exclude_terminal') if rel.get('authors_options', True)
             else ())
  phi_options = () if 'phi_draw' not in rel else (
      '--phi_draw', str(rel['phi_draw']), '--phi_loss', rel['phi_loss'], '--phi_target',
      rel['phi_target'])
  return [
      Step('collect_random', 'launch.collect',
           ('--env', 'turf', '--episodes', str(s['episodes']), '--out', '{out}/data/random',
            '--nostore_states', '--resume', '--noprogress'),
           done='data/random/noturningback.json', est_seconds=s['episodes'] * 0.03),
      _collect_stone(rel['stone_steps'], rel['stone_episodes']),
      Step('train_psi', 'estimators.train',
           data + ('--num_pairs', str(s['pairs'])) + authors
           + (('--seed', str(rel['psi_seed'])) if 'psi_seed' in rel else ())
           + ('--out', '{out}/psi.ckpt', '--noprogress'),
           done='psi.ckpt', est_seconds=s['pairs'] / 800),
      Step('train_phi', 'estimators.train',
           data + authors + ('--psi_checkpoint', '{out}/psi.ckpt', '--phi', '--phi_transitions',
                             str(s['phi_transitions'])) + phi_options
           + (('--phi_save_steps', ','.join(map(str, rel['phi_save_steps'])))
              if rel.get('phi_save_steps') else ())
           + (('--seed', str(rel['phi_seed'])) if 'phi_seed' in rel else ())
           + (('--phi_resume_every', str(rel['phi_resume_every']))
              if 'phi_resume_every' in rel else ())
           + ('--out', '{out}/estimators.ckpt', '--noprogress'),
           done='estimators.ckpt', est_seconds=s['phi_transitions'] / 1_500),
  ]

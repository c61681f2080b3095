"""Turf (Sec. 5.2 / 5.4, Fig. 4, App. C.2, C.5-C.7, Fig. 7): IMPALA, IMPALA + RAE with psi learned
online, and IMPALA + RAC with psi/phi trained offline on random trajectories, with RAC's
threshold sweep. Step builders (the page: `experiments.turf_page`); registered in `experiments.registry.EXPERIMENTS`.

`--seeds` is the number of seeds of IMPALA, IMPALA + RAE and IMPALA + RAC at beta = 0.2 (at least
3 at the small and paper scales); the other thresholds of the sweep get
`sweep_seeds` (at most `--seeds`).

Scale `paper_estimators`: psi/phi with the paper's offline recipe (100k random
episodes, 3M pairs, phi on 100k transitions) and the small scale's RAC runs (500k steps; beta =
0.2 over `--seeds` >= 3, the sweep 0.1-0.5 one seed each); no IMPALA or IMPALA + RAE runs (they
use no offline estimator: the small scale's page has them). Output in its own directory, e.g.
`--out results/turf/paper_estimators`.

Scale `paper_as_released`: the authors' released recipe with psi and phi also on start=stone
episodes (`experiments.turf_estimators`), the `replace` shield, RAC at beta 0.2 over
`--seeds` >= 3 and the sweep 0-0.5.

Scale `released_small`: `paper_as_released` at a small budget (psi 500k pairs, phi 3,907 steps)
with phi regressed onto psi(x', x), the case where RAC behind the `replace` shield does not learn
the goal; each RAC run beside the same run with the learner's mask (`--learner_mask`).

Scale `same_mix`: the data of `released_small` (random and start=stone episodes) with our psi
and phi in SAME padding and the paper's rejection shield; RAC at beta 0.2 over `--seeds` >= 3,
each run beside the same with `--learner_mask`, and the sweep 0-0.5 (one seed each).

Scale `paper_phi_coverage` (after `paper_estimators`): that scale's psi kept, phi
retrained (500k transitions) on its 100k random episodes mixed half and half
(`estimators.train --dataset_weights`)
with short random episodes started on a random stone cell (`start=stone`, 20 steps): random
walks from the start ruin grass before they reach the upper road, so phi had never seen the
end of the road with the grass still fresh. It reads psi and the random episodes from the
sibling directory `OUT/../paper_estimators` (run that scale first, e.g. `--out
results/turf/paper_phi_coverage` beside `results/turf/paper_estimators`); then the same
evaluation, probe and RAC runs (beta 0.2 over `--seeds`, 0.3 and 0.4 one seed each).
"""
import os
from typing import List

from envs import presets
from experiments import turf_estimators
from experiments.spec import Step, estimators_step, scale_settings, train_step

TURF_RAC_BETA = presets.thresholds('turf', 'rac')['beta']   # Sec. 5.4
TURF_RAE_BETA = presets.thresholds('turf', 'rae')['beta']   # C.2
TURF_BETAS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5)          # Fig. 7 (App. C.7)
TURF_SCALES = {
    'tiny': dict(episodes=40, pairs=5_000, phi_transitions=2_000, eval_transitions=200,
                 min_seeds=1, sweep_seeds=1, betas=(0.0, 0.2), max_steps=3_000, actors=1,
                 envs_per_actor=2, run_seconds=45, probe_episodes=16),
    # small: 500k steps a run (~3 min each at ~3k steps/s), 3 seeds of the three agents, the
    # other thresholds 1 seed each; psi/phi from 3k random episodes and 500k pairs.
    'small': dict(episodes=3_000, pairs=500_000, phi_transitions=100_000, eval_transitions=2_000,
                  min_seeds=3, sweep_seeds=1, betas=TURF_BETAS, max_steps=500_000, actors=2,
                  envs_per_actor=8, run_seconds=200),
    # paper: 100k random trajectories and 3M pairs (the Cartpole+ recipe, App. C.6), 10 runs
    # (Fig. 4 caption); 1M steps a run is ours (the paper's curves give no budget in the text).
    'paper': dict(episodes=100_000, pairs=3_000_000, phi_transitions=100_000,
                  eval_transitions=10_000, min_seeds=10, sweep_seeds=10, betas=TURF_BETAS,
                  max_steps=1_000_000, actors=2, envs_per_actor=8, run_seconds=400),
    # The paper's estimators, the small scale's runs (see the module docstring).
    'paper_estimators': dict(episodes=100_000, pairs=3_000_000, phi_transitions=100_000,
                             eval_transitions=10_000, min_seeds=3, sweep_seeds=1,
                             betas=(0.1, 0.2, 0.3, 0.4, 0.5), max_steps=500_000, actors=2,
                             envs_per_actor=8, run_seconds=200, rac_only=True),
    # paper_estimators' psi; phi on its random episodes and start=stone ones (module docstring).
    # phi on 500k transitions, not 100k: on the mixture, 100k left phi far from its target psi(x',
    # x) on the clean map (e.g. 0.38 vs 0.02 stepping onto the grass from the start); 500k fits it.
    'paper_phi_coverage': dict(phi_transitions=500_000, eval_transitions=10_000, min_seeds=3,
                               sweep_seeds=1, betas=(0.2, 0.3, 0.4), max_steps=500_000,
                               actors=2, envs_per_actor=8, run_seconds=200, rac_only=True,
                               phi_mix=dict(base='paper_estimators', episodes=20_000,
                                            max_steps=20, share=0.5)),
    # The authors' release as it runs (experiments.turf_estimators), with psi and phi
    # also on start=stone episodes, and the `replace` shield. RAC runs as the other scales'.
    'paper_as_released': dict(episodes=4_300, pairs=3_000_000, phi_transitions=100_000 * 128,
                              eval_transitions=10_000, min_seeds=3, sweep_seeds=1,
                              betas=TURF_BETAS, max_steps=500_000, actors=2, envs_per_actor=8,
                              run_seconds=600, rac_only=True, shield='replace',
                              released=dict(stone_episodes=20_000, stone_steps=20, share=0.5,
                                            phi_draw=1024, phi_loss='bce',
                                            phi_target='one_minus_forward',
                                            phi_save_steps=(3_907, 25_000),
                                            phi_resume_every=2_500)),
    # paper_as_released at a small budget (psi 500k pairs, phi 3,907 steps) with phi onto psi(x',
    # x), the release's other options kept: its estimators leak at the goal's corner as that
    # scale's do, and behind the `replace` shield RAC at beta 0.2 does not learn the goal. The
    # case in which to measure the learner's mask (every RAC run beside it with --learner_mask).
    # phi from seed 1: seed 0's hidden ReLUs all died, one constant per action (turf_estimators).
    'released_small': dict(episodes=4_300, pairs=500_000, phi_transitions=500_000,
                           eval_transitions=10_000, min_seeds=3, sweep_seeds=1,
                           betas=TURF_BETAS, max_steps=500_000, actors=2, envs_per_actor=8,
                           run_seconds=1_200, rac_only=True, shield='replace',
                           released=dict(stone_episodes=20_000, stone_steps=20, share=0.5,
                                         phi_draw=1024, phi_loss='bce', phi_target='reverse',
                                         phi_save_steps=(), phi_resume_every=2_500,
                                         phi_seed=1)),
    # The release's data (random + start=stone episodes) under our estimators with SAME padding
    # and the paper's rejection shield (turf_estimators): the recipe whose shield keeps the
    # grass and lets the goal be learned.
    'same_mix': dict(episodes=4_300, pairs=500_000, phi_transitions=100_000,
                     eval_transitions=10_000, min_seeds=3, sweep_seeds=1, betas=TURF_BETAS,
                     max_steps=500_000, actors=2, envs_per_actor=8, run_seconds=1_200,
                     rac_only=True,
                     released=dict(stone_episodes=20_000, stone_steps=20, share=0.5,
                                   authors_options=False, conv_padding='SAME', psi_seed=0,
                                   phi_seed=1)),
}
TURF_EVAL_PHI_BETAS = (0.2, 0.3, 0.4)   # "phi < beta" in the per-kind split (Fig. 7's range)


def rac_group(beta: float, learner_mask: bool = False) -> str:
  return f'IMPALA+RAC beta={beta:g}' + (', learner mask' if learner_mask else '')


def rac_run(beta: float, seed: int, learner_mask: bool = False) -> str:
  return f'impala_rac{"_mask" if learner_mask else ""}-b{beta:g}-s{seed}'


def _mask_flags(learner_mask: bool):
  return ('--learner_mask',) if learner_mask else ()


def turf_steps(scale: str, seeds: int) -> List[Step]:
  s = scale_settings(TURF_SCALES, scale, 'turf')
  n = max(seeds, s['min_seeds'])
  if 'released' in s:
    steps = turf_estimators.released_steps(s)
    labels = '{out}/oracle_labels'
  elif 'phi_mix' in s:
    steps = turf_estimators.phi_mix_steps(s)
    # The base scale's transitions: their labels are the same.
    labels = os.path.join('{out}', '..', s['phi_mix']['base'], 'oracle_labels')
  else:
    steps = [
        # The oracle evaluation collects its own transitions: the dataset needs no states.
        Step('collect_random', 'launch.collect',
             ('--env', 'turf', '--episodes', str(s['episodes']), '--out', '{out}/data/random',
              '--nostore_states', '--resume', '--noprogress'),
             done='data/random/noturningback.json', est_seconds=s['episodes'] * 0.03),
        estimators_step('turf', s['pairs'], s['phi_transitions'], 30 + s['pairs'] / 4_000),
    ]
    labels = '{out}/oracle_labels'
  steps += [
      # psi and phi against the exact oracle on random transitions (App. C.6's estimators).
      Step('eval_estimators', 'estimators.evaluate',
           ('--checkpoint', '{out}/estimators.ckpt', '--env', 'turf', '--transitions',
            str(s['eval_transitions']), '--beta', f'{TURF_RAE_BETA:g}', '--phi_beta', f'{TURF_RAC_BETA:g}',
            '--phi_betas', ','.join(f'{b:g}' for b in TURF_EVAL_PHI_BETAS),
            '--labels_cache', labels, '--out', '{out}/estimator_eval'),
           done='estimator_eval/report.json', est_seconds=s['eval_transitions'] * 0.03),
      # Where the shield lets grass through: a random policy under RAC, steps sorted by kind.
      Step('rac_probe', 'experiments.rac_probe',
           ('--checkpoint', '{out}/estimators.ckpt', '--betas',
            ','.join(f'{b:g}' for b in TURF_EVAL_PHI_BETAS), '--episodes',
            str(s.get('probe_episodes', 1000)), '--out', '{out}/rac_probe.json')
           + (('--mode', s['shield']) if 'shield' in s else ()),
           done='rac_probe.json', est_seconds=60),
  ]
  common = ('--env', 'turf', '--num_actors', str(s['actors']), '--envs_per_actor',
            str(s['envs_per_actor']))
  rac = ('--mode', 'rac', '--estimator_checkpoint', '{out}/estimators.ckpt') + (
      ('--shield_mode', s['shield']) if 'shield' in s else ())
  for seed in range(n):
    if not s.get('rac_only'):
      steps.append(train_step(f'impala-s{seed}', 'IMPALA', seed, s['max_steps'],
                              s['run_seconds'], *common, '--mode', 'none'))
      steps.append(train_step(f'impala_rae-s{seed}', 'IMPALA+RAE', seed, s['max_steps'],
                              s['run_seconds'] * 1.3, *common, '--mode', 'rae'))
    # Each RAC run beside the same run whose learner restricts its policy to the shield's
    # mask (--learner_mask): the policy that learns is the one that acts.
    for mask in (False, True):
      steps.append(train_step(rac_run(TURF_RAC_BETA, seed, mask), rac_group(TURF_RAC_BETA, mask),
                              seed, s['max_steps'], s['run_seconds'], *common, *rac,
                              '--beta', f'{TURF_RAC_BETA:g}', *_mask_flags(mask)))
  for beta in s['betas']:
    if beta == TURF_RAC_BETA:
      continue  # its runs are the main comparison's
    for seed in range(min(n, s['sweep_seeds'])):
      for mask in (False, True):
        steps.append(train_step(rac_run(beta, seed, mask), rac_group(beta, mask), seed,
                                s['max_steps'], s['run_seconds'], *common, *rac,
                                '--beta', f'{beta:g}', *_mask_flags(mask)))
  return steps

"""Turf (Sec. 5.2 / 5.4, Fig. 4, App. C.2, C.5-C.7, Fig. 7): IMPALA, IMPALA + RAE with psi learned
online, and IMPALA + RAC with psi/phi trained offline on random trajectories, with RAC's
threshold sweep. Step builders and page sections; registered in `launch.experiments.registry.EXPERIMENTS`.

`--seeds` is the number of seeds of IMPALA, IMPALA + RAE and IMPALA + RAC at beta = 0.2 (at least
3 at the small and paper scales); the other thresholds of the sweep get
`sweep_seeds` (at most `--seeds`).

Scale `paper_estimators`: psi/phi with the paper's offline recipe (100k random
episodes, 3M pairs, phi on 100k transitions) and the small scale's RAC runs (500k steps; beta =
0.2 over `--seeds` >= 3, the sweep 0.1-0.5 one seed each); no IMPALA or IMPALA + RAE runs (they
use no offline estimator: the small scale's page has them). Output in its own directory, e.g.
`--out results/turf/paper_estimators`.

Scale `paper_as_released`: the authors' released recipe with psi and phi also on start=stone
episodes (`launch.experiments.turf_estimators`), the `replace` shield, RAC at beta 0.2 over
`--seeds` >= 3 and the sweep 0-0.5.

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
from typing import Dict, List, Optional, Sequence

from envs import presets
from launch.experiments import pages, turf_estimators, turf_leaks
from launch.experiments.spec import Step, estimators_step, scale_settings, train_step

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
    # The authors' release as it runs (launch.experiments.turf_estimators), with psi and phi
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
}
TURF_EVAL_PHI_BETAS = (0.2, 0.3, 0.4)   # "phi < beta" in the per-kind split (Fig. 7's range)


def rac_group(beta: float) -> str:
  return f'IMPALA+RAC beta={beta:g}'


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
      Step('rac_probe', 'launch.experiments.rac_probe',
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
    steps.append(train_step(f'impala_rac-b{TURF_RAC_BETA:g}-s{seed}', rac_group(TURF_RAC_BETA),
                            seed, s['max_steps'], s['run_seconds'], *common, *rac,
                            '--beta', f'{TURF_RAC_BETA:g}'))
  for beta in s['betas']:
    if beta == TURF_RAC_BETA:
      continue  # its runs are the main comparison's
    for seed in range(min(n, s['sweep_seeds'])):
      steps.append(train_step(f'impala_rac-b{beta:g}-s{seed}', rac_group(beta), seed,
                              s['max_steps'], s['run_seconds'], *common, *rac,
                              '--beta', f'{beta:g}'))
  return steps


def run_record(episode_returns: Sequence[float], ruined: Sequence[float],
               episode_steps: Sequence[float], last_n: int = 100) -> Dict[str, float]:
  """What the page says of one run: ruined grass over the whole of training, and the goal.
  Turf's return is 1 when the goal is reached and 0 otherwise."""
  import numpy as np
  r = np.asarray(episode_returns, float)
  g = np.asarray(ruined, float)
  hits = np.flatnonzero(r > 0)
  return {'episodes': int(len(r)),
          'ruined_total': float(g.sum()) if len(g) else float('nan'),
          'episodes_with_ruin': int(np.sum(g > 0)),
          'goal_last': float(r[-last_n:].mean()) if len(r) else float('nan'),
          'ruined_last': float(g[-last_n:].mean()) if len(g) else float('nan'),
          'first_goal_step': float(episode_steps[hits[0]]) if len(hits) else None}


def side_effects_markdown(records: Dict[str, List[Dict[str, float]]]) -> str:
  """Per group: ruined grass over all of training, the goal at the end; and the paper's claim."""
  lines = ['## Ruined grass over the whole of training, and the goal (Fig. 4 / Sec. 5.4)', '',
           'Per run: grass cells ruined summed over every training episode; goal = fraction of the '
           'last 100 episodes that reached it (Turf returns 1 there, else 0).', '',
           '| group | runs | episodes | ruined grass over training, per run | episodes with any '
           'ruined grass | goal, last 100 episodes | ruined grass/episode, last 100 | first goal '
           'at env step |', '|---|---|---|---|---|---|---|---|']
  for group, runs in records.items():
    lines.append(
        f'| {group} | {len(runs)} | {sum(r["episodes"] for r in runs):,} | '
        f'{", ".join(pages.fmt(r["ruined_total"], 0) for r in runs)} | '
        f'{sum(r["episodes_with_ruin"] for r in runs):,} | '
        f'{pages.mean_ci_text([r["goal_last"] for r in runs], 2)} | '
        f'{pages.mean_ci_text([r["ruined_last"] for r in runs], 2)} | '
        + ', '.join('never' if r['first_goal_step'] is None else f'{r["first_goal_step"]:,.0f}'
                    for r in runs) + ' |')
  rac = records.get(rac_group(TURF_RAC_BETA), [])
  if rac:
    clean = sum(r['ruined_total'] == 0 for r in rac)
    # Learned the goal, not met it by chance: a shielded random walk reaches it in a few % of
    # its episodes.
    reach = sum(r['goal_last'] >= 0.5 for r in rac)
    lines += ['', f'The paper\'s claim (RAC, beta = {TURF_RAC_BETA:g}: no ruined grass over the '
              f'whole of training, and it still reaches the goal): {clean} of {len(rac)} runs '
              f'ruined no grass; {reach} of {len(rac)} reached the goal in at least half of '
              'their last 100 episodes.']
  return '\n'.join(lines) + '\n'


def sweep_markdown(records: Dict[str, List[Dict[str, float]]]) -> str:
  """Fig. 7: return and ruined grass per RAC threshold."""
  lines = ['## RAC threshold sweep (Fig. 7, App. C.7)', '',
           'The paper: above beta = 0.4 the agent never reaches the goal; no ruined grass during '
           'learning needs beta >= 0.2.', '',
           '| beta | runs | goal, last 100 episodes | ruined grass over training, mean per run | '
           'runs with no ruined grass |', '|---|---|---|---|---|']
  for beta in TURF_BETAS:
    runs = records.get(rac_group(beta), [])
    if not runs:
      continue
    lines.append(f'| {beta:g} | {len(runs)} | {pages.mean_ci_text([r["goal_last"] for r in runs], 2)} '
                 f'| {pages.mean_ci_text([r["ruined_total"] for r in runs], 1)} | '
                 f'{sum(r["ruined_total"] == 0 for r in runs)} |')
  return '\n'.join(lines) + '\n'


def _estimator_section(out: str) -> str:
  from estimators import kinds, predict
  report = pages.read_json(os.path.join(out, 'estimator_eval', 'report.json'))
  if report is None:
    return ''
  psi, phi = report.get('psi') or {}, report.get('phi') or {}
  text = ('## Offline psi / phi against the exact oracle (random transitions)\n\n'
          f"{report.get('evaluated', '–')} labelled transitions: psi AUROC "
          f"{pages.fmt(psi.get('auroc'), 3)}, 1 - phi AUROC {pages.fmt(phi.get('auroc'), 3)}; "
          f"phi < {TURF_RAC_BETA:g}: precision {pages.fmt(phi.get('precision'), 3)}, recall "
          f"{pages.fmt(phi.get('recall'), 3)}.\n\n![calibration](estimator_eval/calibration.png)\n")
  target_text = predict.PHI_TARGET_TEXT[report.get('phi_target', 'reverse')]
  if report.get('by_kind'):
    text += ('\nBy transition kind (`envs.turf.TRANSITION_KINDS`; P / R: precision and recall of '
             '"phi < beta" for irreversible within the kind; reversible flagged: the fraction of '
             "the kind's reversible transitions the shield would forbid):\n\n"
             + kinds.markdown(report['by_kind'], 'random-policy transitions', target_text))
  clean = report.get('clean_by_kind')
  if clean:
    text += '\n' + kinds.markdown(clean['by_kind'], 'every action from every state with no '
                                  f"ruined grass ({clean['transitions']} transitions)", target_text)
  # launch.experiments.rac_probe, launch.experiments.turf_coverage (coverage_*.md: of other
  # collections, e.g. start=stone), launch.experiments.turf_corner (*corner.md: named moves)
  names = ['rac_probe.md', 'coverage.md'] + sorted(
      n for n in os.listdir(out)
      if (n.startswith('coverage_') or n.endswith('corner.md')) and n.endswith('.md'))
  for name in names:
    path = os.path.join(out, name)
    if os.path.exists(path):
      with open(path) as f:
        text += '\n#' + f.read()   # its title one level down
  return text


def _records(scale: str, seeds: int, out: str) -> Dict[str, List[Dict[str, float]]]:
  """{group: [run_record of each run in `out` that has logs]}."""
  from launch.analysis import aggregate
  records: Dict[str, List[Dict[str, float]]] = {}
  for group, run_dirs in pages.runs_by_group(turf_steps(scale, seeds), out).items():
    for run_dir in run_dirs:
      try:
        ret = aggregate.series(run_dir, 'episode_return', 'actor_steps')
      except ValueError:
        continue
      ruined = pages.episode_values(run_dir, 'ruined_grass')
      records.setdefault(group, []).append(run_record(ret.values, ruined, ret.xs))
  return records


def _per_run(runs: List[Dict[str, float]], key: str, digits: int) -> str:
  return ', '.join(pages.fmt(r[key], digits) for r in runs) or '–'


def comparison_markdown(base: str, records: Dict[str, List[Dict[str, float]]],
                        base_records: Dict[str, List[Dict[str, float]]],
                        probe: Optional[dict], base_probe: Optional[dict]) -> str:
  """A scale that retrains phi beside the scale `base` whose psi it keeps: the RAC runs and
  the probe of both, per beta."""
  lines = [f'## Against `{base}` (same psi, phi retrained)', '',
           '| beta | runs (base / here) | ruined grass over training, per run: base | here | '
           'goal, last 100 episodes: base | here |', '|---|---|---|---|---|---|']
  for beta in TURF_BETAS:
    ours, theirs = records.get(rac_group(beta), []), base_records.get(rac_group(beta), [])
    if not ours:
      continue
    lines.append(f'| {beta:g} | {len(theirs)} / {len(ours)} | '
                 f'{_per_run(theirs, "ruined_total", 0)} | {_per_run(ours, "ruined_total", 0)} | '
                 f'{_per_run(theirs, "goal_last", 2)} | {_per_run(ours, "goal_last", 2)} |')
  if probe and base_probe:
    lines += ['', '`launch.experiments.rac_probe` (a random policy under the shield), base / here:',
              '',
              '| beta | episodes | episodes with ruined grass | ruined grass, total | '
              'reached goal |',
              '|---|---|---|---|---|']
    theirs = {r['beta']: r for r in base_probe.get('results', [])}
    for r in probe.get('results', []):
      b = theirs.get(r['beta'])
      if b is None or 'by_kind' not in r or 'by_kind' not in b:
        continue
      lines.append(f"| {r['beta']:g} | {b['episodes']:,} / {r['episodes']:,} | "
                   f"{b['episodes_with_ruin']:,} / {r['episodes_with_ruin']:,} | "
                   f"{b['ruined_grass_total']:,} / {r['ruined_grass_total']:,} | "
                   f"{b['episodes_reaching_goal']:,} / {r['episodes_reaching_goal']:,} |")
  return '\n'.join(lines) + '\n'


def leaks_markdown(scale: str, seeds: int, out: str) -> str:
  """Per run, from its actor logs: which cells were ruined and the moves that entered fresh
  grass (`launch.experiments.turf_leaks`), so a leak is read off the page, not inferred."""
  rows = [turf_leaks.leaks(d) for dirs in pages.runs_by_group(turf_steps(scale, seeds), out).values()
          for d in dirs]
  if not rows:
    return ''
  return ('## Where grass was ruined: cells and moves, per run\n\n'
          'Over all of training, from every actor\'s episodes; cells as (row, column), a move as '
          'from>onto; goal rate over all episodes.\n\n' + turf_leaks.markdown(rows))


def turf_markdown(table: dict, out: str) -> str:
  records = _records(table['scale'], table['seeds'], out)
  parts = [side_effects_markdown(records), sweep_markdown(records),
           leaks_markdown(table['scale'], table['seeds'], out)]
  mix = TURF_SCALES[table['scale']].get('phi_mix')
  if mix:
    base_out = os.path.normpath(os.path.join(out, '..', mix['base']))
    parts.append(comparison_markdown(
        mix['base'], records, _records(mix['base'], table['seeds'], base_out),
        pages.read_json(os.path.join(out, 'rac_probe.json')),
        pages.read_json(os.path.join(base_out, 'rac_probe.json'))))
  return '\n'.join(parts + [_estimator_section(out)])

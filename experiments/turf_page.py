"""The Turf experiment's page sections (`experiments.turf`'s runs): ruined grass over
training and the goal, the RAC threshold sweep, where grass was ruined, the offline estimators
against the exact oracle, and a phi-retraining scale against its base."""
import os
from typing import Dict, List, Optional, Sequence

from experiments import pages, turf_leaks
from experiments.turf import TURF_BETAS, TURF_RAC_BETA, TURF_SCALES, rac_group, turf_steps


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
  for mask in (False, True):
    rac = records.get(rac_group(TURF_RAC_BETA, mask), [])
    if not rac:
      continue
    clean = sum(r['ruined_total'] == 0 for r in rac)
    # Learned the goal, not met it by chance: a shielded random walk reaches it in a few % of
    # its episodes.
    reach = sum(r['goal_last'] >= 0.5 for r in rac)
    lines += ['', f'The paper\'s claim (RAC, beta = {TURF_RAC_BETA:g}: no ruined grass over the '
              f'whole of training, and it still reaches the goal), {rac_group(TURF_RAC_BETA, mask)}: '
              f'{clean} of {len(rac)} runs ruined no grass; {reach} of {len(rac)} reached the '
              'goal in at least half of their last 100 episodes.']
  return '\n'.join(lines) + '\n'


def sweep_markdown(records: Dict[str, List[Dict[str, float]]]) -> str:
  """Fig. 7: return and ruined grass per RAC threshold."""
  lines = ['## RAC threshold sweep (Fig. 7, App. C.7)', '',
           'The paper: above beta = 0.4 the agent never reaches the goal; no ruined grass during '
           'learning needs beta >= 0.2.', '',
           '| beta | learner mask | runs | goal, last 100 episodes | ruined grass over training, '
           'mean per run | runs with no ruined grass |', '|---|---|---|---|---|---|']
  for beta in TURF_BETAS:
    for mask in (False, True):
      runs = records.get(rac_group(beta, mask), [])
      if not runs:
        continue
      lines.append(f'| {beta:g} | {"yes" if mask else "no"} | {len(runs)} | '
                   f'{pages.mean_ci_text([r["goal_last"] for r in runs], 2)} '
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
  # experiments.rac_probe, experiments.studies.turf_coverage (coverage_*.md: of other
  # collections, e.g. start=stone), experiments.studies.turf_corner (*corner.md: named moves)
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
  from experiments.analysis import aggregate
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
    lines += ['', '`experiments.rac_probe` (a random policy under the shield), base / here:',
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
  grass (`experiments.turf_leaks`), so a leak is read off the page, not inferred."""
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

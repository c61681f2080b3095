r"""How much Table 2 (App. D) moves between estimator trainings: every cliff estimator checkpoint
of `python -m experiments cliff --seeds K` (K trainings per wind, `experiments.cliff`) drives a
random policy + RAC in one process (`experiments.rac_probe.probe`) at each threshold, and
each cell of the table gets the mean over the K trainings and their range.

Question: How much do the cells of the cliff's Table 2 move between estimator trainings?
Reported in RESULTS.md, "Windy cliff-walk, Tables 1-2": the spread over trainings
(results/cliff/spread.md).

    python -m experiments cliff --scale small --seeds 3 --only 'collect_*,estimators_*'
    python -m experiments.studies.cliff_spread --cliff_dir results/cliff --estimator_seeds 3 \
        --episodes 512 --out results/cliff/spread.json

The in-process policy is the one a `launch.train --agent random --mode rac` run acts with (the
same actor and shield); the page's launch.train cells (`--page_table`, one training) are printed
beside the same training's in-process figure as a check. Writes JSON and a markdown table (same
name, .md).
"""
import json
import os
import time
from typing import Any, Dict, List, Optional

import numpy as np
from absl import flags

from envs import cli
from experiments import cliff, pages, rac_probe


def _page_values(path: Optional[str]) -> Dict[str, float]:
  if not path or not os.path.exists(path):
    return {}
  with open(path) as f:
    table = json.load(f)
  return {r['group']: r.get('episode_return', {}).get('mean') for r in table.get('rows', [])}


def spread_markdown(cells: List[Dict[str, Any]], winds, betas, episodes: int) -> str:
  by = {(c['wind'], c['beta']): c for c in cells}
  ses = [se for c in cells for se in c.get('se_per_training', ())]
  noise = (f" (the standard error of one training's mean is at most {max(ses):.1f} here)"
           if ses else '')
  lines = ['# Table 2 over estimator trainings: mean [lowest-highest] (paper)', '',
           f'Random policy + RAC in one process (`experiments.rac_probe`), {episodes} episodes per '
           'training and cell; each training is psi/phi retrained with another `--seed` on the '
           f"same random episodes. Spread: the range of the trainings' means{noise}.", '',
           '| p | ' + ' | '.join(f'RAC beta={b:g}' for b in betas) + ' |',
           '|---|' + '---|' * len(betas)]
  for p in winds:
    row = [f'{p:g}']
    for i, b in enumerate(betas):
      c = by.get((p, b))
      paper = cliff.CLIFF_PAPER_RAC[p][cliff.CLIFF_BETAS.index(b)] if b in cliff.CLIFF_BETAS else None
      text = '–' if c is None else cliff.cell_text(c['mean'], c['per_training'])
      row.append(text + ('' if paper is None else f' ({paper})'))
    lines.append('| ' + ' | '.join(row) + ' |')
  checks = [c for c in cells if c.get('page_launch_train') is not None]
  if checks:
    lines += ['', "Check against the page's launch.train runs (training 0, 60k env steps each): "
              'in-process / launch.train', '',
              '| p | ' + ' | '.join(f'beta={b:g}' for b in betas) + ' |',
              '|---|' + '---|' * len(betas)]
    for p in winds:
      row = [f'{p:g}']
      for b in betas:
        c = by.get((p, b))
        row.append('–' if c is None or c.get('page_launch_train') is None else
                   f"{c['per_training'][0]:.1f} / {c['page_launch_train']:.1f}")
      lines.append('| ' + ' | '.join(row) + ' |')
  return '\n'.join(lines) + '\n'


def define_flags(fv: flags.FlagValues) -> None:
  flags.DEFINE_string('cliff_dir', 'results/cliff', 'Output directory of the cliff experiment.',
                      flag_values=fv)
  flags.DEFINE_integer('estimator_seeds', 3, 'Estimator trainings per wind (seeds 0..K-1).',
                       flag_values=fv)
  flags.DEFINE_list('winds', [f'{w:g}' for w in cliff.CLIFF_WINDS], 'Winds p.', flag_values=fv)
  flags.DEFINE_list('betas', [f'{b:g}' for b in cliff.CLIFF_BETAS], 'RAC thresholds.',
                    flag_values=fv)
  flags.DEFINE_integer('episodes', 512, 'Episodes per (wind, training, threshold).',
                       flag_values=fv)
  flags.DEFINE_integer('num_envs', 64, 'Environments stepped together.', flag_values=fv)
  flags.DEFINE_string('page_table', None, "The page's table.json (launch.train runs of "
                      'training 0) to print beside the in-process figures '
                      '(default: CLIFF_DIR/table.json when it exists).', flag_values=fv)
  flags.DEFINE_string('out', None, 'JSON file to write.', flag_values=fv)


def parse_args(argv=None):
  args, _ = cli.parse(define_flags, argv, prog='python -m experiments.studies.cliff_spread',
                       description=__doc__.split('\n\n')[0])
  if not args.out:
    cli.fail('--out is required')
  try:
    args.winds = [float(w) for w in args.winds]
    args.betas = [float(b) for b in args.betas]
  except ValueError:
    cli.fail('--winds and --betas must be numbers')
  return args


def main(argv=None):
  args = parse_args(argv)
  from estimators import checkpoint
  winds, betas = args.winds, args.betas
  page = _page_values(args.page_table or os.path.join(args.cliff_dir, 'table.json'))
  missing = [os.path.join(args.cliff_dir, cliff.estimator_name(f'p{p:g}', k))
             for p in winds for k in range(args.estimator_seeds)]
  missing = [path for path in missing if not os.path.exists(path)]
  if missing:
    raise SystemExit(f'error: missing {missing[0]}: train it with experiments cliff --seeds '
                     f"{args.estimator_seeds} --only 'collect_*,estimators_*'")
  cells = []
  for p in winds:
    per_beta: Dict[float, List[Dict[str, Any]]] = {b: [] for b in betas}
    for k in range(args.estimator_seeds):
      ckpt = checkpoint.load(os.path.join(args.cliff_dir, cliff.estimator_name(f'p{p:g}', k)))
      for b in betas:
        t0 = time.time()
        r = rac_probe.probe(ckpt, b, args.episodes, args.num_envs, seed=k,
                            env_options={'wind': p}, env_name='cliff')
        per_beta[b].append(r)
        print(f'p={p:g} training {k} beta={b:g}: {r["mean_return"]:.1f} ± {r["return_se"]:.1f} '
              f'({time.time() - t0:.0f}s)', flush=True)
    for b in betas:
      means = [r['mean_return'] for r in per_beta[b]]
      cells.append({'wind': p, 'beta': b, 'mean': float(np.mean(means)), 'per_training': means,
                    'se_per_training': [r['return_se'] for r in per_beta[b]],
                    'episodes_per_training': [r['episodes'] for r in per_beta[b]],
                    'fallback_fraction': [r['fallback_fraction'] for r in per_beta[b]],
                    'page_launch_train': page.get(f'RAC p={p:g} beta={b:g}')})
  pages.write_report(args.out, {'estimator_seeds': args.estimator_seeds,
                                 'episodes': args.episodes, 'cells': cells},
                     spread_markdown(cells, winds, betas, args.episodes))


if __name__ == '__main__':
  main()

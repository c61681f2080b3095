r"""How much Table 2 (App. D) moves between estimator trainings: every cliff estimator checkpoint
of `launch.experiment cliff --seeds K` (K trainings per wind, `launch.experiments.cliff`) drives a
random policy + RAC in one process (`bench.rac_probe.probe`) at each threshold, and each cell of
the table gets the mean over the K trainings and their range.

    python -m launch.experiment cliff --scale small --seeds 3 --only 'collect_*,estimators_*'
    python -m bench.cliff_spread --cliff_dir results/cliff --estimator_seeds 3 --episodes 512 \
        --out results/cliff/spread.json

The in-process policy is the one a `launch.train --agent random --mode rac` run acts with (the
same shield, uniform logits); the page's launch.train cells (`--page_table`, one training) are
printed beside the same training's in-process figure as a check. Writes JSON and a markdown
table (same name, .md).
"""
import json
import os
import time
from typing import Any, Dict, List, Optional

import numpy as np
from absl import app, flags

from bench import rac_probe
from launch.experiments import cliff

FLAGS = flags.FLAGS


def define_flags():
  flags.DEFINE_string('cliff_dir', 'results/cliff', 'Output directory of the cliff experiment.')
  flags.DEFINE_integer('estimator_seeds', 3, 'Estimator trainings per wind (seeds 0..K-1).')
  flags.DEFINE_list('winds', [f'{p:g}' for p in cliff.CLIFF_WINDS], 'Winds p.')
  flags.DEFINE_list('betas', [f'{b:g}' for b in cliff.CLIFF_BETAS], 'RAC thresholds.')
  flags.DEFINE_integer('episodes', 512, 'Episodes per (wind, training, threshold).')
  flags.DEFINE_integer('num_envs', 64, 'Environments stepped together.')
  flags.DEFINE_string('page_table', None, "The page's table.json (launch.train runs of training "
                      '0) to print beside the in-process figures (default: CLIFF_DIR/table.json '
                      'when it exists).')
  flags.DEFINE_string('out', None, 'JSON file to write.')


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
           f'Random policy + RAC in one process (`bench.rac_probe`), {episodes} episodes per '
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


def main(argv):
  del argv
  from estimators import checkpoint
  from estimators import predict
  if not FLAGS.out:
    raise app.UsageError('--out is required')
  winds = [float(p) for p in FLAGS.winds]
  betas = [float(b) for b in FLAGS.betas]
  page = _page_values(FLAGS.page_table or os.path.join(FLAGS.cliff_dir, 'table.json'))
  cells = []
  for p in winds:
    tag = f'p{p:g}'
    per_beta: Dict[float, List[Dict[str, Any]]] = {b: [] for b in betas}
    for k in range(FLAGS.estimator_seeds):
      path = os.path.join(FLAGS.cliff_dir, cliff.estimator_name(tag, k))
      if not os.path.exists(path):
        raise app.UsageError(f'missing {path}: train it with launch.experiment cliff --seeds '
                             f"{FLAGS.estimator_seeds} --only 'collect_*,estimators_*'")
      predictor = predict.Predictor(checkpoint.load(path), batch=256)
      for b in betas:
        t0 = time.time()
        r = rac_probe.probe(predictor, b, FLAGS.episodes, FLAGS.num_envs, seed=k,
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
  os.makedirs(os.path.dirname(os.path.abspath(FLAGS.out)), exist_ok=True)
  with open(FLAGS.out, 'w') as f:
    json.dump({'estimator_seeds': FLAGS.estimator_seeds, 'episodes': FLAGS.episodes,
               'cells': cells}, f, indent=1)
  with open(os.path.splitext(FLAGS.out)[0] + '.md', 'w') as f:
    f.write(spread_markdown(cells, winds, betas, FLAGS.episodes))


if __name__ == '__main__':
  define_flags()
  app.run(main)

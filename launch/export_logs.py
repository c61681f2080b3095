"""A run's CSV logs, cut to the columns its curves and tables read, small enough to commit:

    python -m launch.export_logs results/sokoban/runs/impala-s0 --out results/sokoban/logs_export/impala-s0

The copy is a run directory `launch.plot`, `launch.analysis.aggregate` and the experiment pages read like
the original: `config.json`, `run_state.json` (wall time), `counts.json` (env steps reached) and,
per node, `logs/<node>/logs.csv` with the kept columns only (all rows). Actor episode rows keep
--actor_columns, learner and precedence rows --node_columns (those a log lacks are skipped).
Nothing in the source run is changed.
"""
import argparse
import csv
import glob
import os
import shutil
import sys
from typing import List, Sequence

from envs import paths

ACTOR_COLUMNS = ('actor_steps', 'unix_time', 'env_index', 'episode_length', 'episode_return',
                 'solved', 'boxes_on_target', 'intrinsic_return', 'penalised_steps', 'max_psi',
                 'rejections', 'ruined_grass')
NODE_COLUMNS = ('actor_steps', 'learner_steps', 'precedence_steps', 'loss', 'policy_entropy',
                'value_mean', 'value_explained_variance', 'advantage_std',
                'rho_clipped_fraction', 'log_rho_abs_mean', 'policy_lag_mean', 'grad_norm',
                'psi_accuracy', 'psi_loss')
RUN_FILES = ('config.json', 'run_state.json', 'counts.json')


def export_csv(src: str, dst: str, columns: Sequence[str]) -> int:
  """Writes the rows of `src` with the `columns` it has; returns the number of rows."""
  with open(src, newline='') as f:
    reader = csv.DictReader(f)
    kept = [c for c in columns if c in (reader.fieldnames or [])]
    rows = [{c: row[c] for c in kept} for row in reader]
  os.makedirs(os.path.dirname(dst), exist_ok=True)
  with paths.atomic_write(dst, newline='') as f:
    writer = csv.DictWriter(f, fieldnames=kept)
    writer.writeheader()
    writer.writerows(rows)
  return len(rows)


def export_run(run_dir: str, out: str, actor_columns: Sequence[str],
               node_columns: Sequence[str]) -> List[str]:
  logs = sorted(glob.glob(os.path.join(run_dir, 'logs', '*', 'logs.csv')))
  if not logs:
    raise ValueError(f'{run_dir} holds no logs (logs/<node>/logs.csv)')
  if os.path.abspath(out) == os.path.abspath(run_dir):
    raise ValueError('--out must differ from the run directory')
  if glob.glob(os.path.join(out, 'logs', '*', 'logs.csv')):
    raise ValueError(f'{out} already holds logs: choose an empty --out')
  os.makedirs(out, exist_ok=True)
  written = []
  for name in RUN_FILES:
    if os.path.exists(os.path.join(run_dir, name)):
      shutil.copyfile(os.path.join(run_dir, name), os.path.join(out, name))
      written.append(name)
  for path in logs:
    node = os.path.basename(os.path.dirname(path))
    columns = actor_columns if node.startswith(('actor', 'evaluator')) else node_columns
    dst = os.path.join(out, 'logs', node, 'logs.csv')
    rows = export_csv(path, dst, columns)
    written.append(f'logs/{node}/logs.csv ({rows} rows, {os.path.getsize(dst):,} bytes)')
  return written


def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument('run_dir', help='the run directory to export')
  p.add_argument('--out', required=True, help='destination run directory (must hold no logs yet)')
  p.add_argument('--actor_columns', default=','.join(ACTOR_COLUMNS),
                 help='columns kept from actor episode logs')
  p.add_argument('--node_columns', default=','.join(NODE_COLUMNS),
                 help='columns kept from learner and precedence logs')
  args = p.parse_args(argv)
  try:
    for line in export_run(args.run_dir, args.out, args.actor_columns.split(','),
                           args.node_columns.split(',')):
      print(line)
  except (OSError, ValueError) as e:
    print(f'error: {e}', file=sys.stderr)
    sys.exit(2)


if __name__ == '__main__':
  main()

"""A run's CSV logs, cut to the columns its curves and tables read, small enough to commit:

    python -m launch.export_logs results/sokoban/runs/impala-s0 --out results/sokoban/logs_export/impala-s0
    python -m launch.export_logs results/sokoban_30m/runs/impala-s0 --checkpoint --replace   # RUN/csv

The copy is a run directory `experiments.plot`, `experiments.analysis.aggregate` and the experiment pages read like
the original: `config.json`, `run_state.json` (wall time), `counts.json` (env steps reached) and,
per node, `logs/<node>/logs.csv` with the kept columns only. Actor episode rows keep
--actor_columns, learner and precedence rows --node_columns (those a log lacks are skipped).
Numbers are written with at most --digits decimals; --actor_every N keeps every N-th episode
row of each actor (a 20M-step Sokoban run logs ~170k episodes: ~11 MB in full, ~1 MB with
--actor_every 8 --digits 3, and curves averaged over hundreds of episodes barely move).
--checkpoint adds each learner's newest valid checkpoint, so that the export is also where the
run continues from on a machine that lacks it (launch.runtime.run_export). Rows an earlier export
already thinned (a run continued from its export) are kept as they are. --out defaults to
RUN_DIR/csv; --replace swaps a new export in for the one there. Nothing in the source run is changed.
"""
import csv
import glob
import os
import shutil
import sys
from typing import List, Optional, Sequence

from absl import flags

from envs import cli, paths
from launch.program import checkpointing
from launch.runtime import run_export

ACTOR_COLUMNS = ('actor_steps', 'unix_time', 'env_index', 'episode_length', 'episode_return',
                 'solved', 'boxes_on_target', 'intrinsic_return', 'penalised_steps', 'max_psi',
                 'rejections', 'ruined_grass')
NODE_COLUMNS = ('actor_steps', 'learner_steps', 'precedence_steps', 'loss', 'policy_entropy',
                'value_mean', 'value_explained_variance', 'advantage_std',
                'rho_clipped_fraction', 'log_rho_abs_mean', 'policy_lag_mean', 'grad_norm',
                'psi_accuracy', 'psi_loss')
# With the config, flags.json is what --resume starts from; `done` marks a finished budget.
RUN_FILES = ('config.json', 'flags.json', 'run_state.json', 'counts.json', 'summary.json', 'done')
REPLAY_CHECKPOINTS = 'replay'   # Reverb's, not a learner's: a continued run refills its replay


def compact_number(text: str, digits: int) -> str:
  """A CSV cell with at most `digits` decimals and no trailing zeros; non-numbers unchanged."""
  try:
    value = float(text)
  except ValueError:
    return text
  if value != value or value in (float('inf'), float('-inf')):
    return text
  out = f'{value:.{digits}f}'
  if '.' in out:
    out = out.rstrip('0').rstrip('.')
  return '0' if out in ('-0', '') else out


def export_csv(src: str, dst: str, columns: Sequence[str], every: int = 1,
               digits: Optional[int] = None) -> int:
  """Writes every `every`-th row of `src` (the first included) with the `columns` it has, numbers
  rounded to `digits` decimals (None: as they are); returns the number of rows written. The rows
  an earlier export thinned (run_export.thinned_rows) are all kept; thinning starts after them.
  `dst` is recorded as thinned whole when `every` > 1 or `src` was, with the number of logged
  episodes each kept row stands for (the rows it replaces: itself and up to every - 1 after it).
  `every` and `digits` as export_run has checked them."""
  cell = (lambda v: v) if digits is None else (lambda v: compact_number(v, digits))
  done = run_export.thinned_rows(src)
  thinned = run_export.episode_weights(src, done)
  rows, weights = [], []   # a row left out adds its episodes to the kept row before it
  with open(src, newline='') as f:
    reader = csv.DictReader(f)
    kept = [c for c in columns if c in (reader.fieldnames or [])]
    for i, row in enumerate(reader):
      episodes = thinned[i] if i < done else 1
      if i < done or (i - done) % every == 0:
        rows.append({c: cell(row.get(c) or '') for c in kept})
        weights.append(episodes)
      else:
        weights[-1] += episodes
  os.makedirs(os.path.dirname(dst), exist_ok=True)
  with paths.atomic_write(dst, newline='') as f:
    writer = csv.DictWriter(f, fieldnames=kept)
    writer.writeheader()
    writer.writerows(rows)
  if every > 1 or done:
    run_export.write_thinned_rows(dst, weights)
  return len(rows)


def export_checkpoints(run_dir: str, out: str) -> List[str]:
  """Copies each learner's newest valid checkpoint (RUN/checkpoints/<node>/) into
  OUT/checkpoints/<node>/; returns what was written."""
  written = []
  root = os.path.join(run_dir, run_export.CHECKPOINTS)
  for node in sorted(os.listdir(root)) if os.path.isdir(root) else ():
    if node == REPLAY_CHECKPOINTS:
      continue
    path = checkpointing.newest_valid_file(os.path.join(root, node))
    if path is None:
      continue
    dst = os.path.join(out, run_export.CHECKPOINTS, node, os.path.basename(path))
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    shutil.copyfile(path, dst)
    written.append(f'{run_export.CHECKPOINTS}/{node}/{os.path.basename(path)} '
                   f'({os.path.getsize(dst):,} bytes)')
  if not written:
    raise ValueError(f'{run_dir} holds no learner checkpoint ({run_export.CHECKPOINTS}/<node>/)')
  return written


def _write_export(run_dir: str, out: str, logs: Sequence[str], actor_columns: Sequence[str],
                  node_columns: Sequence[str], actor_every: int, digits: Optional[int],
                  checkpoint: bool) -> List[str]:
  written = []
  for name in RUN_FILES:
    if os.path.exists(os.path.join(run_dir, name)):
      shutil.copyfile(os.path.join(run_dir, name), os.path.join(out, name))
      written.append(name)
  for path in logs:
    node = os.path.basename(os.path.dirname(path))
    episodes = node.startswith(('actor', 'evaluator'))
    columns = actor_columns if episodes else node_columns
    dst = os.path.join(out, 'logs', node, 'logs.csv')
    rows = export_csv(path, dst, columns, every=actor_every if episodes else 1, digits=digits)
    written.append(f'logs/{node}/logs.csv ({rows} rows, {os.path.getsize(dst):,} bytes)')
  if checkpoint:
    written += export_checkpoints(run_dir, out)
  return written


def export_run(run_dir: str, out: str, actor_columns: Sequence[str],
               node_columns: Sequence[str], actor_every: int = 1,
               digits: Optional[int] = None, checkpoint: bool = False,
               replace: bool = False) -> List[str]:
  """Exports `run_dir` into `out` (see the module's docstring); returns what was written.
  `replace`: `out` may hold an earlier export, which the new one replaces whole once written."""
  if actor_every < 1:
    raise ValueError(f'--actor_every must be >= 1, got {actor_every}')
  if digits is not None and digits < 0:
    raise ValueError(f'--digits must be >= 0, got {digits}')
  logs = sorted(glob.glob(os.path.join(run_dir, 'logs', '*', 'logs.csv')))
  if not logs:
    raise ValueError(f'{run_dir} holds no logs (logs/<node>/logs.csv)')
  if os.path.abspath(out) == os.path.abspath(run_dir):
    raise ValueError('--out must differ from the run directory')
  if not replace and glob.glob(os.path.join(out, 'logs', '*', 'logs.csv')):
    raise ValueError(f'{out} already holds logs: choose an empty --out, or pass --replace')
  # Written beside `out` and swapped in at the end: a failed export leaves the old one whole.
  target, out = out, (out.rstrip(os.sep) + '.new' if replace else out)
  if replace:
    shutil.rmtree(out, ignore_errors=True)
  os.makedirs(out, exist_ok=True)
  try:
    written = _write_export(run_dir, out, logs, actor_columns, node_columns, actor_every, digits,
                            checkpoint)
  except BaseException:
    if replace:
      shutil.rmtree(out, ignore_errors=True)
    raise
  if replace:
    old = target.rstrip(os.sep) + '.old'
    shutil.rmtree(old, ignore_errors=True)
    if os.path.exists(target):
      os.replace(target, old)
    os.replace(out, target)
    shutil.rmtree(old, ignore_errors=True)
  return written


def define_flags(fv: flags.FlagValues) -> None:
  flags.DEFINE_string('out', None, 'destination run directory (must hold no logs yet, unless '
                      f'--replace; default RUN_DIR/{run_export.EXPORT_SUBDIR})', flag_values=fv)
  flags.DEFINE_bool('checkpoint', False, "add each learner's newest valid checkpoint, so the "
                    'run can be continued from the export on a machine that lacks it',
                    flag_values=fv)
  flags.DEFINE_bool('replace', False, 'replace the export already in --out (swapped in once the '
                    'new one is written whole)', flag_values=fv)
  flags.DEFINE_string('actor_columns', ','.join(ACTOR_COLUMNS),
                      'columns kept from actor episode logs', flag_values=fv)
  flags.DEFINE_string('node_columns', ','.join(NODE_COLUMNS),
                      'columns kept from learner and precedence logs', flag_values=fv)
  flags.DEFINE_integer('actor_every', 1, 'keep every N-th episode row of each actor log (1: all)',
                       flag_values=fv)
  flags.DEFINE_integer('digits', None, 'decimals kept in numbers (default: as logged)',
                       flag_values=fv)


def main(argv=None):
  args, run_dirs = cli.parse(define_flags, argv, prog='python -m launch.export_logs',
                             description=__doc__.splitlines()[0],
                             positional='RUN_DIR (the run directory to export)')
  if len(run_dirs) != 1:
    cli.fail(f'expected one RUN_DIR (the run directory to export), got {len(run_dirs)}')
  args.run_dir = run_dirs[0]
  out = args.out or os.path.join(args.run_dir, run_export.EXPORT_SUBDIR)
  try:
    for line in export_run(args.run_dir, out, args.actor_columns.split(','),
                           args.node_columns.split(','), args.actor_every, args.digits,
                           checkpoint=args.checkpoint, replace=args.replace):
      print(line)
  except (OSError, ValueError) as e:
    print(f'error: {e}', file=sys.stderr)
    sys.exit(2)


if __name__ == '__main__':
  main()

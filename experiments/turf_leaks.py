r"""Where grass leaks through in Turf training runs: from each run's actor logs (the environment's
`ruined_cells` and `grass_entries`, `envs.turf`), the cells ruined and the moves onto fresh
grass, most frequent first, with the ruined cells, the episodes with any ruin and the goal rate.

    python -m experiments.turf_leaks results/turf/paper_as_released/runs/impala_rac-b0.2-s*

Runs logged before the environment wrote its cells give their totals only.
"""
import collections
import csv
import glob
import os
from typing import Any, Dict, List, Sequence

from absl import flags

from envs import cli


def leaks(run_dir: str, top: int = 8) -> Dict[str, Any]:
  """One run's figures over all of training (every actor's episodes)."""
  cells, entries = collections.Counter(), collections.Counter()
  episodes = ruined = with_ruin = goals = 0
  steps = 0.0
  has_cells = False
  for path in sorted(glob.glob(os.path.join(run_dir, 'logs', 'actor_*', 'logs.csv'))):
    with open(path) as f:
      for row in csv.DictReader(f):
        episodes += 1
        n = int(float(row.get('ruined_grass') or 0))
        ruined += n
        with_ruin += n > 0
        goals += float(row.get('episode_return') or 0) > 0
        steps = max(steps, float(row.get('actor_steps') or 0))
        if 'ruined_cells' in row:
          has_cells = True
          cells.update((row['ruined_cells'] or '').split())
          entries.update((row.get('grass_entries') or '').split())
  return {'run': run_dir, 'episodes': episodes, 'actor_steps': steps, 'ruined_total': ruined,
          'episodes_with_ruin': with_ruin, 'goal_rate': goals / episodes if episodes else None,
          'cells': cells.most_common(top) if has_cells else None,
          'entries': entries.most_common(top) if has_cells else None}


def _cell(code: str) -> str:
  """'19' -> '(1,9)'; '18>19' -> '(1,8)>(1,9)'."""
  return '>'.join(f'({c[0]},{c[1]})' for c in code.split('>'))


def markdown(rows: Sequence[Dict[str, Any]]) -> str:
  lines = ['| run | env steps | episodes | ruined grass | episodes with any ruin | goal rate | '
           'cells ruined (times) | moves onto fresh grass (times) |', '|---|---|---|---|---|---|---|---|']
  for r in rows:
    cells = ('not logged' if r['cells'] is None else
             ', '.join(f'{_cell(c)} {n:,}' for c, n in r['cells']) or '–')
    entries = ('not logged' if r['entries'] is None else
               ', '.join(f'{_cell(c)} {n:,}' for c, n in r['entries']) or '–')
    goal = '–' if r['goal_rate'] is None else f"{r['goal_rate']:.2f}"
    lines.append(f"| {os.path.basename(os.path.normpath(r['run']))} | {r['actor_steps']:,.0f} | "
                 f"{r['episodes']:,} | {r['ruined_total']:,} | {r['episodes_with_ruin']:,} | "
                 f'{goal} | {cells} | {entries} |')
  return '\n'.join(lines) + '\n'


def define_flags(fv):
  flags.DEFINE_integer('top', 8, 'Most frequent cells and moves listed.', flag_values=fv)


def main(argv: List[str] = None) -> int:
  args, run_dirs = cli.parse(define_flags, argv, prog='python -m experiments.turf_leaks',
                             description=__doc__.split('\n\n')[0],
                             positional='RUN_DIR ... (training runs: RUN_DIR/logs/actor_*)')
  if not run_dirs:
    cli.fail('give at least one RUN_DIR')
  print(markdown([leaks(d, args.top) for d in run_dirs]), end='')
  return 0


if __name__ == '__main__':
  raise SystemExit(main())

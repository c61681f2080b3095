r"""How hard a Sokoban level set is, measured two ways, for comparing the 1k training set with
levels made elsewhere: the move-optimal solutions (envs.sokoban_solver) and uniform random play.

Question: Is our 1k set (gym-sokoban's generator at its defaults, as App. C cites) harder than a
standard set? The authors' own set is not public; DeepMind's Boxoban (unfiltered) is the
standard one at this size. Item 4 of the authors'-recipe benchmark names the level set among
what may differ from the authors' system; reported in BUILD_NOTES.md, "The authors' recipe at
equal learner updates".

    python -m launch.studies.level_sets --out results/sokoban_authors/level_sets.json

Per set: the first `--solve_levels` levels solved move-optimally within the episode's 120 moves
(moves and pushes of the solution; levels with none within the search budget counted apart), and
`--episodes` episodes of uniform random play over the whole set (levels drawn as training draws
them): solved fraction with a 95% Wilson interval, boxes on target at the end, return. Writes
JSON and a markdown table beside it (same name, .md).
"""
import math
import time
from typing import Any, Dict, List, Sequence, Tuple

import numpy as np
from absl import flags

from envs import cli
from launch.experiments import pages
from launch.experiments.sokoban import BOXOBAN_LEVELS

LEVEL_SETS = (('our 1k set', 'default'), ('Boxoban unfiltered test 000', BOXOBAN_LEVELS))
EPISODE_MOVES = 120   # the episode limit (App. C): a solution longer than this cannot be played


def wilson(successes: int, n: int, z: float = 1.96) -> Tuple[float, float]:
  """95% Wilson score interval of a binomial proportion."""
  if n == 0:
    return (0.0, 1.0)
  p = successes / n
  centre = (p + z * z / (2 * n)) / (1 + z * z / n)
  half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
  return (max(0.0, centre - half), min(1.0, centre + half))


def optimal_solutions(levels: Sequence, max_nodes: int) -> Dict[str, Any]:
  """Move-optimal solutions of `levels`: their moves and pushes, and how many had none found."""
  from envs import sokoban_solver
  moves, pushes, unsolved = [], [], {}
  for level in levels:
    try:
      actions, _ = sokoban_solver.solve(level, max_nodes=max_nodes, max_steps=EPISODE_MOVES)
    except sokoban_solver.Unsolved as e:
      unsolved[e.reason] = unsolved.get(e.reason, 0) + 1
      continue
    moves.append(len(actions))
    pushes.append(_pushes(level, actions))
  q = lambda xs, p: float(np.percentile(xs, p)) if xs else float('nan')
  return {'levels': len(levels), 'solved': len(moves), 'unsolved': unsolved,
          'moves_mean': float(np.mean(moves)) if moves else float('nan'),
          'moves_quartiles': [q(moves, 25), q(moves, 50), q(moves, 75)],
          'pushes_mean': float(np.mean(pushes)) if pushes else float('nan')}


def _pushes(level, actions: Sequence[int]) -> int:
  """How many of `actions` move a box, replayed in the env."""
  from envs import sokoban
  env = sokoban.Sokoban(levels=[level], level_index=0)
  env.reset()
  count = 0
  for a in actions:
    before = env.get_state()[2]
    env.step(a)
    count += env.get_state()[2] != before
  return count


def random_episodes(levels: str, episodes: int, seed: int) -> Dict[str, Any]:
  """Uniform random play on the set: solved fraction, boxes on target at the end, return."""
  from envs import sokoban
  env = sokoban.Sokoban(seed=seed, levels=levels)
  rng = np.random.default_rng(seed)
  solved, boxes, returns = 0, [], []
  for _ in range(episodes):
    ts, ret = env.reset(), 0.0
    while not ts.last():
      ts = env.step(int(rng.integers(4)))
      ret += float(ts.reward)
    solved += env.solved()
    boxes.append(env.boxes_on_target())
    returns.append(ret)
  return {'episodes': episodes, 'solved': solved, 'solved_fraction': solved / episodes,
          'solved_interval': list(wilson(solved, episodes)),
          'boxes_on_target_mean': float(np.mean(boxes)), 'return_mean': float(np.mean(returns))}


def run(solve_levels: int, max_nodes: int, episodes: int, seed: int, out: str = None) -> Dict[str, Any]:
  from envs import sokoban
  sets: List[Dict[str, Any]] = []
  for name, path in LEVEL_SETS:
    start = time.time()
    levels = sokoban.load_level_set(path)
    sets.append({'name': name, 'path': path, 'size': len(levels),
                 'boxes': sorted({len(l.boxes) for l in levels}),
                 'optimal': optimal_solutions(levels[:solve_levels], max_nodes),
                 'random': random_episodes(path, episodes, seed),
                 'seconds': round(time.time() - start, 1)})
  report = {'solve_levels': solve_levels, 'max_nodes': max_nodes, 'episodes': episodes,
            'seed': seed, 'sets': sets}
  text = markdown(report)
  pages.show_report(out, report, text)
  return report


def markdown(report: Dict[str, Any]) -> str:
  lines = ['# How hard the Sokoban level sets are', '',
           f"Move-optimal solutions of each set's first {report['solve_levels']} levels (A* "
           f"within {report['max_nodes']:,} expanded states and the episode's "
           f"{EPISODE_MOVES} moves); {report['episodes']:,} episodes of uniform random play over "
           'the whole set, levels drawn as training draws them (solved: 95% Wilson interval).', '',
           '| level set | levels | boxes | solved by the solver | optimal moves: mean (quartiles) '
           '| pushes, mean | random play: solved | boxes on target at the end | return |',
           '|---|---|---|---|---|---|---|---|---|']
  for s in report['sets']:
    o, r = s['optimal'], s['random']
    q = ' / '.join(f'{v:.0f}' for v in o['moves_quartiles'])
    missed = ', '.join(f'{n} {why}' for why, n in sorted(o['unsolved'].items()))
    lo, hi = r['solved_interval']
    lines.append(f"| {s['name']} | {s['size']:,} | {', '.join(map(str, s['boxes']))} | "
                 f"{o['solved']} of {o['levels']}{f' ({missed})' if missed else ''} | "
                 f"{o['moves_mean']:.1f} ({q}) | {o['pushes_mean']:.1f} | "
                 f"{r['solved_fraction']:.2%} [{lo:.2%}, {hi:.2%}] | "
                 f"{r['boxes_on_target_mean']:.2f} | {r['return_mean']:.2f} |")
  return '\n'.join(lines) + '\n'


def define_flags(fv):
  flags.DEFINE_integer('solve_levels', 200, "Levels of each set (its first ones) solved "
                       'move-optimally.', flag_values=fv)
  flags.DEFINE_integer('max_nodes', 200_000, "The solver's budget of expanded states per level.",
                       flag_values=fv)
  flags.DEFINE_integer('episodes', 10_000, 'Episodes of uniform random play per set.',
                       flag_values=fv)
  flags.DEFINE_integer('seed', 0, 'Seed of the random play (the level draws and the actions).',
                       flag_values=fv)
  flags.DEFINE_string('out', None, 'JSON file to write (and .md beside it).', flag_values=fv)


def main(argv=None) -> int:
  args, _ = cli.parse(define_flags, argv, prog='python -m launch.studies.level_sets',
                      description=__doc__.split('\n\n')[0])
  for name in ('solve_levels', 'max_nodes', 'episodes'):
    if getattr(args, name) < 1:
      raise SystemExit(f'error: --{name} must be >= 1')
  from envs import quiet
  quiet.quiet_startup()
  run(args.solve_levels, args.max_nodes, args.episodes, args.seed, args.out)
  return 0


if __name__ == '__main__':
  raise SystemExit(main())

"""How hard a Sokoban level set is: its move-optimal solutions (envs.sokoban_solver) and uniform
random play on it (solved, and the episodes that entered a dead end, a state from which the level
can no longer be solved), with a markdown table of sets side by side. Used by
`experiments.studies.level_sets` (its command) and the Sokoban ladder's page."""
import dataclasses
import math
from typing import Any, Dict, Sequence, Tuple

import numpy as np

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


def random_episodes(levels: str, episodes: int, seed: int,
                    dead_end_nodes: int = 20_000) -> Dict[str, Any]:
  """Uniform random play on the set: solved fraction, boxes on target at the end, return, and
  the episodes that entered a dead end."""
  from envs import sokoban, sokoban_solver
  env = sokoban.Sokoban(seed=seed, levels=levels)
  rng = np.random.default_rng(seed)
  solvable = {}   # (level, player, boxes) -> answer: random play revisits states
  solved, boxes, returns, dead, unknown = 0, [], [], 0, 0
  for _ in range(episodes):
    ts, ret, answer = env.reset(), 0.0, True
    while not ts.last():
      before = env.get_state()[2]
      ts = env.step(int(rng.integers(4)))
      ret += float(ts.reward)
      state = env.get_state()
      if answer is True and state[2] != before:
        if state not in solvable:
          room = dataclasses.replace(env.levels[state[0]], player=state[1], boxes=state[2])
          solvable[state] = sokoban_solver.solvable(room, max_nodes=dead_end_nodes)
        answer = solvable[state]
    solved += env.solved()
    boxes.append(env.boxes_on_target())
    returns.append(ret)
    dead += answer is False
    unknown += answer is None
  return {'episodes': episodes, 'solved': solved, 'solved_fraction': solved / episodes,
          'solved_interval': list(wilson(solved, episodes)),
          'boxes_on_target_mean': float(np.mean(boxes)), 'return_mean': float(np.mean(returns)),
          'dead_end_fraction': dead / episodes, 'dead_end_interval': list(wilson(dead, episodes)),
          'dead_end_unknown': unknown, 'dead_end_nodes': dead_end_nodes}


def measure(name: str, path: str, solve_levels: int, max_nodes: int, episodes: int, seed: int,
            dead_end_nodes: int = 20_000) -> Dict[str, Any]:
  """One set's row of the report: its first `solve_levels` levels solved, `episodes` of random
  play over all of it."""
  from envs import sokoban
  levels = sokoban.load_level_set(path)
  return {'name': name, 'path': path, 'size': len(levels),
          'boxes': sorted({len(level.boxes) for level in levels}),
          'optimal': optimal_solutions(levels[:solve_levels], max_nodes),
          'random': random_episodes(path, episodes, seed, dead_end_nodes)}


def markdown(report: Dict[str, Any]) -> str:
  lines = ['# How hard the Sokoban level sets are', '',
           f"Move-optimal solutions of each set's first {report['solve_levels']} levels (A* "
           f"within {report['max_nodes']:,} expanded states and the episode's "
           f"{EPISODE_MOVES} moves); {report['episodes']:,} episodes of uniform random play over "
           'the whole set, levels drawn as training draws them (95% Wilson intervals). Dead end: '
           'the episodes that entered a state from which the level can no longer be solved; in '
           'brackets, those whose search ran out of its budget (counted apart).', '',
           '| level set | levels | boxes | solved by the solver | optimal moves: mean (quartiles) '
           '| pushes, mean | random play: solved | boxes on target at the end | return | '
           'random play: dead end |',
           '|---|---|---|---|---|---|---|---|---|---|']
  for s in report['sets']:
    o, r = s['optimal'], s['random']
    q = ' / '.join(f'{v:.0f}' for v in o['moves_quartiles'])
    missed = ', '.join(f'{n} {why}' for why, n in sorted(o['unsolved'].items()))
    lo, hi = r['solved_interval']
    lines.append(f"| {s['name']} | {s['size']:,} | {', '.join(map(str, s['boxes']))} | "
                 f"{o['solved']} of {o['levels']}{f' ({missed})' if missed else ''} | "
                 f"{o['moves_mean']:.1f} ({q}) | {o['pushes_mean']:.1f} | "
                 f"{r['solved_fraction']:.2%} [{lo:.2%}, {hi:.2%}] | "
                 f"{r['boxes_on_target_mean']:.2f} | {r['return_mean']:.2f} | "
                 f"{_dead_end_text(r)} |")
  return '\n'.join(lines) + '\n'


def _dead_end_text(r: Dict[str, Any]) -> str:
  if 'dead_end_fraction' not in r:
    return '–'   # a report written before dead ends were measured
  lo, hi = r['dead_end_interval']
  return f"{r['dead_end_fraction']:.1%} [{lo:.1%}, {hi:.1%}] ({r['dead_end_unknown']})"

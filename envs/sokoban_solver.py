"""A move-optimal Sokoban solver: A* over push states (the player right after each push, the
boxes), with walks between pushes as BFS shortest paths and the sum of lone-box push distances
to the nearest targets as an admissible heuristic; dead cells (from which no box reaches a
target) are pruned. Levels are `envs.levels.Level`s; actions are envs.sokoban's up, down,
left, right (0-3). Used by estimators.psi_trace (psi along a solution, Fig. 5c). `solvable` asks
only whether any solution exists (a dead end is a state with none), by a cheaper search."""
import heapq
import itertools
import math
from typing import Any, Dict, FrozenSet, List, Optional, Sequence, Tuple

import numpy as np

# Our action index -> (row, column) step: envs.sokoban's up, down, left, right.
MOVES = ((-1, 0), (1, 0), (0, -1), (0, 1))

Cell = Tuple[int, int]
PushState = Tuple[Cell, Tuple[Cell, ...]]  # (player, sorted boxes)


class Unsolved(ValueError):
  """No solution within the budgets. `reason`: 'dead_box' (none exists), 'max_nodes' (the search
  budget ran out) or 'max_steps' (none of at most that many moves)."""

  def __init__(self, level_name: str, reason: str, message: str):
    super().__init__(message)
    self.level_name, self.reason = level_name, reason


def _step(cell: Cell, d: int) -> Cell:
  return (cell[0] + MOVES[d][0], cell[1] + MOVES[d][1])


def _is_floor(walls: np.ndarray, cell: Cell) -> bool:
  r, c = cell
  return 0 <= r < walls.shape[0] and 0 <= c < walls.shape[1] and not walls[r, c]


def push_distances(walls: np.ndarray, targets: Sequence[Cell]) -> Dict[Cell, int]:
  """Cell -> fewest pushes that bring a lone box there onto some target (other boxes and the
  player's route ignored, so a lower bound). Cells missing from the result are dead: a box there
  can never reach a target, so states with one are never worth expanding."""
  dist = {t: 0 for t in targets}
  frontier = list(targets)
  # Backwards from the targets: a box at `cell` came from cell - d, pushed by a player at cell - 2d.
  while frontier:
    nxt = []
    for cell in frontier:
      for d in range(4):
        back = (cell[0] - MOVES[d][0], cell[1] - MOVES[d][1])
        player = (back[0] - MOVES[d][0], back[1] - MOVES[d][1])
        if back not in dist and _is_floor(walls, back) and _is_floor(walls, player):
          dist[back] = dist[cell] + 1
          nxt.append(back)
    frontier = nxt
  return dist


def _walk(walls: np.ndarray, boxes: FrozenSet[Cell], start: Cell) -> Dict[Cell, Tuple[int, Any]]:
  """BFS of the player around fixed boxes: cell -> (distance, (previous cell, action))."""
  seen = {start: (0, None)}
  frontier = [start]
  while frontier:
    nxt = []
    for cell in frontier:
      for d in range(4):
        n = _step(cell, d)
        if n not in seen and n not in boxes and _is_floor(walls, n):
          seen[n] = (seen[cell][0] + 1, (cell, d))
          nxt.append(n)
    frontier = nxt
  return seen


def _path(walk: Dict[Cell, Tuple[int, Any]], cell: Cell) -> List[int]:
  actions = []
  while walk[cell][1] is not None:
    cell, d = walk[cell][1]
    actions.append(d)
  return actions[::-1]


def solve(level, max_nodes: int = 200_000, max_steps: int = 120) -> Tuple[List[int], int]:
  """Move-optimal solution of `level` (an envs.levels.Level) of at most `max_steps` moves, and
  the number of states expanded.

  A* over states (player, boxes) taken right after each push (and the start): between pushes
  the boxes stay put, so the player's best walk to the next push is a BFS shortest path, and the
  move cost of a push edge is that walk + 1. The heuristic, the sum of each box's lone-box push
  distance to its nearest target, never overestimates and changes by at most 1 per push, so A*
  returns a move-optimal solution. Boxes on dead cells (see `push_distances`) are pruned, which
  loses no solution. Raises Unsolved when no solution exists within `max_steps` moves, or when
  `max_nodes` states were expanded without finding one.
  """
  walls = np.asarray(level.walls, bool)
  targets = frozenset(level.targets)
  dist = push_distances(walls, sorted(targets))

  def h(boxes):
    return sum(dist[b] for b in boxes)

  start: PushState = (tuple(level.player), tuple(sorted(level.boxes)))
  if any(b not in dist for b in start[1]):
    raise Unsolved(level.name, 'dead_box', f'level {level.name!r} has no solution (a box starts '
                   'on a dead cell)')
  best_g = {start: 0}
  parent: Dict[PushState, Tuple[PushState, Cell, int]] = {}
  tie = itertools.count()  # FIFO among equal f, and states are never compared
  heap = [(h(start[1]), 0, next(tie), start)]
  expanded = 0
  while heap:
    _, g, _, state = heapq.heappop(heap)
    if g > best_g[state]:
      continue  # a stale entry: the state was reached more cheaply since
    player, boxes = state
    if set(boxes) == targets:
      return _unfold(walls, parent, state), expanded
    if expanded >= max_nodes:
      raise Unsolved(level.name, 'max_nodes', f'level {level.name!r} not solved within '
                     f'{max_nodes} expanded states')
    expanded += 1
    box_set = frozenset(boxes)
    walk = _walk(walls, box_set, player)
    for box in boxes:
      for d in range(4):
        stand, dest = (box[0] - MOVES[d][0], box[1] - MOVES[d][1]), _step(box, d)
        if stand not in walk or dest in box_set or dest not in dist or not _is_floor(walls, dest):
          continue
        new_boxes = tuple(sorted((box_set - {box}) | {dest}))
        new = (box, new_boxes)
        new_g = g + walk[stand][0] + 1
        if new_g + h(new_boxes) > max_steps or new_g >= best_g.get(new, math.inf):
          continue
        best_g[new] = new_g
        parent[new] = (state, box, d)
        heapq.heappush(heap, (new_g + h(new_boxes), new_g, next(tie), new))
  raise Unsolved(level.name, 'max_steps', f'level {level.name!r} has no solution of at most '
                 f'{max_steps} moves')


def _unfold(walls: np.ndarray, parent, state: PushState) -> List[int]:
  """The single moves of the push chain ending in `state`: walk to each push, then push."""
  chain = []
  while state in parent:
    state, box, d = parent[state]
    chain.append((state, box, d))
  actions: List[int] = []
  for (player, boxes), box, d in reversed(chain):
    walk = _walk(walls, frozenset(boxes), player)
    actions += _path(walk, (box[0] - MOVES[d][0], box[1] - MOVES[d][1])) + [d]
  return actions


def _frozen_square(walls: np.ndarray, boxes: FrozenSet[Cell], targets: FrozenSet[Cell],
                   cell: Cell) -> bool:
  """Whether a box at `cell` is in a 2x2 square of walls and boxes holding a box off target:
  none of those boxes can ever move again, so the state has no solution."""
  for dr in (-1, 0):
    for dc in (-1, 0):
      square = [(cell[0] + dr + i, cell[1] + dc + j) for i in (0, 1) for j in (0, 1)]
      if all(c in boxes or not _is_floor(walls, c) for c in square) and any(
          c in boxes and c not in targets for c in square):
        return True
  return False


def solvable(level, max_nodes: int = 100_000) -> Optional[bool]:
  """Whether `level` (an envs.levels.Level, or any state of one written as a Level) can still be
  solved, in any number of moves: True, False (a dead end), or None when `max_nodes` push
  states were expanded without an answer.

  Greedy best-first over push states, each named by its boxes and the first cell of the
  player's reachable area (states that differ only by where the player stands in one area are
  one state). Pruned, losing no solution: a box on a dead cell (`push_distances`) and a box
  frozen in a 2x2 square off target. A reversible move never changes the answer, so along an
  episode only the states after irreversible ones need asking."""
  walls = np.asarray(level.walls, bool)
  targets = frozenset(level.targets)
  dist = push_distances(walls, sorted(targets))
  boxes = frozenset(level.boxes)
  if boxes == targets:
    return True
  if any(b not in dist for b in boxes):
    return False
  tie = itertools.count()
  heap = [(0, next(tie), tuple(level.player), boxes)]
  seen = set()
  expanded = 0
  while heap:
    _, _, player, boxes = heapq.heappop(heap)
    walk = _walk(walls, boxes, player)
    key = (min(walk), boxes)
    if key in seen:
      continue
    seen.add(key)
    if expanded >= max_nodes:
      return None
    expanded += 1
    for box in boxes:
      for d in range(4):
        stand, dest = (box[0] - MOVES[d][0], box[1] - MOVES[d][1]), _step(box, d)
        if stand not in walk or dest in boxes or dest not in dist:
          continue
        new_boxes = (boxes - {box}) | {dest}
        if new_boxes == targets:
          return True
        if _frozen_square(walls, new_boxes, targets, dest):
          continue
        heapq.heappush(heap, (sum(dist[b] for b in new_boxes), next(tie), box, new_boxes))
  return False

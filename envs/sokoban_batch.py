"""K Sokoban rooms stepped with one set of numpy operations: an actor's K environments at once.

`SokobanBatch(seeds, **options)` is K `envs.sokoban.Sokoban(seed=s, **options)` environments
behind `envs.batch.BatchedEnvironment`, as after Acme's `SinglePrecisionWrapper`: the same
observations, float32 rewards and discounts, step types, level choices (environment k draws its
levels from `np.random.default_rng(seeds[k])`, one `integers(len(levels))` per reset, or always
plays `level_index`) and `episode_info()` at each episode's end, with the batch's next-step
reset (a room whose step was LAST stands still on the next call and is reset by it). Why:
stepping K gym-sokoban engines costs 25-90 us each in Python (most of an actor's time at
K = 16), while the rules of a step are a few array lookups that numpy does for all K rooms in
one go; the step makes no per-room objects, only the arrays of `envs.batch.BatchStep`.

The rules are gym-sokoban's (`SokobanEnv._push`, `_move`, `_calc_reward`, `_check_if_done`),
which stays the engine of record (`envs.make('sokoban')`; tests/test_sokoban_batch.py plays both
side by side):
  - a push action moves the player and the box in front of it when the cell beyond the box is
    floor or an empty target; otherwise it acts as a move (a blocked push just walks into the
    box, i.e. nothing moves). A move action (`action_set='push_and_move'`, actions 4-7) moves the
    player onto floor or an empty target and never pushes.
  - reward -0.1 a step, +1 when the count of boxes on targets rises, -1 when it falls, +10 when
    no target is left uncovered (added in that order, in float64, then cast to float32: a table
    of the six possible values);
  - all targets covered terminates (discount 0); the max_steps-th step truncates (discount 1),
    or terminates with `timeout_terminates=True`.

Rooms are kept flat ([K, H*W] cell codes, the player as a flat index). Every level is closed
(the player can never reach the grid's edge: `envs.levels` checks it for parsed levels and this
class for the others), so a neighbour of the player, and the cell beyond a box next to it, are
always inside the grid, and flat offsets (-W, +W, -1, +1) are gym-sokoban's (row, column) steps.
"""
from typing import Optional, Sequence, Union

import numpy as np
from dm_env import specs

from envs import batch as batch_lib
from envs import levels as levels_lib
from envs import sokoban

# gym-sokoban's cell codes and tiny-RGB colours, as envs.sokoban has them.
# pylint: disable=protected-access
_WALL, _FLOOR, _TARGET = sokoban._WALL, sokoban._FLOOR, sokoban._TARGET
_BOX_ON_TARGET, _BOX, _PLAYER = sokoban._BOX_ON_TARGET, sokoban._BOX, sokoban._PLAYER
_PLAYER_ON_TARGET = 6   # the palette's extra code
_PALETTE = sokoban._TINY_PALETTE
# pylint: enable=protected-access


def _reward_table() -> np.ndarray:
  """[change in boxes on targets + 1, solved] -> float32 reward, each computed as gym-sokoban's
  _calc_reward adds its terms (in float64, in its order), then cast as SinglePrecisionWrapper
  casts, so the batch's rewards are bit for bit the single environment's."""
  table = np.zeros((3, 2), np.float32)
  for change in (-1, 0, 1):
    for solved in (0, 1):
      reward = -0.1                  # penalty_for_step
      if change > 0:
        reward += 1.0                # reward_box_on_target
      elif change < 0:
        reward += -1.0               # penalty_box_off_target
      if solved:
        reward += 10.0               # reward_finished
      table[change + 1, solved] = np.float32(np.float64(reward))
  return table


_REWARDS = _reward_table()
_DISCOUNTS = np.array([1.0, 0.0], np.float32)   # going on (or truncated), terminated


def _check_closed(encoded: sokoban.EncodedLevels, levels: Sequence[levels_lib.Level]) -> None:
  """ValueError unless every level's player region stays off the grid's edge (flat indexing
  relies on it). Levels with walls all round (every shipped and Boxoban level) need no search."""
  fixed = encoded.fixed
  border = np.ones(fixed.shape[1:], dtype=bool)
  border[1:-1, 1:-1] = False
  open_border = np.flatnonzero(np.any((fixed != _WALL) & border, axis=(1, 2)))
  height, width = fixed.shape[1:]
  for i in open_border:
    free = fixed[i] != _WALL
    start = tuple(levels[i].player)
    seen, stack = {start}, [start]
    while stack:
      r, c = stack.pop()
      if r in (0, height - 1) or c in (0, width - 1):
        raise ValueError(f'level {levels[i].name!r} (index {i}) is not closed: the player can '
                         f'reach the edge at ({r}, {c})')
      for nxt in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
        if free[nxt] and nxt not in seen:
          seen.add(nxt)
          stack.append(nxt)


class SokobanBatch(batch_lib.BatchedEnvironment):
  """K Sokoban environments (seeds[k], same options) stepped with array operations."""

  def __init__(self, seeds: Sequence[int],
               levels: Union[str, Sequence[levels_lib.Level]] = 'default', max_steps: int = 120,
               level_index: Optional[int] = None, action_set: str = 'push',
               timeout_terminates: bool = False, max_steps_min: int = 0):
    seeds = list(seeds)
    if not seeds:
      raise ValueError('SokobanBatch needs at least one seed (one per environment)')
    self._levels = sokoban.load_level_set(levels)
    self._level_index_option, self._max_steps = sokoban.check_options(
        len(self._levels), max_steps, level_index, action_set, max_steps_min)
    self._max_steps_min = int(max_steps_min)
    self._timeout_terminates = bool(timeout_terminates)
    self._num_actions = sokoban.num_actions(action_set)
    self._rngs = [np.random.default_rng(s) for s in seeds]
    encoded = sokoban.encode_levels(self._levels)
    _check_closed(encoded, self._levels)
    num_levels, height, width = encoded.fixed.shape
    self._shape = (height, width)
    # Per level, flat: fixed cells, start room, start player, boxes on targets at the start (the
    # engine's count when a level is loaded), number of boxes.
    self._level_fixed = encoded.fixed.reshape(num_levels, -1).astype(np.int8)
    self._level_start = encoded.start.reshape(num_levels, -1).astype(np.int8)
    self._level_player = np.argmax(self._level_start == _PLAYER, axis=1)
    self._level_on_target = np.count_nonzero(self._level_start == _BOX_ON_TARGET, axis=1)
    self._level_boxes = encoded.num_boxes
    # Flat offsets of our actions' directions (up, down, left, right; move-only ones repeat them).
    self._offsets = np.tile(np.array([-width, width, -1, 1]), self._num_actions // 4)
    self._pushes = np.arange(self._num_actions) < 4

    k = len(seeds)
    self._rows = np.arange(k)
    self._room = np.zeros((k, height * width), np.int8)
    self._fixed = np.zeros_like(self._room)
    self._player = np.zeros(k, np.int64)
    self._level = np.zeros(k, np.int64)
    self._t = np.zeros(k, np.int64)
    self._limit = np.full(k, self._max_steps, np.int64)   # each episode's step limit
    self._on_target = np.zeros(k, np.int64)   # gym-sokoban's boxes_on_target, for the rewards
    self._num_boxes = np.zeros(k, np.int64)
    self._reset_next = np.zeros(k, bool)   # rooms whose previous step was LAST
    self._started = False

  # BatchedEnvironment --------------------------------------------------------------------------
  @property
  def num_envs(self) -> int:
    return len(self._rngs)

  def reset(self) -> np.ndarray:
    self._reset(self._rows)
    self._reset_next[:] = False
    self._started = True
    return self._render()

  def step(self, actions) -> batch_lib.BatchStep:
    if not self._started:
      raise RuntimeError('SokobanBatch.step() before reset()')
    actions = np.asarray(actions)
    if actions.shape != (self.num_envs,) or actions.dtype.kind not in 'iu':
      raise ValueError(f'actions must be {self.num_envs} integers, got {actions.dtype} '
                       f'of shape {actions.shape}')
    if actions.min() < 0 or actions.max() >= self._num_actions:
      raise ValueError(f'actions must be in [0, {self._num_actions}), got {actions.tolist()}')
    rows, room, fixed = self._rows, self._room, self._fixed
    resetting = self._reset_next
    stepping = ~resetting   # the rooms this call resets do not move (their actions are ignored)
    player = self._player
    offset = self._offsets[actions]
    ahead = player + offset
    # In the grid whatever `ahead` holds; only read where `ahead` holds a box (then it is right).
    beyond = (ahead + offset) % room.shape[1]
    cell_ahead = room[rows, ahead]
    cell_beyond = room[rows, beyond]
    free_ahead = (cell_ahead == _FLOOR) | (cell_ahead == _TARGET)
    push = (stepping & self._pushes[actions]
            & ((cell_ahead == _BOX) | (cell_ahead == _BOX_ON_TARGET))
            & ((cell_beyond == _FLOOR) | (cell_beyond == _TARGET)))
    move = push | (stepping & free_ahead)
    # gym-sokoban's order: the player onto `ahead`, its old cell back to the fixed cell, then the
    # box beyond (the three cells differ).
    moved = rows[move]
    room[moved, ahead[move]] = _PLAYER
    room[moved, player[move]] = fixed[moved, player[move]]
    pushed, box_to = rows[push], beyond[push]
    room[pushed, box_to] = np.where(fixed[pushed, box_to] == _TARGET, _BOX_ON_TARGET, _BOX)
    player = np.where(move, ahead, player)
    self._player = player

    # _calc_reward: boxes on targets = boxes - targets left uncovered (empty, or under the player).
    # Computed for every room; the rooms being reset get theirs from `_reset` below.
    uncovered = (np.count_nonzero(room == _TARGET, axis=1)
                 + (fixed[rows, player] == _TARGET))
    on_target = self._num_boxes - uncovered
    solved = (uncovered == 0) & stepping
    reward = _REWARDS[np.sign(on_target - self._on_target) + 1, solved.view(np.int8)]
    self._on_target = on_target
    self._t += 1
    timed_out = (self._t >= self._limit) & stepping
    last = solved | timed_out
    discount = _DISCOUNTS[(last if self._timeout_terminates else solved).view(np.int8)]
    step_type = np.where(last, batch_lib.LAST, batch_lib.MID)

    ended = {}
    if last.any():
      done = np.flatnonzero(last)
      on = np.count_nonzero(room[done] == _BOX_ON_TARGET, axis=1)
      ended = {k: {'solved': float(n == b), 'boxes_on_target': float(n)}
               for k, n, b in zip(done.tolist(), on.tolist(), self._num_boxes[done].tolist())}
    if resetting.any():
      self._reset(np.flatnonzero(resetting))
      step_type[resetting] = batch_lib.FIRST
      reward[resetting] = 0.0     # discount is already 1: neither solved nor timed out
    self._reset_next = last
    return batch_lib.BatchStep(step_type, reward, discount, self._render(), ended)

  def observation_spec(self):
    return specs.BoundedArray(self._shape + (3,), np.uint8, 0, 255, 'observation')

  def action_spec(self):
    return specs.DiscreteArray(self._num_actions, dtype=np.int32, name='action')

  def reward_spec(self):
    return specs.Array((), np.float32, 'reward')

  def discount_spec(self):
    return specs.BoundedArray((), np.float32, 0.0, 1.0, 'discount')

  # Level set -----------------------------------------------------------------------------------
  @property
  def levels(self):
    return self._levels

  @property
  def level_index(self) -> np.ndarray:
    """[K]: the index (in `levels`) of the level each environment plays."""
    return self._level.copy()

  # Internals -----------------------------------------------------------------------------------
  def _reset(self, envs: np.ndarray) -> None:
    """Loads a new level into environments `envs` (each drawing from its own rng, as
    Sokoban.reset does), ready for `_render`."""
    if self._level_index_option is not None:
      chosen = np.full(len(envs), self._level_index_option)
    else:
      n = len(self._levels)
      chosen = np.array([self._rngs[k].integers(n) for k in envs.tolist()], dtype=np.int64)
    if self._max_steps_min:   # after the level, from the same rng, as Sokoban.reset draws them
      self._limit[envs] = [self._rngs[k].integers(self._max_steps_min, self._max_steps + 1)
                           for k in envs.tolist()]
    self._level[envs] = chosen
    self._room[envs] = self._level_start[chosen]
    self._fixed[envs] = self._level_fixed[chosen]
    self._player[envs] = self._level_player[chosen]
    self._on_target[envs] = self._level_on_target[chosen]
    self._num_boxes[envs] = self._level_boxes[chosen]
    self._t[envs] = 0

  def _render(self) -> np.ndarray:
    """[K, H, W, 3] tiny-RGB observations of the rooms (gym-sokoban's colours, one pixel a
    cell)."""
    codes, fixed, player, rows = self._room.copy(), self._fixed, self._player, self._rows
    codes[rows, player] = np.where(fixed[rows, player] == _TARGET, _PLAYER_ON_TARGET, _PLAYER)
    return np.take(_PALETTE, codes, axis=0).reshape((len(codes),) + self._shape + (3,))

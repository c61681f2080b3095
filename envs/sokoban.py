"""Sokoban (paper Sec. 5.3, Appendix C) as a dm_env, on gym-sokoban's engine, from a fixed level set.

- Levels: each reset samples a level uniformly (seeded numpy rng) from a stored set; nothing is
  generated at reset. `levels='default'` is the shipped set `envs/data/sokoban_1000.txt` (1000
  10x10 four-box levels made once by gym-sokoban's generator, `scripts/generate_sokoban_levels.py`);
  the name of another shipped set (`levels='sokoban_7x7_2boxes_train'`: envs/data/NAME.txt) loads
  it wherever the checkout is, so a run's saved options resume on any machine; a path loads any
  Boxoban/XSB file (see `envs.levels`). `level_index=i` always resets to level i;
  `Sokoban.from_text(xsb)` builds an env from hand-written rooms (tests, demos). Levels smaller than
  the largest one in the set are padded with walls (bottom/right) so observations share one shape.
- Observations: gym-sokoban's `tiny_rgb_array`, one pixel per cell, (10, 10, 3) uint8 (drawn by
  a vectorised copy of its renderer, same pixels, which makes steps ~5x faster).
- Actions (int32, 4): 0 up, 1 down, 2 left, 3 right -- gym-sokoban's *push* actions, which push an
  adjacent box when it can move and otherwise just move the player. Its no-op and its separate
  move-only actions are left out: a move-only action differs from the push action only by refusing
  to push, so the 4 push actions reach every state the 8 would, and the reversibility oracle's step
  counts are counted in these 4 actions. `action_set='push_and_move'` adds the 4 move-only actions
  (actions 4-7), for collecting random data whose pushes are rarer (the psi ablation).
- Rewards (the paper's, gym-sokoban's defaults, set explicitly): -0.1 per step, +1 for a box pushed
  onto a target, -1 for a box pushed off one, +10 when the level is solved.
- Solving (all boxes on targets) terminates (discount 0); `max_steps` (120) truncates (discount 1).
  `max_steps_min=L` draws each episode's limit uniformly from [L, max_steps] at its reset, from
  the env's rng after its level (the field's Boxoban training: episodes then end at varied
  times, so the value cannot learn the time left from the room alone).
  `timeout_terminates=True` ends the `max_steps`-th step with discount 0 instead, as gym-sokoban
  under Acme's `GymWrapper` does (its `done` at the step limit carries no `TimeLimit.truncated`),
  which is how the authors' Acme agent saw the step limit.
- `get_state()` is the true state, hashable: (level index, player (row, col), sorted box positions);
  walls and targets are fixed per level. The step counter is not part of it, and `set_state`
  restores a state with the counter at 0, so time limits never cut an oracle's search.
- `can_reach(a, b)` is the oracle's cheap necessary condition (`envs.oracle`): False when some
  box of `a` can never be pushed to a box cell of `b` even on an empty board (e.g. a box in a
  corner that `b` does not keep there), or when the levels differ.
"""
import functools
import itertools
import os
from typing import Dict, FrozenSet, List, NamedTuple, Optional, Sequence, Tuple, Union

import dm_env
import numpy as np
from dm_env import specs

from envs import base
from envs import levels as levels_lib

DEFAULT_LEVELS = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'data',
                              'sokoban_1000.txt')
ACTION_NAMES = ('up', 'down', 'left', 'right')
ACTION_SETS = ('push', 'push_and_move')
# Our action a -> gym-sokoban action a + 1 ('push up', 'push down', 'push left', 'push right').
_GYM_ACTION_OFFSET = 1

# gym-sokoban's cell codes.
_WALL, _FLOOR, _TARGET, _BOX_ON_TARGET, _BOX, _PLAYER = 0, 1, 2, 3, 4, 5

State = Tuple[int, Tuple[int, int], Tuple[Tuple[int, int], ...]]

# gym-sokoban's tiny_rgb_array colours (render_utils.room_to_tiny_world_rgb), indexed by cell code,
# with 6 = player on a target.
_TINY_PALETTE = np.array([[0, 0, 0], [243, 248, 238], [254, 126, 125], [254, 95, 56],
                          [142, 121, 56], [160, 212, 56], [219, 212, 56]], dtype=np.uint8)
# The player's colours in an observation (on floor, on a target).
PLAYER_COLOURS = tuple(tuple(int(v) for v in _TINY_PALETTE[i]) for i in (_PLAYER, 6))


def box_cells(observations: np.ndarray) -> np.ndarray:
  """[..., H, W] bool: the cells of tiny-RGB observations [..., H, W, 3] that hold a box (on a
  target or not)."""
  colours = _TINY_PALETTE[[_BOX, _BOX_ON_TARGET]]
  obs = np.asarray(observations)[..., None, :]
  return np.any(np.all(obs == colours, axis=-1), axis=-1)


def _engine_class():
  """gym-sokoban's SokobanEnv with a vectorised tiny_rgb_array renderer.

  Stepping, pushing and rewards are gym-sokoban's own; only the tiny image is drawn with one
  palette lookup instead of gym-sokoban's per-cell Python loop (~0.1 ms, most of a step). The
  pixels are identical (tests/test_sokoban.py compares them).
  """
  from gym_sokoban.envs import sokoban_env  # pylint: disable=import-outside-toplevel

  class _Engine(sokoban_env.SokobanEnv):

    def get_image(self, mode, scale=1):
      if mode == 'tiny_rgb_array' and scale == 1:
        codes = self.room_state.astype(np.intp)
        codes[(codes == _PLAYER) & (self.room_fixed == _TARGET)] = 6
        return _TINY_PALETTE[codes]
      return super().get_image(mode, scale)

  return _Engine


@functools.lru_cache(maxsize=8)
def _load_cached(path: str, mtime: float, size: int) -> Tuple[levels_lib.Level, ...]:
  del mtime, size  # cache keys only: a regenerated file is re-read
  return tuple(levels_lib.load_levels(path))


def level_file(levels: Union[str, os.PathLike]) -> str:
  """The file of 'default', of a shipped set's name (envs/data/NAME.txt), or of a path."""
  levels = os.fspath(levels)
  if levels == 'default':
    return DEFAULT_LEVELS
  shipped = os.path.join(os.path.dirname(DEFAULT_LEVELS), f'{levels}.txt')
  if os.sep not in levels and os.path.isfile(shipped):
    return shipped
  return os.path.abspath(levels)


def load_level_set(levels: Union[str, os.PathLike, Sequence[levels_lib.Level]] = 'default'
                   ) -> Tuple[levels_lib.Level, ...]:
  """'default', a shipped set's name, a level file path, or already parsed levels -> tuple of
  Levels."""
  if isinstance(levels, (str, os.PathLike)):
    path = level_file(levels)
    if not os.path.exists(path):
      raise ValueError(f'level file not found: {path}')
    st = os.stat(path)
    return _load_cached(path, st.st_mtime, st.st_size)
  result = tuple(levels)
  if not result or not all(isinstance(l, levels_lib.Level) for l in result):
    raise ValueError('levels must be "default", a level file path or a non-empty list of Levels')
  return result


def check_options(num_levels: int, max_steps: int, level_index: Optional[int],
                  action_set: str, max_steps_min: int = 0) -> Tuple[Optional[int], int]:
  """Validates Sokoban's options (one-line ValueErrors); (level_index or None, max_steps)."""
  if int(max_steps) < 1:
    raise ValueError(f'max_steps must be >= 1, got {max_steps}')
  if not 0 <= int(max_steps_min) <= int(max_steps):
    raise ValueError(f'max_steps_min must lie in [0, max_steps = {max_steps}] (0: every episode '
                     f'has max_steps), got {max_steps_min}')
  if action_set not in ACTION_SETS:
    raise ValueError(f'action_set must be one of {ACTION_SETS}, got {action_set!r}')
  if level_index is not None and not 0 <= int(level_index) < num_levels:
    raise ValueError(f'level_index must be in [0, {num_levels}), got {level_index}')
  return (None if level_index is None else int(level_index)), int(max_steps)


def num_actions(action_set: str) -> int:
  """gym-sokoban's actions 1-4 push, 5-8 only move; ours are theirs minus _GYM_ACTION_OFFSET."""
  return len(ACTION_NAMES) * (2 if action_set == 'push_and_move' else 1)


def _room_state(fixed: np.ndarray, player, boxes) -> np.ndarray:
  """gym-sokoban's room_state (int64 cell codes): a level's fixed cells, a player and boxes."""
  state = np.array(fixed, dtype=np.int64)
  for r, c in boxes:
    state[r, c] = _BOX_ON_TARGET if fixed[r, c] == _TARGET else _BOX
  state[player[0], player[1]] = _PLAYER
  return state


class EncodedLevels(NamedTuple):
  """A level set as gym-sokoban arrays, every level padded with walls (bottom/right) to the
  set's largest shape, so that K rooms of one set stack into one array."""
  fixed: np.ndarray       # [L, H, W] int64, read-only: wall, floor, target
  start: np.ndarray       # [L, H, W] int64, read-only: the start rooms (boxes, player)
  num_boxes: np.ndarray   # [L] int64


def encode_levels(levels: Sequence[levels_lib.Level]) -> EncodedLevels:
  """The level set as gym-sokoban arrays; ValueError for a level that is already solved."""
  height = max(l.shape[0] for l in levels)
  width = max(l.shape[1] for l in levels)
  fixed = np.full((len(levels), height, width), _WALL, dtype=np.int64)
  start = np.empty_like(fixed)
  for i, level in enumerate(levels):
    h, w = level.shape
    fixed[i, :h, :w] = np.where(level.walls, _WALL, _FLOOR)
    for r, c in level.targets:
      fixed[i, r, c] = _TARGET
    if set(level.boxes) == set(level.targets):
      raise ValueError(f'level {level.name!r} (index {i}) is already solved')
    start[i] = _room_state(fixed[i], level.player, level.boxes)
  num_boxes = np.array([len(l.boxes) for l in levels], dtype=np.int64)
  fixed.setflags(write=False)
  start.setflags(write=False)
  return EncodedLevels(fixed, start, num_boxes)


class Sokoban(dm_env.Environment):

  deterministic = True  # for envs.oracle

  def __init__(self, seed: int = 0, levels: Union[str, Sequence[levels_lib.Level]] = 'default',
               max_steps: int = 120, level_index: Optional[int] = None,
               action_set: str = 'push', timeout_terminates: bool = False,
               max_steps_min: int = 0):
    self._levels = load_level_set(levels)
    self._level_index_option, self._max_steps = check_options(
        len(self._levels), max_steps, level_index, action_set, max_steps_min)
    # With max_steps_min, _max_steps is the current episode's limit, drawn at each reset.
    self._limit_range = (int(max_steps_min), self._max_steps) if max_steps_min else None
    self._timeout_terminates = bool(timeout_terminates)
    self._rng = np.random.default_rng(seed)

    # Every level as gym-sokoban arrays, padded with walls to the set's largest shape.
    encoded = encode_levels(self._levels)
    self._shape = encoded.fixed.shape[1:]
    self._fixed: List[np.ndarray] = list(encoded.fixed)   # read-only: the engine only reads them
    self._start: List[np.ndarray] = list(encoded.start)
    self._num_boxes: List[int] = [int(n) for n in encoded.num_boxes]

    self._engine = _engine_class()(dim_room=self._shape, num_boxes=self._num_boxes[0],
                                   max_steps=self._max_steps, reset=False)
    self._engine.penalty_for_step = -0.1
    self._engine.reward_box_on_target = 1.0
    self._engine.penalty_box_off_target = -1.0
    self._engine.reward_finished = 10.0
    self.num_actions = num_actions(action_set)
    self._box_reach: Dict[int, Dict[Tuple[int, int], FrozenSet[Tuple[int, int]]]] = {}
    self._level = 0
    self._t = 0
    self._needs_reset = True
    self._load(0, self._start[0].copy())
    self._needs_reset = True  # the first step() resets, as in dm_env's other environments

  @classmethod
  def from_text(cls, text: str, seed: int = 0, **options) -> 'Sokoban':
    """An env over the level(s) drawn in `text` (XSB rows; several levels need `;` headers)."""
    return cls(seed=seed, levels=levels_lib.parse_levels(text, source='<text>'), **options)

  # dm_env API -------------------------------------------------------------------------------
  def reset(self) -> dm_env.TimeStep:
    if self._level_index_option is not None:
      index = self._level_index_option
    else:
      index = int(self._rng.integers(len(self._levels)))
    if self._limit_range:
      low, high = self._limit_range
      self._max_steps = int(self._rng.integers(low, high + 1))
    self._load(index, self._start[index].copy())
    return dm_env.restart(self._observation())

  def step(self, action) -> dm_env.TimeStep:
    if self._needs_reset:
      return self.reset()
    action = int(action)
    if not 0 <= action < self.num_actions:
      raise ValueError(f'action must be in [0, {self.num_actions}), got {action}')
    obs, reward, done, info = self._engine.step(action + _GYM_ACTION_OFFSET,
                                                observation_mode='tiny_rgb_array')
    self._t += 1
    reward = float(reward)
    solved = bool(done and info.get('all_boxes_on_target', False))
    timed_out = self._timeout_terminates and self._t >= self._max_steps
    return base.finish_step(self, reward, obs, solved or timed_out)

  def observation_spec(self):
    return specs.BoundedArray(self._shape + (3,), np.uint8, 0, 255, 'observation')

  def action_spec(self):
    return specs.DiscreteArray(self.num_actions, dtype=np.int32, name='action')

  # Level set ---------------------------------------------------------------------------------
  @property
  def levels(self) -> Tuple[levels_lib.Level, ...]:
    return self._levels

  @property
  def level_index(self) -> int:
    """Index (in `levels`) of the level being played."""
    return self._level

  def _room_state(self, index: int, player, boxes) -> np.ndarray:
    return _room_state(self._fixed[index], player, boxes)

  def _load(self, index: int, room_state: np.ndarray) -> None:
    """Puts level `index` with the given room (owned by the engine from now) into the engine."""
    e = self._engine
    fixed = self._fixed[index]
    e.room_fixed = fixed
    e.room_state = room_state
    e.num_boxes = self._num_boxes[index]
    e.player_position = np.argwhere(room_state == _PLAYER)[0]
    e.boxes_on_target = int(np.count_nonzero(room_state == _BOX_ON_TARGET))
    e.box_mapping = {}  # used by gym-sokoban's generator only
    e.num_env_steps = 0
    e.reward_last = 0
    self._level = index
    self._t = 0
    self._needs_reset = False

  # Extras: true state, rendering, metrics ----------------------------------------------------
  def get_state(self) -> State:
    room = self._engine.room_state
    boxes = tuple((int(r), int(c)) for r, c in np.argwhere((room == _BOX) | (room == _BOX_ON_TARGET)))
    r, c = self._engine.player_position
    return (self._level, (int(r), int(c)), boxes)

  def set_state(self, state: State) -> None:
    index, player, boxes = state
    index = int(index)
    if not 0 <= index < len(self._levels):
      raise ValueError(f'state level index {index} out of range [0, {len(self._levels)})')
    if len(boxes) != self._num_boxes[index]:
      raise ValueError(f'state has {len(boxes)} boxes, level {index} has {self._num_boxes[index]}')
    free = self._fixed[index] != _WALL
    cells = [tuple(player)] + [tuple(b) for b in boxes]
    h, w = free.shape
    if (len(set(cells)) != len(cells)
        or not all(0 <= r < h and 0 <= c < w and free[r, c] for r, c in cells)):
      raise ValueError(f'invalid state for level {index}: {state!r}')
    self._load(index, self._room_state(index, player, boxes))

  def _box_reachability(self, index: int) -> Dict[Tuple[int, int], FrozenSet[Tuple[int, int]]]:
    """Cell -> cells a lone box there can be pushed to (other boxes ignored: a superset)."""
    if index not in self._box_reach:
      free = self._fixed[index] != _WALL
      h, w = free.shape
      cells = [(r, c) for r in range(h) for c in range(w) if free[r, c]]

      def pushes(cell):
        r, c = cell
        for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1)):
          if (0 <= r - dr < h and 0 <= c - dc < w and 0 <= r + dr < h and 0 <= c + dc < w
              and free[r - dr, c - dc] and free[r + dr, c + dc]):
            yield (r + dr, c + dc)

      reach = {}
      for cell in cells:
        seen = {cell}
        stack = [cell]
        while stack:
          for nxt in pushes(stack.pop()):
            if nxt not in seen:
              seen.add(nxt)
              stack.append(nxt)
        reach[cell] = frozenset(seen)
      self._box_reach[index] = reach
    return self._box_reach[index]

  def can_reach(self, from_state: State, to_state: State) -> bool:
    """Necessary condition for `to_state` to be reachable from `from_state` (see docstring)."""
    if from_state[0] != to_state[0]:
      return False
    src, dst = from_state[2], to_state[2]
    if len(src) != len(dst):
      return False
    reach = self._box_reachability(int(from_state[0]))
    # Boxes are interchangeable: some assignment of boxes to destinations must be feasible.
    options = [reach.get(b, frozenset()) for b in src]
    return any(all(d in opts for d, opts in zip(perm, options))
               for perm in itertools.permutations(dst))

  def _observation(self) -> np.ndarray:
    return self._engine.render(mode='tiny_rgb_array')

  def render(self, scale: int = 16) -> np.ndarray:
    """The current room, one `scale` x `scale` block of gym-sokoban's tiny colours per cell."""
    tiny = self._observation()
    return np.repeat(np.repeat(tiny, scale, axis=0), scale, axis=1)

  def boxes_on_target(self) -> int:
    return int(np.count_nonzero(self._engine.room_state == _BOX_ON_TARGET))

  def solved(self) -> bool:
    return self.boxes_on_target() == self._num_boxes[self._level]

  def episode_info(self):
    return {'solved': float(self.solved()), 'boxes_on_target': float(self.boxes_on_target())}

  def to_text(self) -> str:
    """The current room in XSB form (handy in test failures and logs)."""
    level, player, boxes = self.get_state()
    base = self._levels[level]
    return levels_lib.Level(name=base.name, index=level, walls=self._fixed[level] == _WALL,
                            targets=base.targets, boxes=boxes, player=player).to_text()

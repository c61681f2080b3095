"""Windy cliff walk (paper App. D, "Performance in Stochastic MDPs", Table 1).

The paper gives the grid size (6x8), the reward (+1 per step alive), the limit (250 steps) and
the wind (with probability p the agent is pushed towards the cliff, in addition to its move), but
not the layout. We chose the simplest layout that reproduces the paper's random-policy scores:

    row 0   S . . . . . . .      S: start (0, 0), top-left corner
    row 1   . . . . . . . .
    row 2   . . . . . . . .
    row 3   . . . . . . . .
    row 4   . . . . . . . .
    row 5   X X X X X X X X      X: cliff, the whole bottom row

Wind blows down (towards the cliff). Each step: the agent moves (0 up, 1 down, 2 left, 3 right;
a move into the outer border leaves it in place); if it lands on a cliff cell it falls. Otherwise,
with probability `wind` it is then pushed one cell down, and falls if that cell is cliff. A fall
terminates the episode (discount 0) with reward 0 on that step; every other step gives +1. The
episode is truncated (discount 1) after `max_steps` (250) steps, so the score of an episode is the
number of steps survived.

Its random-policy scores beside the paper's Table 1, and how the layout was picked: BUILD_NOTES.md,
"Windy cliff layout".

Observation: one-hot float32 vector of size 48 (= 6 * 8), index `row * 8 + col` of the agent's cell
(after a fall: the cliff cell it fell into).

True state: `get_state()` -> `(row, col)` (no step counter); `set_state(state)` restores it and
resets the step counter to 0. With `wind > 0` the environment is stochastic (`deterministic` is
False) and the exact oracle refuses it.
"""
from typing import Tuple

import dm_env
import numpy as np
from dm_env import specs

from envs import base

ROWS, COLS = 6, 8
START = (0, 0)
CLIFF_ROW = ROWS - 1
WIND_DIR = (1, 0)  # down, towards the cliff

FREE_COLOR = (235, 235, 235)
CLIFF_COLOR = (40, 40, 40)
START_COLOR = (190, 220, 190)
AGENT_COLOR = (0, 0, 255)
FALLEN_COLOR = (220, 30, 30)

_MOVES = ((-1, 0), (1, 0), (0, -1), (0, 1))


def is_cliff(r: int, c: int) -> bool:
  return r == CLIFF_ROW


class WindyCliff(dm_env.Environment):
  """Cliff walk with wind towards the cliff; see the module docstring."""

  def __init__(self, seed: int = 0, wind: float = 0.0, max_steps: int = 250):
    wind = float(wind)
    if not 0.0 <= wind <= 1.0:
      raise ValueError(f'wind must be a probability in [0, 1], got {wind}')
    if int(max_steps) < 1:
      raise ValueError(f'max_steps must be >= 1, got {max_steps}')
    self._rng = np.random.default_rng(seed)
    self._wind = wind
    self._max_steps = int(max_steps)
    self.num_actions = 4
    self._pos = START
    self._t = 0
    self._needs_reset = True

  @property
  def deterministic(self) -> bool:
    return self._wind == 0.0

  # dm_env API -------------------------------------------------------------------------------
  def reset(self) -> dm_env.TimeStep:
    self._pos = START
    self._t = 0
    self._needs_reset = False
    return dm_env.restart(self._observation())

  def step(self, action) -> dm_env.TimeStep:
    if self._needs_reset:
      return self.reset()
    dr, dc = _MOVES[int(action)]
    r = min(max(self._pos[0] + dr, 0), ROWS - 1)
    c = min(max(self._pos[1] + dc, 0), COLS - 1)
    if not is_cliff(r, c) and self._wind > 0.0 and self._rng.random() < self._wind:
      r = min(max(r + WIND_DIR[0], 0), ROWS - 1)
      c = min(max(c + WIND_DIR[1], 0), COLS - 1)
    self._pos = (r, c)
    self._t += 1
    obs = self._observation()
    fell = is_cliff(r, c)
    return base.finish_step(self, 0.0 if fell else 1.0, obs, fell)

  def observation_spec(self):
    return specs.Array((ROWS * COLS,), np.float32, 'observation')

  def action_spec(self):
    return specs.DiscreteArray(4, dtype=np.int32, name='action')

  # Extras -----------------------------------------------------------------------------------
  def _observation(self) -> np.ndarray:
    obs = np.zeros((ROWS * COLS,), dtype=np.float32)
    obs[self._pos[0] * COLS + self._pos[1]] = 1.0
    return obs

  def get_state(self) -> Tuple[int, int]:
    """(row, col); no step counter."""
    return self._pos

  def set_state(self, state) -> None:
    """Restores a `get_state()` value; resets the step counter to 0."""
    r, c = int(state[0]), int(state[1])
    if not (0 <= r < ROWS and 0 <= c < COLS):
      raise ValueError(f'position {(r, c)} is outside the {ROWS}x{COLS} grid')
    self._pos = (r, c)
    self._t = 0
    self._needs_reset = False

  @property
  def step_count(self) -> int:
    return self._t

  def episode_info(self):
    return {'fell': int(is_cliff(*self._pos))}

  def render(self, cell: int = 24) -> np.ndarray:
    img = np.empty((ROWS, COLS, 3), dtype=np.uint8)
    img[:] = FREE_COLOR
    img[CLIFF_ROW, :] = CLIFF_COLOR
    img[START] = START_COLOR
    img[self._pos] = FALLEN_COLOR if is_cliff(*self._pos) else AGENT_COLOR
    return np.repeat(np.repeat(img, cell, axis=0), cell, axis=1)

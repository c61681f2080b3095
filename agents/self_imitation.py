"""The episodes self-imitation learns from: each finished episode's steps with their discounted
returns-to-go, and the actor's filter that forwards only its best episodes to the run's
self-imitation table (which keeps the steps of the best episodes seen: agents.adders,
`launch.program.builder.make_self_imitation_table`).

Why the best and not the newest: on a deceptive level (Sokoban level 1 of the 1k set) the
solution turns up in about one episode in 200 while the policy learns the greedy pushes that
rule it out; a buffer of recent steps would hold the solution's steps at ~0.1% of a batch, one
of the best episodes at a good fraction of it. The loss (`losses.self_imitation_loss`) ignores
any step whose return is below the current value, so a buffer not yet full of good episodes does
no harm.

Only episodes that *terminated* are kept. A time-limit truncation cuts off a future the
returns-to-go cannot see: with Sokoban's -0.1 per step, a truncated random walk's last steps
would show returns near 0 against values near -10 (the bootstrap the V-trace targets use), and
self-imitation would copy exactly the aimless walking it should ignore (measured: every sampled
step had R > V, on average by 4, while no episode had solved the level).
"""
from typing import List

import numpy as np


def returns_to_go(rewards: np.ndarray, discount: float) -> np.ndarray:
  """G_t = r_t + discount * G_{t+1}, with nothing after the last step (a truncated episode's
  return counts only what was seen)."""
  out = np.zeros(len(rewards), np.float32)
  running = 0.0
  for t in range(len(rewards) - 1, -1, -1):
    running = float(rewards[t]) + discount * running
    out[t] = running
  return out


class TopReturns:
  """An actor's filter in front of the shared table: forward an episode only if its return is
  among the `k` best this actor has seen (so after the first few, hardly any episode is sent,
  and the table, which keeps the best of all actors, receives what could enter it)."""

  def __init__(self, k: int):
    if k < 1:
      raise ValueError(f'self-imitation episodes must be >= 1, got {k}')
    self._k = k
    self._best: List[float] = []   # ascending

  def admit(self, total: float) -> bool:
    if len(self._best) >= self._k and total < self._best[0]:
      return False
    self._best = sorted(self._best + [total])[-self._k:]
    return True

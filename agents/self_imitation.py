"""The episodes self-imitation learns from: each finished episode's steps with their discounted
returns-to-go, and a buffer that keeps the best episodes seen so far.

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
import dataclasses
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


@dataclasses.dataclass
class Episode:
  observations: np.ndarray   # [T, ...] the observation each action was taken in
  actions: np.ndarray        # [T]
  returns: np.ndarray        # [T] discounted returns-to-go
  total: float               # undiscounted return, the buffer's ranking


class BestEpisodes:
  """The `capacity` episodes with the highest undiscounted return (ties: the newer stays)."""

  def __init__(self, capacity: int, discount: float, seed: int = 0):
    if capacity < 1:
      raise ValueError(f'self-imitation buffer capacity must be >= 1, got {capacity}')
    self._capacity, self._discount = capacity, discount
    self._episodes: List[Episode] = []
    self._rng = np.random.default_rng(seed)

  def __len__(self) -> int:
    return len(self._episodes)

  @property
  def totals(self) -> List[float]:
    return [e.total for e in self._episodes]

  def add(self, observations, actions, rewards, terminated: bool) -> bool:
    """Offers a finished episode; returns whether it was kept."""
    rewards = np.asarray(rewards, np.float32)
    if not len(rewards) or not terminated:
      return False
    episode = Episode(np.asarray(observations), np.asarray(actions, np.int32),
                      returns_to_go(rewards, self._discount), float(rewards.sum()))
    if len(self._episodes) >= self._capacity:
      worst = int(np.argmin(self.totals))
      if episode.total < self._episodes[worst].total:
        return False
      del self._episodes[worst]
    self._episodes.append(episode)
    return True

  def sample(self, n: int):
    """n steps drawn uniformly over all steps held: (observations, actions, returns)."""
    if not self._episodes:
      raise ValueError('self-imitation buffer is empty')
    sizes = np.array([len(e.actions) for e in self._episodes])
    flat = self._rng.integers(0, sizes.sum(), size=n)
    which = np.searchsorted(np.cumsum(sizes), flat, side='right')
    at = flat - np.concatenate([[0], np.cumsum(sizes)[:-1]])[which]
    obs = np.stack([self._episodes[e].observations[t] for e, t in zip(which, at)])
    actions = np.array([self._episodes[e].actions[t] for e, t in zip(which, at)], np.int32)
    returns = np.array([self._episodes[e].returns[t] for e, t in zip(which, at)], np.float32)
    return obs, actions, returns


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

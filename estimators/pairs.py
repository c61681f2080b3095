"""Windowed, time-ordered pair sampling for precedence training (vectorised, jittable).

Data of any origin (Reverb windows online, stored episodes offline) is laid out *flat*: position
k holds one observation and `last[k]` is the flat index of the last observation of the segment
(episode or episode piece) that contains k, or -1 when k is padding. A pair (i, j) is drawn with
i uniform over allowed start positions that have a successor, and j = i + d, d uniform in
[1, min(w, last[i] - i)], so pairs never cross a segment boundary and are at most w apart.
The pair is then shuffled: label 1 means "first element precedes the second".
"""
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np


class Pairs(NamedTuple):
  first: jnp.ndarray   # [P] flat indices
  second: jnp.ndarray  # [P] flat indices
  label: jnp.ndarray   # [P] 1.0 if `first` comes before `second` in time, else 0.0


def start_indices(last: jnp.ndarray, start_ok: jnp.ndarray):
  """Flat positions a pair may start from (allowed and with a successor), padded to a static
  length for jit; returns (starts [N], count)."""
  can_start = start_ok & (last > jnp.arange(last.shape[0]))
  starts = jnp.nonzero(can_start, size=last.shape[0], fill_value=0)[0]
  return starts, jnp.sum(can_start)


def sample_pairs(key: jnp.ndarray, last: jnp.ndarray, starts: jnp.ndarray, num_starts,
                 num_pairs: int, window: int) -> Pairs:
  """Samples `num_pairs` shuffled pairs; i is uniform over starts[:num_starts]."""
  k_start, k_gap, k_swap = jax.random.split(key, 3)
  i = starts[jax.random.randint(k_start, (num_pairs,), 0, jnp.maximum(num_starts, 1))]
  span = jnp.minimum(window, last[i] - i)  # >= 1 for every allowed start
  d = 1 + jnp.floor(jax.random.uniform(k_gap, (num_pairs,)) * span).astype(jnp.int32)
  d = jnp.minimum(d, span)
  j = i + d
  in_order = jax.random.bernoulli(k_swap, 0.5, (num_pairs,))
  first = jnp.where(in_order, i, j)
  second = jnp.where(in_order, j, i)
  return Pairs(first, second, in_order.astype(jnp.float32))


def window_layout(valid: np.ndarray, period: int):
  """Flat layout for a batch of fixed-length windows [B, L] (Reverb 'precedence' items).

  valid[b, t] says whether step t of window b holds a real observation (padding after an
  episode end is invalid). Starts are restricted to the first `period` steps of each window:
  windows overlap by L - period steps, so every (start, gap <= L - period) pair of an episode is
  then reachable from exactly one window.
  Returns (last [B*L], start_ok [B*L]).
  """
  valid = np.asarray(valid, dtype=bool)
  b, l = valid.shape
  n_valid = valid.sum(axis=1)                           # windows are valid-prefix + padding
  offsets = np.arange(b)[:, None] * l
  last = np.where(valid, offsets + (n_valid - 1)[:, None], -1)
  start_ok = valid & (np.arange(l)[None, :] < period)
  return last.reshape(-1), start_ok.reshape(-1)


def window_layout_jnp(valid: jnp.ndarray, period: int):
  """`window_layout` in jax, for use inside a jitted training step."""
  b, l = valid.shape
  n_valid = jnp.sum(valid, axis=1)
  offsets = jnp.arange(b)[:, None] * l
  last = jnp.where(valid, offsets + (n_valid - 1)[:, None], -1)
  start_ok = valid & (jnp.arange(l)[None, :] < period)
  return last.reshape(-1), start_ok.reshape(-1)


def episode_layout(lengths: np.ndarray):
  """Flat layout for whole episodes stored back to back (offline datasets).

  lengths[e] = number of observations of episode e. Returns (last [N], start_ok [N]).
  """
  lengths = np.asarray(lengths, dtype=np.int64)
  ends = np.cumsum(lengths) - 1
  last = np.repeat(ends, lengths)
  return last.astype(np.int32), np.ones_like(last, dtype=bool)


def transition_layout(last: np.ndarray):
  """Indices k whose successor k+1 is in the same segment: the (x, a, x') transitions."""
  k = np.arange(len(last))
  return k[np.asarray(last) > k]

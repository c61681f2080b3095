"""Windowed, time-ordered pair sampling for precedence training (vectorised, jittable).

Data of any origin (Reverb windows online, stored episodes offline) is laid out *flat*: position
k holds one observation and `last[k]` is the flat index of the last observation of the segment
(episode or episode piece) that contains k, or -1 when k holds no observation. A start i may be
restricted (`start_ok`) so that a pair reachable from several overlapping windows is owned by
exactly one.

Online, a window is 2w (or more) consecutive rows of one room's *stream*: its episodes back to
back, each followed by a filler row (the final observation, every scalar zero), one window every
w rows. A window is therefore cut anywhere in an episode and may hold several segments: the tail
of an episode begun before it, whole short episodes, the head of one still running
(`window_layout`). A window owns the pairs starting in its first w rows; every pair of the stream
with a gap <= w then has exactly one owner, the window starting at the largest multiple of w not
after its start, which holds the whole pair.

The valid pairs are {(i, j): i an allowed start, j in i's segment, 0 < j - i <= w}; start i owns
n_i = min(w, last[i] - i) of them. `sample_pairs` draws uniformly from that set (the paper samples
pairs "uniformly in a sliding window"), then shuffles each pair: label 1 means "first element
precedes the second". `SAMPLINGS` names the alternative kept for the reward-free Cartpole preset
('start_uniform': start uniform, then gap uniform on [1, n_i], which weights pairs near an
episode's end more; BUILD_NOTES.md, "Deviations from the paper", has the measurement).
"""
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

# Proposals per pair and round of the rejection sampler. The acceptance rate is mean(n_i) / w;
# measured on random-Cartpole-like episodes (~24 observations), 128 pairs per call: 8 proposals
# per round took 567 us (w = 200) and 288 us (w = 15) per call, against 1,152 and 782 us with 32
# (the cost is per proposal, so fewer and more rounds win unless acceptance is tiny).
PROPOSALS_PER_ROUND = 8
SAMPLINGS = ('uniform', 'start_uniform')


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
                 num_pairs: int, window: int, sampling: str = 'uniform') -> Pairs:
  """Samples `num_pairs` shuffled pairs, each uniform over the valid pairs (see module doc), or
  with `sampling='start_uniform'` a start uniform over starts[:num_starts] and a gap uniform on
  [1, n_i].

  Exact rejection sampling: propose a start i uniform over starts[:num_starts] and a gap d uniform
  on [1, w]; accept when d <= n_i. P(i, d accepted) = 1 / (num_starts * w) for every valid pair, so
  an accepted pair is uniform over them. Rounds of proposals repeat until every pair slot holds
  an accepted proposal (each round accepts with probability >= 1 / w per proposal).
  """
  if sampling not in SAMPLINGS:
    raise ValueError(f'unknown pair sampling {sampling!r}; expected one of {SAMPLINGS}')
  last, starts = jnp.asarray(last), jnp.asarray(starts)
  k_loop, k_swap = jax.random.split(key)
  n = jnp.maximum(num_starts, 1)
  rows = jnp.arange(num_pairs)
  if sampling == 'start_uniform':
    k_i, k_d = jax.random.split(k_loop)
    i = starts[jax.random.randint(k_i, (num_pairs,), 0, n)]
    d = jax.random.randint(k_d, (num_pairs,), 1, jnp.maximum(jnp.minimum(window, last[i] - i), 1) + 1)
    return _shuffled(k_swap, i, i + d)

  def propose(k):
    k_i, k_d = jax.random.split(k)
    shape = (num_pairs, PROPOSALS_PER_ROUND)
    i = starts[jax.random.randint(k_i, shape, 0, n)]
    d = jax.random.randint(k_d, shape, 1, window + 1)
    ok = d <= last[i] - i
    first_ok = jnp.argmax(ok, axis=1)
    return i[rows, first_ok], d[rows, first_ok], jnp.any(ok, axis=1)

  def body(carry):
    k, i, d, done = carry
    k, sub = jax.random.split(k)
    new_i, new_d, accepted = propose(sub)
    take = accepted & ~done
    return k, jnp.where(take, new_i, i), jnp.where(take, new_d, d), done | accepted

  zeros = jnp.zeros((num_pairs,), jnp.int32)
  # No start at all: nothing can be sampled; return (0, 0) pairs instead of looping forever.
  done = jnp.full((num_pairs,), num_starts == 0)
  _, i, d, _ = jax.lax.while_loop(lambda c: ~jnp.all(c[3]), body, (k_loop, zeros, zeros, done))
  return _shuffled(k_swap, i, i + d)


def _shuffled(key, i, j) -> Pairs:
  """Each time-ordered pair (i, j) shown in order (label 1) or swapped (label 0), 50/50."""
  in_order = jax.random.bernoulli(key, 0.5, i.shape)
  return Pairs(jnp.where(in_order, i, j), jnp.where(in_order, j, i), in_order.astype(jnp.float32))


def observed_steps(step_valid: jnp.ndarray) -> jnp.ndarray:
  """[..., L] bool: which steps of a Reverb window hold a real observation.

  The adder marks every real step with valid = 1. The step that closes an episode (Acme's filler,
  holding the episode's final observation) has valid = 0, and so has padding; an observation at t
  is therefore real iff valid[t] or valid[t - 1].
  """
  real = jnp.asarray(step_valid) > 0
  shifted = jnp.concatenate([jnp.zeros_like(real[..., :1]), real[..., :-1]], axis=-1)
  return real | shifted


def window_layout(step_valid: jnp.ndarray, start_of_episode: jnp.ndarray, period: int):
  """Flat layout for a batch of stream-aligned Reverb windows [B, L] (jittable).

  step_valid, start_of_episode: the rows' 'valid' and 'start_of_episode' extras (1 on the
  filler's successor, the first row of an episode). Windows start every `period` rows of the
  stream and hold L >= 2 * period rows, so a pair with gap <= period starting in a window's first
  `period` rows ends inside it: those are the window's starts (`start_ok`), and every such pair of
  the stream is owned once. A segment runs from one start_of_episode row to the row before the
  next (a filler belongs to the episode it closes); pairs never leave a segment, so none crosses
  episodes. A filler at row 0 is not an observation here (its predecessor is in the previous
  window, which owns every pair ending at it). Returns flat [B*L] arrays:
  last (the last observation of k's segment, -1 where k holds none), start_ok, and ends_episode
  (k's segment ends with the filler, its episode's final observation; `training.Batch`).
  """
  step_valid = jnp.asarray(step_valid)
  b, l = step_valid.shape
  if l < 2 * period:
    raise ValueError(f'windows of {l} rows cannot own every pair of gap <= {period}: they need '
                     f'at least 2 * period = {2 * period} rows')
  observed = observed_steps(step_valid)
  t = jnp.arange(l)
  begins = (jnp.asarray(start_of_episode) > 0) | (t == 0)
  # The segment of row t ends before the first segment beginning after t (or at the window's end).
  next_begin = jax.lax.cummin(jnp.where(begins, t, l), axis=1, reverse=True)
  seg_end = jnp.concatenate([next_begin[:, 1:], jnp.full((b, 1), l)], axis=1) - 1
  # Its last observation: the last observed row up to seg_end; for an observed row that is in
  # its own segment, since the row itself qualifies.
  latest_observed = jax.lax.cummax(jnp.where(observed, t, -1), axis=1)
  last_row = jnp.maximum(jnp.take_along_axis(latest_observed, seg_end, axis=1), 0)
  ends_with_filler = ~jnp.take_along_axis(step_valid > 0, last_row, axis=1)
  last = jnp.where(observed, jnp.arange(b)[:, None] * l + last_row, -1)
  start_ok = observed & (t < period)
  ends_episode = observed & ends_with_filler
  return last.reshape(-1), start_ok.reshape(-1), ends_episode.reshape(-1)


def episode_layout(lengths: np.ndarray):
  """Flat layout for whole episodes stored back to back (offline datasets).

  lengths[e] = number of observations of episode e. Returns (last [N], start_ok [N]).
  """
  lengths = np.asarray(lengths, dtype=np.int64)
  ends = np.cumsum(lengths) - 1
  last = np.repeat(ends, lengths)
  return last.astype(np.int32), np.ones_like(last, dtype=bool)


def valid_pairs(last: np.ndarray, start_ok: np.ndarray, window: int):
  """Every valid (i, j) of a flat layout, enumerated on the host (tests and coverage figures)."""
  last, start_ok = np.asarray(last), np.asarray(start_ok)
  return [(i, j) for i in np.flatnonzero(start_ok)
          for j in range(i + 1, min(i + window, int(last[i])) + 1)]


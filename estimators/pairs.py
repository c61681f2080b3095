"""Windowed, time-ordered pair sampling for precedence training (vectorised, jittable).

Data of any origin (Reverb windows online, stored episodes offline) is laid out *flat*: position
k holds one observation and `last[k]` is the flat index of the last observation of the segment
(episode or episode piece) that contains k, or -1 when k is padding. A start i may be restricted
(`start_ok`) so that a pair reachable from several overlapping windows is owned by exactly one.

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


def window_layout(step_valid: jnp.ndarray, period: int):
  """Flat layout for a batch of Reverb 'precedence' windows [B, L] (jittable).

  step_valid: the adder's 'valid' extra. Windows start every `period` steps and overlap by
  L - period = period steps. A window owns the pairs that start in its first `period` steps; the
  window that ends an episode (it holds the final observation) owns every start it contains,
  since no later window covers them. With L = 2 * period every valid pair of an episode (gap <=
  period) is then owned by exactly one window (tests/test_pair_coverage.py checks this on a real
  Reverb table). Returns (last [B*L], start_ok [B*L]).
  """
  step_valid = jnp.asarray(step_valid)
  b, l = step_valid.shape
  observed = observed_steps(step_valid)
  n_obs = jnp.sum(observed, axis=1)
  ends_episode = n_obs > jnp.sum(step_valid > 0, axis=1)   # the filler's observation is there
  offsets = jnp.arange(b)[:, None] * l
  last = jnp.where(observed, offsets + (n_obs - 1)[:, None], -1)
  start_ok = observed & ((jnp.arange(l)[None, :] < period) | ends_episode[:, None])
  return last.reshape(-1), start_ok.reshape(-1)


def window_ends_episode(step_valid: jnp.ndarray) -> jnp.ndarray:
  """[B*L] bool for Reverb windows [B, L]: the position's window holds its episode's final
  observation (Acme's filler), which is then the window's last observation (`window_layout`)."""
  step_valid = jnp.asarray(step_valid)
  b, l = step_valid.shape
  ends = jnp.sum(observed_steps(step_valid), axis=1) > jnp.sum(step_valid > 0, axis=1)
  return jnp.repeat(ends, l)


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


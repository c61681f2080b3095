import jax
import numpy as np
import pytest

from estimators import pairs


def _sample(last, start_ok, n, w, seed=0):
  starts, count = pairs.start_indices(np.asarray(last), np.asarray(start_ok))
  p = pairs.sample_pairs(jax.random.PRNGKey(seed), np.asarray(last), starts, count, n, w)
  return np.asarray(p.first), np.asarray(p.second), np.asarray(p.label)


def test_episode_pairs_stay_in_episode_and_window():
  lengths = [3, 50, 1, 17, 200]
  last, start_ok = pairs.episode_layout(lengths)
  episode_of = np.repeat(np.arange(len(lengths)), lengths)
  w = 7
  first, second, label = _sample(last, start_ok, 20_000, w)
  assert np.all(episode_of[first] == episode_of[second])
  gap = np.abs(second - first)
  assert gap.min() >= 1 and gap.max() <= w
  # Every gap 1..w occurs; the single-step episode (index 53) never appears.
  assert set(np.unique(gap)) == set(range(1, w + 1))
  assert 53 not in set(first) | set(second)


def test_labels_say_whether_pair_is_in_order_and_are_balanced():
  last, start_ok = pairs.episode_layout([100, 100])
  first, second, label = _sample(last, start_ok, 20_000, 10, seed=3)
  np.testing.assert_array_equal(label == 1.0, first < second)
  assert abs(label.mean() - 0.5) < 0.02


def test_window_layout_respects_padding_and_period():
  valid = np.zeros((3, 6), bool)
  valid[0, :6] = True   # full window
  valid[1, :2] = True   # short: episode ended
  valid[2, :1] = True   # a single observation: no pair possible
  last, start_ok = pairs.window_layout(valid, period=3)
  np.testing.assert_array_equal(last[:6], [5] * 6)
  np.testing.assert_array_equal(last[6:12], [7, 7, -1, -1, -1, -1])
  np.testing.assert_array_equal(last[12:], [12, -1, -1, -1, -1, -1])
  np.testing.assert_array_equal(start_ok[:6], [1, 1, 1, 0, 0, 0])
  first, second, _ = _sample(last, start_ok, 5_000, 3)
  lo, hi = np.minimum(first, second), np.maximum(first, second)
  assert set(np.unique(lo)) == {0, 1, 2, 6}          # starts only in the first `period` steps
  assert np.all(hi <= np.where(lo < 6, 5, 7))        # never into padding or the next window
  # The jax version agrees with numpy.
  last_j, ok_j = pairs.window_layout_jnp(valid, 3)
  np.testing.assert_array_equal(np.asarray(last_j), last)
  np.testing.assert_array_equal(np.asarray(ok_j), start_ok)


def test_observation_mask_keeps_final_observation_of_episode():
  from agents.adders import observation_mask
  # valid extras: 3 real steps, then the filler step (holding the final observation), then padding
  valid = np.array([1, 1, 1, 0, 0, 0], np.float32)
  np.testing.assert_array_equal(observation_mask(valid), [1, 1, 1, 1, 0, 0])

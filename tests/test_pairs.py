import jax
import numpy as np
import pytest

from estimators import pairs


def _sample(last, start_ok, n, w, seed=0, sampling='uniform'):
  starts, count = pairs.start_indices(np.asarray(last), np.asarray(start_ok))
  p = pairs.sample_pairs(jax.random.PRNGKey(seed), np.asarray(last), starts, count, n, w, sampling)
  return np.asarray(p.first), np.asarray(p.second), np.asarray(p.label)


@pytest.mark.parametrize('sampling', pairs.SAMPLINGS)
def test_episode_pairs_stay_in_episode_and_window(sampling):
  lengths = [3, 50, 1, 17, 200]
  last, start_ok = pairs.episode_layout(lengths)
  episode_of = np.repeat(np.arange(len(lengths)), lengths)
  w = 7
  first, second, label = _sample(last, start_ok, 20_000, w, sampling=sampling)
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


def test_window_layout_owns_first_period_except_in_the_episode_final_window():
  # The adder's 'valid' extra: 1 = real step, 0 = the filler holding the final observation, then padding.
  step_valid = np.zeros((3, 6), np.float32)
  step_valid[0, :6] = 1        # a full window in the middle of an episode
  step_valid[1, :4] = 1        # the episode's final window: 4 real steps, the filler, padding
  step_valid[2, :1] = 1        # a one-step episode: its first observation and the filler
  last, start_ok = map(np.asarray, pairs.window_layout(step_valid, period=3))
  np.testing.assert_array_equal(last[:6], [5] * 6)
  np.testing.assert_array_equal(last[6:12], [10, 10, 10, 10, 10, -1])
  np.testing.assert_array_equal(last[12:], [13, 13, -1, -1, -1, -1])
  np.testing.assert_array_equal(start_ok[:6], [1, 1, 1, 0, 0, 0])      # mid-episode: first period
  np.testing.assert_array_equal(start_ok[6:12], [1, 1, 1, 1, 1, 0])    # final window: every start
  np.testing.assert_array_equal(start_ok[12:], [1, 1, 0, 0, 0, 0])
  first, second, _ = _sample(last, start_ok, 5_000, 3)
  lo, hi = np.minimum(first, second), np.maximum(first, second)
  assert set(np.unique(lo)) == {0, 1, 2, 6, 7, 8, 9, 12}
  assert np.all(hi <= np.where(lo < 6, 5, np.where(lo < 12, 10, 13)))        # never into padding or the next window


def test_pairs_are_uniform_over_valid_pairs():
  """Exact-count test: every valid pair (0 < j - i <= w, same episode) is equally likely."""
  from scipy import stats
  lengths, w = [2, 5, 9, 3], 4
  last, start_ok = pairs.episode_layout(lengths)
  valid = pairs.valid_pairs(last, start_ok, w)
  n = 60_000
  first, second, _ = _sample(last, start_ok, n, w, seed=11)
  lo, hi = np.minimum(first, second), np.maximum(first, second)
  index = {p: k for k, p in enumerate(valid)}
  counts = np.bincount([index[(int(a), int(b))] for a, b in zip(lo, hi)], minlength=len(valid))
  assert len(counts) == len(valid)                   # nothing outside the valid set
  p_value = stats.chisquare(counts).pvalue
  assert p_value > 1e-3, (p_value, counts)
  # The pair closing the longest episode is as frequent as any other (the old sampler drew it
  # ~w times more often than a pair from the middle of the episode).
  assert counts.min() > 0.8 * n / len(valid) and counts.max() < 1.2 * n / len(valid)


def test_start_uniform_sampling_draws_each_start_equally_often():
  last, start_ok = pairs.episode_layout([6])           # starts 0..4 own 5, 4, 3, 2, 1 pairs
  first, second, _ = _sample(last, start_ok, 50_000, 10, seed=2, sampling='start_uniform')
  counts = np.bincount(np.minimum(first, second), minlength=5)
  np.testing.assert_allclose(counts / counts.sum(), 0.2, atol=0.01)


def test_pairs_uniform_when_segments_are_much_shorter_than_the_window():
  lengths, w = [2, 3, 2], 200        # acceptance ~0.5%: several rejection rounds per pair
  last, start_ok = pairs.episode_layout(lengths)
  valid = pairs.valid_pairs(last, start_ok, w)
  first, second, _ = _sample(last, start_ok, 8_000, w, seed=5)
  pairs_seen = {(int(min(a, b)), int(max(a, b))) for a, b in zip(first, second)}
  assert pairs_seen == set(valid)


def test_observed_steps_keep_final_observation_of_episode():
  # valid extras: 3 real steps, then the filler step (holding the final observation), then padding
  valid = np.array([1, 1, 1, 0, 0, 0], np.float32)
  np.testing.assert_array_equal(np.asarray(pairs.observed_steps(valid)), [1, 1, 1, 1, 0, 0])

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


def _layout(step_valid, start_of_episode, period):
  return tuple(np.asarray(x) for x in pairs.window_layout(
      np.asarray(step_valid, np.float32), np.asarray(start_of_episode, np.float32), period))


def test_window_layout_of_hand_made_stream_windows():
  # Rows of a room's stream: valid 1 on real rows, 0 on the filler closing an episode (its final
  # observation); start_of_episode 1 on the row after a filler. Windows of 6 rows, period 3.
  step_valid = [[1, 1, 0, 1, 1, 1],     # an episode's tail, its filler, a new episode
                [0, 1, 1, 1, 0, 1],     # a filler at row 0, a whole episode, a new one
                [1, 0, 1, 1, 0, 1],     # two whole short episodes, then a new one
                [1, 1, 1, 1, 1, 1]]     # no episode boundary
  start_of_episode = [[0, 0, 0, 1, 0, 0],
                      [0, 1, 0, 0, 0, 1],
                      [1, 0, 1, 0, 0, 1],
                      [0, 0, 0, 0, 0, 0]]
  last, start_ok, ends = _layout(step_valid, start_of_episode, period=3)
  np.testing.assert_array_equal(last, [2, 2, 2, 5, 5, 5,
                                       -1, 10, 10, 10, 10, 11,
                                       13, 13, 16, 16, 16, 17,
                                       23, 23, 23, 23, 23, 23])
  np.testing.assert_array_equal(start_ok, [1, 1, 1, 0, 0, 0,
                                           0, 1, 1, 0, 0, 0,
                                           1, 1, 1, 0, 0, 0,
                                           1, 1, 1, 0, 0, 0])
  np.testing.assert_array_equal(ends, [1, 1, 1, 0, 0, 0,
                                       0, 1, 1, 1, 1, 0,
                                       1, 1, 1, 1, 1, 0,
                                       0, 0, 0, 0, 0, 0])
  # The row 0 filler starts and ends no pair here; no pair leaves its segment or window.
  owned = set(pairs.valid_pairs(last, start_ok, 3))
  assert owned == {(0, 1), (0, 2), (1, 2),
                   (7, 8), (7, 9), (7, 10), (8, 9), (8, 10),
                   (12, 13), (14, 15), (14, 16),
                   (18, 19), (18, 20), (18, 21), (19, 20), (19, 21), (19, 22),
                   (20, 21), (20, 22), (20, 23)}


def test_window_layout_needs_two_periods_per_window():
  with pytest.raises(ValueError, match='2 \\* period'):
    pairs.window_layout(np.ones((1, 5)), np.zeros((1, 5)), 3)


def _stream(rng, episodes, max_real):
  """A room's stream: episodes of 1..max_real real rows, each followed by its filler row.
  Returns (valid, start_of_episode, episode id, the episode's filler position) per row."""
  real = rng.integers(1, max_real + 1, size=episodes)
  valid = np.concatenate([np.r_[np.ones(n), 0.0] for n in real])
  start = np.concatenate([np.r_[1.0, np.zeros(n)] for n in real])
  episode = np.repeat(np.arange(episodes), real + 1)
  filler = np.repeat(np.cumsum(real + 1) - 1, real + 1)
  return valid, start, episode, filler


def _cut(stream, w):
  """Stream-aligned windows of 2w rows every w rows, while they fit: ([n, 2w], starts [n])."""
  begin = np.arange(0, len(stream) - 2 * w + 1, w)
  return np.stack([stream[s:s + 2 * w] for s in begin]), begin


@pytest.mark.parametrize('w,max_real,seed', [(1, 3, 0), (3, 4, 1), (4, 12, 2), (5, 2, 3)])
def test_stream_windows_own_every_pair_of_the_stream_once(w, max_real, seed):
  valid, start, episode, filler = _stream(np.random.default_rng(seed), 30, max_real)
  windows, begin = _cut(valid, w)
  last, start_ok, ends = _layout(windows, _cut(start, w)[0], w)
  length = 2 * w
  position = (begin[:, None] + np.arange(length)).reshape(-1)     # flat index -> stream row
  owned = [(position[a], position[b]) for a, b in pairs.valid_pairs(last, start_ok, w)]
  reach = begin[-1] + length                                       # rows after it are in no window
  expected = {(i, j) for i in range(len(begin) * w) for j in range(i + 1, min(i + w + 1, reach))
              if episode[i] == episode[j]}
  assert len(owned) == len(set(owned))                             # each pair once
  assert set(owned) == expected
  # ends_episode: the owned start's episode closes (its filler) inside the start's window.
  k = np.flatnonzero(start_ok)
  np.testing.assert_array_equal(ends[k], filler[position[k]] < np.repeat(begin + length,
                                                                        length)[k])


def test_windows_of_two_rooms_share_no_pair():
  # Room 0's window ends with an episode still running, room 1's starts inside an episode (no
  # start flag at row 0): side by side in one batch, they must not join into one segment.
  rng = np.random.default_rng(4)
  w = 4
  (valid_0, start_0, *_), (valid_1, start_1, *_) = (_stream(rng, 20, 6) for _ in range(2))
  cuts_0, cuts_1 = _cut(valid_0, w)[0], _cut(valid_1, w)[0]
  room_0 = np.flatnonzero(cuts_0[:, -1] == 1)[0]
  room_1 = np.flatnonzero((cuts_1[:, 0] == 1) & (_cut(start_1, w)[0][:, 0] == 0))[0]
  windows = np.stack([cuts_0[room_0], cuts_1[room_1]])
  starts = np.stack([_cut(start_0, w)[0][room_0], _cut(start_1, w)[0][room_1]])
  last, start_ok, _ = _layout(windows, starts, w)
  owned = pairs.valid_pairs(last, start_ok, w)
  assert owned and all(a // (2 * w) == b // (2 * w) for a, b in owned)
  assert last[2 * w - 1] == 2 * w - 1 and last[2 * w] >= 2 * w
  for room in range(2):
    alone = _layout(windows[room:room + 1], starts[room:room + 1], w)
    shifted = {(a + room * 2 * w, b + room * 2 * w) for a, b in pairs.valid_pairs(*alone[:2], w)}
    assert shifted == {p for p in owned if p[0] // (2 * w) == room}


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

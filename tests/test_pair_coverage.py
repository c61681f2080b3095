"""Online pair coverage, proven on a real Reverb table: for every episode length 1..5w and
several w, the windows the actors' adder actually writes own every valid pair (i, j),
0 < j - i <= w, of the episode exactly once, and nothing else."""
import collections

import pytest

from bench.pair_coverage import every_pair, owned_pairs, written_windows


@pytest.mark.parametrize('window', [1, 2, 3, 5, 8])
def test_every_valid_pair_is_owned_by_exactly_one_written_window(window):
  lengths = range(1, 5 * window + 1)
  for length, windows in zip(lengths, written_windows(lengths, window)):
    every = every_pair(length, window)
    owned = collections.Counter(owned_pairs(windows, window))
    assert set(owned) == every, (length, window, sorted(every - set(owned)), sorted(set(owned) - every))
    assert max(owned.values()) == 1, (length, window)


def test_the_rule_before_the_fix_missed_the_last_partial_period():
  # T = 8, w = 3: windows [0..5] and [3..8]; starts 6 and 7 lie in no window's first period.
  windows = written_windows([8], 3)[0]
  assert every_pair(8, 3) - set(owned_pairs(windows, 3, old_rule=True)) == {(6, 7), (6, 8), (7, 8)}

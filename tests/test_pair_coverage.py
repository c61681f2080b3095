"""Online pair coverage, proven on a real Reverb table: for every episode length 1..5w and
several w, the windows the actors' adder actually writes own every valid pair (i, j),
0 < j - i <= w, of the episode exactly once, and nothing else."""
import collections
from typing import List, Sequence, Tuple

import dm_env
import numpy as np
import pytest
import tree
from acme import specs
from dm_env import specs as dm_specs

from agents import adders
from estimators import pairs


class StepIndexEnv(dm_env.Environment):
  """Episodes of exactly `length` steps observing (episode id, time index t = 0..length)."""

  def __init__(self, episode: int, length: int):
    self._episode, self._length, self._t = episode, length, 0

  def _obs(self):
    return np.array([self._episode, self._t], np.float32)

  def reset(self):
    self._t = 0
    return dm_env.restart(self._obs())

  def step(self, action):
    self._t += 1
    step_type = dm_env.StepType.LAST if self._t >= self._length else dm_env.StepType.MID
    return dm_env.TimeStep(step_type, np.float32(0.0), np.float32(step_type.mid()), self._obs())

  def observation_spec(self):
    return dm_specs.Array((2,), np.float32)

  def action_spec(self):
    return dm_specs.DiscreteArray(2, dtype=np.int32)

  def reward_spec(self):
    return dm_specs.Array((), np.float32)

  def discount_spec(self):
    return dm_specs.BoundedArray((), np.float32, 0.0, 1.0)


def written_windows(lengths: Sequence[int], window: int) -> List[List[Tuple[np.ndarray, np.ndarray]]]:
  """Writes one episode per length, back to back through one adder into one Reverb table, and
  returns, per episode, the (time index [n], 'valid' extra [n]) of every window written."""
  import reverb
  spec = specs.make_environment_spec(StepIndexEnv(0, 1))
  server = reverb.Server([reverb.Table(
      adders.PRECEDENCE_TABLE, reverb.selectors.Fifo(), reverb.selectors.Fifo(), 1_000_000,
      reverb.rate_limiters.MinSize(1), max_times_sampled=1,
      signature=adders.precedence_signature(spec))])
  try:
    client = reverb.Client(f'localhost:{server.port}')
    adder = adders.TrajectoryAdder(client, window=window)
    for episode, length in enumerate(lengths):
      env = StepIndexEnv(episode, length)
      timestep = env.reset()
      adder.add_first(timestep)
      while not timestep.last():
        timestep = env.step(np.int32(0))
        adder.add(np.int32(0), timestep)
    adder.close()
    n = client.server_info()[adders.PRECEDENCE_TABLE].current_size
    samples = client.sample(adders.PRECEDENCE_TABLE, num_samples=n, emit_timesteps=False)
    per_episode = [[] for _ in lengths]
    signature = adders.precedence_signature(spec)
    for s in samples:
      window = adders.unpack_precedence(tree.unflatten_as(signature, s.data))
      obs, valid = window.observation, window.extras['valid']
      episode = int(obs[0, 0])
      assert np.all(obs[:, 0] == episode), 'a window crosses an episode boundary'
      per_episode[episode].append((obs[:, 1].astype(int), valid))
    return per_episode
  finally:
    server.stop()


PADDED_ROWS = 8


def owned_pairs(windows, window: int, old_rule: bool = False) -> List[Tuple[int, int]]:
  """The (t_i, t_j) pairs, in episode time, that the windows own (with repeats). The batch is
  padded with empty windows (no valid step, so they own nothing) to a fixed number of rows, so
  the layout's ops compile once per window size rather than once per episode length."""
  length = 2 * window
  rows = max(PADDED_ROWS, len(windows))
  step_valid = np.zeros((rows, length), np.float32)
  times = np.zeros((rows, length), int)
  for b, (t, valid) in enumerate(windows):
    step_valid[b, :len(valid)] = valid
    times[b, :len(t)] = t
  last, start_ok = map(np.asarray, pairs.window_layout(step_valid, window))
  if old_rule:
    observed = np.asarray(pairs.observed_steps(step_valid))
    start_ok = (observed & (np.arange(length)[None, :] < window)).reshape(-1)
  flat_times = times.reshape(-1)
  return [(flat_times[i], flat_times[j]) for i, j in pairs.valid_pairs(last, start_ok, window)]


def every_pair(length: int, window: int):
  """All (i, j), 0 < j - i <= window, of an episode of `length` steps (length + 1 observations)."""
  return {(i, j) for i in range(length + 1) for j in range(i + 1, min(i + window, length) + 1)}


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

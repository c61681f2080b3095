r"""Which precedence pairs the online learner can draw: episodes of known lengths are written
through the actors' real window adder into a real Reverb table, the windows are read back, and
the pairs each window owns (`estimators.pairs.window_layout`) are compared with every valid pair
(i, j), 0 < j - i <= w, of every episode.

    python -m bench.pair_coverage --out results/pair_coverage.json

Reports, per (episode length T, window w), the fraction of valid pairs reachable and how many
times each is owned, for today's layout and for the rule before the fix (starts only in the
first w steps of every window), which never drew pairs starting in an episode's last partial
period.
"""
from typing import Dict, List, Sequence, Tuple

import dm_env
import numpy as np
import tree
from absl import app, flags
from acme import specs
from dm_env import specs as dm_specs

from agents import adders
from bench import common
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
    adder.flush()
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


def owned_pairs(windows, window: int, old_rule: bool = False) -> List[Tuple[int, int]]:
  """The (t_i, t_j) pairs, in episode time, that the windows own (with repeats)."""
  length = 2 * window
  step_valid = np.zeros((len(windows), length), np.float32)
  times = np.zeros((len(windows), length), int)
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


def coverage(length: int, window: int) -> Dict[str, Dict[str, float]]:
  every = every_pair(length, window)
  windows = written_windows([length], window)[0]
  out = {'valid_pairs': len(every), 'windows': len(windows)}
  for name, old in (('now', False), ('before_fix', True)):
    owned = owned_pairs(windows, window, old_rule=old)
    counts = {}
    for p in owned:
      counts[p] = counts.get(p, 0) + 1
    out[name] = {'reachable_fraction': len(every & set(counts)) / len(every),
                 'outside_valid': len(set(counts) - every),
                 'max_owners': max(counts.values()) if counts else 0}
  return out


FLAGS = flags.FLAGS
flags.DEFINE_string('out', 'results/pair_coverage.json', 'JSON output.')


def main(argv: Sequence[str]):
  del argv
  cases = [(250, 200), (44, 15), (120, 15), (200, 200), (37, 10)]
  results = {f'T={t},w={w}': coverage(t, w) for t, w in cases}
  for name, r in results.items():
    print(f"{name}: {r['valid_pairs']} valid pairs in {r['windows']} windows; reachable "
          f"{r['before_fix']['reachable_fraction']:.3f} before the fix, "
          f"{r['now']['reachable_fraction']:.3f} now (max owners {r['now']['max_owners']})")
  common.write_json(FLAGS.out, results)


if __name__ == '__main__':
  app.run(main)

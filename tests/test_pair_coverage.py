"""Online pair coverage, proven on a real Reverb table: rooms whose episodes take every length
1..5w, stepped by the actor's loop, written by its writer (one row per actor step for all rooms,
windows of 2w rows every w rows of the stream), read back as the precedence learner reads them:
for several w, the windows own every valid pair (i, j), 0 < j - i <= w, of every room's
episodes exactly once, and nothing else (no pair across rooms or episodes)."""
import collections
from typing import Dict, List, Sequence, Tuple

import dm_env
import numpy as np
import pytest
import tree
from acme import specs
from acme.utils import loggers
from dm_env import specs as dm_specs

from agents import acting, adders
from agents import loop as loop_lib
from estimators import pairs


class StepIndexEnv(dm_env.Environment):
  """Episodes of the given lengths in turn, observing (episode id, time index t = 0..length);
  episode ids are `room * 1000 + e`, so no two rooms share one."""

  def __init__(self, room: int, lengths: Sequence[int]):
    self._room, self._lengths, self._episode, self._t = room, list(lengths), -1, 0

  def _obs(self):
    return np.array([self._room * 1000 + self._episode, self._t], np.float32)

  def reset(self):
    self._episode += 1
    self._t = 0
    return dm_env.restart(self._obs())

  def step(self, action):
    self._t += 1
    length = self._lengths[self._episode % len(self._lengths)]
    step_type = dm_env.StepType.LAST if self._t >= length else dm_env.StepType.MID
    return dm_env.TimeStep(step_type, np.float32(0.0), np.float32(step_type.mid()), self._obs())

  def observation_spec(self):
    return dm_specs.Array((2,), np.float32)

  def action_spec(self):
    return dm_specs.DiscreteArray(2, dtype=np.int32)

  def reward_spec(self):
    return dm_specs.Array((), np.float32)

  def discount_spec(self):
    return dm_specs.BoundedArray((), np.float32, 0.0, 1.0)


ROOMS = 2


def written_windows(lengths: Sequence[int], window: int) -> Dict[int, List[np.ndarray]]:
  """ROOMS rooms (room k plays `lengths` from its k-th on) stepped by the actor loop with a
  random policy until each has played every length once, written into one Reverb table; returns
  per room its windows in order, each (episode id [2w], time index [2w], valid [2w],
  start_of_episode [2w]) as the precedence learner's reader unpacks them."""
  import reverb
  spec = specs.make_environment_spec(StepIndexEnv(0, [1]))
  server = reverb.Server([reverb.Table(
      adders.PRECEDENCE_TABLE, reverb.selectors.Fifo(), reverb.selectors.Fifo(), 1_000_000,
      reverb.rate_limiters.MinSize(1), max_times_sampled=1,
      signature=adders.precedence_signature(spec, window, ROOMS))])
  try:
    client = reverb.Client(f'localhost:{server.port}')
    writer = adders.ActorWriter(client, ROOMS, window=window)
    rooms = [StepIndexEnv(k, list(lengths[k:]) + list(lengths[:k])) for k in range(ROOMS)]
    actor = acting.BatchedActor(2, acting.ReversibilityConfig(), seeds=range(ROOMS))
    loop = loop_lib.BatchedEnvironmentLoop(rooms, actor, 'none', writer,
                                           logger=loggers.NoOpLogger())
    loop.run(num_steps=ROOMS * (sum(lengths) + len(lengths) + 3 * window))
    loop.close()
    n = client.server_info()[adders.PRECEDENCE_TABLE].current_size
    samples = client.sample(adders.PRECEDENCE_TABLE, num_samples=n, emit_timesteps=False)
    signature = adders.precedence_signature(spec, window, ROOMS)
    per_room = collections.defaultdict(list)
    for s in samples:
      windows = adders.unpack_precedence(
          {name: np.asarray(x)[None] for name, x in tree.unflatten_as(signature, s.data).items()})
      for k in range(ROOMS):
        obs = windows.observation[k]
        per_room[k].append((obs[:, 0].astype(int), obs[:, 1].astype(int),
                            windows.extras['valid'][k], windows.start_of_episode[k]))
    return per_room
  finally:
    server.stop()


def owned_pairs(per_room, window: int) -> List[Tuple[int, int, int, int]]:
  """(room, stream position i, stream position j, episode id) of every pair the windows own,
  with repeats: all rooms' windows in one batch, as the precedence learner takes them."""
  windows = [(k, m, w) for k, ws in per_room.items() for m, w in enumerate(ws)]
  step_valid = np.stack([w[2] for _, _, w in windows])
  starts = np.stack([w[3] for _, _, w in windows])
  last, start_ok, _ = map(np.asarray, pairs.window_layout(step_valid, starts, window))
  length = 2 * window
  out = []
  for i, j in pairs.valid_pairs(last, start_ok, window):
    (k, m, w), r_i, r_j = windows[i // length], i % length, j % length
    assert j // length == i // length, 'a pair across windows'
    assert w[0][r_i] == w[0][r_j], 'a pair across episodes'
    out.append((k, m * window + r_i, m * window + r_j, int(w[0][r_i])))
  return out


def every_pair(per_room, window: int):
  """Every (room, i, j, episode), 0 < j - i <= w, of the rooms' streams as the windows hold them
  (every row holds an observation: a step's, or the episode's final one on its filler row),
  with i where a written window's first w rows reach."""
  out = set()
  for k, ws in per_room.items():
    episode = {}
    for m, (ids, _, _, _) in enumerate(ws):
      for r, e in enumerate(ids):
        episode[m * window + r] = int(e)
    reach = len(ws) * window
    for i in range(reach):
      for j in range(i + 1, i + window + 1):
        if j in episode and episode[j] == episode[i]:
          out.add((k, i, j, episode[i]))
  return out


@pytest.mark.parametrize('window', [1, 2, 3, 5, 8])
def test_every_valid_pair_is_owned_by_exactly_one_written_window(window):
  lengths = list(range(1, 5 * window + 1))
  per_room = written_windows(lengths, window)
  owned = collections.Counter(owned_pairs(per_room, window))
  every = every_pair(per_room, window)
  assert set(owned) == every, (window, sorted(every - set(owned))[:5],
                               sorted(set(owned) - every)[:5])
  assert max(owned.values()) == 1, window
  # Every length was played whole within the windows' reach, in both rooms.
  ends = {(k, e) for k, _, _, e in owned}
  assert len(ends) >= ROOMS * (len(lengths) - 1), len(ends)

"""One environment's steps into Reverb: IMPALA unrolls for the 'impala' queue and precedence
windows for the 'precedence' table, written once.

`TrajectoryAdder` appends each step to a single Reverb TrajectoryWriter; the items of both
tables are references to the same columns, so an observation crosses the wire once (Acme's
adders, one per table, each kept a writer and sent every observation twice). Items are the ones
Acme's adders wrote (tests/test_adders.py compares them on a real Reverb server):

- impala: Acme's SequenceAdder with EndBehavior.CONTINUE: sequences of `sequence_length`
  entries every `period` entries of the *stream* (episodes back to back, each followed by its
  filler entry: the final observation with action, reward, discount and extras zero).
- precedence: Acme's SequenceAdder with EndBehavior.TRUNCATE: windows of 2w entries starting
  every w entries of the episode; the episode's last window holds what is left, filler
  included. The reader pads it to 2w (`launch.program.precedence_learner.make_window_iterator`; padding
  in the actor cost ~0.35 ms per Cartpole step). The 'valid' extra is 1 on real steps and 0 on
  the filler, so an observation at t is real iff valid[t] or valid[t-1]
  (`estimators.pairs.observed_steps`); `estimators.pairs.window_layout` says which window owns
  which pairs.
"""
from typing import Optional

import dm_env
import numpy as np
from acme import adders, specs
from acme.adders import reverb as reverb_adders

IMPALA_TABLE = 'impala'
PRECEDENCE_TABLE = 'precedence'
# Per-step extras of IMPALA items: the behaviour logits, Acme's (dummy) core state, and the
# learner update that made the acting policy (for the learner's policy-lag diagnostic).
IMPALA_EXTRAS = ('core_state', 'logits', 'policy_version')


def impala_signature(environment_spec: specs.EnvironmentSpec, sequence_length: int):
  extras = {'core_state': np.zeros((), np.float32),
            'logits': np.ones((environment_spec.actions.num_values,), np.float32),
            'policy_version': np.zeros((), np.float32)}
  return reverb_adders.SequenceAdder.signature(environment_spec, extras, sequence_length)


def precedence_signature(environment_spec: specs.EnvironmentSpec):
  """Variable-length windows (at most 2w steps)."""
  return reverb_adders.SequenceAdder.signature(
      environment_spec, {'valid': np.ones((), np.float32)}, sequence_length=None)


def item_due(count: int, length: int, period: int) -> bool:
  """Acme's SequenceAdder rule: an item when `count` completed entries reach `length`, then
  every `period` entries."""
  return count == length or (count > length and (count - length) % period == 0)


class SequenceCutter:
  """One environment's rows -> IMPALA sequences in memory, by the rule the writer's items
  follow (length T every T - 1 rows of the stream): `add` returns a sequence when one is due.
  For `bench.single_process`, which trains without Reverb."""

  def __init__(self, length: int):
    self._length = length
    self._rows = []
    self._count = 0

  def add(self, row):
    self._rows.append(row)
    self._count += 1
    del self._rows[:-self._length]
    if item_due(self._count, self._length, self._length - 1):
      return list(self._rows)
    return None


class TrajectoryAdder(adders.Adder):

  def __init__(self, client, impala_sequence: Optional[int] = None, window: Optional[int] = None,
               max_in_flight_items: int = 4):
    """impala_sequence: unroll length (period = length - 1), None = no IMPALA items;
    window: w of the precedence windows, None = no precedence items."""
    if impala_sequence is None and window is None:
      raise ValueError('TrajectoryAdder writes nothing: give impala_sequence and/or window')
    self._impala = impala_sequence
    self._window = window
    longest = max(impala_sequence or 0, 2 * (window or 0))
    self._writer = client.trajectory_writer(num_keep_alive_refs=longest + 1)
    self._max_in_flight = max_in_flight_items
    self._stream_entries = 0     # completed entries since the writer started (IMPALA items)
    self._episode_entries = 0    # completed entries of the current episode (precedence items)
    self._pending = None         # (observation, start_of_episode) waiting for its action

  def add_first(self, timestep: dm_env.TimeStep):
    self._pending = (timestep.observation, True)
    self._episode_entries = 0

  def add(self, action, next_timestep: dm_env.TimeStep, extras=()):
    # One complete row per step (Acme appends a partial observation, then completes it: two
    # appends, each ~60 us of Reverb's Python and C++ per call), with flat columns (fewer nested
    # structures to flatten on every append).
    observation, first = self._pending
    row = {'observation': observation, 'start_of_episode': first, 'action': action,
           'reward': next_timestep.reward, 'discount': next_timestep.discount,
           'valid': np.float32(1.0), **(extras or {})}
    self._writer.append(row)
    self._entry_completed(episode_end=False)
    self._pending = (next_timestep.observation, False)
    if next_timestep.last():
      filler = {k: np.zeros_like(v) for k, v in row.items()}   # valid = 0
      filler['observation'] = next_timestep.observation
      self._writer.append(filler)
      self._entry_completed(episode_end=True)

  def _items(self, length: int, extras_keys):
    """The last `length` rows, as an Acme Trajectory with the given extras."""
    h = self._writer.history
    cut = slice(-length, None)
    return reverb_adders.base.Trajectory(
        observation=h['observation'][cut], action=h['action'][cut], reward=h['reward'][cut],
        discount=h['discount'][cut], start_of_episode=h['start_of_episode'][cut],
        extras={k: h[k][cut] for k in extras_keys})

  def _entry_completed(self, episode_end: bool):
    self._stream_entries += 1
    self._episode_entries += 1
    created = False
    if self._impala and item_due(self._stream_entries, self._impala, self._impala - 1):
      self._writer.create_item(IMPALA_TABLE, 1.0,
                               self._items(self._impala, IMPALA_EXTRAS))
      created = True
    if self._window:
      w, n = self._window, self._episode_entries
      length = None
      if episode_end:   # what is left: from the first multiple of w whose window reaches the end
        start = max(0, -(-(n - 2 * w) // w)) * w
        length = n - start
      elif item_due(n, 2 * w, w):
        length = 2 * w
      if length:
        self._writer.create_item(PRECEDENCE_TABLE, 1.0, self._items(length, ('valid',)))
        created = True
    if created:
      self._writer.flush(self._max_in_flight)

  def reset(self):
    pass  # episodes are delimited by add_first / the filler, not by resetting the writer

  def flush(self):
    """Blocks until every item created so far is on the server."""
    self._writer.flush(0)

  def __del__(self):
    try:
      self._writer.flush(0, timeout_ms=10_000)
      self._writer.close()
    except Exception:  # the server may already be gone at shutdown
      pass

"""One environment's steps into Reverb: IMPALA unrolls for the 'impala' queue and precedence
windows for the 'precedence' table, written once.

`TrajectoryAdder` appends each step to a single Reverb TrajectoryWriter; the items of both
tables are references to the same columns, so an observation crosses the wire once (Acme's
adders, one per table, each kept a writer and sent every observation twice). Items hold what
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

With self-imitation on (`--self_imitation_updates`), `SelfImitationAdder` wraps an environment's
adder and writes the steps of the best terminated episodes to a third table, 'self_imitation':
one item per step, (observation, [action, discounted return-to-go]), the episode's return its
priority; the table evicts the lowest first (`launch.program.builder.make_tables`).

Rows. Reverb's writer converts, buffers and chunks every column on every append, so a row has at
most three columns: 'observation', 'steps' (the per-step scalars packed into one float32 vector,
entries `STEP_FIELDS`) and 'logits' (written only with IMPALA items). Items reference whole
columns: an IMPALA item is {observation, steps, logits}, a precedence window {observation,
steps}. The readers turn them back into the Acme `Trajectory` (same fields, dtypes and extras as
Acme's items) with `unpack_impala` / `unpack_precedence`; the layout lives only here.

Rows and items go straight to the writer's C++ half (`reverb.pybind.TrajectoryWriter`, which
reverb.TrajectoryWriter wraps; agents.reverb_internals): the Python half flattens every row with paths (dm-tree in
Python) and rebuilds its history structure for each item: over half of the calling thread's time
per step (BUILD_NOTES.md, "Rows of three columns"). Flush and close still go through the Python
half.
"""
import collections
from typing import Iterator, NamedTuple, Optional

import dm_env
import numpy as np
import tensorflow as tf
import tree
from acme import adders, specs
from acme.adders import reverb as reverb_adders

from agents import reverb_internals, self_imitation

IMPALA_TABLE = 'impala'
PRECEDENCE_TABLE = 'precedence'
# One item per step of a terminated episode that self-imitation may learn from: its observation
# and (action, discounted return-to-go), with the episode's return as the item's priority.
SELF_IMITATION_TABLE = 'self_imitation'
ACTION_RETURN = 'action_return'
# Per-step extras of IMPALA items: the behaviour logits, Acme's (dummy) core state, and the
# learner update that made the acting policy (for the learner's policy-lag diagnostic).
IMPALA_EXTRAS = ('core_state', 'logits', 'policy_version')

STEPS = 'steps'
# The entries of a row's 'steps' vector, in order, with the dtype each is read back as. The start
# flag and the action are small integers, exact in float32; the rest are float32 already.
STEP_FIELDS = (('start_of_episode', np.bool_), ('action', np.int32), ('reward', np.float32),
               ('discount', np.float32), ('valid', np.float32), ('core_state', np.float32),
               ('policy_version', np.float32))
# The columns of each table's items; a row has the IMPALA columns (or the precedence ones when
# the adder writes no IMPALA items), in this order.
IMPALA_COLUMNS = ('observation', STEPS, 'logits')
PRECEDENCE_COLUMNS = ('observation', STEPS)
# The episode-closing filler row: every scalar zero (valid 0 marks it).
FILLER_STEPS = np.zeros(len(STEP_FIELDS), np.float32)
FILLER_STEPS.setflags(write=False)   # appended by every adder


def pack_steps(start_of_episode, action, reward, discount, valid, core_state,
               policy_version) -> np.ndarray:
  """One row's scalars as its 'steps' vector (the arguments in `STEP_FIELDS` order)."""
  return np.array((start_of_episode, action, reward, discount, valid, core_state,
                   policy_version), np.float32)


def unpack_steps(steps) -> dict:
  """'steps' [..., len(STEP_FIELDS)] (numpy, any leading axes) -> {field: [...] in its dtype}."""
  steps = np.asarray(steps)
  out = {}
  for i, (name, dtype) in enumerate(STEP_FIELDS):
    column = steps[..., i]
    out[name] = column != 0 if dtype is np.bool_ else column.astype(dtype, copy=False)
  return out


def unpack_impala(data) -> reverb_adders.base.Trajectory:
  """An 'impala' item (or a batch of them) as read back -> the Trajectory the learner trains on."""
  f = unpack_steps(data[STEPS])
  return reverb_adders.base.Trajectory(
      observation=data['observation'], action=f['action'], reward=f['reward'],
      discount=f['discount'], start_of_episode=f['start_of_episode'],
      extras={'core_state': f['core_state'], 'logits': data['logits'],
              'policy_version': f['policy_version']})


def unpack_precedence(data) -> reverb_adders.base.Trajectory:
  """A 'precedence' window (or a batch of them) as read back -> Trajectory with the 'valid'
  extra."""
  f = unpack_steps(data[STEPS])
  return reverb_adders.base.Trajectory(
      observation=data['observation'], action=f['action'], reward=f['reward'],
      discount=f['discount'], start_of_episode=f['start_of_episode'],
      extras={'valid': f['valid']})


def unpacked(samples: Iterator, unpack) -> Iterator:
  """Numpy ReplaySamples (a dataset's `as_numpy_iterator()`) with their data unpacked."""
  for sample in samples:
    yield sample._replace(data=unpack(sample.data))


def _check_layout(environment_spec: specs.EnvironmentSpec):
  """The layout reads actions back as int32 and rewards and discounts as float32 (what
  `acme.wrappers.SinglePrecisionWrapper` gives), and the observation is one array (one column):
  refuse other specs rather than change them."""
  if not hasattr(environment_spec.observations, 'shape'):
    raise ValueError(f'rows hold one observation array, got {environment_spec.observations}')
  got = (environment_spec.actions.dtype, environment_spec.rewards.dtype,
         environment_spec.discounts.dtype)
  if tuple(map(np.dtype, got)) != (np.int32, np.float32, np.float32) or any(
      s.shape != () for s in (environment_spec.actions, environment_spec.rewards,
                              environment_spec.discounts)):
    raise ValueError('rows pack scalar int32 actions and float32 rewards and discounts, got '
                     f'{environment_spec.actions}, {environment_spec.rewards}, '
                     f'{environment_spec.discounts}')


def _signature(environment_spec: specs.EnvironmentSpec, length: Optional[int], columns):
  _check_layout(environment_spec)
  observation = environment_spec.observations
  every = {'observation': tf.TensorSpec((length, *observation.shape), observation.dtype,
                                        'observation'),
           STEPS: tf.TensorSpec((length, len(STEP_FIELDS)), tf.float32, STEPS),
           'logits': tf.TensorSpec((length, environment_spec.actions.num_values), tf.float32,
                                   'logits')}
  return {name: every[name] for name in columns}


def impala_signature(environment_spec: specs.EnvironmentSpec, sequence_length: int):
  return _signature(environment_spec, sequence_length, IMPALA_COLUMNS)


def precedence_signature(environment_spec: specs.EnvironmentSpec):
  """Variable-length windows (at most 2w steps)."""
  return _signature(environment_spec, None, PRECEDENCE_COLUMNS)


def self_imitation_signature(environment_spec: specs.EnvironmentSpec):
  """Single steps (no time axis)."""
  observation = environment_spec.observations
  return {'observation': tf.TensorSpec(observation.shape, observation.dtype, 'observation'),
          ACTION_RETURN: tf.TensorSpec((2,), tf.float32, ACTION_RETURN)}


class ImitationSteps(NamedTuple):
  observation: np.ndarray   # [N, ...]
  action: np.ndarray        # [N] int32
  returns: np.ndarray       # [N] float32


def unpack_self_imitation(data) -> ImitationSteps:
  action_return = np.asarray(data[ACTION_RETURN])
  return ImitationSteps(np.asarray(data['observation']), action_return[:, 0].astype(np.int32),
                        action_return[:, 1])


def item_due(count: int, length: int, period: int) -> bool:
  """Acme's SequenceAdder rule: an item when `count` completed entries reach `length`, then
  every `period` entries."""
  return count == length or (count > length and (count - length) % period == 0)


# What `TrajectoryAdder.add` accepts as extras: the IMPALA extras ('logits' its own column, the
# others packed into 'steps').
_EXTRAS = frozenset(IMPALA_EXTRAS)


class TrajectoryAdder(adders.Adder):

  def __init__(self, client, impala_sequence: Optional[int] = None, window: Optional[int] = None,
               max_in_flight_items: int = 4):
    """impala_sequence: unroll length (period = length - 1), None = no IMPALA items;
    window: w of the precedence windows, None = no precedence items."""
    if impala_sequence is None and window is None:
      raise ValueError('TrajectoryAdder writes nothing: give impala_sequence and/or window')
    self._impala = impala_sequence
    self._window = window
    keep = max(impala_sequence or 0, 2 * (window or 0)) + 1
    self._writer = client.trajectory_writer(num_keep_alive_refs=keep)
    self._cc_writer = reverb_internals.cc_writer(self._writer)   # its C++ half (the docstring)
    columns = IMPALA_COLUMNS if impala_sequence else PRECEDENCE_COLUMNS
    # References to the last `keep` cells of each column, as the C++ writer keeps them alive.
    self._refs = [collections.deque(maxlen=keep) for _ in columns]
    # An item's columns in the order its table signature flattens in (dm-tree sorts dict keys).
    position = {name: i for i, name in enumerate(columns)}
    self._impala_columns = (tree.flatten({n: position[n] for n in IMPALA_COLUMNS})
                            if impala_sequence else None)
    self._precedence_columns = tree.flatten({n: position[n] for n in PRECEDENCE_COLUMNS})
    self._max_in_flight = max_in_flight_items
    self._stream_entries = 0     # completed entries since the writer started (IMPALA items)
    self._episode_entries = 0    # completed entries of the current episode (precedence items)
    self._pending = None         # (observation, start_of_episode) waiting for its action

  def add_first(self, timestep: dm_env.TimeStep):
    self._pending = (timestep.observation, True)
    self._episode_entries = 0

  def add(self, action, next_timestep: dm_env.TimeStep, extras=()):
    # One complete row per step (Acme appends a partial observation, then completes it: two
    # appends, each ~60 us of Reverb's Python and C++ per call), of at most three columns.
    extras = extras or {}
    unknown = extras.keys() - _EXTRAS
    if unknown:
      raise ValueError(f'extras {sorted(unknown)} have no place in the row layout')
    observation, first = self._pending
    # np.asarray first: numpy converts a 0-d jax array (the loop's dummy core state) in
    # np.array((...)) several times slower than a numpy scalar.
    steps = pack_steps(first, action, next_timestep.reward, next_timestep.discount, 1.0,
                       np.asarray(extras.get('core_state', 0.0)),
                       extras.get('policy_version', 0.0))
    logits = extras['logits'] if self._impala else None
    self._append(observation, steps, logits)
    self._entry_completed(episode_end=False)
    self._pending = (next_timestep.observation, False)
    if next_timestep.last():
      self._append(next_timestep.observation, FILLER_STEPS,
                   None if logits is None else np.zeros_like(logits))
      self._entry_completed(episode_end=True)

  def _append(self, observation, steps, logits):
    row = [observation, steps] if logits is None else [observation, steps, logits]
    for refs, ref in zip(self._refs, self._cc_writer.Append(row)):
      refs.append(ref)

  def _create_item(self, table: str, length: int, columns):
    """An item of the last `length` rows of `columns` (indices into the row)."""
    cells = [list(self._refs[c])[-length:] for c in columns]
    self._cc_writer.CreateItem(table, 1.0, cells, [False] * len(cells))

  def _entry_completed(self, episode_end: bool):
    self._stream_entries += 1
    self._episode_entries += 1
    created = False
    if self._impala and item_due(self._stream_entries, self._impala, self._impala - 1):
      self._create_item(IMPALA_TABLE, self._impala, self._impala_columns)
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
        self._create_item(PRECEDENCE_TABLE, length, self._precedence_columns)
        created = True
    if created:
      self._writer.flush(self._max_in_flight)

  def reset(self):
    pass  # episodes are delimited by add_first / the filler, not by resetting the writer

  def flush(self):
    """Blocks until every item created so far is on the server."""
    self._writer.flush(0)

  def close(self):
    """Sends what is pending and ends the writer's stream. An open stream holds the server's
    shutdown for its whole grace period (5 s), so owners close the adder before stopping it."""
    try:
      self._writer.flush(0, timeout_ms=10_000)
      self._writer.close()
    except Exception:  # the server may already be gone at shutdown
      pass

  def __del__(self):
    self.close()


class SharedWriter:
  """One Reverb writer that several adders write through. Each of them may close it when it is
  closed; the stream is ended once, on the first call."""

  def __init__(self, writer):
    self.writer, self._closed = writer, False

  def close(self):
    if self._closed:
      return
    self._closed = True
    try:
      self.writer.close()
    except Exception:  # the server may already be gone at shutdown
      pass


class SelfImitationAdder(adders.Adder):
  """Wraps one environment's adder: passes every call on, and at the end of a *terminated*
  episode that `admit` lets through writes its steps to the self-imitation table, each with its
  discounted return-to-go (of the reward the agent is trained on, RAE's penalty included). The
  K adders of an actor share one writer (a `SharedWriter`) and one filter
  (`agents.self_imitation.TopReturns`): episodes are rare and written whole, so the Python
  writer's cost does not matter."""

  def __init__(self, inner: adders.Adder, shared: SharedWriter, admit, discount: float):
    self._inner, self._shared, self._admit, self._discount = inner, shared, admit, discount
    self._writer = shared.writer
    self._observations, self._actions, self._rewards = [], [], []

  def add_first(self, timestep: dm_env.TimeStep):
    self._inner.add_first(timestep)
    self._observations, self._actions, self._rewards = [timestep.observation], [], []

  def add(self, action, next_timestep: dm_env.TimeStep, extras=()):
    self._inner.add(action, next_timestep, extras)
    self._actions.append(int(action))
    self._rewards.append(float(next_timestep.reward))
    if not next_timestep.last():
      self._observations.append(next_timestep.observation)
      return
    total = float(np.sum(self._rewards))
    if float(next_timestep.discount) == 0.0 and self._admit(total):
      returns = self_imitation.returns_to_go(np.asarray(self._rewards), self._discount)
      for observation, action_taken, ret in zip(self._observations, self._actions, returns):
        self._writer.append({'observation': observation,
                             ACTION_RETURN: np.array([action_taken, ret], np.float32)})
        self._writer.create_item(SELF_IMITATION_TABLE, priority=total, trajectory={
            'observation': self._writer.history['observation'][-1],
            ACTION_RETURN: self._writer.history[ACTION_RETURN][-1]})
      self._writer.flush()
    self._observations, self._actions, self._rewards = [], [], []

  def reset(self):
    self._inner.reset()

  def flush(self):
    if hasattr(self._inner, 'flush'):
      self._inner.flush()

  def close(self):
    """Closes the wrapped adder and the shared writer (once for all the actor's adders, which
    then write nothing more to the self-imitation table)."""
    if hasattr(self._inner, 'close'):
      self._inner.close()
    self._shared.close()

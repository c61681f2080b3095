"""An actor's steps into Reverb: one writer per actor, one row per actor step holding all its
rooms, and the items of the 'impala' queue and the 'precedence' table made from those rows.

Each actor steps its K rooms ("environments") in lock-step, and every actor step appends exactly
one row: the K rooms' observations, step scalars and behaviour logits, stacked. That is possible
because a room whose episode ended spends its next actor step on the episode's filler row (the
batched environments reset it on the next step, `envs.batch`): each room's column of the rows is
then exactly the stream one per-room Acme adder saw, episodes back to back, each followed by its
filler entry (the final observation with action, reward, discount and extras zero). One Reverb
`Append` per actor step instead of one per room (BUILD_NOTES.md, "One row per actor step").

Items hold a block of rows [length, G] of a fixed group of G rooms (G divides K; the learner's
batch of B sequences is B / G items; `launch.program.builder.rooms_per_item` picks G, 1 for a
table sampled uniformly):

- impala: the last `sequence_length` rows every `sequence_length - 1` rows: each room's column
  is what Acme's SequenceAdder with EndBehavior.CONTINUE wrote for that room
  (tests/test_adders.py compares them on a real Reverb server).
- precedence: the last 2w rows every w rows of the stream (not of the episode): a room's window
  may hold several episodes. The 'valid' extra is 1 on real steps and 0 on the filler, so an
  observation at t is real iff valid[t] or valid[t-1] (`estimators.pairs.observed_steps`), and
  episodes are split at start_of_episode; `estimators.pairs.window_layout` says which window owns
  which pairs (each pair of a room's episode with gap <= w exactly once).

The readers turn items back into per-room sequences [B, length, ...] (`unpack_impala`,
`unpack_precedence`): the Acme `Trajectory` with the same fields, dtypes and extras as Acme's
items. `LAYOUT_VERSION` names this layout; replay checkpoints of another are not restored.

With self-imitation on (`--self_imitation_updates`), `SelfImitationRows` wraps the actor's writer,
reads each room's episodes back out of the rows and writes the steps of the best terminated ones
to a third table, 'self_imitation': one item per step, (observation, [action, discounted
return-to-go]), the episode's return its priority; the table evicts the lowest first
(`launch.program.builder.make_tables`).

Rows. Reverb's writer converts, buffers and chunks every column on every append, so a row has at
most three columns per group: 'observation', 'steps' (the per-step scalars packed into one float32
vector, entries `STEP_FIELDS`) and 'logits' (written only with IMPALA items). The layout lives
only here. Rows and items go straight to the writer's C++ half (`reverb.pybind.TrajectoryWriter`,
which reverb.TrajectoryWriter wraps; agents.reverb_internals): the Python half flattens every row
with paths (dm-tree in Python) and rebuilds its history structure for each item (BUILD_NOTES.md,
"Rows of three columns"). Flush and close still go through the Python half.
"""
import collections
from typing import Iterator, NamedTuple, Optional

import numpy as np
import reverb
import tensorflow as tf
import tree
from acme import specs
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
# Items of [length, G rooms] blocks of one-row-per-actor-step writers, G = 1 in a uniformly sampled
# table. Replay checkpoints record it; version 1 was one writer and one row per room, version 2
# blocks of G rooms in the replay too (`launch.program.replay`).
LAYOUT_VERSION = 3

STEPS = 'steps'
# The entries of a row's 'steps' vector, in order, with the dtype each is read back as. The start
# flag and the action are small integers, exact in float32; the rest are float32 already.
STEP_FIELDS = (('start_of_episode', np.bool_), ('action', np.int32), ('reward', np.float32),
               ('discount', np.float32), ('valid', np.float32), ('core_state', np.float32),
               ('policy_version', np.float32))
_START, _ACTION, _REWARD, _DISCOUNT, _VALID, _CORE_STATE, _POLICY_VERSION = range(len(STEP_FIELDS))
# The columns of each table's items; a row has, per group of rooms, the IMPALA columns (or the
# precedence ones when the writer makes no IMPALA items), in this order.
IMPALA_COLUMNS = ('observation', STEPS, 'logits')
PRECEDENCE_COLUMNS = ('observation', STEPS)
# The episode-closing filler row: every scalar zero (valid 0 marks it).
FILLER_STEPS = np.zeros(len(STEP_FIELDS), np.float32)
FILLER_STEPS.setflags(write=False)


def pack_steps(start_of_episode, action, reward, discount, valid, core_state,
               policy_version) -> np.ndarray:
  """One room's scalars as its 'steps' vector (the arguments in `STEP_FIELDS` order)."""
  return np.array((start_of_episode, action, reward, discount, valid, core_state,
                   policy_version), np.float32)


def step_rows(start_of_episode: np.ndarray, action: np.ndarray, reward: np.ndarray,
              discount: np.ndarray, filler: np.ndarray, policy_version: float) -> np.ndarray:
  """One actor step's 'steps' rows [K, len(STEP_FIELDS)] for its K rooms: a real step
  (start flag of its observation, action, reward, discount, valid 1, the acting policy's version)
  where `filler` is False, the filler row (all zero) where it is True. Acme's core state is a
  dummy, always 0."""
  rows = np.zeros((len(action), len(STEP_FIELDS)), np.float32)
  rows[:, _START] = start_of_episode
  rows[:, _ACTION] = action
  rows[:, _REWARD] = reward
  rows[:, _DISCOUNT] = discount
  rows[:, _VALID] = 1.0
  rows[:, _POLICY_VERSION] = policy_version
  rows[filler] = 0.0
  return rows


def unpack_steps(steps) -> dict:
  """'steps' [..., len(STEP_FIELDS)] (numpy, any leading axes) -> {field: [...] in its dtype}."""
  steps = np.asarray(steps)
  out = {}
  for i, (name, dtype) in enumerate(STEP_FIELDS):
    column = steps[..., i]
    out[name] = column != 0 if dtype is np.bool_ else column.astype(dtype, copy=False)
  return out


def per_room(data):
  """Items [N, length, G, ...] (a batch as read back) -> per-room sequences [N * G, length, ...],
  the G rooms of an item consecutive."""
  def split(x):
    x = np.asarray(x)
    n, length, g = x.shape[:3]
    return np.swapaxes(x, 1, 2).reshape((n * g, length) + x.shape[3:])
  return {name: split(x) for name, x in data.items()}


def unpack_impala(data) -> reverb_adders.base.Trajectory:
  """A batch of 'impala' items [N, T, G, ...] as read back -> the Trajectory of its N * G
  sequences [N * G, T, ...] the learner trains on."""
  data = per_room(data)
  f = unpack_steps(data[STEPS])
  return reverb_adders.base.Trajectory(
      observation=data['observation'], action=f['action'], reward=f['reward'],
      discount=f['discount'], start_of_episode=f['start_of_episode'],
      extras={'core_state': f['core_state'], 'logits': data['logits'],
              'policy_version': f['policy_version']})


def unpack_precedence(data) -> reverb_adders.base.Trajectory:
  """A batch of 'precedence' items [N, 2w, G, ...] -> Trajectory of its N * G rooms' windows
  [N * G, 2w, ...] with the 'valid' extra."""
  data = per_room(data)
  f = unpack_steps(data[STEPS])
  return reverb_adders.base.Trajectory(
      observation=data['observation'], action=f['action'], reward=f['reward'],
      discount=f['discount'], start_of_episode=f['start_of_episode'],
      extras={'valid': f['valid']})


def unpacked(samples: Iterator, unpack) -> Iterator:
  """Numpy ReplaySamples (a dataset's `as_numpy_iterator()`) with their data unpacked."""
  for sample in samples:
    yield sample._replace(data=unpack(sample.data))


def precedence_windows(client, window_batch: int, rooms: int) -> Iterator:
  """The precedence learner's input: batches of at least `window_batch` windows, items of
  `rooms` rooms' windows of 2w rows sampled from `client`'s 'precedence' table, unpacked into one
  Trajectory per room with the 'valid' extra."""
  items = -(-window_batch // rooms)
  dataset = reverb.TrajectoryDataset.from_table_signature(
      server_address=client.server_address, table=PRECEDENCE_TABLE,
      max_in_flight_samples_per_worker=2 * items)
  return unpacked(dataset.batch(items, drop_remainder=True).as_numpy_iterator(),
                  unpack_precedence)


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


def _signature(environment_spec: specs.EnvironmentSpec, length: int, rooms: int, columns):
  _check_layout(environment_spec)
  observation = environment_spec.observations
  every = {'observation': tf.TensorSpec((length, rooms, *observation.shape), observation.dtype,
                                        'observation'),
           STEPS: tf.TensorSpec((length, rooms, len(STEP_FIELDS)), tf.float32, STEPS),
           'logits': tf.TensorSpec((length, rooms, environment_spec.actions.num_values),
                                   tf.float32, 'logits')}
  return {name: every[name] for name in columns}


def impala_signature(environment_spec: specs.EnvironmentSpec, sequence_length: int,
                     rooms_per_item: int):
  return _signature(environment_spec, sequence_length, rooms_per_item, IMPALA_COLUMNS)


def precedence_signature(environment_spec: specs.EnvironmentSpec, window: int,
                         rooms_per_item: int):
  """Windows of 2w rows."""
  return _signature(environment_spec, 2 * window, rooms_per_item, PRECEDENCE_COLUMNS)


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


class ActorWriter:
  """One actor's writer: `append` takes one actor step's rows for its K rooms and makes the
  items due (module docstring)."""

  def __init__(self, client, num_envs: int, impala_sequence: Optional[int] = None,
               window: Optional[int] = None, rooms_per_item: Optional[int] = None,
               max_in_flight_items: int = 4):
    """impala_sequence: unroll length T (period T - 1), None = no IMPALA items;
    window: w of the precedence windows, None = no precedence items;
    rooms_per_item: G, a divisor of num_envs (None: num_envs)."""
    if impala_sequence is None and window is None:
      raise ValueError('ActorWriter writes nothing: give impala_sequence and/or window')
    rooms = rooms_per_item or num_envs
    if num_envs % rooms:
      raise ValueError(f'{rooms} rooms per item do not divide the actor\'s {num_envs} rooms')
    self._num_envs, self._rooms = num_envs, rooms
    self._groups = num_envs // rooms
    self._impala = impala_sequence
    self._window = window
    keep = max(impala_sequence or 0, 2 * (window or 0)) + 1
    self._writer = client.trajectory_writer(num_keep_alive_refs=keep)
    self._cc_writer = reverb_internals.cc_writer(self._writer)   # its C++ half (the docstring)
    columns = IMPALA_COLUMNS if impala_sequence else PRECEDENCE_COLUMNS
    self._width = len(columns)
    # References to the last `keep` cells of each column of each group, as the C++ writer keeps
    # them alive.
    self._refs = [collections.deque(maxlen=keep) for _ in range(self._width * self._groups)]
    # An item's columns in the order its table signature flattens in (dm-tree sorts dict keys).
    position = {name: i for i, name in enumerate(columns)}
    self._impala_columns = (tree.flatten({n: position[n] for n in IMPALA_COLUMNS})
                            if impala_sequence else None)
    self._precedence_columns = tree.flatten({n: position[n] for n in PRECEDENCE_COLUMNS})
    self._max_in_flight = max_in_flight_items
    self._rows = 0     # rows appended since the writer started

  @property
  def num_envs(self) -> int:
    return self._num_envs

  def append(self, observation: np.ndarray, steps: np.ndarray,
             logits: Optional[np.ndarray] = None):
    """One actor step: observation [K, ...], steps [K, len(STEP_FIELDS)] (`step_rows`),
    logits [K, A] (required with IMPALA items, ignored without)."""
    columns = [observation, steps, logits] if self._impala else [observation, steps]
    if self._impala and logits is None:
      raise ValueError('rows of IMPALA items need the behaviour logits')
    if len(steps) != self._num_envs:
      raise ValueError(f'{len(steps)} rows for a writer of {self._num_envs} rooms')
    if self._groups == 1:
      row = columns
    else:
      g = self._rooms
      row = [c[i * g:(i + 1) * g] for i in range(self._groups) for c in columns]
    for refs, ref in zip(self._refs, self._cc_writer.Append(row)):
      refs.append(ref)
    self._rows += 1
    created = False
    if self._impala and item_due(self._rows, self._impala, self._impala - 1):
      self._create_items(IMPALA_TABLE, self._impala, self._impala_columns)
      created = True
    if self._window and item_due(self._rows, 2 * self._window, self._window):
      self._create_items(PRECEDENCE_TABLE, 2 * self._window, self._precedence_columns)
      created = True
    if created:
      self._writer.flush(self._max_in_flight)

  def _create_items(self, table: str, length: int, columns):
    """One item per group: the last `length` rows of the group's `columns`."""
    for group in range(self._groups):
      cells = [list(self._refs[group * self._width + c])[-length:] for c in columns]
      self._cc_writer.CreateItem(table, 1.0, cells, [False] * len(cells))

  def flush(self):
    """Blocks until every item created so far is on the server."""
    self._writer.flush(0)

  def close(self):
    """Sends what is pending and ends the writer's stream. An open stream holds the server's
    shutdown for its whole grace period (5 s), so owners close the writer before stopping it."""
    try:
      self._writer.flush(0, timeout_ms=10_000)
      self._writer.close()
    except Exception:  # the server may already be gone at shutdown
      pass

  def __del__(self):
    self.close()


class SelfImitationRows:
  """Wraps an actor's writer: passes every actor step's rows on, reads each room's episodes back
  out of them, and at the end of a *terminated* episode that `admit` lets through writes its steps
  to the self-imitation table, each with its discounted return-to-go (of the reward the agent is
  trained on, RAE's penalty included), through `writer` (`client.trajectory_writer`). One filter
  (`agents.self_imitation.TopReturns`) for the actor's rooms: episodes are rare and written whole,
  so the Python writer's cost does not matter."""

  def __init__(self, inner, writer, admit, discount: float):
    self._inner, self._writer, self._admit, self._discount = inner, writer, admit, discount
    self._episodes = [([], [], []) for _ in range(inner.num_envs)]   # observations, actions, rewards
    self._last_discount = np.ones(inner.num_envs, np.float32)

  @property
  def num_envs(self) -> int:
    return self._inner.num_envs

  def append(self, observation, steps, logits=None):
    self._inner.append(observation, steps, logits)
    for k in range(len(steps)):
      observations, actions, rewards = self._episodes[k]
      if steps[k, _VALID]:
        if steps[k, _START]:
          observations.clear(), actions.clear(), rewards.clear()
        observations.append(observation[k])
        actions.append(int(steps[k, _ACTION]))
        rewards.append(float(steps[k, _REWARD]))
        self._last_discount[k] = steps[k, _DISCOUNT]
      elif actions:   # the filler: the episode's steps are all there
        self._episode_ended(observations, actions, rewards, self._last_discount[k] == 0.0)
        observations.clear(), actions.clear(), rewards.clear()

  def _episode_ended(self, observations, actions, rewards, terminated: bool):
    total = float(np.sum(rewards))
    if not (terminated and self._admit(total)):
      return
    returns = self_imitation.returns_to_go(np.asarray(rewards), self._discount)
    for observation, action_taken, ret in zip(observations, actions, returns):
      self._writer.append({'observation': observation,
                           ACTION_RETURN: np.array([action_taken, ret], np.float32)})
      self._writer.create_item(SELF_IMITATION_TABLE, priority=total, trajectory={
          'observation': self._writer.history['observation'][-1],
          ACTION_RETURN: self._writer.history[ACTION_RETURN][-1]})
    self._writer.flush()

  def flush(self):
    self._inner.flush()

  def close(self):
    """Closes the wrapped writer and the self-imitation one."""
    self._inner.close()
    try:
      self._writer.close()
    except Exception:  # the server may already be gone at shutdown
      pass

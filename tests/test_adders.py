"""`ActorWriter` (one writer per actor, one row per actor step for all its rooms, items of
[length, G rooms] blocks): unpacked, each room's IMPALA unrolls are exactly the items Acme 0.4.0's
SequenceAdder (EndBehavior.CONTINUE) wrote for that room alone, and its precedence windows are
its stream's rows cut every w rows, on real Reverb servers, over episodes shorter and longer
than both item lengths, episode ends and filler rows inside items included."""
import dm_env
import numpy as np
import pytest
import reverb
import tree
from acme import specs, wrappers
from acme.adders import reverb as reverb_adders

import envs
from agents import adders
from envs import batch as batch_lib

SEQUENCE, WINDOW, ROOMS = 7, 4, 3


def acme_signature(spec):
  """The table signature of Acme's IMPALA items: one column per field and extra."""
  extras = {'core_state': np.zeros((), np.float32),
            'logits': np.ones((spec.actions.num_values,), np.float32),
            'policy_version': np.zeros((), np.float32)}
  return reverb_adders.SequenceAdder.signature(spec, extras, SEQUENCE)


def acme_adder(client):
  """What one room's actor wrote before: Acme's SequenceAdder of IMPALA unrolls."""
  return reverb_adders.SequenceAdder(
      client=client, priority_fns={adders.IMPALA_TABLE: None}, period=SEQUENCE - 1,
      sequence_length=SEQUENCE, end_of_episode_behavior=reverb_adders.EndBehavior.CONTINUE)


def _server(signatures):
  def fifo(name, signature):  # every item read back once, in insertion order
    return reverb.Table(name, reverb.selectors.Fifo(), reverb.selectors.Fifo(), 100_000,
                        reverb.rate_limiters.MinSize(1), max_times_sampled=1, signature=signature)
  return reverb.Server([fifo(name, signature) for name, signature in signatures.items()])


def _our_signatures(spec, rooms):
  return {adders.IMPALA_TABLE: adders.impala_signature(spec, SEQUENCE, rooms),
          adders.PRECEDENCE_TABLE: adders.precedence_signature(spec, WINDOW, rooms)}


def _cartpole(seed):
  return wrappers.SinglePrecisionWrapper(envs.make('cartpole', seed=seed, reward_free=False))


def _spec():
  return specs.make_environment_spec(_cartpole(0))


def _drive(writer, acme, steps: int, seed: int):
  """ROOMS Cartpole rooms stepped in lock-step for `steps` actor steps (room k: random actions,
  or always one side, so its episodes are short and long), each step's rows to `writer` as the
  actor loop makes them, and each room's timesteps to its own Acme adder `acme[k]`. Returns
  each room's stream of rows, [(observation, steps row)]."""
  batch = batch_lib.EnvironmentList([_cartpole(seed + k) for k in range(ROOMS)])
  rng = np.random.default_rng(seed)
  obs = batch.reset()
  for k in range(ROOMS):
    acme[k].add_first(dm_env.restart(obs[k]))
  starts = np.ones(ROOMS, bool)
  streams = [[] for _ in range(ROOMS)]
  for t in range(steps):
    actions = np.array([rng.integers(2) if k == 0 or t % 50 > 25 else k - 1
                        for k in range(ROOMS)], np.int32)
    logits = rng.normal(size=(ROOMS, 2)).astype(np.float32)
    version = np.float32(rng.integers(100))
    step = batch.step(actions)
    filler = step.step_type == dm_env.StepType.FIRST
    rows = adders.step_rows(starts, actions, step.reward, step.discount, filler, version)
    writer.append(obs, rows, np.where(filler[:, None], np.float32(0), logits))
    for k in range(ROOMS):
      streams[k].append((obs[k], rows[k]))
      if filler[k]:
        acme[k].add_first(dm_env.restart(step.observation[k]))
      else:
        acme[k].add(actions[k], dm_env.TimeStep(dm_env.StepType(step.step_type[k]),
                                                step.reward[k], step.discount[k],
                                                step.observation[k]),
                    {'logits': logits[k], 'core_state': np.float32(0.0),
                     'policy_version': version})
    starts, obs = filler, step.observation
  return streams


def _items(server, table, signature):
  """The table's items in insertion order, structured by `signature`."""
  client = reverb.Client(f'localhost:{server.port}')
  n = client.server_info()[table].current_size
  return [tree.unflatten_as(signature, s.data)
          for s in client.sample(table, num_samples=n, emit_timesteps=False)]


def _as_batch(item):
  """One item as read back -> a batch of one (the readers' input)."""
  return {name: np.asarray(x)[None] for name, x in item.items()}


def test_step_layout_packs_and_unpacks_hand_computed_rows():
  # Room 0: a first step (action 3, reward -0.5, discount 0.9), room 1: the filler row.
  rows = adders.step_rows(np.array([True, True]), np.array([3, 1]), np.array([-0.5, 2.0]),
                          np.array([0.9, 1.0], np.float32), np.array([False, True]), 12.0)
  np.testing.assert_array_equal(rows, np.array([[1.0, 3.0, -0.5, 0.9, 1.0, 0.0, 12.0],
                                                [0.0] * 7], np.float32))
  assert rows.dtype == np.float32
  first = adders.pack_steps(True, np.int32(3), np.float32(-0.5), np.float32(0.9), 1.0,
                            np.float32(0.0), np.float32(12.0))
  np.testing.assert_array_equal(first, rows[0])
  # One item of T = 2 rows of G = 2 rooms: room 0 steps then ends (filler), room 1 the reverse.
  logits = np.array([[[0.25, -1.0], [0.0, 0.0]], [[0.0, 0.0], [2.0, 0.5]]], np.float32)
  observation = np.arange(16, dtype=np.float32).reshape(2, 2, 4)        # [T, G, 4]
  steps = np.stack([np.stack([first, adders.FILLER_STEPS]),
                    np.stack([adders.FILLER_STEPS, first])])              # [T, G, F]
  packed = _as_batch({'observation': observation, 'logits': logits, adders.STEPS: steps})
  got = adders.unpack_impala(packed)
  want = {'action': (np.int32, [[3, 0], [0, 3]]),
          'reward': (np.float32, [[-0.5, 0.0], [0.0, -0.5]]),
          'discount': (np.float32, [[np.float32(0.9), 0.0], [0.0, np.float32(0.9)]]),
          'start_of_episode': (np.bool_, [[True, False], [False, True]])}
  for field, (dtype, values) in want.items():
    value = getattr(got, field)
    assert value.dtype == dtype, field
    np.testing.assert_array_equal(value, np.array(values, dtype))
  # Room g's sequence is column g of the item: observation[b = g, t] = item[t, g].
  np.testing.assert_array_equal(got.observation, np.swapaxes(observation, 0, 1))
  assert sorted(got.extras) == ['core_state', 'logits', 'policy_version']
  np.testing.assert_array_equal(got.extras['policy_version'],
                                np.array([[12.0, 0.0], [0.0, 12.0]], np.float32))
  np.testing.assert_array_equal(got.extras['logits'], np.swapaxes(logits, 0, 1))
  windows = adders.unpack_precedence(_as_batch({'observation': observation,
                                                adders.STEPS: steps}))
  assert list(windows.extras) == ['valid']
  np.testing.assert_array_equal(windows.extras['valid'], np.array([[1, 0], [0, 1]], np.float32))
  # Two items of one room each: their rooms' sequences in item order.
  two = adders.per_room({'x': np.arange(8).reshape(2, 2, 1, 2)})['x']
  np.testing.assert_array_equal(two, np.arange(8).reshape(2, 2, 2))
  # Actions stay exact in float32 far beyond any action count here.
  big = adders.unpack_steps(adders.pack_steps(False, 2**24 - 1, 0, 0, 1, 0, 0))
  assert big['action'] == 2**24 - 1 and big['action'].dtype == np.int32


def test_layout_refuses_specs_it_would_change():
  spec = _spec()
  wide = spec._replace(rewards=specs.Array((), np.float64))
  with pytest.raises(ValueError, match='float32 rewards'):
    adders.impala_signature(wide, SEQUENCE, 1)
  with pytest.raises(ValueError, match='int32 actions'):
    adders.precedence_signature(spec._replace(actions=specs.DiscreteArray(3, dtype=np.int64)),
                                WINDOW, 1)


@pytest.mark.parametrize('rooms', [ROOMS, 1])
def test_each_rooms_items_are_those_of_its_own_acme_adder(rooms):
  spec = _spec()
  ours, theirs = _server(_our_signatures(spec, rooms)), _server(
      {adders.IMPALA_TABLE: acme_signature(spec)})
  try:
    mine = adders.ActorWriter(reverb.Client(f'localhost:{ours.port}'), ROOMS, SEQUENCE, WINDOW,
                              rooms_per_item=rooms)
    acme = [acme_adder(reverb.Client(f'localhost:{theirs.port}')) for _ in range(ROOMS)]
    streams = _drive(mine, acme, steps=300, seed=5)
    mine.close()
    del acme  # flushes Acme's writers
    groups = ROOMS // rooms
    got = [adders.unpack_impala(_as_batch(item)) for item in
           _items(ours, adders.IMPALA_TABLE, _our_signatures(spec, rooms)[adders.IMPALA_TABLE])]
    # Acme's items interleave the rooms' writers: sort them back by room (the observation's
    # first entries identify the room's stream).
    want = _items(theirs, adders.IMPALA_TABLE, acme_signature(spec))
    per_room_want = [[w for w in want if _room_of(w.observation[0], streams) == k]
                     for k in range(ROOMS)]
    assert len(got) == groups * ((300 - 1) // (SEQUENCE - 1))
    for i, item in enumerate(got):
      for g in range(rooms):
        k = (i % groups) * rooms + g
        expect = per_room_want[k][i // groups]
        sequence = tree.map_structure(lambda x: x[g], item)
        tree.assert_same_structure(sequence, expect)
        for x, y in zip(tree.flatten(sequence), tree.flatten(expect)):
          assert x.dtype == y.dtype and x.shape == y.shape, (x.dtype, y.dtype)
          np.testing.assert_array_equal(x, y)
    assert sum(row[4] == 0 for stream in streams for _, row in stream) > 10   # many episodes
    windows = [adders.unpack_precedence(_as_batch(item)) for item in _items(
        ours, adders.PRECEDENCE_TABLE, _our_signatures(spec, rooms)[adders.PRECEDENCE_TABLE])]
    assert len(windows) == groups * ((300 - 2 * WINDOW) // WINDOW + 1)
    for i, window in enumerate(windows):
      m = i // groups
      for g in range(rooms):
        rows = streams[(i % groups) * rooms + g][m * WINDOW:m * WINDOW + 2 * WINDOW]
        np.testing.assert_array_equal(window.observation[g], np.stack([o for o, _ in rows]))
        np.testing.assert_array_equal(window.extras['valid'][g], [r[4] for _, r in rows])
        np.testing.assert_array_equal(window.start_of_episode[g], [r[0] != 0 for _, r in rows])
  finally:
    ours.stop()
    theirs.stop()


def _room_of(observation, streams) -> int:
  """The room whose stream holds `observation` (Cartpole states do not repeat across rooms)."""
  for k, stream in enumerate(streams):
    if any(np.array_equal(observation, o) for o, _ in stream):
      return k
  raise AssertionError('observation of no room')


def test_rows_that_do_not_fit_the_writer_are_refused():
  spec = _spec()
  server = _server(_our_signatures(spec, ROOMS))
  try:
    writer = adders.ActorWriter(reverb.Client(f'localhost:{server.port}'), ROOMS, SEQUENCE,
                                WINDOW)
    obs = np.zeros((ROOMS, 4), np.float32)
    rows = adders.step_rows(np.ones(ROOMS, bool), np.zeros(ROOMS), np.zeros(ROOMS),
                            np.ones(ROOMS), np.zeros(ROOMS, bool), 0.0)
    with pytest.raises(ValueError, match='logits'):
      writer.append(obs, rows)
    with pytest.raises(ValueError, match='2 rows for a writer of 3 rooms'):
      writer.append(obs[:2], rows[:2], np.zeros((2, 2), np.float32))
    with pytest.raises(ValueError, match='do not divide'):
      adders.ActorWriter(reverb.Client(f'localhost:{server.port}'), ROOMS, SEQUENCE,
                         rooms_per_item=2)
    writer.close()
  finally:
    server.stop()

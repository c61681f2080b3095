"""`TrajectoryAdder` (one writer, both tables' items referring to the same columns, rows packed
as `agents.adders` lays them out) writes, once unpacked, exactly the items Acme 0.4.0's two
SequenceAdders wrote (IMPALA unrolls with CONTINUE, precedence windows with TRUNCATE), on real
Reverb servers, over episodes shorter and longer than both item lengths."""
import numpy as np
import pytest
import reverb
import tree
from acme import specs, wrappers
from acme.adders import reverb as reverb_adders

import envs
from agents import adders

SEQUENCE, WINDOW = 7, 4


class AcmeAdders:
  """What the actors used before: one Acme SequenceAdder (and writer) per table."""

  def __init__(self, client, sequence_length, window):
    self._impala = reverb_adders.SequenceAdder(
        client=client, priority_fns={adders.IMPALA_TABLE: None}, period=sequence_length - 1,
        sequence_length=sequence_length, end_of_episode_behavior=reverb_adders.EndBehavior.CONTINUE)
    self._windows = reverb_adders.SequenceAdder(
        client=client, priority_fns={adders.PRECEDENCE_TABLE: None}, period=window,
        sequence_length=2 * window, end_of_episode_behavior=reverb_adders.EndBehavior.TRUNCATE)

  @staticmethod
  def signatures(spec, sequence_length):
    """Their tables' signatures: Acme's items, one column per field and extra."""
    extras = {'core_state': np.zeros((), np.float32),
              'logits': np.ones((spec.actions.num_values,), np.float32),
              'policy_version': np.zeros((), np.float32)}
    return {adders.IMPALA_TABLE: reverb_adders.SequenceAdder.signature(spec, extras, sequence_length),
            adders.PRECEDENCE_TABLE: reverb_adders.SequenceAdder.signature(
                spec, {'valid': np.ones((), np.float32)}, sequence_length=None)}

  def add_first(self, ts):
    self._impala.add_first(ts)
    self._windows.add_first(ts)

  def add(self, action, ts, extras):
    self._impala.add(action, ts, extras)
    self._windows.add(action, ts, {'valid': np.float32(1.0)})


def _server(signatures):
  def fifo(name, signature):  # every item read back once, in insertion order
    return reverb.Table(name, reverb.selectors.Fifo(), reverb.selectors.Fifo(), 100_000,
                        reverb.rate_limiters.MinSize(1), max_times_sampled=1, signature=signature)
  return reverb.Server([fifo(name, signature) for name, signature in signatures.items()])


def _our_signatures(spec):
  return {adders.IMPALA_TABLE: adders.impala_signature(spec, SEQUENCE),
          adders.PRECEDENCE_TABLE: adders.precedence_signature(spec)}


def _spec():
  return specs.make_environment_spec(
      wrappers.SinglePrecisionWrapper(envs.make('cartpole', seed=0, reward_free=False)))


def _drive(adder, seed):
  env = wrappers.SinglePrecisionWrapper(envs.make('cartpole', seed=seed, reward_free=False))
  rng = np.random.default_rng(seed)
  for episode in range(12):
    ts = env.reset()
    adder.add_first(ts)
    push = episode % 3   # 0: random (short and long), 1/2: always one side (short)
    while not ts.last():
      a = np.int32(rng.integers(2) if push == 0 else push - 1)
      logits = rng.normal(size=2).astype(np.float32)
      ts = env.step(a)
      adder.add(a, ts, {'logits': logits, 'core_state': np.float32(0.0),
                        'policy_version': np.float32(rng.integers(100))})


def _items(server, table, signature):
  """The table's items in insertion order, structured by `signature`."""
  client = reverb.Client(f'localhost:{server.port}')
  n = client.server_info()[table].current_size
  return [tree.unflatten_as(signature, s.data)
          for s in client.sample(table, num_samples=n, emit_timesteps=False)]


def test_step_layout_packs_and_unpacks_hand_computed_rows():
  # A first step (action 3, reward -0.5, discount 0.9, version 12) then the filler row.
  first = adders.pack_steps(True, np.int32(3), np.float32(-0.5), np.float32(0.9), 1.0,
                            np.float32(0.0), np.float32(12.0))
  np.testing.assert_array_equal(
      first, np.array([1.0, 3.0, -0.5, 0.9, 1.0, 0.0, 12.0], np.float32))
  assert first.dtype == np.float32
  logits = np.array([[[0.25, -1.0], [2.0, 0.5]]], np.float32)           # [B=1, T=2, A=2]
  observation = np.arange(8, dtype=np.float32).reshape(1, 2, 4)
  packed = {'observation': observation, 'logits': logits,
            adders.STEPS: np.stack([first, adders.FILLER_STEPS])[None]}
  got = adders.unpack_impala(packed)
  want = {'action': (np.int32, [[3, 0]]), 'reward': (np.float32, [[-0.5, 0.0]]),
          'discount': (np.float32, [[np.float32(0.9), 0.0]]),
          'start_of_episode': (np.bool_, [[True, False]])}
  for field, (dtype, values) in want.items():
    value = getattr(got, field)
    assert value.dtype == dtype, field
    np.testing.assert_array_equal(value, np.array(values, dtype))
  assert got.observation is observation
  assert sorted(got.extras) == ['core_state', 'logits', 'policy_version']
  np.testing.assert_array_equal(got.extras['policy_version'], np.array([[12.0, 0.0]], np.float32))
  np.testing.assert_array_equal(got.extras['core_state'], np.zeros((1, 2), np.float32))
  assert got.extras['logits'] is logits
  windows = adders.unpack_precedence({'observation': observation,
                                      adders.STEPS: packed[adders.STEPS]})
  assert list(windows.extras) == ['valid']
  np.testing.assert_array_equal(windows.extras['valid'], np.array([[1.0, 0.0]], np.float32))
  np.testing.assert_array_equal(windows.action, np.array([[3, 0]], np.int32))
  # Actions stay exact in float32 far beyond any action count here.
  big = adders.unpack_steps(adders.pack_steps(False, 2**24 - 1, 0, 0, 1, 0, 0))
  assert big['action'] == 2**24 - 1 and big['action'].dtype == np.int32


def test_layout_refuses_specs_it_would_change():
  spec = _spec()
  wide = spec._replace(rewards=specs.Array((), np.float64))
  with pytest.raises(ValueError, match='float32 rewards'):
    adders.impala_signature(wide, SEQUENCE)
  with pytest.raises(ValueError, match='int32 actions'):
    adders.precedence_signature(spec._replace(actions=specs.DiscreteArray(3, dtype=np.int64)))


def test_one_writer_writes_the_items_of_acmes_two_adders():
  spec = _spec()
  theirs_signatures = AcmeAdders.signatures(spec, SEQUENCE)
  ours, theirs = _server(_our_signatures(spec)), _server(theirs_signatures)
  try:
    mine = adders.TrajectoryAdder(reverb.Client(f'localhost:{ours.port}'), SEQUENCE, WINDOW)
    _drive(mine, seed=5)
    mine.close()
    acme = AcmeAdders(reverb.Client(f'localhost:{theirs.port}'), SEQUENCE, WINDOW)
    _drive(acme, seed=5)
    del acme  # flushes Acme's writers
    unpack = {adders.IMPALA_TABLE: adders.unpack_impala,
              adders.PRECEDENCE_TABLE: adders.unpack_precedence}
    for table in (adders.IMPALA_TABLE, adders.PRECEDENCE_TABLE):
      got = [unpack[table](item)
             for item in _items(ours, table, _our_signatures(spec)[table])]
      want = _items(theirs, table, theirs_signatures[table])
      assert len(got) == len(want) > 10, (table, len(got), len(want))
      lengths = set()
      for a, b in zip(got, want):
        tree.assert_same_structure(a, b)
        for x, y in zip(tree.flatten(a), tree.flatten(b)):
          assert x.dtype == y.dtype and x.shape == y.shape, (table, x.dtype, y.dtype)
          np.testing.assert_array_equal(x, y)
        lengths.add(len(a.action))
      if table == adders.PRECEDENCE_TABLE:
        assert len(lengths) > 2   # full windows and truncated episode ends both occurred
  finally:
    ours.stop()
    theirs.stop()


def test_extras_outside_the_layout_are_refused():
  server = _server(_our_signatures(_spec()))
  try:
    adder = adders.TrajectoryAdder(reverb.Client(f'localhost:{server.port}'), SEQUENCE, WINDOW)
    env = wrappers.SinglePrecisionWrapper(envs.make('cartpole', seed=0, reward_free=False))
    adder.add_first(env.reset())
    with pytest.raises(ValueError, match='hidden'):
      adder.add(np.int32(0), env.step(np.int32(0)),
                {'logits': np.zeros(2, np.float32), 'hidden': np.float32(1.0)})
    adder.close()
  finally:
    server.stop()

"""`TrajectoryAdder` (one writer, both tables' items referring to the same columns) writes
exactly the items Acme 0.4.0's two SequenceAdders wrote (IMPALA unrolls with CONTINUE,
precedence windows with TRUNCATE), on real Reverb servers, over episodes shorter and longer than
both item lengths."""
import numpy as np
import reverb
from acme import specs, wrappers

import envs
from agents import adders
from bench.adder_bench import AcmeAdders

SEQUENCE, WINDOW = 7, 4


def _server(spec):
  def fifo(name, signature):  # every item read back once, in insertion order
    return reverb.Table(name, reverb.selectors.Fifo(), reverb.selectors.Fifo(), 100_000,
                        reverb.rate_limiters.MinSize(1), max_times_sampled=1, signature=signature)
  return reverb.Server([fifo(adders.IMPALA_TABLE, adders.impala_signature(spec, SEQUENCE)),
                        fifo(adders.PRECEDENCE_TABLE, adders.precedence_signature(spec))])


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


def _items(server, table):
  client = reverb.Client(f'localhost:{server.port}')
  n = client.server_info()[table].current_size
  return [s.data for s in client.sample(table, num_samples=n, emit_timesteps=False)]


def test_one_writer_writes_the_items_of_acmes_two_adders():
  spec = specs.make_environment_spec(
      wrappers.SinglePrecisionWrapper(envs.make('cartpole', seed=0, reward_free=False)))
  ours, theirs = _server(spec), _server(spec)
  try:
    mine = adders.TrajectoryAdder(reverb.Client(f'localhost:{ours.port}'), SEQUENCE, WINDOW)
    _drive(mine, seed=5)
    mine.flush()
    acme = AcmeAdders(reverb.Client(f'localhost:{theirs.port}'), SEQUENCE, WINDOW)
    _drive(acme, seed=5)
    del acme  # flushes Acme's writers
    for table in (adders.IMPALA_TABLE, adders.PRECEDENCE_TABLE):
      got, want = _items(ours, table), _items(theirs, table)
      assert len(got) == len(want) > 10, (table, len(got), len(want))
      lengths = set()
      for a, b in zip(got, want):
        assert len(a) == len(b)
        for x, y in zip(a, b):
          np.testing.assert_array_equal(x, y)
        lengths.add(len(a[0]))
      if table == adders.PRECEDENCE_TABLE:
        assert len(lengths) > 2   # full windows and truncated episode ends both occurred
  finally:
    ours.stop()
    theirs.stop()


class _CutterAdder:
  """The in-memory sequences bench.single_process trains on, driven like an adder: rows as the
  adder appends them (each step, then a filler row at an episode's end)."""

  def __init__(self):
    self.cutter, self.items, self._pending = adders.SequenceCutter(SEQUENCE), [], None

  def add_first(self, ts):
    self._pending = (ts.observation, True)

  def add(self, action, ts, extras):
    obs, first = self._pending
    row = {'observation': obs, 'action': action, 'reward': ts.reward, 'discount': ts.discount,
           'start_of_episode': first, **extras}
    rows = [row]
    if ts.last():
      filler = {k: np.zeros_like(v) for k, v in row.items()}
      filler['observation'] = ts.observation
      rows.append(filler)
    for r in rows:
      sequence = self.cutter.add(r)
      if sequence is not None:
        self.items.append(sequence)
    self._pending = (ts.observation, False)


def test_the_single_process_check_cuts_the_adders_impala_items():
  spec = specs.make_environment_spec(
      wrappers.SinglePrecisionWrapper(envs.make('cartpole', seed=0, reward_free=False)))
  server = _server(spec)
  try:
    mine = adders.TrajectoryAdder(reverb.Client(f'localhost:{server.port}'), SEQUENCE)
    _drive(mine, seed=3)
    mine.flush()
    cutter = _CutterAdder()
    _drive(cutter, seed=3)
    import tree
    signature = adders.impala_signature(spec, SEQUENCE)
    want = [tree.unflatten_as(signature, flat) for flat in _items(server, adders.IMPALA_TABLE)]
    assert len(cutter.items) == len(want) > 10
    for rows, item in zip(cutter.items, want):
      np.testing.assert_array_equal(np.stack([r['observation'] for r in rows]), item.observation)
      np.testing.assert_array_equal(np.stack([r['action'] for r in rows]), item.action)
      np.testing.assert_array_equal(np.stack([r['reward'] for r in rows]), item.reward)
      np.testing.assert_array_equal(np.stack([r['start_of_episode'] for r in rows]),
                                    item.start_of_episode)
      np.testing.assert_array_equal(np.stack([r['logits'] for r in rows]), item.extras['logits'])
  finally:
    server.stop()

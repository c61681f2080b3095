"""Offline episode datasets (RLDS via TFDS) and the collect CLI."""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import envs
from estimators import dataset, pairs
from estimators.rlds import flat as rlds_flat
from estimators.rlds import writer as rlds_writer
from launch.runtime import collection as collect

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))


def _episodes(name, n, seed=0, store_states=True, **options):
  stream = collect.episode_stream(name, options, [seed], store_states)
  return [next(stream) for _ in range(n)]


def _write(path, eps, name='cartpole', **kw):
  env = envs.make(name)
  return dataset.write_episodes(str(path), eps, name, {}, env.action_spec().num_values,
                                env.observation_spec(), **kw)


def _assert_same(a, b):
  assert len(a) == len(b)
  for x, y in zip(a, b):
    assert x.observations.dtype == y.observations.dtype
    np.testing.assert_array_equal(x.observations, y.observations)
    np.testing.assert_array_equal(x.actions, y.actions)
    assert y.actions.dtype == np.int32
    np.testing.assert_array_equal(x.rewards, y.rewards)
    np.testing.assert_array_equal(x.discounts, y.discounts)
    assert x.states == y.states


@pytest.mark.parametrize('name,store_states', [('cartpole', False), ('cartpole', True),
                                               ('turf', True)])
def test_round_trip(tmp_path, name, store_states):
  eps = _episodes(name, 6, store_states=store_states)
  meta = _write(tmp_path / 'ds', eps, name)
  back, meta2 = dataset.load_episodes(str(tmp_path / 'ds'))
  _assert_same(eps, back)
  assert meta2['num_episodes'] == 6 == meta['num_episodes']
  assert meta2['num_transitions'] == sum(len(e.actions) for e in eps)
  assert meta2['env'] == name and meta2['has_states'] == store_states
  if store_states:   # states come back hashable and equal, usable as oracle keys
    assert {s for e in back for s in e.states} == {s for e in eps for s in e.states}
  with open(tmp_path / 'ds' / dataset.METADATA_FILE) as f:
    assert json.load(f)['created']


def test_tf_dataset_follows_rlds(tmp_path):
  eps = _episodes('turf', 3)
  _write(tmp_path / 'ds', eps, 'turf')
  ds = dataset.as_tf_dataset(str(tmp_path / 'ds'))
  episodes = list(ds)
  assert len(episodes) == 3
  for ep, ref in zip(episodes, eps):
    steps = list(ep['steps'].as_numpy_iterator())
    assert len(steps) == len(ref.actions) + 1
    assert set(steps[0]) >= {'observation', 'action', 'reward', 'discount', 'is_first',
                             'is_last', 'is_terminal', 'state'}
    assert steps[0]['observation'].dtype == np.uint8 and steps[0]['observation'].shape == (10, 10, 3)
    assert [s['is_first'] for s in steps] == [True] + [False] * len(ref.actions)
    assert [s['is_last'] for s in steps] == [False] * len(ref.actions) + [True]
    assert steps[-1]['action'] == 0 and steps[-1]['reward'] == 0
    np.testing.assert_array_equal(steps[-1]['observation'], ref.observations[-1])
    np.testing.assert_array_equal([s['action'] for s in steps[:-1]], ref.actions)
    terminated = ref.discounts[-1] == 0
    assert steps[-1]['is_terminal'] == terminated
    assert not any(s['is_terminal'] for s in steps[:-1])


def test_flatten_layout():
  eps = _episodes('cartpole', 4)
  flat = dataset.flatten(eps)
  lengths = [len(e.observations) for e in eps]
  np.testing.assert_array_equal(flat.lengths, lengths)
  last, _ = pairs.episode_layout(flat.lengths)
  np.testing.assert_array_equal(flat.last, last)
  assert flat.observations.shape == (sum(lengths), 4)
  start = 0
  for e in eps:
    n = len(e.observations)
    np.testing.assert_array_equal(flat.observations[start:start + n], e.observations)
    np.testing.assert_array_equal(flat.actions[start:start + n - 1], e.actions)
    assert flat.actions[start + n - 1] == 0
    assert (flat.last[start:start + n] == start + n - 1).all()
    start += n
  assert flat.actions.dtype == np.int32 and flat.last.dtype == np.int32
  states = dataset.flat_states(eps)
  assert len(states) == sum(lengths) and states[0] == eps[0].states[0]


def test_concat_flat_is_the_flat_layout_of_all_episodes():
  eps = _episodes('cartpole', 5)
  whole = dataset.flatten(eps)
  joined = dataset.concat_flat([dataset.flatten(eps[:2]), dataset.flatten(eps[2:3]),
                                dataset.flatten(eps[3:])])
  for a, b in zip(whole, joined):
    np.testing.assert_array_equal(a, b)
  assert joined.last.dtype == np.int32 and joined.actions.dtype == np.int32
  other = dataset.FlatData(np.zeros((3, 2), np.float32), np.zeros(3, np.int32),
                           np.full(3, 2, np.int32), np.array([3]))
  with pytest.raises(ValueError, match='different observations'):
    dataset.concat_flat([whole, other])


def test_refuses_to_overwrite_and_keeps_old_data_on_failure(tmp_path):
  out = tmp_path / 'ds'
  eps = _episodes('cartpole', 3, store_states=False)
  _write(out, eps)
  with pytest.raises(dataset.DatasetExistsError, match=str(out)):
    _write(out, eps)

  def broken():   # an interrupted write must leave the old dataset intact
    yield eps[0]
    raise KeyboardInterrupt

  with pytest.raises(KeyboardInterrupt):
    _write(out, broken(), overwrite=True)
  _assert_same(eps, dataset.load_episodes(str(out))[0])
  assert sorted(os.listdir(tmp_path)) == ['ds']       # no temp dir left behind
  _write(out, eps[:1], overwrite=True)
  assert dataset.load_episodes(str(out))[1]['num_episodes'] == 1
  other = tmp_path / 'other'                   # never replace a directory that is no dataset
  other.mkdir()
  (other / 'notes.txt').write_text('keep me')
  with pytest.raises(dataset.DatasetError, match='not an episode dataset'):
    _write(other, eps, overwrite=True)
  assert (other / 'notes.txt').read_text() == 'keep me'
  empty = tmp_path / 'empty'                   # an empty directory is a free output
  empty.mkdir()
  assert _write(empty, eps)['num_episodes'] == 3


def test_append(tmp_path):
  out = tmp_path / 'ds'
  eps = _episodes('turf', 5)
  _write(out, eps[:2], 'turf')
  meta = _write(out, eps[2:], 'turf', append=True)
  assert meta['num_episodes'] == 5
  _assert_same(eps, dataset.load_episodes(str(out))[0])
  with pytest.raises(dataset.DatasetError, match='cannot append'):
    _write(out, _episodes('cartpole', 1, store_states=False), 'cartpole', append=True)


def test_errors_name_the_path(tmp_path):
  with pytest.raises(dataset.DatasetError, match='does not exist'):
    dataset.load_episodes(str(tmp_path / 'missing'))
  (tmp_path / 'empty').mkdir()
  with pytest.raises(dataset.DatasetError, match='not an episode dataset'):
    dataset.load_episodes(str(tmp_path / 'empty'))
  out = tmp_path / 'ds'
  _write(out, _episodes('turf', 4), 'turf')
  shard = [f for f in os.listdir(out) if '.tfrecord-' in f][0]
  size = os.path.getsize(out / shard)
  with open(out / shard, 'r+b') as f:
    f.truncate(size // 2)
  with pytest.raises(dataset.DatasetError, match=f'corrupt dataset at {out}'):
    dataset.load_episodes(str(out))
  os.remove(out / shard)
  with pytest.raises(dataset.DatasetError, match=f'corrupt dataset at {out}'):
    dataset.load_episodes(str(out))


def test_collect_in_process_resume_and_refusal(tmp_path):
  out = str(tmp_path / 'c')
  meta = collect.run('turf', 5, out, progress=False)
  assert meta['num_episodes'] == 5 and meta['has_states']
  with pytest.raises(collect.CollectError, match='already exists'):
    collect.run('turf', 5, out, progress=False)
  with pytest.raises(collect.CollectError, match='cannot resume'):
    collect.run('cliff', 8, out, resume=True, progress=False)
  meta = collect.run('turf', 8, out, resume=True, progress=False)
  assert meta['num_episodes'] == 8 and meta['collected_episodes'] == 3
  eps, _ = dataset.load_episodes(out)
  assert len(eps) == 8
  # Resumed episodes come from a different seed stream, not repeats of the first ones.
  assert not np.array_equal(eps[5].actions, eps[0].actions)
  meta = collect.run('turf', 2, out, overwrite=True, progress=False)
  assert meta['num_episodes'] == 2


def test_collect_cli(tmp_path):
  out = str(tmp_path / 'cp')
  cmd = [sys.executable, '-m', 'launch.collect', '--env', 'cartpole', '--env_option',
         'max_steps=50000', '--episodes', '20', '--out', out, '--seed', '3']
  proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
  assert proc.returncode == 0, proc.stderr[-2000:]
  eps, meta = dataset.load_episodes(out)
  assert len(eps) == 20 and meta['env_options'] == {'max_steps': 50000}
  assert not meta['has_states'] and meta['num_actions'] == 2
  assert all(len(e.actions) >= 1 and e.observations.shape[1:] == (4,) for e in eps)
  again = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
  assert again.returncode == 2
  errors = [l for l in again.stderr.splitlines() if l.startswith('error:')]
  assert len(errors) == 1 and 'already exists' in errors[0]


def test_collect_distributed_reports_progress(tmp_path, capfd, monkeypatch):
  # The supervisor of a distributed collection prints progress lines while the nodes run (it
  # once passed the progress callback where watch() takes the run directory, and printed none).
  from launch.runtime import processes
  monkeypatch.setattr(collect, 'PROGRESS_EVERY_S', 1.0)
  out = str(tmp_path / 'dist')
  meta = collect.run('cliff', 150, out, num_actors=2, progress=True)
  lines = [l for l in capfd.readouterr().err.splitlines() if 'episodes' in l and '/150' in l]
  assert lines, 'no progress line from the distributed collection'
  assert meta['num_episodes'] == 150
  assert processes.leftover_processes(meta['launcher_session']) == []
  eps, meta = dataset.load_episodes(out)
  assert len(eps) == 150 and meta['has_states']
  assert all(len(e.states) == len(e.observations) for e in eps)


def test_collect_imports_next_to_train():
  from launch import collect as collect_cli
  from launch import train  # both define --env/--seed: collect's flags exist only as a program
  assert train.FLAGS is collect_cli.FLAGS


# ----------------------------------------------------------------------------------------- #
# load_flat: the batched loader estimators.train uses
# ----------------------------------------------------------------------------------------- #

@pytest.fixture(scope='module')
def sharded_turf(tmp_path_factory):
  """Turf episodes (uint8 observations with values >= 128) over several shards of more than
  16 episodes (TFDS interleaves them) plus appended ones: written 17 per shard, 32 + 9."""
  out = tmp_path_factory.mktemp('flat') / 'turf'
  eps = _episodes('turf', 41)
  with pytest.MonkeyPatch.context() as mp:
    mp.setattr(rlds_writer, 'EPISODES_PER_SHARD', 17)
    _write(out, eps[:32], 'turf')
    _write(out, eps[32:], 'turf', append=True)
  assert len([f for f in os.listdir(out) if '.tfrecord-' in f]) == 3
  return out


def _assert_same_flat(a, b):
  assert a._fields == b._fields
  for name, x, y in zip(a._fields, a, b):
    assert x.dtype == y.dtype and x.shape == y.shape, name
    np.testing.assert_array_equal(x, y, err_msg=name)


def test_load_flat_equals_load_episodes_then_flatten(sharded_turf):
  ref = dataset.flatten(dataset.load_episodes(str(sharded_turf))[0])
  flat, meta = dataset.load_flat(str(sharded_turf))
  _assert_same_flat(ref, flat)
  assert meta == dataset.read_metadata(str(sharded_turf))
  assert flat.observations.dtype == np.uint8 and np.max(flat.observations) >= 128
  _assert_same_flat(ref, dataset.load_flat(str(sharded_turf), batch_episodes=5)[0])
  plan = rlds_flat._flat_plan(str(sharded_turf), meta)     # the generic parse_example path
  _assert_same_flat(ref, rlds_flat._read_flat(str(sharded_turf), plan, 7, packed_uint8=False))


def test_load_flat_float_observations_and_fallback(tmp_path, sharded_turf, monkeypatch):
  eps = _episodes('cartpole', 5, store_states=False)
  _write(tmp_path / 'cp', eps)
  flat, _ = dataset.load_flat(str(tmp_path / 'cp'))
  _assert_same_flat(dataset.flatten(eps), flat)
  assert flat.observations.dtype == np.float32

  def not_packed(*args):
    raise rlds_flat._NotPackedUint8('test')

  monkeypatch.setattr(rlds_flat, '_decode_packed_uint8', not_packed)
  _assert_same_flat(dataset.flatten(dataset.load_episodes(str(sharded_turf))[0]),
                    dataset.load_flat(str(sharded_turf))[0])


def test_decode_packed_uint8_matches_protobuf():
  import tensorflow as tf
  rng = np.random.default_rng(0)
  lists = [np.array([0, 127, 128, 255]), rng.integers(0, 256, 1), rng.integers(0, 256, 63),
           rng.integers(100, 256, 300), rng.integers(0, 256, 20_000)]   # 1-3 byte headers
  raw = [tf.train.Int64List(value=v.tolist()).SerializeToString() for v in lists]
  buf = np.frombuffer(b''.join(raw), np.uint8)
  out = np.empty(sum(len(v) for v in lists), np.uint8)
  counts = rlds_flat._decode_packed_uint8(buf, np.array([len(r) for r in raw]), out)
  np.testing.assert_array_equal(counts, [len(v) for v in lists])
  np.testing.assert_array_equal(out, np.concatenate(lists))
  unpacked = b''.join(b'\x08' + bytes([v]) for v in (1, 2, 3))
  too_big = tf.train.Int64List(value=[1, 256, 3]).SerializeToString()
  split = raw[0] + raw[1]           # two packed runs of the same field: valid protobuf
  for bad, n in ((unpacked, 3), (too_big, 3), (split, 5)):
    with pytest.raises(rlds_flat._NotPackedUint8):
      rlds_flat._decode_packed_uint8(np.frombuffer(bad, np.uint8), np.array([len(bad)]),
                                   np.empty(n, np.uint8))


def test_load_flat_errors_are_one_line(tmp_path, sharded_turf):
  with pytest.raises(dataset.DatasetError, match='does not exist'):
    dataset.load_flat(str(tmp_path / 'missing'))
  out = tmp_path / 'turf'
  shutil.copytree(sharded_turf, out)
  shards = sorted(f for f in os.listdir(out) if '.tfrecord-' in f)
  with open(out / shards[1], 'r+b') as f:             # a middle shard cut short
    f.truncate(os.path.getsize(out / shards[1]) // 2)
  with pytest.raises(dataset.DatasetError, match=f'corrupt dataset at {out}') as err:
    dataset.load_flat(str(out))
  assert '\n' not in str(err.value)
  os.remove(out / shards[1])
  with pytest.raises(dataset.DatasetError, match=f'corrupt dataset at {out}') as err:
    dataset.load_flat(str(out))
  assert '\n' not in str(err.value)
  shutil.rmtree(out)
  shutil.copytree(sharded_turf, out)                  # contents disagree with the metadata
  meta_path = out / dataset.METADATA_FILE
  meta = json.loads(meta_path.read_text())
  meta['num_transitions'] -= 1
  meta_path.write_text(json.dumps(meta))
  with pytest.raises(dataset.DatasetError, match='its metadata says') as err:
    dataset.load_flat(str(out))
  assert '\n' not in str(err.value)

"""The estimator checkpoint file: an .npz of numeric arrays plus one JSON document, opened
without pickle, so a checkpoint from elsewhere cannot run code; earlier formats refused in one
line; plus the --info CLI and the env compatibility check."""
import io
import json
import os
import pickle
import zipfile

import jax
import numpy as np
import pytest

from estimators import checkpoint
from estimators import networks as nets

CARTPOLE = ('cartpole', (4,), np.float32, 2)
TURF = ('turf', (10, 10, 3), np.uint8, 4)


def _trained_like(spec, seed=0):
  """Real Haiku params of the env's default networks, and a batch to run them on."""
  env, shape, dtype, num_actions = spec
  config = nets.default_estimator_config(env)
  est = nets.make_estimators(config, num_actions)
  rng = np.random.default_rng(seed)
  x = (rng.integers(0, 256, (3,) + shape) if dtype == np.uint8
       else rng.normal(size=(3,) + shape)).astype(dtype)
  psi = est.psi_init(jax.random.PRNGKey(seed), x)
  phi = est.phi_init(jax.random.PRNGKey(seed + 1), x)
  return config, est, psi, phi, x


def _assert_same_tree(a, b):
  assert jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b)
  for u, v in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
    u, v = np.asarray(u), np.asarray(v)
    assert u.dtype == v.dtype and u.shape == v.shape
    assert u.tobytes() == v.tobytes()  # bit-identical, not just close


def _refused(path, contains):
  with pytest.raises(checkpoint.CheckpointError) as info:
    checkpoint.load(str(path))
  message = str(info.value)
  assert '\n' not in message and contains in message, message
  return message


def _write_npz(path, **arrays):
  with open(path, 'wb') as f:
    np.savez(f, **arrays)


def _meta(**fields):
  doc = {'format': checkpoint.FORMAT, 'network': nets.default_estimator_config('cartpole').to_dict(),
         'num_actions': 2, 'obs_shape': [4], 'obs_dtype': 'float32', 'metadata': {},
         'has_phi': False}
  doc.update(fields)
  return np.frombuffer(json.dumps(doc).encode(), np.uint8)


def _old_pickle(path, network_dict, spec, psi, phi, metadata):
  """A checkpoint as estimators.checkpoint wrote it before format 2."""
  _, shape, dtype, num_actions = spec
  payload = {'format': 'noturningback-estimators/1', 'network': network_dict,
             'num_actions': num_actions, 'obs_shape': tuple(shape),
             'obs_dtype': str(np.dtype(dtype)), 'psi': jax.device_get(psi),
             'phi': jax.device_get(phi), 'metadata': metadata}
  with open(path, 'wb') as f:
    pickle.dump(payload, f, protocol=4)


class _WritesMarker:
  """Unpickling this creates `path`: the stand-in for a pickle that runs code."""

  def __init__(self, path):
    self.path = path

  def __reduce__(self):
    return (open, (self.path, 'w'))


# ------------------------------------------------------------------------------------------- #
# Round trips
# ------------------------------------------------------------------------------------------- #

@pytest.mark.parametrize('spec', [CARTPOLE, TURF], ids=['mlp', 'conv'])
def test_round_trip_is_bit_identical_and_the_nets_agree(spec, tmp_path):
  env, shape, dtype, num_actions = spec
  config, est, psi, phi, x = _trained_like(spec)
  path = tmp_path / 'est.ckpt'  # no .npz suffix: the file must land at exactly this name
  meta = {'env_name': env, 'psi_loss': np.float32(0.25), 'window': 50, 'sizes': (1, 2)}
  checkpoint.save(str(path), config, num_actions, shape, dtype, psi, phi, meta)
  assert sorted(os.listdir(tmp_path)) == ['est.ckpt']  # no suffix added, no temp file left
  assert path.read_bytes()[:4] == b'PK\x03\x04'
  ckpt = checkpoint.load(str(path))
  assert ckpt.network == config and ckpt.num_actions == num_actions
  assert ckpt.obs_shape == shape and ckpt.obs_dtype == np.dtype(dtype).name
  assert ckpt.metadata == {'env_name': env, 'psi_loss': 0.25, 'window': 50, 'sizes': [1, 2]}
  assert ckpt.path == str(path)
  _assert_same_tree(ckpt.psi_params, psi)
  _assert_same_tree(ckpt.phi_params, phi)
  before = est.psi_apply(psi, None, x[:-1], x[1:], False)
  after = ckpt.estimators.psi_apply(ckpt.psi_params, None, x[:-1], x[1:], False)
  np.testing.assert_array_equal(np.asarray(after), np.asarray(before))
  np.testing.assert_array_equal(np.asarray(ckpt.estimators.phi_apply(ckpt.phi_params, x)),
                                np.asarray(est.phi_apply(phi, x)))


def test_file_is_a_plain_npz_with_one_array_per_leaf(tmp_path):
  config, _, psi, phi, _ = _trained_like(CARTPOLE)
  path = tmp_path / 'est.ckpt'
  checkpoint.save(str(path), config, 2, (4,), np.float32, psi, phi)
  with np.load(str(path), allow_pickle=False) as npz:
    files = set(npz.files)
    doc = json.loads(npz['__meta__'].tobytes())
  # Haiku module names hold '/', escaped so that '/' only ever separates levels.
  assert 'psi/encoder%2Flinear/w' in files and 'phi/phi_out/b' in files
  assert len(files) == 1 + len(jax.tree_util.tree_leaves(psi)) + len(jax.tree_util.tree_leaves(phi))
  assert doc['format'] == 'noturningback-estimators/2' and doc['has_phi'] is True
  assert nets.EstimatorNetConfig.from_dict(doc['network']) == config


def test_psi_only_checkpoint(tmp_path):
  config, _, psi, _, _ = _trained_like(CARTPOLE)
  path = str(tmp_path / 'psi.ckpt')
  checkpoint.save(path, config, 2, (4,), np.float32, psi, None)
  ckpt = checkpoint.load(path)
  assert ckpt.phi_params is None
  _assert_same_tree(ckpt.psi_params, psi)
  with np.load(path, allow_pickle=False) as npz:
    assert not [k for k in npz.files if k.startswith('phi/')]


def test_arbitrary_nesting_and_awkward_keys_round_trip(tmp_path):
  psi = {'a/b': {'w%2F': np.arange(3, dtype=np.int32)},
         'deep': {'er': {'still': {'x': np.ones((2, 2), np.float64)}}},
         'flags': {'on': np.array([True, False])}}
  path = str(tmp_path / 'odd.ckpt')
  checkpoint.save(path, nets.default_estimator_config('cartpole'), 2, (4,), 'float32', psi, None)
  _assert_same_tree(checkpoint.load(path).psi_params, psi)


@pytest.mark.parametrize('psi, contains', [
    ({'m': {'w': np.array(['text'])}}, 'not a plain numeric array'),
    ({'m': {'w': np.array([object()], dtype=object)}}, 'not a plain numeric array'),
    ({'m': {1: np.zeros(2)}}, 'is not a string'),
    ({'m': {}}, 'is empty'),
    (None, 'not a dict of arrays'),
])
def test_save_refuses_what_could_not_come_back_and_keeps_the_old_file(tmp_path, psi, contains):
  path = tmp_path / 'keep.ckpt'
  path.write_bytes(b'previous checkpoint')
  with pytest.raises(checkpoint.CheckpointError, match=contains):
    checkpoint.save(str(path), nets.default_estimator_config('cartpole'), 2, (4,), 'float32', psi, None)
  assert path.read_bytes() == b'previous checkpoint'
  assert os.listdir(tmp_path) == ['keep.ckpt']


def test_metadata_must_be_json(tmp_path):
  config, _, psi, _, _ = _trained_like(CARTPOLE)
  with pytest.raises(checkpoint.CheckpointError, match='not JSON'):
    checkpoint.save(str(tmp_path / 'm.ckpt'), config, 2, (4,), 'float32', psi, None,
                    {'when': object()})
  assert os.listdir(tmp_path) == []


# ------------------------------------------------------------------------------------------- #
# Opening never unpickles
# ------------------------------------------------------------------------------------------- #

def test_a_pickle_that_runs_code_is_refused_and_never_runs(tmp_path):
  marker = tmp_path / 'pwned'
  path = tmp_path / 'evil.ckpt'
  payload = {'format': 'noturningback-estimators/1', 'psi': _WritesMarker(str(marker))}
  path.write_bytes(pickle.dumps(payload, protocol=4))
  _refused(path, 'old pickle-format checkpoint')
  assert checkpoint.main(['--info', str(path)]) == 2
  assert not marker.exists()
  pickle.loads(path.read_bytes())  # the payload is live: plain pickle does run it
  assert marker.exists()


def test_a_pickled_array_inside_an_npz_is_refused_and_never_runs(tmp_path):
  marker = tmp_path / 'pwned'
  path = tmp_path / 'evil.ckpt'
  evil = np.array([_WritesMarker(str(marker))], dtype=object)
  _write_npz(path, __meta__=_meta(), **{'psi/m/w': evil})  # savez pickles object arrays
  _refused(path, 'corrupt or not a checkpoint')
  assert not marker.exists()
  with np.load(str(path), allow_pickle=True) as npz:
    npz['psi/m/w']
  assert marker.exists()


# ------------------------------------------------------------------------------------------- #
# Broken and foreign files
# ------------------------------------------------------------------------------------------- #

def test_missing_empty_truncated_and_random_files(tmp_path):
  _refused(tmp_path / 'absent.ckpt', 'estimator checkpoint not found')
  (tmp_path / 'empty.ckpt').write_bytes(b'')
  _refused(tmp_path / 'empty.ckpt', 'corrupt or not a checkpoint')
  config, _, psi, phi, _ = _trained_like(CARTPOLE)
  good = tmp_path / 'good.ckpt'
  checkpoint.save(str(good), config, 2, (4,), np.float32, psi, phi)
  data = good.read_bytes()
  for n in (len(data) // 2, len(data) - 10):
    (tmp_path / 'cut.ckpt').write_bytes(data[:n])
    _refused(tmp_path / 'cut.ckpt', 'corrupt or not a checkpoint')
  noise = np.random.default_rng(0).bytes(4096)
  (tmp_path / 'noise.ckpt').write_bytes(b'\x00' + noise)
  _refused(tmp_path / 'noise.ckpt', 'corrupt or not a checkpoint')
  (tmp_path / 'noisy_zip.ckpt').write_bytes(b'PK\x03\x04' + noise)
  _refused(tmp_path / 'noisy_zip.ckpt', 'corrupt or not a checkpoint')


def test_a_flipped_byte_inside_an_array_is_caught(tmp_path):
  config, _, psi, _, _ = _trained_like(CARTPOLE)
  path = tmp_path / 'flip.ckpt'
  checkpoint.save(str(path), config, 2, (4,), np.float32, psi, None)
  data = bytearray(path.read_bytes())
  with zipfile.ZipFile(io.BytesIO(bytes(data))) as z:
    info = z.getinfo('psi/encoder%2Flinear/w.npy')
  data[info.header_offset + 30 + len(info.filename) + 200] ^= 0xFF  # past the headers: array bytes
  path.write_bytes(bytes(data))
  _refused(path, 'corrupt or not a checkpoint')  # the zip CRC, checked on read


def test_zips_and_npzs_that_are_not_ours(tmp_path):
  with zipfile.ZipFile(tmp_path / 'notes.ckpt', 'w') as z:
    z.writestr('hello.txt', 'hi')
  _refused(tmp_path / 'notes.ckpt', 'not a noturningback estimator checkpoint')
  _write_npz(tmp_path / 'data.npz', obs=np.zeros((3, 4)))
  _refused(tmp_path / 'data.npz', 'no __meta__ document')
  _write_npz(tmp_path / 'stray.ckpt', __meta__=_meta(),
             **{'psi/m/w': np.zeros(2), 'obs': np.zeros(2)})
  _refused(tmp_path / 'stray.ckpt', "unexpected array 'obs'")
  _write_npz(tmp_path / 'badjson.ckpt', __meta__=np.frombuffer(b'{"format": ', np.uint8))
  _refused(tmp_path / 'badjson.ckpt', '__meta__ document: JSONDecodeError')
  _write_npz(tmp_path / 'nonet.ckpt',
             __meta__=_meta(network={'torso': 'transformer', 'phi_encoder': 'torso'}),
             **{'psi/m/w': np.zeros(2)})
  _refused(tmp_path / 'nonet.ckpt', 'malformed metadata')
  _write_npz(tmp_path / 'sneaky_phi.ckpt', __meta__=_meta(has_phi=False),
             **{'psi/m/w': np.zeros(2), 'phi/m/w': np.zeros(2)})
  _refused(tmp_path / 'sneaky_phi.ckpt', 'holds phi arrays but says it has no phi')
  _write_npz(tmp_path / 'overlap.ckpt', __meta__=_meta(),
             **{'psi/m/w': np.zeros(2), 'psi/m/w/x': np.zeros(2)})
  _refused(tmp_path / 'overlap.ckpt', 'overlap.ckpt: array psi/m/w')
  _write_npz(tmp_path / 'strings.ckpt', __meta__=_meta(), **{'psi/m/w': np.array(['a'])})
  _refused(tmp_path / 'strings.ckpt', 'not a numeric array')


def test_wrong_format_tag(tmp_path):
  for tag in ('noturningback-estimators/99', 'someone-else/1', None):
    _write_npz(tmp_path / 'tag.ckpt', __meta__=_meta(format=tag), **{'psi/m/w': np.zeros(2)})
    message = _refused(tmp_path / 'tag.ckpt', 'checkpoint format')
    assert repr(tag) in message and "'noturningback-estimators/2'" in message


# ------------------------------------------------------------------------------------------- #
# The command line
# ------------------------------------------------------------------------------------------- #

def test_an_old_pickle_checkpoint_is_refused_in_one_line_naming_the_commit(tmp_path, capsys):
  config, _, psi, phi, _ = _trained_like(TURF)
  network_dict = config.to_dict()
  del network_dict['phi_encoder']
  old = tmp_path / 'old.ckpt'
  _old_pickle(old, network_dict, TURF, psi, phi, {'env_name': 'turf', 'window': 60})
  message = _refused(old, 'old pickle-format checkpoint, which this code does not read')
  assert f'commit {checkpoint.EARLIER_FORMAT_READER} is the last that converts it' in message
  assert f'--convert {old} NEW' in message and 'retrain' in message
  assert checkpoint.main(['--info', str(old)]) == 2
  err = capsys.readouterr().err.strip()
  assert err == f'error: {message}'


def test_a_network_without_phi_encoder_is_refused_in_one_line_naming_the_commit(tmp_path):
  network = nets.default_estimator_config('cartpole').to_dict()
  del network['phi_encoder']
  _write_npz(tmp_path / 'early.ckpt', __meta__=_meta(network=network),
             **{'psi/m/w': np.zeros(2, np.float32)})
  message = _refused(tmp_path / 'early.ckpt', 'lacks phi_encoder')
  assert 'earlier version' in message and 'corrupt' not in message
  assert f'commit {nets.EARLIER_FORMAT_READER} is the last that reads it' in message


@pytest.mark.parametrize('argv', [['--convert', 'old.ckpt', 'new.ckpt'], ['--convert', 'old.ckpt'],
                                  []])
def test_convert_is_no_longer_a_flag_and_info_is_required(tmp_path, capsys, argv):
  config, _, psi, phi, _ = _trained_like(CARTPOLE)
  _old_pickle(tmp_path / 'old.ckpt', config.to_dict(), CARTPOLE, psi, phi, {})
  with pytest.raises(SystemExit) as e:
    checkpoint.main([str(tmp_path / a) if a.endswith('.ckpt') else a for a in argv])
  assert e.value.code == 2
  err = capsys.readouterr().err.strip()
  assert err.startswith('error: ') and '\n' not in err, err
  assert not (tmp_path / 'new.ckpt').exists()


def test_info_prints_the_document_and_parameter_shapes(tmp_path, capsys):
  config, _, psi, _, _ = _trained_like(CARTPOLE)
  path = str(tmp_path / 'psi.ckpt')
  checkpoint.save(path, config, 2, (4,), np.float32, psi, None, {'env_name': 'cartpole'})
  assert checkpoint.main(['--info', path]) == 0
  info = json.loads(capsys.readouterr().out)
  assert info['format'] == checkpoint.FORMAT and info['has_phi'] is False
  assert info['obs_shape'] == [4] and info['num_actions'] == 2
  assert info['metadata'] == {'env_name': 'cartpole'}
  assert info['parameters']['psi/encoder%2Flinear/w'] == {'shape': [4, 64], 'dtype': 'float32'}
  assert info['parameters']['psi/psi_out/b'] == {'shape': [1], 'dtype': 'float32'}
  assert checkpoint.main(['--info', str(tmp_path / 'absent')]) == 2
  err = capsys.readouterr().err.strip()
  assert err == f"error: estimator checkpoint not found: {tmp_path / 'absent'}"


# ------------------------------------------------------------------------------------------- #
# check_compatible
# ------------------------------------------------------------------------------------------- #

def test_check_compatible(tmp_path):
  config, _, psi, _, _ = _trained_like(TURF)
  path = str(tmp_path / 'turf.ckpt')
  checkpoint.save(path, config, 4, (10, 10, 3), np.uint8, psi, None)
  ckpt = checkpoint.load(path)
  checkpoint.check_compatible(ckpt, (10, 10, 3), np.uint8, 4, 'turf')
  checkpoint.check_compatible(ckpt, [10, 10, 3], 'uint8', np.int64(4))
  with pytest.raises(checkpoint.CheckpointError) as info:
    checkpoint.check_compatible(ckpt, (4,), np.float32, 2, 'cartpole')
  assert str(info.value) == (
      f'estimator checkpoint {path} was trained on observations (10, 10, 3) uint8 with 4 '
      'actions, but env cartpole has (4,) float32 with 2 actions')
  for shape, dtype, num_actions in (((10, 10, 4), np.uint8, 4), ((10, 10, 3), np.float32, 4),
                                    ((10, 10, 3), np.uint8, 5)):
    with pytest.raises(checkpoint.CheckpointError, match='but the environment has'):
      checkpoint.check_compatible(ckpt, shape, dtype, num_actions)

"""envs.paths.atomic_write / atomic_path: the one rename-into-place every writer uses."""
import json
import os
import stat

import pytest

from envs import paths


def test_replaces_the_file_and_leaves_nothing_beside_it(tmp_path):
  target = tmp_path / 'state.json'
  target.write_text('old')
  with paths.atomic_write(str(target)) as f:
    f.write('new')
    assert target.read_text() == 'old'   # readers see the old file until the block ends
  assert target.read_text() == 'new'
  assert os.listdir(tmp_path) == ['state.json']


def test_an_error_mid_write_keeps_the_old_file(tmp_path):
  target = tmp_path / 'ckpt.npz'
  target.write_bytes(b'good')
  with pytest.raises(RuntimeError):
    with paths.atomic_write(str(target), 'wb') as f:
      f.write(b'half')
      raise RuntimeError('killed mid-write')
  assert target.read_bytes() == b'good'
  assert os.listdir(tmp_path) == ['ckpt.npz']


def test_atomic_path_for_writers_that_take_a_name(tmp_path):
  target = tmp_path / 'shim.so'
  with paths.atomic_path(str(target)) as tmp:
    assert os.path.dirname(tmp) == str(tmp_path) and os.path.basename(tmp).startswith('.tmp-')
    with open(tmp, 'w') as f:
      f.write('built')
  assert target.read_text() == 'built'
  with pytest.raises(ValueError):
    with paths.atomic_path(str(target)) as tmp:
      raise ValueError('the compiler failed before writing')
  assert target.read_text() == 'built' and os.listdir(tmp_path) == ['shim.so']


def test_mode_follows_the_umask_and_fsync_writes(tmp_path):
  old = os.umask(0o022)
  try:
    with paths.atomic_write(str(tmp_path / 'a'), fsync=True) as f:
      f.write('x')
  finally:
    os.umask(old)
  assert stat.S_IMODE(os.stat(tmp_path / 'a').st_mode) == 0o644


def test_a_missing_directory_is_an_error_not_created(tmp_path):
  # A run directory that was removed stays removed (a late stop request must not recreate it).
  with pytest.raises(OSError):
    with paths.atomic_write(str(tmp_path / 'gone' / 'stop_request.json')) as f:
      f.write('{}')
  assert not (tmp_path / 'gone').exists()


def test_write_json_is_whole_or_nothing_and_can_make_its_directory(tmp_path):
  path = tmp_path / 'a' / 'b.json'
  with pytest.raises(OSError):
    paths.write_json(str(path), {'x': 1})   # no directory: not created unless asked
  assert paths.write_json(str(path), {'b': 2, 'a': [1]}, make_dirs=True, sort_keys=True) == str(path)
  assert json.loads(path.read_text()) == {'a': [1], 'b': 2}
  with pytest.raises(TypeError):
    paths.write_json(str(path), {'c': object()})   # not JSON-able: the old file stays
  assert json.loads(path.read_text()) == {'a': [1], 'b': 2}
  assert sorted(os.listdir(path.parent)) == ['b.json']

"""Verifying a whole dataset before it is extended: appending to a damaged one buries the damage,
or silently replaces the episodes a damaged dataset_info.json no longer lists. Every file is
read; a problem names the file to restore (DamagedDatasetError)."""
import os
from typing import List, Tuple

import numpy as np

from envs.cli import one_line
from estimators.rlds.reader import _read_json, read_metadata
from estimators.rlds.schema import (
  _ACTION_KEY,
  _FEATURES_FILE,
  _INFO_FILE,
  DATASET_NAME,
  METADATA_FILE,
  SPLIT,
  DamagedDatasetError,
  import_tfds,
)

_SHARD_PREFIX = f'{DATASET_NAME}-{SPLIT}.'
_VERIFY_BATCH = 256


def _is_count(v) -> bool:
  return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _is_dtype_name(v) -> bool:
  try:
    return isinstance(v, str) and np.dtype(v).name == v
  except TypeError:
    return False


_METADATA_FIELDS = (   # what appending relies on: field, test, what it must be
    ('env', lambda v: isinstance(v, str) and bool(v), 'an environment name'),
    ('env_options', lambda v: isinstance(v, dict), 'an object'),
    ('num_actions', lambda v: _is_count(v) and v >= 1, 'an integer >= 1'),
    ('observation_shape', lambda v: isinstance(v, list) and all(_is_count(d) for d in v),
     'a list of sizes'),
    ('observation_dtype', _is_dtype_name, 'a numpy dtype name'),
    ('num_episodes', _is_count, 'a count'),
    ('num_transitions', _is_count, 'a count'),
    ('has_states', lambda v: isinstance(v, bool), 'true or false'),
)


def _check_metadata_fields(path: str, meta: dict):
  file = os.path.join(path, METADATA_FILE)
  for field, ok, want in _METADATA_FIELDS:
    if field not in meta:
      raise DamagedDatasetError(path, file, f'lacks {field}')
    if not ok(meta[field]):
      raise DamagedDatasetError(path, file, f'has {field}={meta[field]!r}, expected {want}')


def _listed_shard_lengths(path: str) -> List[int]:
  """The shard lengths dataset_info.json gives the split, checked for shape and sign."""
  file = os.path.join(path, _INFO_FILE)
  info = _read_json(path, file)
  if not isinstance(info, dict) or info.get('name') != DATASET_NAME:
    raise DamagedDatasetError(path, file, f'does not describe the dataset {DATASET_NAME!r}')
  splits = info.get('splits')
  mine = [x for x in splits if isinstance(x, dict) and x.get('name') == SPLIT] if isinstance(
      splits, list) else []
  if len(mine) != 1:
    raise DamagedDatasetError(path, file, f'does not list exactly one {SPLIT!r} split')
  raw = mine[0].get('shardLengths', [])
  try:
    lengths = [int(n) for n in raw]
  except (TypeError, ValueError):
    lengths = None
  if lengths is None or any(n < 1 for n in lengths):
    raise DamagedDatasetError(path, file, f'has bad shard lengths {raw!r}')
  return lengths


def _check_features(path: str, meta: dict):
  """TFDS can read the dataset description, and its features agree with our metadata."""
  file = os.path.join(path, _FEATURES_FILE)
  _read_json(path, file)
  try:
    tfds = import_tfds()
    steps = tfds.builder_from_directory(path).info.features['steps']
    shape, dtype = tuple(steps['observation'].shape), np.dtype(steps['observation'].np_dtype)
    has_states = 'state' in steps.keys()
  except Exception as e:  # pylint: disable=broad-except
    raise DamagedDatasetError(path, file, f'is not a readable RLDS description '
                              f'({one_line(e)})') from e
  want = (tuple(meta['observation_shape']), np.dtype(meta['observation_dtype']),
          meta['has_states'])
  if (shape, dtype, has_states) != want:
    raise DamagedDatasetError(path, file, f'describes observations {shape} {dtype.name} '
                              f'{"with" if has_states else "without"} states, '
                              f'{METADATA_FILE} {want[0]} {want[1].name} '
                              f'{"with" if want[2] else "without"} states')


def _shard_contents(path: str, file: str) -> Tuple[int, int]:
  """(episodes, transitions) of one shard, read to its end: a shard cut short raises
  DataLossError in tf.data, which becomes DamagedDatasetError naming it."""
  import tensorflow as tf

  def steps_per_episode(serialized):
    spec = {_ACTION_KEY: tf.io.RaggedFeature(tf.int64, row_splits_dtype=tf.int64)}
    return tf.io.parse_example(serialized, spec)[_ACTION_KEY].row_lengths()

  ds = tf.data.TFRecordDataset(file, buffer_size=1 << 22).batch(_VERIFY_BATCH)
  episodes, transitions = 0, 0
  try:
    for steps in ds.map(steps_per_episode).as_numpy_iterator():
      if np.any(steps < 1):
        raise DamagedDatasetError(path, file, f'has an episode without steps near record '
                                  f'{episodes}')
      episodes += len(steps)
      transitions += int(steps.sum()) - len(steps)
  except tf.errors.OpError as e:
    raise DamagedDatasetError(path, file, f'is cut short or corrupt ({one_line(e)})') from e
  return episodes, transitions


def verify_dataset(path: str) -> dict:
  """Checks that the dataset at `path` is whole before it is extended, and returns its metadata:
  every metadata file parses and has the fields appending needs, the TFDS description agrees
  with noturningback.json, the shard files are exactly the listed ones, and every shard reads
  to its end with the listed number of episodes; the episode and transition counts of
  noturningback.json match the shards. Reads the whole dataset. Raises DamagedDatasetError
  naming the first bad file (DatasetError when `path` is no dataset at all); never writes."""
  path = os.path.abspath(path)
  meta = read_metadata(path)
  _check_metadata_fields(path, meta)
  lengths = _listed_shard_lengths(path)
  _check_features(path, meta)
  info_file = os.path.join(path, _INFO_FILE)
  listed = [f'{_SHARD_PREFIX}tfrecord-{i:05d}' for i in range(len(lengths))]
  present = sorted(f for f in os.listdir(path) if f.startswith(_SHARD_PREFIX))
  if present != listed:
    missing = sorted(set(listed) - set(present))
    if missing:
      raise DamagedDatasetError(path, os.path.join(path, missing[0]), 'is missing')
    raise DamagedDatasetError(path, info_file, f'lists {len(listed)} shard'
                              f'{"" if len(listed) == 1 else "s"} but the directory also holds '
                              f'{sorted(set(present) - set(listed))[0]}')
  transitions = 0
  for name, want in zip(listed, lengths):
    n_eps, n_steps = _shard_contents(path, os.path.join(path, name))
    if n_eps != want:
      raise DamagedDatasetError(path, info_file, f'says {name} holds {want} episodes, it '
                                f'holds {n_eps}')
    transitions += n_steps
  meta_file = os.path.join(path, METADATA_FILE)
  if meta['num_episodes'] != sum(lengths) or meta['num_transitions'] != transitions:
    raise DamagedDatasetError(path, meta_file, f'says {meta["num_episodes"]} episodes and '
                              f'{meta["num_transitions"]} transitions, the shards hold '
                              f'{sum(lengths)} and {transitions}')
  return meta

"""Reading episode datasets: their metadata, the RLDS episodes as tf.data or as Episodes."""
import json
import os
from typing import Iterator, List, Tuple

from envs.cli import one_line
from estimators.rlds.schema import (
  _FEATURES_FILE,
  _INFO_FILE,
  METADATA_FILE,
  SPLIT,
  DamagedDatasetError,
  DatasetError,
  Episode,
  _from_steps,
  import_tfds,
)


def read_metadata(path: str) -> dict:
  """The `noturningback.json` of a dataset; DatasetError if `path` is not one."""
  path = os.path.abspath(path)
  if not os.path.exists(path):
    raise DatasetError(f'no dataset at {path}: the directory does not exist')
  if not os.path.isdir(path):
    raise DatasetError(f'no dataset at {path}: it is a file, not a dataset directory')
  meta_path = os.path.join(path, METADATA_FILE)
  if not os.path.isfile(meta_path):
    raise DatasetError(f'{path} is not an episode dataset (no {METADATA_FILE})')
  for name in (_INFO_FILE, _FEATURES_FILE):
    if not os.path.isfile(os.path.join(path, name)):
      raise DamagedDatasetError(path, os.path.join(path, name), 'is missing')
  meta = _read_json(path, meta_path)
  if not isinstance(meta, dict) or 'num_episodes' not in meta:
    raise DamagedDatasetError(path, meta_path, 'lacks num_episodes')
  return meta


def _read_json(path: str, file: str):
  try:
    with open(file) as f:
      return json.load(f)
  except (OSError, ValueError) as e:
    raise DamagedDatasetError(path, file, f'is unreadable ({one_line(e)})') from e


def _builder(path: str):
  tfds = import_tfds()
  try:
    return tfds.builder_from_directory(path)
  except Exception as e:  # pylint: disable=broad-except
    raise DatasetError(f'corrupt dataset at {path}: {one_line(e)}') from e


def as_tf_dataset(path: str):
  """The RLDS episodes as a tf.data dataset: each element {'steps': tf.data.Dataset of steps}."""
  path = os.path.abspath(path)
  read_metadata(path)
  try:
    return _builder(path).as_dataset(split=SPLIT, shuffle_files=False)
  except DatasetError:
    raise
  except Exception as e:  # pylint: disable=broad-except
    raise DatasetError(f'corrupt dataset at {path}: {one_line(e)}') from e


def iter_episodes(path: str) -> Iterator[Episode]:
  """Streams the episodes of a dataset (DatasetError if it is corrupt), in TFDS's read order:
  stored order within a shard; with several shards (over EPISODES_PER_SHARD episodes, or
  appended) the shards are interleaved 16 episodes at a time (load_flat keeps this order)."""
  import tensorflow as tf
  path = os.path.abspath(path)
  meta = read_metadata(path)
  ds = as_tf_dataset(path)
  # Batch each episode's steps into one element: far faster than iterating nested datasets.
  ds = ds.map(lambda ep: ep['steps'].batch(2**31 - 1).get_single_element(),
              num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  count = 0
  try:
    for steps in ds.prefetch(4).as_numpy_iterator():
      count += 1
      yield _from_steps(steps)
  except (tf.errors.OpError, ValueError) as e:
    raise DatasetError(f'corrupt dataset at {path}: {one_line(e)}') from e
  if count != meta['num_episodes']:
    raise DatasetError(f'corrupt dataset at {path}: read {count} episodes, its metadata '
                       f'says {meta["num_episodes"]}')


def load_episodes(path: str) -> Tuple[List[Episode], dict]:
  """All episodes of the dataset at `path` and its metadata. Raises DatasetError."""
  meta = read_metadata(path)
  return list(iter_episodes(path)), meta

"""Offline episode datasets in RLDS format (one TFDS dataset, split 'train', one example per
episode), written with `tfds.core.SequentialWriter` and read with `tfds.builder_from_directory`.

    write_episodes('data/cartpole', episodes, 'cartpole', {'max_steps': 50000},
                   num_actions=2, obs_spec=env.observation_spec())
    episodes, meta = load_episodes('data/cartpole')
    flat = flatten(episodes)                       # layout of estimators.pairs.episode_layout
    ds = as_tf_dataset('data/cartpole')            # tf.data of RLDS episodes {'steps': Dataset}

RLDS step convention: an episode of T transitions is stored as T+1 steps. Step t holds
observation x_t and the action a_t taken there, with the reward/discount that followed it;
the last step holds the final observation x_T with a dummy action 0, reward 0, discount 0,
is_last=True (is_terminal=True when the episode ended by termination, i.e. its last discount
was 0, rather than by a time limit). When true environment states are given, each step also
has a 'state' string: the JSON of `env.get_state()` (tuples restored on load), so evaluation
can label transitions with the exact oracle.

Beside the TFDS files the dataset directory holds `noturningback.json` (env name, options,
num_actions, observation spec, number of episodes and steps, creation time). Writes go to a
temporary directory next to the target, renamed into place at the end, so an interrupted write
never damages an existing dataset.
"""
import contextlib
import json
import logging
import os
import shutil
import signal
import tempfile
import threading
import time
from typing import Any, Dict, Iterable, Iterator, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from envs import paths

METADATA_FILE = 'noturningback.json'
_INFO_FILE = 'dataset_info.json'         # TFDS's: splits and shard lengths
_FEATURES_FILE = 'features.json'
DATASET_NAME = 'noturningback_episodes'
DATASET_VERSION = '1.0.0'
SPLIT = 'train'
EPISODES_PER_SHARD = 2000
_WRITE_BATCH_STEPS = 50_000   # SequentialWriter rewrites its metadata per add_examples call


class _TfdsDtypeNoise(logging.Filter):
  """Drops TFDS 4.8's dtype deprecation warnings, which its own features.json reader triggers."""

  def filter(self, record):
    msg = str(record.msg)
    return not ('is deprecated. Please change your code to use NumPy' in msg or
                'You use TensorFlow DType' in msg)


logging.getLogger('absl').addFilter(_TfdsDtypeNoise())


class DatasetError(ValueError):
  """Missing, foreign, mismatched or corrupt dataset; the message names the path."""


class DamagedDatasetError(DatasetError):
  """One file of a dataset is unreadable, cut short or disagrees with the rest. `file` names it
  and `problem` says what is wrong, so callers can tell the user exactly what to restore."""

  def __init__(self, path: str, file: str, problem: str):
    super().__init__(f'corrupt dataset at {path}: {os.path.basename(file)} {problem}')
    self.path, self.file, self.problem = path, file, problem


class DatasetExistsError(DatasetError):
  """The output directory already holds something and neither overwrite nor append was asked."""


class Episode(NamedTuple):
  observations: np.ndarray          # [T+1, ...] x_0 .. x_T
  actions: np.ndarray               # int32 [T]
  rewards: np.ndarray               # float32 [T]
  discounts: np.ndarray             # float32 [T]
  states: Optional[List[Any]] = None  # [T+1] hashable true env states, or None


class FlatData(NamedTuple):
  observations: np.ndarray  # [N, ...] every observation of every episode, back to back
  actions: np.ndarray       # int32 [N]: action taken at k (0 at an episode's final observation)
  last: np.ndarray          # int32 [N]: flat index of the last observation of k's episode
  lengths: np.ndarray       # int64 [E]: observations per episode (T+1)


# ----------------------------------------------------------------------------------------- #
# Specs and features
# ----------------------------------------------------------------------------------------- #

def _obs_shape_dtype(obs_spec) -> Tuple[Tuple[int, ...], np.dtype]:
  if isinstance(obs_spec, dict) and 'shape' in obs_spec:
    return tuple(int(s) for s in obs_spec['shape']), np.dtype(obs_spec['dtype'])
  if isinstance(obs_spec, (tuple, list)) and len(obs_spec) == 2:
    return tuple(int(s) for s in obs_spec[0]), np.dtype(obs_spec[1])
  return tuple(int(s) for s in obs_spec.shape), np.dtype(obs_spec.dtype)


def _features(obs_shape, obs_dtype, with_states: bool):
  import tensorflow_datasets as tfds
  steps = {
      'observation': tfds.features.Tensor(shape=obs_shape, dtype=np.dtype(obs_dtype)),
      'action': tfds.features.Tensor(shape=(), dtype=np.int32),
      'reward': tfds.features.Tensor(shape=(), dtype=np.float32),
      'discount': tfds.features.Tensor(shape=(), dtype=np.float32),
      'is_first': tfds.features.Tensor(shape=(), dtype=np.bool_),
      'is_last': tfds.features.Tensor(shape=(), dtype=np.bool_),
      'is_terminal': tfds.features.Tensor(shape=(), dtype=np.bool_),
  }
  if with_states:
    steps['state'] = tfds.features.Tensor(shape=(), dtype=np.object_)
  return tfds.features.FeaturesDict({'steps': tfds.features.Dataset(steps)})


def _ds_info(data_dir: str, obs_shape, obs_dtype, with_states: bool):
  import tensorflow_datasets as tfds
  identity = tfds.core.dataset_info.DatasetIdentity(
      name=DATASET_NAME, version=tfds.core.Version(DATASET_VERSION), data_dir=data_dir,
      module_name='estimators.dataset')
  return tfds.core.DatasetInfo(
      builder=identity, description='Episodes collected for reversibility-aware RL (RLDS).',
      features=_features(obs_shape, obs_dtype, with_states))


# ----------------------------------------------------------------------------------------- #
# States <-> strings (JSON; lists come back as tuples so states stay hashable)
# ----------------------------------------------------------------------------------------- #

def _json_default(o):
  if isinstance(o, np.generic):
    return o.item()
  if isinstance(o, np.ndarray):
    return o.tolist()
  raise TypeError(f'cannot store an env state containing {type(o).__name__}')


def encode_state(state) -> bytes:
  return json.dumps(state, default=_json_default, separators=(',', ':')).encode()


def _tuplify(x):
  if isinstance(x, list):
    return tuple(_tuplify(v) for v in x)
  return x


def decode_state(data: bytes):
  return _tuplify(json.loads(data))


# ----------------------------------------------------------------------------------------- #
# Episodes <-> RLDS examples
# ----------------------------------------------------------------------------------------- #

def _check_episode(ep: Episode, i: int, obs_shape, obs_dtype, num_actions: int):
  t = len(ep.actions)
  if len(ep.observations) != t + 1:
    raise ValueError(f'episode {i}: {len(ep.observations)} observations for {t} actions '
                     f'(expected actions + 1)')
  if len(ep.rewards) != t or len(ep.discounts) != t:
    raise ValueError(f'episode {i}: rewards/discounts must have one entry per action ({t})')
  if tuple(ep.observations.shape[1:]) != tuple(obs_shape):
    raise ValueError(f'episode {i}: observation shape {tuple(ep.observations.shape[1:])} '
                     f'!= spec {tuple(obs_shape)}')
  if ep.states is not None and len(ep.states) != t + 1:
    raise ValueError(f'episode {i}: {len(ep.states)} states for {t + 1} observations')
  if t and (np.min(ep.actions) < 0 or np.max(ep.actions) >= num_actions):
    raise ValueError(f'episode {i}: action out of range [0, {num_actions})')


def _to_example(ep: Episode, obs_dtype, with_states: bool) -> Dict[str, Any]:
  t = len(ep.actions)
  zero = np.zeros((1,), np.float32)
  terminal = bool(t > 0 and float(ep.discounts[-1]) == 0.0)
  is_last = np.zeros((t + 1,), bool)
  is_last[-1] = True
  steps = {
      'observation': np.asarray(ep.observations, dtype=obs_dtype),
      'action': np.concatenate([np.asarray(ep.actions, np.int32), np.zeros((1,), np.int32)]),
      'reward': np.concatenate([np.asarray(ep.rewards, np.float32), zero]),
      'discount': np.concatenate([np.asarray(ep.discounts, np.float32), zero]),
      'is_first': np.arange(t + 1) == 0,
      'is_last': is_last,
      'is_terminal': is_last & terminal,
  }
  if with_states:
    steps['state'] = np.array([encode_state(s) for s in ep.states], dtype=object)
  return {'steps': steps}


def _from_steps(steps: Dict[str, np.ndarray]) -> Episode:
  states = None
  if 'state' in steps:
    states = [decode_state(s) for s in steps['state']]
  return Episode(observations=steps['observation'], actions=steps['action'][:-1].astype(np.int32),
                 rewards=steps['reward'][:-1].astype(np.float32),
                 discounts=steps['discount'][:-1].astype(np.float32), states=states)


# ----------------------------------------------------------------------------------------- #
# Writing
# ----------------------------------------------------------------------------------------- #

def _fast_serialize(example: Dict[str, Any]) -> bytes:
  """The tf.train.Example TFDS 4.8 writes for {'steps': Dataset({... Tensor features})}: one
  flat list per step field under 'steps/<field>' (bools as int64), without TFDS's per-step
  python encoding (which made writing ~20x slower than collecting)."""
  import tensorflow as tf
  feature = {}
  for key, arr in example['steps'].items():
    flat = np.asarray(arr).ravel()
    if flat.dtype == np.bool_ or np.issubdtype(flat.dtype, np.integer):
      f = tf.train.Feature(int64_list=tf.train.Int64List(value=flat.astype(np.int64).tolist()))
    elif np.issubdtype(flat.dtype, np.floating):
      f = tf.train.Feature(float_list=tf.train.FloatList(value=flat.tolist()))
    else:
      f = tf.train.Feature(bytes_list=tf.train.BytesList(value=list(flat)))
    feature['steps/' + key] = f
  return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def _make_writer_class():
  import tensorflow as tf
  import tensorflow_datasets as tfds
  from tensorflow_datasets.core import example_serializer

  class Writer(tfds.core.SequentialWriter):
    """SequentialWriter that takes serialized examples. The fast serializer is checked against
    TFDS's own encoder + serializer on the first example; on any difference (another TFDS
    version) the TFDS path is used for the whole write."""

    def __init__(self, ds_info, **kwargs):
      super().__init__(ds_info, **kwargs)
      self._features = ds_info.features
      self._tfds_serializer = example_serializer.ExampleSerializer(
          ds_info.features.get_serialized_info())
      self._fast = None   # unknown until the first example

    def _tfds_serialize(self, example) -> bytes:
      return self._tfds_serializer.serialize_example(self._features.encode_example(example))

    def serialize(self, example) -> bytes:
      if self._fast is None:
        reference = self._tfds_serialize(example)
        try:
          fast = _fast_serialize(example)
          self._fast = (tf.train.Example.FromString(fast) ==
                        tf.train.Example.FromString(reference))
        except Exception:  # pylint: disable=broad-except
          self._fast = False
        return reference
      return _fast_serialize(example) if self._fast else self._tfds_serialize(example)

    def add_serialized(self, split_name: str, serialized: List[bytes]):
      split = self._splits[split_name]
      for data in serialized:
        split.add_example(data)
        if split.current_shard.num_examples >= self._max_examples_per_shard:
          split.close_shard()
      self._write_splits_metadata()

  return Writer


def _Writer(ds_info, **kwargs):  # pylint: disable=invalid-name
  global _WRITER_CLASS
  if _WRITER_CLASS is None:
    _WRITER_CLASS = _make_writer_class()
  return _WRITER_CLASS(ds_info, **kwargs)


_WRITER_CLASS = None


# Used by the CLIs to refuse an output before any work is done.
unwritable_reason = paths.unwritable_reason


def dataset_exists(path: str) -> bool:
  return os.path.isfile(os.path.join(path, METADATA_FILE))


def write_episodes(out_dir: str, episodes: Iterable[Episode], env_name: str,
                   env_options: dict, num_actions: int, obs_spec, overwrite: bool = False,
                   append: bool = False, extra_metadata: Optional[dict] = None,
                   verified: bool = False) -> dict:
  """Writes `episodes` as an RLDS dataset at `out_dir`; returns the metadata written.

  `episodes` may be a generator (it is consumed once, streamed to disk). Stores true states
  when the first episode has them (then every episode must). If `out_dir` exists:
  DatasetExistsError unless overwrite=True (replace it) or append=True (keep its episodes and
  add these; env, options, num_actions and observation spec must match). Before appending, the
  existing dataset is read whole (`verify_dataset`; DamagedDatasetError if any part of it is
  damaged) unless the caller has just done so (`verified`). It is never modified: the new
  dataset is a copy plus new shards, written beside it and swapped in when complete.
  `obs_spec`: anything with .shape/.dtype (a dm_env spec, an array), or {'shape', 'dtype'}.
  """
  out_dir = os.path.abspath(out_dir)
  obs_shape, obs_dtype = _obs_shape_dtype(obs_spec)
  if os.path.exists(out_dir) and not os.path.isdir(out_dir):
    raise DatasetError(f'{out_dir} exists and is not a directory')
  exists = os.path.isdir(out_dir) and bool(os.listdir(out_dir))   # an empty dir is free
  if exists and not (overwrite or append):
    raise DatasetExistsError(f'{out_dir} already exists; pass overwrite (replace it) or '
                             f'append/resume (add episodes to it)')
  if exists and not dataset_exists(out_dir):
    raise DatasetError(f'{out_dir} is not an episode dataset (no {METADATA_FILE}); refusing '
                       f'to replace or extend it')
  appending = bool(append and not overwrite and exists)
  old_meta = None
  if appending:
    old_meta = read_metadata(out_dir) if verified else verify_dataset(out_dir)
    mine = {'env': env_name, 'env_options': dict(env_options), 'num_actions': int(num_actions),
            'observation_shape': list(obs_shape), 'observation_dtype': obs_dtype.name}
    theirs = {k: old_meta.get(k) for k in mine}
    if json.loads(json.dumps(mine)) != theirs:
      raise DatasetError(f'cannot append to {out_dir}: it was collected with {theirs}, not {mine}')

  episodes = iter(episodes)
  first = next(episodes, None)
  if old_meta is not None:
    with_states = bool(old_meta['has_states'])
  else:
    with_states = first is not None and first.states is not None

  parent = os.path.dirname(out_dir)
  os.makedirs(parent, exist_ok=True)
  tmp = tempfile.mkdtemp(prefix=f'.{os.path.basename(out_dir)}.writing-', dir=parent)
  try:
    if appending:
      shutil.rmtree(tmp)
      shutil.copytree(out_dir, tmp)
    info = _ds_info(tmp, obs_shape, obs_dtype, with_states)
    writer = _Writer(info, max_examples_per_shard=EPISODES_PER_SHARD, overwrite=not appending)
    writer.initialize_splits([SPLIT], fail_if_exists=False)
    n_eps = old_meta['num_episodes'] if appending else 0
    n_steps = old_meta['num_transitions'] if appending else 0
    batch, batch_steps = [], 0

    def all_episodes() -> Iterator[Episode]:
      if first is not None:
        yield first
      yield from episodes

    for ep in all_episodes():
      _check_episode(ep, n_eps, obs_shape, obs_dtype, num_actions)
      if (ep.states is not None) != with_states:
        raise ValueError(f'episode {n_eps}: every episode must {"" if with_states else "not "}'
                         f'have states, like the {"dataset" if appending else "first episode"}')
      batch.append(writer.serialize(_to_example(ep, obs_dtype, with_states)))
      batch_steps += len(ep.actions) + 1
      n_eps += 1
      n_steps += len(ep.actions)
      if batch_steps >= _WRITE_BATCH_STEPS or len(batch) >= EPISODES_PER_SHARD:
        writer.add_serialized(SPLIT, batch)
        batch, batch_steps = [], 0
    if batch:
      writer.add_serialized(SPLIT, batch)
    writer.close_all()
    meta = {
        'format': 'rlds', 'dataset_name': DATASET_NAME, 'split': SPLIT,
        'env': env_name, 'env_options': dict(env_options), 'num_actions': int(num_actions),
        'observation_shape': list(obs_shape), 'observation_dtype': obs_dtype.name,
        'num_episodes': n_eps, 'num_transitions': n_steps, 'has_states': with_states,
        'created': old_meta['created'] if appending else time.strftime('%Y-%m-%dT%H:%M:%S%z'),
        'updated': time.strftime('%Y-%m-%dT%H:%M:%S%z'),
    }
    if old_meta is not None:
      meta.update({k: v for k, v in old_meta.items() if k not in meta})
    if extra_metadata:
      meta.update(extra_metadata)
    with open(os.path.join(tmp, METADATA_FILE), 'w') as f:
      json.dump(meta, f, indent=2, sort_keys=True)
    _replace_dir(tmp, out_dir)
  except BaseException:
    shutil.rmtree(tmp, ignore_errors=True)
    raise
  return meta


def _replace_dir(src: str, dst: str):
  """Moves the finished `src` to `dst`; an existing `dst` is moved aside first, then deleted.
  SIGINT/SIGTERM wait until both renames are done: between them `dst` does not exist, and an
  interrupt there would leave the old dataset only under its temporary name."""
  old = None
  with _signals_deferred():
    if os.path.exists(dst):
      old = tempfile.mkdtemp(prefix=f'.{os.path.basename(dst)}.old-', dir=os.path.dirname(dst))
      os.rmdir(old)
      os.rename(dst, old)
    os.rename(src, dst)
  if old is not None:
    shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def _signals_deferred():
  """SIGINT/SIGTERM arriving inside are held and raised again on leaving. Their Python handlers
  run in the main thread whichever thread the kernel chose (TF has many), so a signal mask
  would not hold them; handlers can only be swapped in the main thread, elsewhere this does
  nothing."""
  if threading.current_thread() is not threading.main_thread():
    yield
    return
  caught, previous = [], {}
  for sig in (signal.SIGINT, signal.SIGTERM):
    handler = signal.getsignal(sig)
    if handler is not None:   # None: installed outside Python, cannot be put back
      previous[sig] = signal.signal(sig, lambda signum, frame: caught.append(signum))
  try:
    yield
  finally:
    for sig, handler in previous.items():
      signal.signal(sig, handler)
    for sig in caught:
      signal.raise_signal(sig)


# ----------------------------------------------------------------------------------------- #
# Reading
# ----------------------------------------------------------------------------------------- #

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
    raise DamagedDatasetError(path, file, f'is unreadable ({_one_line(e)})') from e


def _builder(path: str):
  import tensorflow_datasets as tfds
  try:
    return tfds.builder_from_directory(path)
  except Exception as e:  # pylint: disable=broad-except
    raise DatasetError(f'corrupt dataset at {path}: {_one_line(e)}') from e


def _one_line(e: BaseException) -> str:
  text = str(getattr(e, 'message', None) or e).strip().splitlines()
  return f'{type(e).__name__}: {text[0] if text else ""}'[:300]


def as_tf_dataset(path: str):
  """The RLDS episodes as a tf.data dataset: each element {'steps': tf.data.Dataset of steps}."""
  path = os.path.abspath(path)
  read_metadata(path)
  try:
    return _builder(path).as_dataset(split=SPLIT, shuffle_files=False)
  except DatasetError:
    raise
  except Exception as e:  # pylint: disable=broad-except
    raise DatasetError(f'corrupt dataset at {path}: {_one_line(e)}') from e


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
    raise DatasetError(f'corrupt dataset at {path}: {_one_line(e)}') from e
  if count != meta['num_episodes']:
    raise DatasetError(f'corrupt dataset at {path}: read {count} episodes, its metadata '
                       f'says {meta["num_episodes"]}')


def load_episodes(path: str) -> Tuple[List[Episode], dict]:
  """All episodes of the dataset at `path` and its metadata. Raises DatasetError."""
  meta = read_metadata(path)
  return list(iter_episodes(path)), meta


# ----------------------------------------------------------------------------------------- #
# Verifying (before a dataset is extended: appending to a damaged one buries the damage, or
# silently replaces the episodes a damaged dataset_info.json no longer lists)
# ----------------------------------------------------------------------------------------- #

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
    import tensorflow_datasets as tfds
    steps = tfds.builder_from_directory(path).info.features['steps']
    shape, dtype = tuple(steps['observation'].shape), np.dtype(steps['observation'].np_dtype)
    has_states = 'state' in steps.keys()
  except Exception as e:  # pylint: disable=broad-except
    raise DamagedDatasetError(path, file, f'is not a readable RLDS description '
                              f'({_one_line(e)})') from e
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
    raise DamagedDatasetError(path, file, f'is cut short or corrupt ({_one_line(e)})') from e
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


# ----------------------------------------------------------------------------------------- #
# Fast flat loading (training): batched tf.data reads straight into preallocated arrays
# ----------------------------------------------------------------------------------------- #

_FLAT_READ_EPISODES = 128      # serialized episodes per tf.data batch (parsed together)
# TFDS's default read order for as_dataset(shuffle_files=False) when the dataset info does not
# set disable_shuffling (ours never does): shards interleaved 16 at a time, 16 episodes per
# turn (reader._get_default_interleave_cycle_length, ReadConfig.interleave_block_length).
_TFDS_CYCLE_LENGTH = 16
_OBS_KEY, _ACTION_KEY = 'steps/observation', 'steps/action'


class _NotPackedUint8(Exception):
  """The stored observations are not the packed uint8 varints the fast decoder reads."""


def _flat_plan(path: str, meta: dict):
  """What load_flat needs from the TFDS dataset info (shard files, read order, features), or
  None when the features are not the plain per-step tensors it parses (then it falls back to
  load_episodes + flatten)."""
  import tensorflow_datasets as tfds
  builder = _builder(path)
  info = builder.info
  try:
    steps = info.features['steps']
    serialized = info.features.get_serialized_info()['steps']
    obs_feature = steps['observation']
    obs_info, act_info = serialized['observation'], serialized['action']
    instructions = info.splits[SPLIT].file_instructions
  except Exception as e:  # pylint: disable=broad-except
    raise DatasetError(f'corrupt dataset at {path}: {_one_line(e)}') from e
  obs_shape = tuple(obs_feature.shape)
  obs_dtype = np.dtype(obs_feature.np_dtype)
  plain = (len(obs_info.shape) == len(obs_shape) + 1 and obs_info.shape[0] is None
           and all(s is not None for s in obs_shape) and tuple(act_info.shape) == (None,)
           and np.dtype(obs_info.np_dtype) == obs_dtype
           and (obs_dtype.kind in 'biuf') and np.dtype(act_info.np_dtype).kind in 'iu')
  expected = meta.get('num_transitions'), meta.get('num_episodes')
  if not plain or not all(isinstance(v, int) and v >= 0 for v in expected):
    return None
  read_config = tfds.ReadConfig()
  cycle = 1 if info.disable_shuffling else _TFDS_CYCLE_LENGTH
  return dict(files=[os.fspath(i.filename) for i in instructions],
              skip=[int(i.skip) for i in instructions], take=[int(i.take) for i in instructions],
              cycle=cycle, block=read_config.interleave_block_length or 1,
              obs_shape=obs_shape, obs_dtype=obs_dtype,
              num_observations=expected[0] + expected[1], num_episodes=expected[1])


def _packed_lists(serialized, key: str):
  """The serialized Int64List of feature `key` of each tf.train.Example in `serialized`,
  extracted with tf.io.decode_proto (no value decoding): {'lists': uint8 [total bytes] (the
  lists back to back), 'list_bytes': [B], 'list_found': [B] (entries of `key` holding an
  int64_list; 1 when well formed)}."""
  import tensorflow as tf
  features = tf.io.decode_proto(serialized, 'tensorflow.Example', ['features'],
                                [tf.string]).values[0]
  features = tf.concat([features, tf.zeros([tf.shape(features)[0], 1], tf.string)], 1)[:, 0]
  sizes, (entries,) = tf.io.decode_proto(features, 'tensorflow.Features', ['feature'],
                                         [tf.string])
  entries = tf.RaggedTensor.from_tensor(entries, lengths=sizes[:, 0])
  _, (keys, values) = tf.io.decode_proto(entries.flat_values, 'tensorflow.Features.FeatureEntry',
                                         ['key', 'value'], [tf.string, tf.string])
  pad = tf.zeros([tf.shape(keys)[0], 1], tf.string)
  match = tf.equal(tf.concat([keys, pad], 1)[:, 0], key)
  feature = tf.boolean_mask(tf.concat([values, pad], 1)[:, 0], match)
  list_sizes, (lists,) = tf.io.decode_proto(feature, 'tensorflow.Feature', ['int64_list'],
                                            [tf.string])
  lists = tf.concat([lists, tf.zeros([tf.shape(lists)[0], 1], tf.string)], 1)[:, 0]
  has_list = tf.scatter_nd(tf.where(match), tf.cast(list_sizes[:, 0] > 0, tf.int32),
                           tf.shape(match, out_type=tf.int64))
  return {'lists': tf.io.decode_raw(tf.strings.reduce_join(lists), tf.uint8),
          'list_bytes': tf.cast(tf.strings.length(lists), tf.int64),
          'list_found': tf.reduce_sum(entries.with_flat_values(has_list), axis=1)}


def _decode_packed_uint8(raw: np.ndarray, list_bytes: np.ndarray, out: np.ndarray) -> np.ndarray:
  """Decodes Int64Lists stored back to back in `raw` (each: tag 0x0a, varint length, packed
  varints) whose values are all < 256 into `out` (uint8, exactly as many entries as values);
  returns the number of values of each list. As a varint, v < 128 is the byte v and
  128 <= v < 256 the two bytes v, 0x01, so decoding drops each list's header and every byte
  that follows a byte >= 128: vectorised numpy passes, one Python step per list, none per
  value. Raises _NotPackedUint8 on anything else (unpacked or split lists, larger values, a
  value count that does not fit `out`)."""
  n = len(list_bytes)
  starts = np.cumsum(list_bytes) - list_bytes
  if n == 0 or np.any(list_bytes < 3):
    raise _NotPackedUint8('empty list')
  head = raw[np.minimum(starts[:, None] + np.arange(6), len(raw) - 1)].astype(np.int64)
  size = np.zeros(n, np.int64)
  header = np.zeros(n, np.int64)
  for k in range(1, 6):   # the payload length: a varint of at most 5 bytes after the tag
    open_ = header == 0
    size[open_] |= (head[open_, k] & 0x7f) << (7 * (k - 1))
    header[open_ & (head[:, k] < 0x80)] = k + 1
  if np.any(head[:, 0] != 0x0a) or np.any(header == 0) or np.any(header + size != list_bytes):
    raise _NotPackedUint8('not one packed field')
  ends = starts + list_bytes
  if np.any(raw[ends - 1] >= 0x80):
    raise _NotPackedUint8('a list ends inside a value')
  cont = raw >= 0x80
  in_header = np.repeat(starts - np.cumsum(header) + header, header) + np.arange(header.sum())
  cont[in_header] = False                     # header bytes are neither values nor their tails
  if np.any(cont[:-1] & (raw[1:] != 1)):
    raise _NotPackedUint8('a value >= 256')
  counts = size - np.array([np.count_nonzero(cont[a:b]) for a, b in zip(starts, ends)], np.int64)
  if int(counts.sum()) != out.size:
    raise _NotPackedUint8('value count')
  keep = np.empty_like(cont)
  keep[0] = True
  np.logical_not(cont[:-1], out=keep[1:])
  keep[in_header] = False
  out[:] = raw[keep]
  return counts


def _flat_tf_dataset(plan: dict, batch_episodes: int, packed_uint8: bool):
  """tf.data of batches of episodes in TFDS's episode order: 'actions' int32 [n] and
  'lengths' [B] (parse_example of the action field), and the observations, either parsed
  ('observations' [n, ...] in the stored dtype, 'obs_values' [B]) or, with `packed_uint8`,
  their raw Int64Lists for _decode_packed_uint8. Rewards, flags and states are not decoded."""
  import tensorflow as tf
  obs_shape, obs_dtype = plan['obs_shape'], plan['obs_dtype']
  parse_dtype = tf.float32 if obs_dtype.kind == 'f' else tf.int64   # as TFDS stores them
  files = tf.data.Dataset.from_tensor_slices(
      (tf.constant(plan['files'], tf.string), tf.constant(plan['skip'], tf.int64),
       tf.constant(plan['take'], tf.int64)))

  def read(filename, skip, take):
    return tf.data.TFRecordDataset(filename, buffer_size=1 << 22).skip(skip).take(take)

  def parse(serialized):
    spec = {_ACTION_KEY: tf.io.RaggedFeature(tf.int64, row_splits_dtype=tf.int64)}
    if not packed_uint8:
      spec[_OBS_KEY] = tf.io.RaggedFeature(parse_dtype, row_splits_dtype=tf.int64)
    ex = tf.io.parse_example(serialized, spec)
    act = ex[_ACTION_KEY]
    out = {'actions': tf.cast(act.flat_values, tf.int32), 'lengths': act.row_lengths()}
    if packed_uint8:
      out.update(_packed_lists(serialized, _OBS_KEY))
    else:
      obs = ex[_OBS_KEY]
      out.update(observations=tf.reshape(tf.cast(obs.flat_values, tf.as_dtype(obs_dtype)),
                                         (-1,) + tuple(obs_shape)),
                 obs_values=obs.row_lengths())
    return out

  ds = files.interleave(read, cycle_length=plan['cycle'], block_length=plan['block'],
                        num_parallel_calls=min(plan['cycle'], 4), deterministic=True)
  ds = ds.batch(batch_episodes).map(parse, num_parallel_calls=tf.data.AUTOTUNE,
                                    deterministic=True)
  return ds.prefetch(2)


def _empty_flat(obs_shape, obs_dtype) -> FlatData:
  return FlatData(np.zeros((0,) + tuple(obs_shape), obs_dtype), np.zeros((0,), np.int32),
                  np.zeros((0,), np.int32), np.zeros((0,), np.int64))


def _read_flat(path: str, plan: dict, batch_episodes: int, packed_uint8: bool) -> FlatData:
  import tensorflow as tf
  total, num_eps = plan['num_observations'], plan['num_episodes']
  observations = np.empty((total,) + plan['obs_shape'], plan['obs_dtype'])
  obs_values = observations.reshape(-1)      # a view: decoded values go straight in
  actions = np.empty((total,), np.int32)
  lengths = np.empty((num_eps,), np.int64)
  size = int(np.prod(plan['obs_shape'], dtype=np.int64))
  pos, eps = 0, 0

  def mismatch(what):
    return DatasetError(f'corrupt dataset at {path}: read {what}, its metadata says '
                        f'{num_eps} episodes and {total} observations')

  try:
    for batch in _flat_tf_dataset(plan, batch_episodes, packed_uint8).as_numpy_iterator():
      steps = batch['lengths']
      n, b = int(steps.sum()), len(steps)
      if pos + n > total or eps + b > num_eps:
        raise mismatch(f'more than that (>= {eps + b} episodes, {pos + n} observations)')
      if packed_uint8:
        if np.any(batch['list_found'] != 1):
          raise _NotPackedUint8('observation feature missing or repeated')
        values = _decode_packed_uint8(batch['lists'], batch['list_bytes'],
                                      obs_values[pos * size:(pos + n) * size])
      else:
        values = batch['obs_values']
      if not (np.all(values == steps * size) and np.all(steps >= 1)):
        raise DatasetError(f'corrupt dataset at {path}: an episode among {eps}..{eps + b - 1} '
                           f'has no steps or not one observation per step')
      if not packed_uint8:
        observations[pos:pos + n] = batch['observations']
      actions[pos:pos + n] = batch['actions']
      lengths[eps:eps + b] = steps
      pos, eps = pos + n, eps + b
  except (tf.errors.OpError, ValueError) as e:
    if isinstance(e, DatasetError):
      raise
    raise DatasetError(f'corrupt dataset at {path}: {_one_line(e)}') from e
  if pos != total or eps != num_eps:
    raise mismatch(f'{eps} episodes and {pos} observations')
  ends = np.cumsum(lengths) - 1
  actions[ends] = 0          # the dummy action at each final observation, as flatten sets it
  last = np.repeat(ends, lengths).astype(np.int32)
  return FlatData(observations, actions, last, lengths)


def load_flat(path: str, batch_episodes: int = _FLAT_READ_EPISODES) -> Tuple[FlatData, dict]:
  """The dataset at `path` in the flat layout, and its metadata: exactly
  `flatten(load_episodes(path)[0])` (same episode order, dtypes and values; an empty FlatData
  for a dataset without episodes), without per-episode objects or per-step Python.

  The RLDS shards are read with tf.data (parallel shard reads, batches of episodes parsed in
  parallel map calls; only the observation and action fields are decoded, never rewards,
  flags or true states) and copied batch by batch into arrays preallocated from the
  metadata's counts: observations keep their stored dtype and memory stays at the result
  plus a few batches. uint8 observations, which TFDS stores as packed int64 varints, are
  decoded by `_decode_packed_uint8` (a few vectorised numpy passes, straight into the
  result: about half the CPU of tf.io.parse_example, which decodes each value as a generic
  int64 varint); other dtypes, or values not stored that way, use parse_example. Raises DatasetError (one line) for a missing, corrupt or truncated dataset,
  or one whose contents disagree with its metadata."""
  path = os.path.abspath(path)
  meta = read_metadata(path)
  plan = _flat_plan(path, meta)
  if plan is None:   # features this reader does not parse: the per-episode reader
    episodes, meta = load_episodes(path)
    if not episodes:
      shape, dtype = _obs_shape_dtype({'shape': meta.get('observation_shape', ()),
                                       'dtype': meta.get('observation_dtype', 'float32')})
      return _empty_flat(shape, dtype), meta
    return flatten(episodes), meta
  if plan['obs_dtype'] == np.uint8:
    try:
      return _read_flat(path, plan, batch_episodes, packed_uint8=True), meta
    except _NotPackedUint8:
      pass            # written some other way: parse it generically
  return _read_flat(path, plan, batch_episodes, packed_uint8=False), meta


# ----------------------------------------------------------------------------------------- #
# Flat layout (estimators.pairs.episode_layout)
# ----------------------------------------------------------------------------------------- #

def flatten(episodes: Sequence[Episode]) -> FlatData:
  """Concatenates episodes back to back: position k holds one observation, the action taken
  there (0 at an episode's final observation) and the flat index of its episode's last
  observation, as `estimators.pairs.episode_layout(lengths)` lays them out."""
  if not episodes:
    raise ValueError('flatten: no episodes')
  lengths = np.array([len(ep.observations) for ep in episodes], dtype=np.int64)
  observations = np.concatenate([np.asarray(ep.observations) for ep in episodes], axis=0)
  actions = np.concatenate([np.append(np.asarray(ep.actions, np.int32), np.int32(0))
                            for ep in episodes]).astype(np.int32)
  ends = np.cumsum(lengths) - 1
  last = np.repeat(ends, lengths).astype(np.int32)
  return FlatData(observations, actions, last, lengths)


def flat_states(episodes: Sequence[Episode]) -> Optional[List[Any]]:
  """True states aligned with `flatten(episodes)`, or None when the episodes have none."""
  if any(ep.states is None for ep in episodes):
    return None
  return [s for ep in episodes for s in ep.states]

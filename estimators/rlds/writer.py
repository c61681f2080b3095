"""Writing episode datasets: a temporary directory beside the target, TFDS shards written by a
SequentialWriter with a fast serializer, noturningback.json beside them, then renamed into
place with signals deferred, so an interrupted write never damages an existing dataset;
append (after verify) and overwrite."""
import contextlib
import json
import os
import shutil
import signal
import tempfile
import threading
import time
from typing import Any, Dict, Iterable, Iterator, List, Optional

import numpy as np

from envs import paths
from estimators.rlds.reader import read_metadata
from estimators.rlds.schema import (
  DATASET_NAME,
  METADATA_FILE,
  SPLIT,
  DatasetError,
  DatasetExistsError,
  Episode,
  _check_episode,
  _ds_info,
  _obs_shape_dtype,
  _to_example,
  import_tfds,
)
from estimators.rlds.verify import verify_dataset

EPISODES_PER_SHARD = 2000
_WRITE_BATCH_STEPS = 50_000   # SequentialWriter rewrites its metadata per add_examples call
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
  tfds = import_tfds()
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


def _writer_class():
  global _WRITER_CLASS
  if _WRITER_CLASS is None:
    _WRITER_CLASS = _make_writer_class()
  return _WRITER_CLASS


def _Writer(ds_info, **kwargs):  # pylint: disable=invalid-name
  return _writer_class()(ds_info, **kwargs)


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
  identity = {'env': env_name, 'env_options': dict(env_options), 'num_actions': int(num_actions),
              'observation_shape': list(obs_shape), 'observation_dtype': obs_dtype.name}
  old_meta = _metadata_appended_to(out_dir, identity, overwrite, append, verified)
  appending = old_meta is not None

  episodes = iter(episodes)
  first = next(episodes, None)
  if old_meta is not None:
    with_states = bool(old_meta['has_states'])
  else:
    with_states = first is not None and first.states is not None

  # TF and TFDS are imported (on first use) before the write starts, with SIGINT/SIGTERM held:
  # a KeyboardInterrupt raised while C extensions import either broke the import (ImportError,
  # exit 1) or, after the clean one-line exit, ended the process by SIGINT (seen in 2 of 25
  # SIGTERMs sent within 1 s of the temporary directory appearing).
  with _signals_deferred():
    _writer_class()
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

    def all_episodes() -> Iterator[Episode]:
      if first is not None:
        yield first
      yield from episodes

    n_eps, n_steps = _add_episodes(writer, all_episodes(), old_meta, obs_shape, obs_dtype,
                                   num_actions, with_states)
    writer.close_all()
    meta = {
        'format': 'rlds', 'dataset_name': DATASET_NAME, 'split': SPLIT, **identity,
        'num_episodes': n_eps, 'num_transitions': n_steps, 'has_states': with_states,
        'created': old_meta['created'] if appending else time.strftime('%Y-%m-%dT%H:%M:%S%z'),
        'updated': time.strftime('%Y-%m-%dT%H:%M:%S%z'),
    }
    if old_meta is not None:
      meta.update({k: v for k, v in old_meta.items() if k not in meta})
    if extra_metadata:
      meta.update(extra_metadata)
    paths.write_json(os.path.join(tmp, METADATA_FILE), meta, sort_keys=True)
    _replace_dir(tmp, out_dir)
  except BaseException:
    shutil.rmtree(tmp, ignore_errors=True)
    raise
  return meta


def _metadata_appended_to(out_dir: str, identity: dict, overwrite: bool, append: bool,
                          verified: bool) -> Optional[dict]:
  """The metadata of the dataset at `out_dir` that this write appends to, None when it writes a
  new one (nothing there, or overwrite); raises when `out_dir` may be neither replaced nor
  extended, or holds episodes of another environment, options, action count or observation spec
  (`identity`)."""
  if os.path.exists(out_dir) and not os.path.isdir(out_dir):
    raise DatasetError(f'{out_dir} exists and is not a directory')
  exists = os.path.isdir(out_dir) and bool(os.listdir(out_dir))   # an empty dir is free
  if exists and not (overwrite or append):
    raise DatasetExistsError(f'{out_dir} already exists; pass overwrite (replace it) or '
                             f'append/resume (add episodes to it)')
  if exists and not dataset_exists(out_dir):
    raise DatasetError(f'{out_dir} is not an episode dataset (no {METADATA_FILE}); refusing '
                       f'to replace or extend it')
  if not (append and not overwrite and exists):
    return None
  old_meta = read_metadata(out_dir) if verified else verify_dataset(out_dir)
  theirs = {k: old_meta.get(k) for k in identity}
  if json.loads(json.dumps(identity)) != theirs:
    raise DatasetError(f'cannot append to {out_dir}: it was collected with {theirs}, not '
                       f'{identity}')
  return old_meta


def _add_episodes(writer, episodes: Iterable[Episode], old_meta: Optional[dict], obs_shape,
                  obs_dtype, num_actions: int, with_states: bool):
  """Serializes `episodes` into the writer's split in batches; (episodes, transitions) the
  dataset then holds (`old_meta`'s, when appending, and these)."""
  appending = old_meta is not None
  n_eps = old_meta['num_episodes'] if appending else 0
  n_steps = old_meta['num_transitions'] if appending else 0
  batch, batch_steps = [], 0
  for ep in episodes:
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
  return n_eps, n_steps


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

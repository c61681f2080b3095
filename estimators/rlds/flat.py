"""Fast flat loading for training: the TFRecord shards read with batched tf.data straight into
arrays sized from the metadata (uint8 observations decoded from TFDS's packed varints with
numpy), in TFDS's own file order; and the flat layout of estimators.pairs.episode_layout."""
import os
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from envs.cli import one_line
from estimators.rlds.reader import _builder, load_episodes, read_metadata
from estimators.rlds.schema import (
  _ACTION_KEY,
  _OBS_KEY,
  SPLIT,
  DatasetError,
  Episode,
  FlatData,
  _obs_shape_dtype,
  import_tfds,
)

_FLAT_READ_EPISODES = 128      # serialized episodes per tf.data batch (parsed together)
# TFDS's default read order for as_dataset(shuffle_files=False) when the dataset info does not
# set disable_shuffling (ours never does): shards interleaved 16 at a time, 16 episodes per
# turn (reader._get_default_interleave_cycle_length, ReadConfig.interleave_block_length).
_TFDS_CYCLE_LENGTH = 16


class _NotPackedUint8(Exception):
  """The stored observations are not the packed uint8 varints the fast decoder reads."""


def _flat_plan(path: str, meta: dict):
  """What load_flat needs from the TFDS dataset info (shard files, read order, features), or
  None when the features are not the plain per-step tensors it parses (then it falls back to
  load_episodes + flatten)."""
  tfds = import_tfds()
  builder = _builder(path)
  info = builder.info
  try:
    steps = info.features['steps']
    serialized = info.features.get_serialized_info()['steps']
    obs_feature = steps['observation']
    obs_info, act_info = serialized['observation'], serialized['action']
    instructions = info.splits[SPLIT].file_instructions
  except Exception as e:  # pylint: disable=broad-except
    raise DatasetError(f'corrupt dataset at {path}: {one_line(e)}') from e
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
    raise DatasetError(f'corrupt dataset at {path}: {one_line(e)}') from e
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


def concat_flat(parts: Sequence[FlatData]) -> FlatData:
  """Several flat datasets back to back, as one (`last` shifted to the new positions): the
  layout `flatten` gives their episodes concatenated in order. The parts must share one
  observation shape and dtype (ValueError otherwise)."""
  if not parts:
    raise ValueError('concat_flat: no datasets')
  if len(parts) == 1:
    return parts[0]
  shapes = {(p.observations.shape[1:], p.observations.dtype) for p in parts}
  if len(shapes) > 1:
    raise ValueError('concat_flat: the datasets hold different observations: ' + ', '.join(
        f'{list(s)} {np.dtype(d).name}' for s, d in sorted(shapes, key=str)))
  offsets = np.cumsum([0] + [len(p.last) for p in parts[:-1]])
  return FlatData(np.concatenate([p.observations for p in parts]),
                  np.concatenate([np.asarray(p.actions, np.int32) for p in parts]),
                  np.concatenate([np.asarray(p.last, np.int64) + o
                                  for p, o in zip(parts, offsets)]).astype(np.int32),
                  np.concatenate([np.asarray(p.lengths, np.int64) for p in parts]))

"""The RLDS schema of an episode dataset: its files and names, the errors, an Episode and the
flat layout, the TFDS features, true environment states as JSON strings, and an episode as
one RLDS example (T transitions as T+1 steps: step t holds x_t, the action a_t taken there
and the reward/discount that followed; the last step holds x_T with a dummy action 0, reward
0, discount 0, is_last; is_terminal when the last discount was 0)."""
import json
import logging
import os
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

import numpy as np

from envs import paths

METADATA_FILE = 'noturningback.json'
_INFO_FILE = 'dataset_info.json'         # TFDS's: splits and shard lengths
_FEATURES_FILE = 'features.json'
DATASET_NAME = 'noturningback_episodes'
DATASET_VERSION = '1.0.0'
SPLIT = 'train'
_OBS_KEY, _ACTION_KEY = 'steps/observation', 'steps/action'   # in a serialized episode


class _TfdsDtypeNoise(logging.Filter):
  """Drops TFDS 4.8's dtype deprecation warnings, which its own features.json reader triggers."""

  def filter(self, record):
    msg = str(record.msg)
    return not ('is deprecated. Please change your code to use NumPy' in msg or
                'You use TensorFlow DType' in msg)


_NOISE_FILTER = _TfdsDtypeNoise()


def import_tfds():
  """tensorflow_datasets, with the filter of its dtype noise on absl's logger (installed when
  TFDS is first used here, not when this package is imported)."""
  logger = logging.getLogger('absl')
  if _NOISE_FILTER not in logger.filters:
    logger.addFilter(_NOISE_FILTER)
  import tensorflow_datasets  # pylint: disable=g-import-not-at-top
  return tensorflow_datasets


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
  tfds = import_tfds()
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
  tfds = import_tfds()
  identity = tfds.core.dataset_info.DatasetIdentity(
      name=DATASET_NAME, version=tfds.core.Version(DATASET_VERSION), data_dir=data_dir,
      module_name='estimators.dataset')
  return tfds.core.DatasetInfo(
      builder=identity, description='Episodes collected for reversibility-aware RL (RLDS).',
      features=_features(obs_shape, obs_dtype, with_states))


# ----------------------------------------------------------------------------------------- #
# States <-> strings (JSON; lists come back as tuples so states stay hashable)
# ----------------------------------------------------------------------------------------- #

def encode_state(state) -> bytes:
  try:
    return json.dumps(state, default=paths.json_default, separators=(',', ':')).encode()
  except TypeError as e:
    raise TypeError(f'cannot store an env state: {e}') from e


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

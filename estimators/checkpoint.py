"""Estimator checkpoints: psi/phi parameters plus the config that built them, in one file.

    ckpt = estimators.checkpoint.load('psi.ckpt')
    p = training.psi_prob(ckpt.estimators, ckpt.psi_params, x, x_next)

The file is an .npz (whatever its name ends in) holding numeric arrays only, and is read with
`allow_pickle=False`, so opening a checkpoint somebody sent you never runs their code:
  psi/<module>/<name>, phi/<module>/<name>  one array per parameter leaf ('/' joins the levels of
                                            the nested dict; '%' and '/' inside a key are escaped
                                            as %25 and %2F, since Haiku module names hold '/')
  __meta__                                  UTF-8 JSON as uint8: format tag, network config,
                                            num_actions, obs_shape, obs_dtype, metadata, has_phi
Written atomically (temp file + rename), so an interrupted save never replaces a good file.

Command line:
    python -m estimators.checkpoint --info PATH    # the JSON document and parameter shapes
"""
import collections.abc
import dataclasses
import json
import os
import sys
import zipfile
import zlib
from typing import Any, Dict, Optional, Tuple

import jax
import numpy as np
from absl import flags

from envs import cli, paths
from estimators import networks as nets

FORMAT = 'noturningback-estimators/2'
# The last commit that converts the old pickle checkpoints (`python -m estimators.checkpoint
# --convert OLD NEW` there); this code never unpickles.
EARLIER_FORMAT_READER = '8d33eeb7de'
META_KEY = '__meta__'
HEADS = ('psi', 'phi')
_NUMERIC_KINDS = 'biufc'  # bool, ints, floats, complex: what np.load reads back exactly
_ZIP_MAGIC = b'PK\x03\x04'
_PICKLE_PROTO = 0x80
# Everything that can go wrong reading a zip of .npy members (zlib/NotImplementedError: a
# crafted member with a bad stream or compression method; json errors are ValueErrors).
_READ_ERRORS = (zipfile.BadZipFile, zlib.error, ValueError, KeyError, OSError, EOFError,
                NotImplementedError)


class CheckpointError(ValueError):
  """Missing, corrupt or incompatible estimator checkpoint."""


@dataclasses.dataclass
class EstimatorCheckpoint:
  network: nets.EstimatorNetConfig
  num_actions: int
  obs_shape: Tuple[int, ...]
  obs_dtype: str
  psi_params: Any
  phi_params: Any
  metadata: Dict[str, Any]
  path: str = ''  # where it was loaded from, so errors about it can name the file

  @property
  def estimators(self) -> nets.Estimators:
    return nets.make_estimators(self.network, self.num_actions)


def _corrupt(path: str, why: str) -> CheckpointError:
  return CheckpointError(f'estimator checkpoint {path} is corrupt or not a checkpoint ({why})')


def _not_ours(path: str, why: str) -> CheckpointError:
  return CheckpointError(f'{path} is not a noturningback estimator checkpoint ({why})')


# ------------------------------------------------------------------------------------------- #
# Parameter trees <-> flat array keys
# ------------------------------------------------------------------------------------------- #

def _escape(key: str) -> str:
  return key.replace('%', '%25').replace('/', '%2F')


def _unescape(part: str) -> str:
  return part.replace('%2F', '/').replace('%25', '%')


def _leaf_array(key: str, value) -> np.ndarray:
  array = np.asarray(value)
  # Anything else (objects, strings, bfloat16's void kind) would need pickle or come back altered.
  if array.dtype.kind not in _NUMERIC_KINDS:
    raise CheckpointError(f'parameter {key} has dtype {array.dtype}, not a plain numeric array')
  return array


def _flatten(tree, prefix: str, out: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
  if not isinstance(tree, collections.abc.Mapping):
    raise CheckpointError(f'{prefix} parameters are a {type(tree).__name__}, not a dict of arrays')
  for name, value in tree.items():
    if not isinstance(name, str):
      raise CheckpointError(f'parameter key {name!r} under {prefix} is not a string')
    key = f'{prefix}/{_escape(name)}'
    if isinstance(value, collections.abc.Mapping):
      if not value:  # would leave no array behind, so it could not come back
        raise CheckpointError(f'parameter dict {key} is empty')
      _flatten(value, key, out)
    else:
      out[key] = _leaf_array(key, value)
  return out


def _insert(tree: dict, parts, array: np.ndarray, where: str) -> None:
  for part in parts[:-1]:
    tree = tree.setdefault(part, {})
    if not isinstance(tree, dict):
      raise CheckpointError(f'{where} sits below another array')
  if parts[-1] in tree:
    raise CheckpointError(f'{where} collides with another parameter')
  tree[parts[-1]] = array


def _unflatten(path: str, arrays: Dict[str, np.ndarray]) -> Dict[str, dict]:
  trees = {head: {} for head in HEADS}
  for key, array in arrays.items():
    head, *parts = key.split('/')
    if head not in trees or not parts:
      raise _not_ours(path, f'unexpected array {key!r}')
    if array.dtype.kind not in _NUMERIC_KINDS:
      raise CheckpointError(f'{path}: array {key} has dtype {array.dtype}, not a numeric array')
    _insert(trees[head], [_unescape(p) for p in parts], array, f'{path}: array {key}')
  return trees


# ------------------------------------------------------------------------------------------- #
# save
# ------------------------------------------------------------------------------------------- #

def _meta_array(document: Dict[str, Any]) -> np.ndarray:
  try:
    text = json.dumps(document, default=paths.json_default, sort_keys=True)
  except (TypeError, ValueError) as e:  # non-string keys, circular references
    raise CheckpointError(f'checkpoint metadata is not JSON ({cli.one_line(e)})') from e
  return np.frombuffer(text.encode('utf-8'), dtype=np.uint8)


def _arrays(network, num_actions, obs_shape, obs_dtype, psi_params, phi_params, metadata):
  arrays = _flatten(jax.device_get(psi_params), 'psi', {})
  if phi_params is not None:
    _flatten(jax.device_get(phi_params), 'phi', arrays)
  arrays[META_KEY] = _meta_array({
      'format': FORMAT, 'network': network.to_dict(), 'num_actions': int(num_actions),
      'obs_shape': [int(s) for s in obs_shape], 'obs_dtype': str(np.dtype(obs_dtype)),
      'metadata': dict(metadata or {}), 'has_phi': phi_params is not None,
  })
  return arrays


def _write_atomically(path: str, arrays: Dict[str, np.ndarray]) -> None:
  directory = os.path.dirname(os.path.abspath(path))
  os.makedirs(directory, exist_ok=True)
  # A file object, not a name: np.savez would append '.npz' to a name that lacks it.
  with paths.atomic_write(path, 'wb') as f:
    np.savez(f, **arrays)


def save(path: str, network: nets.EstimatorNetConfig, num_actions: int, obs_shape, obs_dtype,
         psi_params, phi_params, metadata: Optional[Dict[str, Any]] = None) -> None:
  """Writes the checkpoint to exactly `path`. phi_params may be None (a psi-only checkpoint)."""
  arrays = _arrays(network, num_actions, obs_shape, obs_dtype, psi_params, phi_params, metadata)
  _write_atomically(path, arrays)


# ------------------------------------------------------------------------------------------- #
# load
# ------------------------------------------------------------------------------------------- #

def _check_magic(path: str) -> None:
  with open(path, 'rb') as f:
    head = f.read(len(_ZIP_MAGIC))
  if head[:1] == bytes([_PICKLE_PROTO]):
    raise CheckpointError(
        f'{path} is an old pickle-format checkpoint, which this code does not read (a pickle can '
        f'run code when opened); commit {EARLIER_FORMAT_READER} is the last that converts it '
        f'(`python -m estimators.checkpoint --convert {path} NEW` there, if you trust where it '
        'came from), or retrain')
  if head != _ZIP_MAGIC:
    raise _corrupt(path, 'not an npz file')


def _read_arrays(path: str) -> Dict[str, np.ndarray]:
  try:
    with np.load(path, allow_pickle=False) as npz:
      arrays = {key: npz[key] for key in npz.files}  # read all now: corruption shows up here
  except _READ_ERRORS as e:
    raise _corrupt(path, cli.one_line(e)) from e
  for key, value in arrays.items():
    if not isinstance(value, np.ndarray):  # np.load hands back raw bytes for a non-.npy member
      raise _not_ours(path, f'member {key!r} is not an array')
  return arrays


def _parse_meta(path: str, arrays: Dict[str, np.ndarray]) -> Dict[str, Any]:
  raw = arrays.pop(META_KEY, None)
  if raw is None or raw.dtype != np.uint8 or raw.ndim != 1:
    raise _not_ours(path, f'no {META_KEY} document')
  try:
    document = json.loads(raw.tobytes().decode('utf-8'))
  except ValueError as e:  # UnicodeDecodeError and JSONDecodeError both are
    raise _corrupt(path, f'{META_KEY} document: {cli.one_line(e)}') from e
  if not isinstance(document, dict):
    raise _corrupt(path, f'{META_KEY} document is not a JSON object')
  if document.get('format') != FORMAT:
    raise CheckpointError(f"{path} has checkpoint format {document.get('format')!r}; "
                          f'this code reads {FORMAT!r}')
  return document


def _checkpoint(path: str, document: Dict[str, Any], trees: Dict[str, dict]) -> EstimatorCheckpoint:
  if not document.get('has_phi') and trees['phi']:
    raise CheckpointError(f'{path} holds phi arrays but says it has no phi')
  try:
    network = nets.EstimatorNetConfig.from_dict(document['network'])
  except nets.EarlierFormatError as e:
    raise CheckpointError(f'estimator checkpoint {path}: {e}') from None
  except (KeyError, TypeError, ValueError, AttributeError) as e:
    raise _corrupt(path, f'malformed metadata: {cli.one_line(e)}') from e
  try:
    return EstimatorCheckpoint(
        network=network,
        num_actions=int(document['num_actions']),
        obs_shape=tuple(int(s) for s in document['obs_shape']),
        obs_dtype=str(np.dtype(document['obs_dtype'])),
        psi_params=trees['psi'], phi_params=trees['phi'] if document['has_phi'] else None,
        metadata=dict(document['metadata']), path=path)
  except (KeyError, TypeError, ValueError, AttributeError) as e:
    raise _corrupt(path, f'malformed metadata: {cli.one_line(e)}') from e


def load(path: str) -> EstimatorCheckpoint:
  """Reads a checkpoint written by `save`; never unpickles. Raises CheckpointError (one line)."""
  if not os.path.isfile(path):
    raise CheckpointError(f'estimator checkpoint not found: {path}')
  _check_magic(path)
  arrays = _read_arrays(path)
  document = _parse_meta(path, arrays)
  return _checkpoint(path, document, _unflatten(path, arrays))


def check_compatible(ckpt: EstimatorCheckpoint, obs_shape, obs_dtype, num_actions: int,
                     source: str = '') -> None:
  """Refuses (one line) a checkpoint whose observations or action count differ from the env's.
  `source` names the env in the message, e.g. 'cartpole'."""
  want = (tuple(int(s) for s in obs_shape), np.dtype(obs_dtype), int(num_actions))
  have = (tuple(ckpt.obs_shape), np.dtype(ckpt.obs_dtype), int(ckpt.num_actions))
  if want == have:
    return
  name = f' {ckpt.path}' if ckpt.path else ''
  env = f'env {source}' if source else 'the environment'
  raise CheckpointError(
      f'estimator checkpoint{name} was trained on observations {have[0]} {have[1]} with '
      f'{have[2]} actions, but {env} has {want[0]} {want[1]} with {want[2]} actions')


# ------------------------------------------------------------------------------------------- #
# The command line
# ------------------------------------------------------------------------------------------- #

def describe(path: str) -> Dict[str, Any]:
  """The JSON document of a checkpoint plus {array key: shape and dtype}, for --info."""
  ckpt = load(path)  # validates the whole file first
  arrays = _flatten(ckpt.psi_params, 'psi', {})
  if ckpt.phi_params is not None:
    _flatten(ckpt.phi_params, 'phi', arrays)
  return {
      'format': FORMAT, 'network': ckpt.network.to_dict(), 'num_actions': ckpt.num_actions,
      'obs_shape': list(ckpt.obs_shape), 'obs_dtype': ckpt.obs_dtype,
      'has_phi': ckpt.phi_params is not None, 'metadata': ckpt.metadata,
      'parameters': {k: {'shape': list(a.shape), 'dtype': str(a.dtype)} for k, a in arrays.items()},
  }


def define_flags(fv: flags.FlagValues) -> None:
  flags.DEFINE_string('info', None, 'PATH: print the metadata and parameter shapes',
                      flag_values=fv)


def main(argv=None) -> int:
  args, _ = cli.parse(define_flags, argv, prog='python -m estimators.checkpoint',
                      description='Inspect an estimator checkpoint.', required=('info',))
  try:
    print(json.dumps(describe(args.info), indent=2, sort_keys=True))
  except (CheckpointError, OSError) as e:
    print(f'error: {e}', file=sys.stderr)
    return 2
  return 0


if __name__ == '__main__':
  sys.exit(main())

r"""Batch predictions of a trained estimator checkpoint on arrays stored in an .npz file.

    python -m estimators.predict --checkpoint ckpt/turf.ckpt --input pairs.npz --output psi.npz

Input keys: `obs` [N, *obs_shape] and optionally `next_obs` [N, *obs_shape].
  - with `next_obs`: writes `psi` [N] = sigmoid(psi(obs, next_obs)), the probability that obs
    precedes next_obs (high = irreversible transition);
  - `obs` only: writes `phi` [N, num_actions] = sigmoid(phi(obs, a)), the estimated
    reversibility of each action (low = irreversible); needs a checkpoint trained with --phi.
Errors (missing keys, shape mismatch with the checkpoint, NaN/inf inputs, unreadable files, an
unwritable --output or one that is the --input) are one line, exit 2; nothing is written then.
"""
import dataclasses
import os
import sys
from typing import Optional

from absl import app, flags

from envs import cli as envs_cli
from envs import paths
from envs.cli import field
from estimators import cli

FLAGS = flags.FLAGS


@dataclasses.dataclass(frozen=True)
class Prediction:
  """What to predict on and where: one flag per field (envs.cli field flags)."""
  checkpoint: Optional[str] = field(None, 'Estimator checkpoint (estimators.train --out).')
  input: Optional[str] = field(None, 'Input .npz with obs (and next_obs).')
  output: Optional[str] = field(None, 'Output .npz (psi or phi).')
  batch: int = field(4096, 'Rows per jitted forward pass.')


SECTIONS = (envs_cli.Section('', Prediction),)


def define_flags(flag_values=flags.FLAGS):
  """Defines the CLI flags, one per field of Prediction (on the global FLAGS when run as a
  script, on a private FlagValues in tests; several CLIs share flag names, so none defines them
  at import)."""
  envs_cli.define_field_flags(flag_values, SECTIONS)


class PredictError(ValueError):
  """Bad input, reported as one line."""


# How reports name phi's target; None: a checkpoint that records none (a psi-only one needs none).
PHI_TARGET_TEXT = {'reverse': "psi(x', x)", 'one_minus_forward': "1 - psi(x, x')",
                   None: 'not recorded'}
# The last commit that reads a checkpoint that does not record what its phi was regressed onto.
EARLIER_FORMAT_READER = '8d33eeb7de'


class Predictor:
  """Jitted, fixed-size batched psi/phi probabilities for one checkpoint (no recompilation for
  ragged tails: the last chunk is padded)."""

  def __init__(self, ckpt, batch: int = 4096):
    import jax

    from estimators import training
    self.ckpt = ckpt
    self.batch = max(1, int(batch))
    est = ckpt.estimators
    self._psi = jax.jit(lambda p, x, y: training.psi_prob(est, p, x, y))
    self._phi = jax.jit(lambda p, x: training.phi_prob(est, p, x))
    # What phi was regressed onto (training.PHI_TARGETS), as its training recorded it; None
    # where nothing is recorded. Only phi_target() needs it, so psi and phi still predict then.
    self.phi_target_name = (ckpt.metadata.get('train_config') or {}).get('phi_target')
    self._phi_target = jax.jit(lambda p, x, y: training.phi_target_prob(
        est, p, x, y, self.phi_target_name))

  def check_obs(self, obs, name: str = 'obs'):
    import numpy as np
    obs = np.asarray(obs)
    want = tuple(self.ckpt.obs_shape)
    if obs.ndim != len(want) + 1 or tuple(obs.shape[1:]) != want:
      raise PredictError(f'{name} has shape {tuple(obs.shape)}; the checkpoint expects '
                         f'[N, {", ".join(str(s) for s in want)}]')
    if obs.dtype != np.dtype(self.ckpt.obs_dtype):
      if obs.dtype.kind not in 'biuf':
        raise PredictError(f'{name} has dtype {obs.dtype}; the checkpoint expects {self.ckpt.obs_dtype}')
      _check_finite(obs, name)   # before the cast: NaN cast to an integer dtype is garbage
      obs = obs.astype(self.ckpt.obs_dtype)
    _check_finite(obs, name)
    return obs

  def _chunks(self, fn, *arrays):
    import numpy as np
    n = len(arrays[0])
    outs = []
    for s in range(0, n, self.batch):
      parts = [a[s:s + self.batch] for a in arrays]
      m = len(parts[0])
      if m < self.batch and n > self.batch:  # pad the tail to the compiled size
        parts = [np.concatenate([p, np.repeat(p[-1:], self.batch - m, axis=0)]) for p in parts]
      outs.append(np.asarray(fn(*parts))[:m])
    if not outs:
      return None
    return np.concatenate(outs)

  def _pair_scores(self, fn, obs, next_obs):
    import numpy as np
    obs, next_obs = self.check_obs(obs, 'obs'), self.check_obs(next_obs, 'next_obs')
    if len(obs) != len(next_obs):
      raise PredictError(f'obs has {len(obs)} rows but next_obs has {len(next_obs)}')
    out = self._chunks(lambda x, y: fn(self.ckpt.psi_params, x, y), obs, next_obs)
    return np.zeros((0,), np.float32) if out is None else out

  def psi(self, obs, next_obs):
    return self._pair_scores(self._psi, obs, next_obs)

  def phi_target(self, obs, next_obs):
    """phi's regression target for the transitions obs -> next_obs, as its training computed
    it (`training.phi_target_prob`); CheckpointError (one line) for a checkpoint that does not
    record it."""
    if self.phi_target_name is None:
      from estimators.checkpoint import CheckpointError
      name = f' {self.ckpt.path}' if self.ckpt.path else ''
      raise CheckpointError(
          f"estimator checkpoint{name} lacks metadata train_config.phi_target (what phi was "
          'trained onto): it was written by an earlier version; commit '
          f'{EARLIER_FORMAT_READER} is the last that reads it')
    return self._pair_scores(self._phi_target, obs, next_obs)

  def phi(self, obs):
    import numpy as np
    if self.ckpt.phi_params is None:
      raise PredictError('this checkpoint has no trained phi (train with --phi)')
    obs = self.check_obs(obs, 'obs')
    out = self._chunks(lambda x: self._phi(self.ckpt.phi_params, x), obs)
    return np.zeros((0, self.ckpt.num_actions), np.float32) if out is None else out


def _check_finite(obs, name: str):
  """NaN/inf rows would come out as silent NaN (or arbitrary) probabilities: refused."""
  import numpy as np
  if obs.dtype.kind != 'f' or not len(obs):
    return
  bad = ~np.isfinite(obs.reshape(len(obs), -1)).all(axis=1)
  if bad.any():
    raise PredictError(f'{name} has {int(bad.sum())} of {len(obs)} rows with NaN or inf values '
                       f'(first: row {int(np.argmax(bad))}); drop or fix them')


def check_paths(input_path: str, output_path: str):
  """The output can be written and is not the input (which would be overwritten: compared as
  real paths, so links and relative spellings do not get past)."""
  from estimators import dataset
  if not os.path.isfile(input_path):
    raise PredictError(f'input file not found: {input_path}')
  if os.path.realpath(output_path) == os.path.realpath(input_path):
    raise PredictError(f'--output {output_path} is the --input file; write the predictions to '
                       f'another file')
  if os.path.isdir(output_path):
    raise PredictError(f'--output {output_path} is a directory; give an .npz file path')
  problem = dataset.unwritable_reason(output_path)
  if problem:
    raise PredictError(f'cannot write --output {os.path.abspath(output_path)}: {problem}')


def predict_file(checkpoint_path: str, input_path: str, output_path: str, batch: int = 4096) -> dict:
  """Runs the CLI's work; returns {key: shape} of what was written."""
  import numpy as np

  from estimators import checkpoint

  check_paths(input_path, output_path)
  if batch < 1:
    raise PredictError(f'--batch must be >= 1, got {batch}')
  try:
    with np.load(input_path, allow_pickle=False) as data:
      arrays = {k: data[k] for k in data.files}
  except Exception as e:  # zipfile/pickle/ValueError on a non-npz file
    raise PredictError(f'cannot read {input_path} as .npz ({type(e).__name__})') from e
  if 'obs' not in arrays:
    raise PredictError(f"{input_path} has no 'obs' array (keys: {', '.join(sorted(arrays)) or 'none'})")
  ckpt = checkpoint.load(checkpoint_path)
  predictor = Predictor(ckpt, batch)
  if 'next_obs' in arrays:
    result = {'psi': predictor.psi(arrays['obs'], arrays['next_obs']).astype(np.float32)}
  else:
    result = {'phi': predictor.phi(arrays['obs']).astype(np.float32)}
  directory = os.path.dirname(os.path.abspath(output_path))
  os.makedirs(directory, exist_ok=True)
  with paths.atomic_write(output_path, 'wb') as f:
    np.savez(f, **result)
  return {k: v.shape for k, v in result.items()}


def main(argv):
  cli.quiet_logs(FLAGS)
  if cli.unexpected_arguments(argv):
    return 2
  from estimators.checkpoint import CheckpointError
  p = cli.options_from_flags(Prediction, FLAGS)
  for name in ('checkpoint', 'input', 'output'):
    if not getattr(p, name):
      print(f'error: --{name} is required', file=sys.stderr)
      return 2
  try:
    shapes = predict_file(p.checkpoint, p.input, p.output, p.batch)
  except (PredictError, CheckpointError) as e:
    print(f'error: {e}', file=sys.stderr)
    return 2
  except OSError as e:
    print(f'error: {e.strerror or e}: {e.filename or p.output}', file=sys.stderr)
    return 2
  print(f'wrote {p.output}: ' + ', '.join(f'{k} {list(s)}' for k, s in shapes.items()))
  return 0


if __name__ == '__main__':
  define_flags()
  app.run(main)

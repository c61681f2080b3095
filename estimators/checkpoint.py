"""Estimator checkpoints: psi/phi parameters plus the config that built them, in one file.

    ckpt = estimators.checkpoint.load('psi.ckpt')
    p = training.psi_prob(ckpt.estimators, ckpt.psi_params, x, x_next)

Written atomically (temp file + rename), so an interrupted save never replaces a good file.
"""
import dataclasses
import os
import pickle
import tempfile
from typing import Any, Dict, Optional, Tuple

import jax
import numpy as np

from estimators import networks as nets

FORMAT = 'noturningback-estimators/1'


class CheckpointError(ValueError):
  """Missing, corrupt or incompatible estimator checkpoint."""


@dataclasses.dataclass
class EstimatorCheckpoint:
  network: nets.NetworkConfig
  num_actions: int
  obs_shape: Tuple[int, ...]
  obs_dtype: str
  psi_params: Any
  phi_params: Any
  metadata: Dict[str, Any]

  @property
  def estimators(self) -> nets.Estimators:
    return nets.make_estimators(self.network, self.num_actions)


def save(path: str, network: nets.NetworkConfig, num_actions: int, obs_shape, obs_dtype,
         psi_params, phi_params, metadata: Optional[Dict[str, Any]] = None) -> None:
  payload = {
      'format': FORMAT, 'network': network.to_dict(), 'num_actions': int(num_actions),
      'obs_shape': tuple(int(s) for s in obs_shape), 'obs_dtype': str(np.dtype(obs_dtype)),
      'psi': jax.device_get(psi_params), 'phi': jax.device_get(phi_params),
      'metadata': dict(metadata or {}),
  }
  directory = os.path.dirname(os.path.abspath(path))
  os.makedirs(directory, exist_ok=True)
  fd, tmp = tempfile.mkstemp(dir=directory, prefix='.tmp-ckpt-')
  with os.fdopen(fd, 'wb') as f:
    pickle.dump(payload, f, protocol=4)
  os.replace(tmp, path)


def load(path: str) -> EstimatorCheckpoint:
  if not os.path.isfile(path):
    raise CheckpointError(f'estimator checkpoint not found: {path}')
  try:
    with open(path, 'rb') as f:
      payload = pickle.load(f)
  except Exception as e:  # pickle raises many types on corrupt input
    raise CheckpointError(f'estimator checkpoint {path} is corrupt or not a checkpoint ({type(e).__name__})') from e
  if not isinstance(payload, dict) or payload.get('format') != FORMAT:
    raise CheckpointError(f'{path} is not a noturningback estimator checkpoint (format {FORMAT})')
  return EstimatorCheckpoint(
      network=nets.NetworkConfig.from_dict(payload['network']), num_actions=payload['num_actions'],
      obs_shape=tuple(payload['obs_shape']), obs_dtype=payload['obs_dtype'],
      psi_params=payload['psi'], phi_params=payload['phi'], metadata=payload['metadata'])

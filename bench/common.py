"""What the benchmark scripts share."""
import json
import os


def write_json(path: str, results) -> None:
  """Writes `results` as indented JSON, creating the parent directory."""
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  with open(path, 'w') as f:
    json.dump(results, f, indent=2)


def untrained_estimators(path: str, env_name: str, spec) -> str:
  """An estimator checkpoint of `env_name`'s preset psi/phi, untrained, for `spec` (an Acme
  EnvironmentSpec): what a throughput measurement needs, its cost not depending on the values."""
  import numpy as np
  from estimators import checkpoint, training
  from estimators import networks as nets
  network = nets.default_config(env_name)
  est = nets.make_estimators(network, spec.actions.num_values)
  obs = np.zeros(spec.observations.shape, spec.observations.dtype)
  state = training.init_state(est, training.TrainConfig(), obs)
  checkpoint.save(path, network, spec.actions.num_values, obs.shape, obs.dtype, state.psi_params,
                  state.phi_params, {'purpose': 'throughput benchmark (untrained)'})
  return path

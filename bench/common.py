"""What the benchmark scripts share: the one JSON writer of their results, the actors' loop
timers read back from a run, and the untrained estimators a throughput measurement needs."""
import os
from typing import Dict


def write_json(path: str, results) -> None:
  """Writes `results` as indented JSON through envs.paths.write_json, creating the parent
  directory; the file is replaced atomically, so a bench stopped mid-write leaves the previous
  one."""
  from envs import paths
  paths.write_json(path, results, make_dirs=True)


def actor_loop_us(run_dir: str) -> Dict[str, float]:
  """Wall microseconds per env step in each part of the actors' loops (env, inference, write,
  log: agents.loop's cumulative timers), over all actors of the run, from each actor's last
  log row."""
  from launch.runtime import summary
  totals: Dict[str, float] = {}
  steps = 0
  logs = os.path.join(run_dir, 'logs')
  for d in sorted(os.listdir(logs)) if os.path.isdir(logs) else ():
    rows = summary.read_log(run_dir, d) if d.startswith('actor_') else []
    if rows and 'loop_steps' in rows[-1]:
      steps += rows[-1]['loop_steps']
      for key, value in rows[-1].items():
        if key.startswith('loop_s_'):
          totals[key[len('loop_s_'):]] = totals.get(key[len('loop_s_'):], 0.0) + value
  return {k: 1e6 * v / steps for k, v in totals.items()} if steps else {}


def untrained_estimators(path: str, env_name: str, spec) -> str:
  """An estimator checkpoint of `env_name`'s preset psi/phi, untrained, for `spec` (an Acme
  EnvironmentSpec): what a throughput measurement needs, its cost not depending on the values."""
  import numpy as np

  from estimators import checkpoint, training
  from estimators import networks as nets
  network = nets.default_estimator_config(env_name)
  est = nets.make_estimators(network, spec.actions.num_values)
  obs = np.zeros(spec.observations.shape, spec.observations.dtype)
  state = training.init_state(est, training.TrainConfig(), obs)
  checkpoint.save(path, network, spec.actions.num_values, obs.shape, obs.dtype, state.psi_params,
                  state.phi_params, {'purpose': 'throughput benchmark (untrained)'})
  return path

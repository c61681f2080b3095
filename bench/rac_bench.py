r"""Per-step cost of the RAC shield in the actor versus no shield (same actor class, same env).

    python -m bench.rac_bench --env cartpole --steps 20000 --out results/rac_bench.json

Runs the real `ReversibilityAwareActor` in an Acme `EnvironmentLoop`-equivalent loop (no
Reverb, no learner), for the random policy and the IMPALA policy network: mode none, then mode
rac with frozen estimator parameters (one batched phi pass + shield per step), then rae (one psi
pass per step). Reports steps/s, microseconds per step and the ratios.
"""
import json
import os
import time

import numpy as np
from absl import app, flags
from bench import common

FLAGS = flags.FLAGS
flags.DEFINE_string('env', 'cartpole', 'Environment.')
flags.DEFINE_integer('steps', 20_000, 'Steps per measurement.')
flags.DEFINE_integer('repeats', 3, 'Measurements per mode (best is kept).')
flags.DEFINE_string('out', 'results/rac_bench.json', 'JSON output.')


def _loop(env, actor, steps):
  ts = env.reset()
  actor.observe_first(ts)
  start = time.perf_counter()
  for _ in range(steps):
    a = actor.select_action(ts.observation)
    ts = env.step(a)
    actor.observe(a, ts)
    if ts.last():
      ts = env.reset()
      actor.observe_first(ts)
  return steps / (time.perf_counter() - start)


def measure(env_name: str, steps: int, repeats: int) -> dict:
  import envs
  from agents.acting import ReversibilityAwareActor, ReversibilityConfig
  from estimators import networks as nets, training

  env = envs.make(env_name, seed=0)
  spec = env.observation_spec()
  num_actions = env.action_spec().num_values
  est = nets.make_estimators(nets.default_config(env_name), num_actions)
  state = training.init_state(est, training.TrainConfig(), np.zeros(spec.shape, spec.dtype))
  frozen = (state.psi_params, state.phi_params)

  # The IMPALA policy network (untrained parameters: the cost does not depend on their values).
  import jax
  from acme import specs, wrappers
  from agents import networks as agent_networks
  env_spec = specs.make_environment_spec(wrappers.SinglePrecisionWrapper(env))
  nets_impala = agent_networks.make_networks(env_spec, agent_networks.default_policy_config(
      env_name, agent_networks.is_image_spec(env_spec)))
  policy_params = nets_impala.unroll_init_fn(jax.random.PRNGKey(0), agent_networks.DUMMY_CORE_STATE)

  class _FixedParams:
    params = policy_params

    def update(self, wait=False):
      pass

  out = {'env': env_name, 'steps': steps}
  for policy in ('random', 'impala'):
    results = {}
    for mode in ('none', 'rac', 'rae'):
      actor = ReversibilityAwareActor(
          num_actions, ReversibilityConfig(mode=mode, beta=0.4), seed=0,
          policy_forward=nets_impala.forward_fn if policy == 'impala' else None,
          policy_client=_FixedParams() if policy == 'impala' else None,
          estimators=est if mode != 'none' else None,
          frozen_estimator_params=frozen if mode != 'none' else None)
      _loop(env, actor, 500)  # compile
      results[mode] = max(_loop(env, actor, steps) for _ in range(repeats))
    out[policy] = {'steps_per_s': results,
                   'us_per_step': {m: 1e6 / v for m, v in results.items()},
                   'ratio_rac_over_none': results['rac'] / results['none'],
                   'ratio_rae_over_none': results['rae'] / results['none']}
  return out


def main(argv):
  del argv
  out = measure(FLAGS.env, FLAGS.steps, FLAGS.repeats)
  common.write_json(FLAGS.out, out)
  print(json.dumps(out, indent=2))


if __name__ == '__main__':
  app.run(main)

r"""The actor's ceiling on this machine: one process stepping K environments with the real
`BatchedActor` (one fused jitted call per step) and `BatchedEnvironmentLoop`, no Reverb, no
learner, for modes none / rae / rac with frozen (untrained) estimators.

    python -m bench.actor_bench --env sokoban --envs 1,8,32 --out results/actor_bench_sokoban.json
    python -m bench.actor_bench --env sokoban --envs 16 --steppers vectorised,one_by_one

The K environments are stepped as an actor node steps them: with the environment's vectorised
batch where it has one (`envs.make_batch`, Sokoban), else one by one (`envs.batch.EnvironmentList`);
`--steppers vectorised,one_by_one` measures both in one invocation (rows `POLICY/K=k` and
`POLICY/K=k/one_by_one`). Reports env steps/s per (policy, K, mode), the rae/none and rac/none
ratios, and a per-step time breakdown (the batched environment step, the fused call, the rest of
the loop).
"""
import json
import sys
import time

import jax
import numpy as np
from absl import flags
from acme import specs
from acme.utils import loggers

from agents import acting
from agents import loop as loop_lib
from agents import networks as agent_networks
from bench import common
from envs import cli


def define_flags(fv: flags.FlagValues) -> None:
  """--env is the run configuration's field; the rest are this bench's own knobs."""
  from launch.program.config import RunConfig
  cli.define_field_flags(fv, (cli.Section('', RunConfig, only=('env',)),))
  flags.DEFINE_list('envs', ['1', '8', '32'], 'Environments per actor (K) to measure.',
                    flag_values=fv)
  flags.DEFINE_list('policies', ['impala', 'random'], 'Policies to measure.', flag_values=fv)
  flags.DEFINE_integer('steps', 20_000, 'Environment steps per measurement.', flag_values=fv)
  flags.DEFINE_integer('repeats', 2, 'Measurements per setting (best is kept).', flag_values=fv)
  flags.DEFINE_list('steppers', ['vectorised'], "How the K environments are stepped: 'vectorised' "
                    "(the environment's batch where it has one, as actor nodes do) and/or "
                    "'one_by_one' (K single environments).", flag_values=fv)
  flags.DEFINE_string('out', 'results/actor_bench.json', 'JSON output.', flag_values=fv)


class _Timed:
  """Wraps an object's method to accumulate its wall time (for the breakdown)."""

  def __init__(self, fn):
    self.fn, self.seconds = fn, 0.0

  def __call__(self, *args, **kwargs):
    t = time.perf_counter()
    out = self.fn(*args, **kwargs)
    self.seconds += time.perf_counter() - t
    return out


STEPPERS = ('vectorised', 'one_by_one')


def _run_config(env_name: str, stepper: str = 'vectorised'):
  """The configuration a run would build this bench's environments from: the environment with
  its reward (Cartpole's too), stepped as `stepper` says."""
  from launch.program.config import RunConfig
  if stepper not in STEPPERS:
    raise ValueError(f'unknown stepper {stepper!r}; expected one of {STEPPERS}')
  return RunConfig(env=env_name, vectorised_env=stepper == 'vectorised',
                   env_options={'reward_free': False} if env_name == 'cartpole' else {})


def make_environments(env_name: str, seeds, stepper: str = 'vectorised'):
  """An actor's K environments as a run builds them (launch.program.builder.make_environments):
  the vectorised batch where the environment has one and `stepper` is 'vectorised', else K
  single environments stepped one by one."""
  from launch.program import builder
  return builder.make_environments(_run_config(env_name, stepper), seeds)


def measure(env_name: str, ks, policies, steps: int, repeats: int,
            steppers=('vectorised',)) -> dict:
  from estimators import networks as nets
  from estimators import training
  from launch.program import builder
  env0 = builder.make_environment(_run_config(env_name), 0)
  spec = specs.make_environment_spec(env0)
  num_actions = spec.actions.num_values
  est = nets.make_estimators(nets.default_estimator_config(env_name), num_actions)
  state = training.init_state(est, training.TrainConfig(), np.zeros(spec.observations.shape,
                                                                    spec.observations.dtype))
  estimator_source = acting.FixedParams((state.psi_params, state.phi_params))
  impala = agent_networks.make_networks(spec, agent_networks.default_policy_config(
      env_name, agent_networks.is_image_spec(spec)))
  policy_source = acting.FixedParams(
      impala.unroll_init_fn(jax.random.PRNGKey(0), agent_networks.DUMMY_CORE_STATE))

  out = {'env': env_name, 'steps': steps, 'results': {}}
  for policy in policies:
    for k in ks:
      for stepper in steppers:
        row = {}
        for mode in ('none', 'rae', 'rac'):
          def make_loop():
            actor = acting.BatchedActor(
                num_actions, acting.ReversibilityConfig(mode=mode, beta=0.4), list(range(k)),
                policy_forward=impala.forward_fn if policy == 'impala' else None,
                policy_source=policy_source if policy == 'impala' else None,
                estimators=est if mode != 'none' else None,
                estimator_source=estimator_source if mode != 'none' else None)
            environments = make_environments(env_name, list(range(k)), stepper)
            environments.step = _Timed(environments.step)
            return loop_lib.BatchedEnvironmentLoop(environments, actor, mode,
                                                   logger=loggers.NoOpLogger()), actor, environments
          loop, actor, environments = make_loop()
          loop.run(num_steps=50 * k)  # compile
          best, breakdown = 0.0, None
          for _ in range(repeats):
            loop, actor, environments = make_loop()
            actor.step = _Timed(actor.step)
            loop.run(num_steps=50 * k)  # compile for this instance
            actor.step.seconds = environments.step.seconds = 0.0
            start = time.perf_counter()
            n = loop.run(num_steps=steps)
            wall = time.perf_counter() - start
            if n / wall > best:
              env_s = environments.step.seconds
              best = n / wall
              breakdown = {'us_per_step_total': 1e6 * wall / n, 'us_per_step_env': 1e6 * env_s / n,
                           'us_per_step_fused_call': 1e6 * actor.step.seconds / n,
                           'us_per_step_loop_rest': 1e6 * (wall - env_s - actor.step.seconds) / n}
          row[mode] = {'env_steps_per_s': best, 'breakdown': breakdown}
        row['environments'] = type(environments).__name__
        row['ratio_rae_over_none'] = row['rae']['env_steps_per_s'] / row['none']['env_steps_per_s']
        row['ratio_rac_over_none'] = row['rac']['env_steps_per_s'] / row['none']['env_steps_per_s']
        key = f'{policy}/K={k}' + ('' if stepper == 'vectorised' else f'/{stepper}')
        out['results'][key] = row
        print(f"{env_name} {key} ({row['environments']}): " + ', '.join(
            f"{m} {row[m]['env_steps_per_s']:,.0f}/s" for m in ('none', 'rae', 'rac')), flush=True)
  return out


def main(argv=None) -> int:
  args, _ = cli.parse(define_flags, argv, prog='python -m bench.actor_bench',
                      description=__doc__.split('\n\n')[0])
  ks = cli.int_list(args.envs, 'envs')
  unknown = sorted(set(args.steppers) - set(STEPPERS))
  if unknown:
    cli.fail(f'--steppers: unknown {", ".join(unknown)}; expected some of {", ".join(STEPPERS)}')
  out = measure(args.env, ks, args.policies, args.steps, args.repeats, args.steppers)
  common.write_json(args.out, out)
  print(json.dumps(out, indent=2))
  return 0


if __name__ == '__main__':
  sys.exit(main())

"""What the RAE/RAC wrappers add to a vector environment's step: Turf with 8 sub-environments,
bare against behind `ReversibilityShieldVector` (phi and the mask of all 8 in at most one call a
step) and `ReversibilityPenaltyVector` (psi of all 8 transitions in at most one call), for
Gymnasium's SyncVectorEnv and, where the sb3 extra is installed, Stable-Baselines3's
DummyVecEnv with `agents.sb3_wrappers`; each wrapper with its cache of answers
(`agents.gym_wrappers.EstimatorScores`) and without (`_nocache`: the network on every step).
The bare and penalty variants take uniformly random actions; the shield variants draw them
uniformly from the shield's mask, as a masked agent explores (with the trained phi it keeps to
the road, where frames repeat; random actions trample the grass, and nearly every frame is
new: the `_nocache` rows are that case's cost).

    python -m bench.gym_wrappers_bench --checkpoint results/turf_gym/same_mix/estimators.ckpt \
        --out results/bench/gym_wrappers_turf.json

Rounds interleave the variants (each round times every variant for --steps vector steps) and
the best round of each is kept, so a busy machine slows them alike; the JSON has every round.
Without --checkpoint the Turf preset's untrained psi/phi are used: the cost does not depend on
the weights. Prints one line per variant: microseconds per vector step and per env step, and
the overhead against the bare vector environment.
"""
import os
import sys
import tempfile
import time

import numpy as np
from absl import flags

from bench import common
from envs import cli

ENV_ID = 'noturningback/Turf-v0'


def define_flags(fv: flags.FlagValues) -> None:
  flags.DEFINE_string('checkpoint', None, 'Turf estimator checkpoint with phi (default: '
                      'untrained preset networks).', flag_values=fv)
  flags.DEFINE_integer('num_envs', 8, 'Sub-environments.', flag_values=fv)
  flags.DEFINE_integer('steps', 2000, 'Vector steps per variant per round.', flag_values=fv)
  flags.DEFINE_integer('rounds', 5, 'Rounds (the best of each variant is kept).', flag_values=fv)
  flags.DEFINE_string('out', 'results/bench/gym_wrappers_turf.json', 'JSON to write.',
                      flag_values=fv)


def _variants(checkpoint: str, n: int) -> dict:
  """name -> (vector env, whether its actions are drawn from its shield's mask)."""
  import gymnasium

  import envs.gym_adapter  # noqa: F401  (registers the ids)
  from agents import gym_wrappers
  ckpt = gym_wrappers.EstimatorScores(checkpoint, need_phi=True).ckpt

  def scores(cache_size):
    # One per wrapper, so that each variant's count of network calls is its own.
    return gym_wrappers.EstimatorScores(ckpt, cache_size=cache_size)

  def gym_vec():
    return gymnasium.vector.SyncVectorEnv([lambda: gymnasium.make(ENV_ID) for _ in range(n)])
  out = {'gymnasium_bare': (gym_vec(), False)}
  for tag, size in (('', 100_000), ('_nocache', 0)):
    out[f'gymnasium_shield{tag}'] = (
        gym_wrappers.ReversibilityShieldVector(gym_vec(), scores(size), beta=0.2), True)
    out[f'gymnasium_penalty{tag}'] = (
        gym_wrappers.ReversibilityPenaltyVector(gym_vec(), scores(size), beta=0.8, lam=0.1),
        False)
  try:
    from stable_baselines3.common.env_util import make_vec_env
  except ImportError:
    return out   # the sb3 extra is not installed

  from agents import sb3_wrappers

  def sb3_vec():
    return make_vec_env(ENV_ID, n_envs=n, seed=0)
  out['sb3_bare'] = (sb3_vec(), False)
  for tag, size in (('', 100_000), ('_nocache', 0)):
    out[f'sb3_shield{tag}'] = (sb3_wrappers.shield_vec_env(sb3_vec(), scores(size), beta=0.2),
                               True)
    out[f'sb3_penalty{tag}'] = (
        sb3_wrappers.penalty_vec_env(sb3_vec(), scores(size), beta=0.8, lam=0.1), False)
  return out


def _time_steps(venv, masked: bool, steps: int, rng: np.random.Generator) -> float:
  """Seconds per vector step over `steps` steps of uniformly random actions, or (`masked`) of
  actions drawn uniformly from the shield's mask, as a masked agent explores (both APIs reset
  finished copies themselves)."""
  n = venv.num_envs
  noise = rng.random((steps, n, 4))
  t0 = time.perf_counter()
  for u in noise:
    if masked:
      actions = np.argmax(u * venv.action_masks(), axis=1)
    else:
      actions = np.argmax(u, axis=1)
    venv.step(actions)
  return (time.perf_counter() - t0) / steps


def measure(checkpoint: str, n: int, steps: int, rounds: int) -> dict:
  variants = _variants(checkpoint, n)
  rng = np.random.default_rng(0)
  for name, (venv, masked) in variants.items():
    if name.startswith('sb3'):
      venv.reset()
    else:
      venv.reset(seed=0)
    _time_steps(venv, masked, 200, rng)   # compile, warm up
  seconds = {name: [] for name in variants}
  for _ in range(rounds):
    for name, (venv, masked) in variants.items():
      seconds[name].append(_time_steps(venv, masked, steps, rng))
  out = {'env': ENV_ID, 'num_envs': n, 'steps_per_round': steps, 'rounds': rounds,
         'variants': {}}
  for name, values in seconds.items():
    family = name.split('_')[0]
    best, bare = min(values), min(seconds[f'{family}_bare'])
    venv, masked = variants[name]
    scores = getattr(venv, 'scores', None)
    out['variants'][name] = {
        'actions': 'uniform over the shield\'s mask' if masked else 'uniform',
        'us_per_vector_step': 1e6 * best, 'us_per_env_step': 1e6 * best / n,
        'added_us_per_env_step': 1e6 * (best - bare) / n,
        'overhead_vs_bare': best / bare - 1.0,
        'rounds_us_per_vector_step': [1e6 * v for v in values]}
    if scores is not None:
      out['variants'][name]['network_calls'] = scores.network_calls
      out['variants'][name]['vector_steps'] = 200 + rounds * steps
  return out


def main(argv=None) -> int:
  args, _ = cli.parse(define_flags, argv, prog='python -m bench.gym_wrappers_bench',
                      description=__doc__.split('\n')[0])
  if min(args.num_envs, args.steps, args.rounds) < 1:
    cli.fail('--num_envs, --steps and --rounds must be >= 1')
  from envs import quiet
  quiet.quiet_startup()
  with tempfile.TemporaryDirectory() as tmp:
    checkpoint = args.checkpoint
    if checkpoint is None:
      from acme import specs

      import envs
      env = envs.make('turf')
      checkpoint = common.untrained_estimators(os.path.join(tmp, 'turf.ckpt'), 'turf',
                                               specs.make_environment_spec(env))
    elif not os.path.isfile(checkpoint):
      cli.fail(f'--checkpoint {checkpoint} is not a file')
    results = measure(checkpoint, args.num_envs, args.steps, args.rounds)
  results['checkpoint'] = args.checkpoint or 'untrained turf preset'
  common.write_json(args.out, results)
  for name, v in results['variants'].items():
    print(f'{name:26s} {v["us_per_vector_step"]:8.1f} us/vector step  '
          f'{v["us_per_env_step"]:7.1f} us/env step  overhead {100 * v["overhead_vs_bare"]:+6.1f}%'
          f'  ({v["actions"]} actions)')
  print(f'wrote {args.out}')
  return 0


if __name__ == '__main__':
  sys.exit(main())

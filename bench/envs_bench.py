"""Environment throughput: env steps/s under uniformly random actions (reset on episode end).

    python -m bench.envs_bench --out results/envs_bench.json [--seconds 2.5]

Writes JSON {env: {steps_per_s, steps, seconds, episodes, ...}}; Sokoban is included when
`envs/sokoban.py` is importable (with its reset time), otherwise recorded with a note.

For every environment with a vectorised batch (`envs.has_batch`: Sokoban) it also compares, in
the same invocation, K (`--batch_envs`, 16) environments stepped as an actor steps them: K
single environments one by one (`envs.batch.EnvironmentList` of SinglePrecisionWrapper'd envs,
the old way) against the vectorised batch, in interleaved rounds (best of each kept, so the
ratio holds on a busy machine), as {name}_batch: {one_by_one, vectorised, ratio} env steps/s.
"""
import sys
import time
from typing import Dict, Sequence

import numpy as np
from absl import flags
from acme import wrappers

import envs
from bench import common
from envs import batch as batch_lib
from envs import cli


def measure_steps(env, seconds: float, seed: int = 0) -> Dict[str, float]:
  rng = np.random.default_rng(seed)
  n = int(env.action_spec().num_values)
  actions = rng.integers(n, size=1 << 16)
  ts = env.reset()
  steps = episodes = 0
  t0 = time.perf_counter()
  deadline = t0 + seconds
  while True:
    for _ in range(256):
      if ts.last():
        ts = env.reset()
        episodes += 1
      ts = env.step(actions[steps & 0xFFFF])
      steps += 1
    if time.perf_counter() >= deadline:
      break
  elapsed = time.perf_counter() - t0
  return {'steps_per_s': steps / elapsed, 'steps': steps, 'seconds': elapsed,
          'episodes': episodes}


def measure_batch_steps(batch, seconds: float, seed: int = 0) -> Dict[str, float]:
  """Env steps/s of a BatchedEnvironment under uniformly random actions: K per call, as the actor
  loop counts them (the call after an environment's LAST step resets it, so its row there is a
  reset, not a step)."""
  rng = np.random.default_rng(seed)
  k = batch.num_envs
  n = int(batch.action_spec().num_values)
  actions = rng.integers(n, size=(1 << 10, k)).astype(np.int32)
  batch.reset()
  calls = 0
  t0 = time.perf_counter()
  deadline = t0 + seconds
  while True:
    for _ in range(32):
      batch.step(actions[calls & 0x3FF])
      calls += 1
    if time.perf_counter() >= deadline:
      break
  elapsed = time.perf_counter() - t0
  return {'steps_per_s': calls * k / elapsed, 'steps': calls * k, 'seconds': elapsed}


def compare_batch(name: str, k: int, seconds: float, rounds: int = 3) -> Dict[str, object]:
  """K environments of `name` stepped one by one vs its vectorised batch, interleaved rounds."""
  seeds = list(range(1, k + 1))
  one_by_one = batch_lib.EnvironmentList(
      [wrappers.SinglePrecisionWrapper(envs.make(name, seed=s)) for s in seeds])
  vectorised = envs.make_batch(name, seeds)
  best = {'one_by_one': 0.0, 'vectorised': 0.0}
  for _ in range(rounds):
    for label, batch in (('one_by_one', one_by_one), ('vectorised', vectorised)):
      r = measure_batch_steps(batch, seconds / rounds)
      best[label] = max(best[label], r['steps_per_s'])
  return {'envs': k, **best, 'ratio': best['vectorised'] / best['one_by_one']}


def measure_resets(env, seconds: float) -> Dict[str, float]:
  resets = 0
  t0 = time.perf_counter()
  while True:
    env.reset()
    resets += 1
    if time.perf_counter() - t0 >= seconds:
      break
  elapsed = time.perf_counter() - t0
  return {'reset_ms': 1000.0 * elapsed / resets, 'resets': resets}


def run(seconds: float, batch_envs: int = 16) -> Dict[str, Dict[str, object]]:
  results: Dict[str, Dict[str, object]] = {}
  for name in ('cartpole', 'turf', 'cliff', 'sokoban'):
    try:
      env = envs.make(name, seed=0)
    except ImportError as e:  # e.g. envs/sokoban.py not written yet
      results[name] = {'skipped': f'not importable: {e}'}
      continue
    except Exception as e:  # pylint: disable=broad-except
      results[name] = {'skipped': f'{type(e).__name__}: {e}'}
      continue
    r: Dict[str, object] = dict(measure_steps(env, seconds))
    if name == 'sokoban':
      r.update(measure_resets(env, min(seconds, 2.0)))
    results[name] = r
    if envs.has_batch(name) and batch_envs > 0:
      results[f'{name}_batch'] = compare_batch(name, batch_envs, 2 * seconds)
  return results


def define_flags(fv: flags.FlagValues) -> None:
  flags.DEFINE_string('out', 'results/envs_bench.json', 'JSON output', flag_values=fv)
  flags.DEFINE_float('seconds', 2.5, 'time per environment', flag_values=fv)
  flags.DEFINE_integer('batch_envs', 16, 'K for the one-by-one vs vectorised comparison (0: skip '
                       'it)', flag_values=fv)


def main(argv: Sequence[str] = None) -> int:
  args, _ = cli.parse(define_flags, argv, prog='python -m bench.envs_bench',
                      description=__doc__.split('\n')[0])
  results = run(args.seconds, args.batch_envs)
  for name, r in results.items():
    if 'ratio' in r:
      print(f"{name:9s} K={r['envs']}: one by one {r['one_by_one']:,.0f} steps/s, vectorised "
            f"{r['vectorised']:,.0f} steps/s ({r['ratio']:.1f}x)")
    elif 'steps_per_s' in r:
      extra = f", reset {r['reset_ms']:.2f} ms" if 'reset_ms' in r else ''
      print(f"{name:9s} {r['steps_per_s']:12,.0f} steps/s{extra}")
    else:
      print(f"{name:9s} skipped: {r['skipped']}")
  common.write_json(args.out, results)
  print(f'wrote {args.out}')
  return 0


if __name__ == '__main__':
  sys.exit(main())

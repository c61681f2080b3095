"""Environment throughput: env steps/s under uniformly random actions (reset on episode end).

    python -m bench.envs_bench --out results/envs_bench.json [--seconds 2.5]
    python -m bench.envs_bench --cliff_table [--episodes 5000]   # paper App. D, Table 1 column

Writes JSON {env: {steps_per_s, steps, seconds, episodes, ...}}; Sokoban is included when
`envs/sokoban.py` is importable (with its reset time), otherwise recorded with a note.
"""
import argparse
import json
import os
import sys
import time
from typing import Dict, Sequence

import numpy as np

import envs
from bench import common

# Paper App. D, Table 1 (threshold 0 column): random-policy mean score per wind probability p.
PAPER_CLIFF_RANDOM = {0.0: 57.5, 0.1: 29.8, 0.2: 18.6, 0.3: 13.4, 0.4: 10.5}


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


def cliff_random_scores(wind: float, episodes: int = 5000, seed: int = 0) -> np.ndarray:
  """Scores (steps survived) of a uniformly random policy in the windy cliff."""
  env = envs.make('cliff', seed=seed, wind=wind)
  rng = np.random.default_rng(seed + 1)
  scores = np.zeros(episodes)
  for i in range(episodes):
    ts = env.reset()
    total = 0.0
    while not ts.last():
      ts = env.step(int(rng.integers(4)))
      total += ts.reward
    scores[i] = total
  return scores


def cliff_table(episodes: int = 5000, seed: int = 0) -> Dict[str, Dict[str, float]]:
  out = {}
  for p, paper in PAPER_CLIFF_RANDOM.items():
    s = cliff_random_scores(p, episodes, seed)
    out[str(p)] = {'paper': paper, 'mean': float(s.mean()),
                   'stderr': float(s.std() / np.sqrt(len(s))),
                   'rel_err': float(s.mean() / paper - 1.0)}
  return out


def run(seconds: float) -> Dict[str, Dict[str, object]]:
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
  return results


def main(argv: Sequence[str] = None) -> int:
  p = argparse.ArgumentParser(prog='python -m bench.envs_bench', description=__doc__.split('\n')[0])
  p.add_argument('--out', default='results/envs_bench.json')
  p.add_argument('--seconds', type=float, default=2.5, help='time per environment')
  p.add_argument('--cliff_table', action='store_true',
                 help='also compute the random-policy windy-cliff table (App. D, Table 1)')
  p.add_argument('--episodes', type=int, default=5000, help='episodes per p for --cliff_table')
  args = p.parse_args(argv)
  results = run(args.seconds)
  for name, r in results.items():
    if 'steps_per_s' in r:
      extra = f", reset {r['reset_ms']:.2f} ms" if 'reset_ms' in r else ''
      print(f"{name:9s} {r['steps_per_s']:12,.0f} steps/s{extra}")
    else:
      print(f"{name:9s} skipped: {r['skipped']}")
  if args.cliff_table:
    table = cliff_table(args.episodes)
    results['cliff_random_table'] = table
    for key, row in table.items():
      print(f"cliff p={key}: paper {row['paper']:.1f}  ours {row['mean']:.1f} "
            f"(+-{row['stderr']:.1f}, {100 * row['rel_err']:+.1f}%)")
  common.write_json(args.out, results)
  print(f'wrote {args.out}')
  return 0


if __name__ == '__main__':
  sys.exit(main())

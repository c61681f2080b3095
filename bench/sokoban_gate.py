"""The single-level learning gate: IMPALA (mode none, the Sokoban presets) trained on one level at
a time of the shipped 1k set, each for --max_steps env steps; a level passes when its agent
solved at least --target of its last --last_n training episodes.

    python -m bench.sokoban_gate                       # levels 37, 7, 1, up to 1M steps each
    python -m bench.sokoban_gate --levels 0 --max_steps 2000000   # the stretch level
    python -m bench.sokoban_gate --levels 1 --mode rae --out results/sokoban/gate_rae

With --mode rae the agent is IMPALA + RAE with a frozen psi of the level itself: per level,
--psi_episodes uniformly random episodes (launch.collect) and --psi_pairs training pairs
(estimators.train, the Sokoban preset network), kept under OUT/level_<i>/psi/.

Each level is a full distributed run (Launchpad, Reverb, learner, actors) under
OUT/level_<i>/. Rerun the same command after a stop: finished levels are read back, a stopped
one continues with --resume. Writes OUT/gate.json and OUT/gate.md (per level: steps reached,
solved fraction and boxes on target over the last episodes, the first env step at which the
trailing --last_n episodes reached the target, wall time).
"""
import json
import os
import subprocess
import sys
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np
from absl import app, flags

from launch.analysis import aggregate
from launch.runtime import run_state, summary

FLAGS = flags.FLAGS
flags.DEFINE_list('levels', ['37', '7', '1'], 'Level indices of envs/data/sokoban_1000.txt.')
flags.DEFINE_integer('max_steps', 1_000_000, 'Env steps per level.')
flags.DEFINE_float('target', 0.9, 'Solved fraction of the last --last_n episodes to pass.')
flags.DEFINE_integer('last_n', 200, 'Training episodes the solved fraction is taken over.')
flags.DEFINE_string('out', 'results/sokoban/gate', 'Output directory.')
flags.DEFINE_integer('seed', 0, 'Seed of every run.')
flags.DEFINE_integer('num_actors', 2, 'Actor processes per run.')
flags.DEFINE_integer('envs_per_actor', 16, 'Environments each actor steps together.')
flags.DEFINE_enum('mode', 'none', ['none', 'rae'], "'none': IMPALA; 'rae': IMPALA + RAE with a "
                  "psi trained on the level's random episodes.")
flags.DEFINE_integer('psi_episodes', 3000, '--mode rae: random episodes per level for psi.')
flags.DEFINE_integer('psi_pairs', 1_000_000, '--mode rae: psi training pairs per level.')
flags.DEFINE_bool('stop_when_passed', True, 'Stop a level\'s run once its last --last_n episodes '
                  'reach --target (checked every 20 s; the run ends gracefully and the table shows '
                  'the steps it reached); --nostop_when_passed runs every level to --max_steps.')
flags.DEFINE_multi_string('train_arg', [], 'Extra launch.train flag for every run (repeatable), '
                          "e.g. --train_arg=--samples_per_insert=0 to measure the queue.")


def _none_if_nan(x: float) -> Optional[float]:
  return None if np.isnan(x) else x


def level_result(run_dir: str, target: float, n: int) -> Dict:
  episodes = summary.actor_episodes(run_dir)
  solved = np.array([e.get('solved', 0.0) for e in episodes])
  boxes = np.array([e.get('boxes_on_target', 0.0) for e in episodes])
  steps = np.array([e.get('actor_steps', 0.0) for e in episodes])
  last = slice(-n, None)
  return {
      'episodes': len(episodes),
      'steps_reached': float(steps[-1]) if len(steps) else 0.0,
      'solved_last': float(solved[last].mean()) if len(solved) else 0.0,
      'boxes_on_target_last': float(boxes[last].mean()) if len(boxes) else 0.0,
      'steps_to_target': _none_if_nan(aggregate.first_reaching(steps, solved, target, n)),
      'wall_time_s': run_state.total_wall_time(run_dir),
      'passed': bool(len(solved) >= n and solved[last].mean() >= target - 1e-9),
  }


def level_psi(level: int, run_dir: str, episodes: int, pairs: int, seed: int) -> str:
  """The level's psi checkpoint (collected and trained once; a stopped collection resumes)."""
  psi_dir = os.path.join(run_dir, 'psi')
  ckpt = os.path.join(psi_dir, 'psi.ckpt')
  if os.path.exists(ckpt):
    return ckpt
  data = os.path.join(psi_dir, 'random')
  for argv in (['launch.collect', '--env', 'sokoban', '--env_option', f'level_index={level}',
                '--episodes', str(episodes), '--out', data, '--seed', str(seed), '--resume',
                '--noprogress'],
               ['estimators.train', '--dataset', data, '--out', ckpt, '--network_preset',
                'sokoban', '--num_pairs', str(pairs), '--seed', str(seed), '--noprogress']):
    print(' '.join(argv), flush=True)
    subprocess.run([sys.executable, '-m', *argv], check=True)
  return ckpt


PASSED = 'passed the gate'


def train(level: int, run_dir: str, max_steps: int, seed: int, actors: int, envs_per_actor: int,
          extra: Sequence[str], mode: str = 'none', psi: Optional[str] = None,
          passed: Optional[Callable[[], bool]] = None) -> None:
  """Trains (or resumes) the level's run to max_steps; with `passed`, asks the run to stop as
  soon as it returns True."""
  final = run_state.read_json(os.path.join(run_dir, 'final_state.json'), {}) or {}
  if final.get('status') == run_state.COMPLETED and \
      final.get('counts', {}).get('actor_steps', 0) >= max_steps:
    return
  if mode == 'rae':
    extra = ('--estimator_checkpoint', psi, *extra)
  argv = [sys.executable, '-m', 'launch.train', '--env', 'sokoban', '--mode', mode,
          '--env_option', f'level_index={level}', '--max_steps', str(max_steps),
          '--seed', str(seed), '--num_actors', str(actors), '--envs_per_actor', str(envs_per_actor),
          '--run_dir', run_dir, *extra]
  if run_state.holds_run(run_dir):
    argv.append('--resume')
  print(' '.join(argv[1:]), flush=True)
  proc = subprocess.Popen(argv)
  while proc.poll() is None:
    try:
      proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
      if passed is not None and passed():
        run_state.request_stop(run_dir, PASSED)
        passed = None   # asked once; the coordinator stops the run
  if proc.returncode:
    raise subprocess.CalledProcessError(proc.returncode, argv)


def markdown(results: Dict[str, Dict], max_steps: int, target: float, n: int,
             agent: str = 'IMPALA') -> str:
  lines = [f'Single-level gate: {agent}, up to {max_steps:,} env steps per level; a level passes '
           f'at >= {target:.0%} solved over its last {n} training episodes, and its run is '
           'stopped once it does (unless --nostop_when_passed).', '',
           '| level | steps reached | solved, last episodes | boxes on target | steps to target '
           '| wall time | passed |', '|---|---|---|---|---|---|---|']
  for level, r in results.items():
    reach = f"{r['steps_to_target']:,.0f}" if r['steps_to_target'] is not None else 'not reached'
    lines.append(f"| {level} | {r['steps_reached']:,.0f} | {r['solved_last']:.3f} | "
                 f"{r['boxes_on_target_last']:.2f} | {reach} | {r['wall_time_s'] / 60:.1f} min | "
                 f"{'yes' if r['passed'] else 'no'} |")
  return '\n'.join(lines) + '\n'


def main(argv: List[str]):
  del argv
  try:
    levels = [int(l) for l in FLAGS.levels]
  except ValueError:
    raise SystemExit(f'--levels must be level indices, got {FLAGS.levels}')
  if not 0 < FLAGS.target <= 1:
    raise SystemExit(f'--target must lie in (0, 1], got {FLAGS.target}')
  os.makedirs(FLAGS.out, exist_ok=True)
  results = {}
  for level in levels:
    run_dir = os.path.abspath(os.path.join(FLAGS.out, f'level_{level}'))
    psi = None
    if FLAGS.mode == 'rae':
      psi = level_psi(level, run_dir, FLAGS.psi_episodes, FLAGS.psi_pairs, FLAGS.seed)
    passed = lambda: level_result(run_dir, FLAGS.target, FLAGS.last_n)['passed']
    if not (FLAGS.stop_when_passed and run_state.holds_run(run_dir) and passed()):
      train(level, run_dir, FLAGS.max_steps, FLAGS.seed, FLAGS.num_actors, FLAGS.envs_per_actor,
            FLAGS.train_arg, FLAGS.mode, psi, passed if FLAGS.stop_when_passed else None)
    results[str(level)] = level_result(run_dir, FLAGS.target, FLAGS.last_n)
    run_state.write_json(os.path.join(FLAGS.out, 'gate.json'),
                         {'max_steps': FLAGS.max_steps, 'target': FLAGS.target,
                          'mode': FLAGS.mode,
                          'last_n': FLAGS.last_n, 'train_args': FLAGS.train_arg,
                          'levels': results})
    with open(os.path.join(FLAGS.out, 'gate.md'), 'w') as f:
      agent = 'IMPALA + RAE (psi of the level)' if FLAGS.mode == 'rae' else 'IMPALA'
      f.write(markdown(results, FLAGS.max_steps, FLAGS.target, FLAGS.last_n, agent))
    print(json.dumps({level: results[str(level)]}), flush=True)


if __name__ == '__main__':
  app.run(main)

"""The single-level learning gate: IMPALA (mode none, the Sokoban preset) trained on one level at
a time of the shipped 1k set, each for --max_steps env steps; a level passes when its agent
solved at least --target of its last --last_n training episodes.

Question: Can the agent learn single Sokoban levels at all (levels 37, 7, 1, each within 1M env
steps)?
Reported in RESULTS.md, "Sokoban: IMPALA vs IMPALA + RAE": the single-level gate
(results/sokoban/gate_field_reuse/gate.md) and RAE on level 1. The gates under
results/sokoban/gate, gate_canvas15, gate_room_items and gate_rae ran the batch-16 recipe
(experiments.sokoban.BATCH16_AGENT, with --self_imitation_updates 1, 16 rooms per actor, every
episode to 120 steps), which --train_arg flags give.

    python -m experiments.studies.sokoban_gate                  # levels 37, 7, 1, up to 1M steps each
    python -m experiments.studies.sokoban_gate --levels 0 --max_steps 2000000   # the stretch level
    python -m experiments.studies.sokoban_gate --levels 1 --mode rae --out results/sokoban/gate_rae

With --mode rae the agent is IMPALA + RAE with a frozen psi of the level itself: per level,
--psi_episodes uniformly random episodes (launch.collect) and --psi_pairs training pairs
(estimators.train, the Sokoban preset network), kept under OUT/level_<i>/psi/.

Each level is a full distributed run (Launchpad, Reverb, learner, actors) under OUT/level_<i>/,
run as an experiment's steps are (`experiments.runner.run_step`, output in
OUT/logs/<step>.log). Rerun the same command after a stop: finished levels are read back, a
stopped one continues with --resume. Writes OUT/gate.json and OUT/gate.md (per level: steps
reached, solved fraction and boxes on target over the last episodes, the first env step at which
the trailing --last_n episodes reached the target, wall time).
"""
import dataclasses
import json
import os
import subprocess
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np
from absl import flags

from envs import cli
from experiments import runner
from experiments.analysis import aggregate
from experiments.spec import Step, TrainStep, train_step
from launch.runtime import run_state, summary

PASSED = 'passed the gate'


def level_result(run_dir: str, target: float, n: int) -> Dict:
  episodes = summary.actor_episodes(run_dir)
  solved = np.array([e.get('solved', 0.0) for e in episodes])
  boxes = np.array([e.get('boxes_on_target', 0.0) for e in episodes])
  steps = np.array([e.get('actor_steps', 0.0) for e in episodes])
  last = slice(-n, None)
  reached = aggregate.first_reaching(steps, solved, target, n)
  return {
      'episodes': len(episodes),
      'steps_reached': float(steps[-1]) if len(steps) else 0.0,
      'solved_last': float(solved[last].mean()) if len(solved) else 0.0,
      'boxes_on_target_last': float(boxes[last].mean()) if len(boxes) else 0.0,
      'steps_to_target': None if np.isnan(reached) else reached,
      'wall_time_s': run_state.RunRecords(run_dir).total_wall_time(),
      'passed': bool(len(solved) >= n and solved[last].mean() >= target - 1e-9),
  }


def psi_steps(level: int, episodes: int, pairs: int, seed: int) -> List[Step]:
  """The level's psi: its random episodes (a stopped collection resumes), then psi on them."""
  psi = f'level_{level}/psi'
  return [
      Step(f'psi_collect-level_{level}', 'launch.collect',
           ('--env', 'sokoban', '--env_option', f'level_index={level}', '--episodes',
            str(episodes), '--out', f'{{out}}/{psi}/random', '--seed', str(seed), '--resume',
            '--noprogress'),
           done=f'{psi}/random/noturningback.json', est_seconds=episodes * 0.02),
      Step(f'psi_train-level_{level}', 'estimators.train',
           ('--dataset', f'{{out}}/{psi}/random', '--out', f'{{out}}/{psi}/psi.ckpt',
            '--network_preset', 'sokoban', '--num_pairs', str(pairs), '--seed', str(seed),
            '--noprogress'),
           done=f'{psi}/psi.ckpt', est_seconds=pairs / 2_000),
  ]


def level_step(level: int, max_steps: int, seed: int, actors: int, envs_per_actor: int,
               extra: Sequence[str], mode: str = 'none', name: Optional[str] = None,
               run_path: Optional[str] = None) -> TrainStep:
  """The level's training run (OUT/level_<i> unless `run_path`); with mode rae, on the level's
  own psi (psi_steps)."""
  if mode == 'rae':
    extra = ('--estimator_checkpoint', f'{{out}}/level_{level}/psi/psi.ckpt', *extra)
  step = train_step(name or f'level_{level}', f'level {level}', seed, max_steps,
                    max_steps / 2_000, '--env', 'sokoban', '--mode', mode, '--env_option',
                    f'level_index={level}', '--num_actors', str(actors), '--envs_per_actor',
                    str(envs_per_actor), *extra)
  return dataclasses.replace(step, run_path=run_path or f'level_{level}')


def _completed(run_dir: str, max_steps: int) -> bool:
  """A run that ended at --max_steps (also one trained before the runner wrote `done` files)."""
  final = run_state.read_json(os.path.join(run_dir, run_state.FINAL_STATE), {}) or {}
  return (final.get('status') == run_state.COMPLETED
          and final.get('counts', {}).get('actor_steps', 0) >= max_steps)


def run(step, out: str, passed: Optional[Callable[[], bool]] = None) -> None:
  """Runs a step of the gate (or trains/resumes a level's run to its max_steps) unless it is
  done; with `passed`, asks the run to stop as soon as it returns True."""
  if runner.step_done(step, out) or (step.is_training and _completed(
      os.path.join(out, step.run_dir), step.max_steps)):
    return
  print(f'{step.name}: python {" ".join(runner.step_argv(step, out))} '
        f'(log: {os.path.join(out, "logs", step.name + ".log")})', flush=True)
  stop_when = None if passed is None else (lambda: PASSED if passed() else None)
  code = runner.run_step(step, out, stop_when=stop_when)
  if code:
    raise subprocess.CalledProcessError(code, runner.step_argv(step, out))


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


def add_run_flags(fv: flags.FlagValues, envs_per_actor: int = 16) -> None:
  """The flags of every level's run (shared with experiments.studies.sokoban_reuse)."""
  flags.DEFINE_integer('max_steps', 1_000_000, 'Env steps per level.', flag_values=fv)
  flags.DEFINE_float('target', 0.9, 'Solved fraction of the last --last_n episodes to pass.',
                     flag_values=fv)
  flags.DEFINE_integer('last_n', 200, 'Training episodes the solved fraction is taken over.',
                       flag_values=fv)
  flags.DEFINE_integer('seed', 0, 'Seed of every run.', flag_values=fv)
  flags.DEFINE_integer('num_actors', 2, 'Actor processes per run.', flag_values=fv)
  flags.DEFINE_integer('envs_per_actor', envs_per_actor, 'Environments each actor steps together.',
                       flag_values=fv)
  flags.DEFINE_multi_string('train_arg', [], 'Extra launch.train flag for every run '
                            '(repeatable), e.g. --train_arg=--samples_per_insert=0 to measure the '
                            'queue.', flag_values=fv)


def define_flags(fv: flags.FlagValues) -> None:
  flags.DEFINE_list('levels', ['37', '7', '1'], 'Level indices of envs/data/sokoban_1000.txt.',
                    flag_values=fv)
  flags.DEFINE_string('out', 'results/sokoban/gate_field_reuse', "Output directory (finished levels "
                     "are read back: a new preset's gate needs a new one).", flag_values=fv)
  flags.DEFINE_enum('mode', 'none', ['none', 'rae'], "'none': IMPALA; 'rae': IMPALA + RAE with a "
                    "psi trained on the level's random episodes.", flag_values=fv)
  flags.DEFINE_integer('psi_episodes', 3000, '--mode rae: random episodes per level for psi.',
                       flag_values=fv)
  flags.DEFINE_integer('psi_pairs', 1_000_000, '--mode rae: psi training pairs per level.',
                       flag_values=fv)
  flags.DEFINE_bool('stop_when_passed', True, "Stop a level's run once its last --last_n "
                    'episodes reach --target (checked every 20 s; the run ends gracefully and the '
                    'table shows the steps it reached); --nostop_when_passed runs every level to '
                    '--max_steps.', flag_values=fv)
  add_run_flags(fv, envs_per_actor=32)   # the 64 rooms of the preset's recipe comparison


def parse_args(argv=None):
  args, _ = cli.parse(define_flags, argv, prog='python -m experiments.studies.sokoban_gate',
                      description=__doc__.split('\n\n')[0])
  try:
    args.levels = [int(level) for level in args.levels]
  except ValueError:
    cli.fail(f'--levels must be level indices, got {args.levels}')
  if not 0 < args.target <= 1:
    cli.fail(f'--target must lie in (0, 1], got {args.target}')
  return args


def main(argv=None):
  args = parse_args(argv)
  out = os.path.abspath(args.out)
  os.makedirs(out, exist_ok=True)
  results = {}
  for level in args.levels:
    step = level_step(level, args.max_steps, args.seed, args.num_actors, args.envs_per_actor,
                      args.train_arg, args.mode)
    run_dir = os.path.join(out, step.run_dir)
    if args.mode == 'rae':
      collect, train_psi = psi_steps(level, args.psi_episodes, args.psi_pairs, args.seed)
      if not runner.step_done(train_psi, out):   # the data stays local; the checkpoint suffices
        run(collect, out)
        run(train_psi, out)
    passed = lambda: level_result(run_dir, args.target, args.last_n)['passed']  # noqa: E731
    if not (args.stop_when_passed and run_state.holds_run(run_dir) and passed()):
      run(step, out, passed if args.stop_when_passed else None)
    results[str(level)] = level_result(run_dir, args.target, args.last_n)
    run_state.write_json(os.path.join(out, 'gate.json'),
                         {'max_steps': args.max_steps, 'target': args.target, 'mode': args.mode,
                          'last_n': args.last_n, 'train_args': args.train_arg,
                          'levels': results})
    with open(os.path.join(out, 'gate.md'), 'w') as f:
      agent = 'IMPALA + RAE (psi of the level)' if args.mode == 'rae' else 'IMPALA'
      f.write(markdown(results, args.max_steps, args.target, args.last_n, agent))
    print(json.dumps({level: results[str(level)]}), flush=True)


if __name__ == '__main__':
  main()

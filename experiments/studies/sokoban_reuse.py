"""Sequence reuse against the plain queue: IMPALA on one Sokoban level with the 'impala' table as a
queue (each sequence trained on once) and as a replay sampled R times per sequence, everything
else the batch-16 recipe (`experiments.sokoban.BATCH16_AGENT`) with one self-imitation update
per V-trace update, every episode to 120 steps (RECIPE). Learning per env step and per wall second, one run per ratio, in one
invocation (run it with nothing else on the machine: the wall times are part of the result).

Question: Does sampling each sequence R times from a replay learn a Sokoban level faster, per env
step and per wall second, than the plain queue?
Reported in RESULTS.md, "Sokoban: IMPALA vs IMPALA + RAE": queue against replay
(results/sokoban/reuse/reuse.md).

    python -m experiments.studies.sokoban_reuse                # level 7, ratios 0 (queue), 2, 4, 8
    python -m experiments.studies.sokoban_reuse --ratios 0,4 --level 1

Every run takes experiments.studies.sokoban_gate's run flags (--max_steps, --seed, --num_actors,
--envs_per_actor, --last_n, --target, --train_arg). Writes OUT/reuse.json and OUT/reuse.md; the
runs are OUT/spi_<R>/level_<L>/ (rerun the same command after a stop: finished runs are read
back, a stopped one continues).
"""
import os

from absl import flags

from envs import cli
from experiments.analysis import aggregate
from experiments.sokoban import BATCH16_AGENT, BATCH16_ENV_OPTIONS, agent_flags
from experiments.studies import sokoban_gate
from launch.runtime import run_state, summary

# The runs' agent but for the ratio, whatever the Sokoban preset says.
RECIPE = (*agent_flags(dict(BATCH16_AGENT, self_imitation_updates=1)), *BATCH16_ENV_OPTIONS)


def run_result(run_dir: str, milestones, target: float, last_n: int) -> dict:
  result = sokoban_gate.level_result(run_dir, target, last_n)
  wall = result['wall_time_s']
  learner = summary.read_log(run_dir, 'learner')
  result['learner_updates'] = max((r.get('learner_steps', 0) for r in learner), default=0)
  result['env_steps_per_s'] = result['steps_reached'] / wall if wall else None
  result['policy_lag_mean'] = (sum(r.get('policy_lag_mean', 0) for r in learner) / len(learner)
                               if learner else None)
  # Wall seconds at which each milestone was first reached: the run's wall time at that step.
  s = aggregate.series(run_dir, 'solved', 'actor_steps')
  walls = aggregate.series(run_dir, 'solved', 'wall_time')
  for m in milestones:
    step = aggregate.first_reaching(s.xs, s.values, m, last_n)
    sec = aggregate.first_reaching(walls.xs, walls.values, m, last_n)
    result[f'steps_to_{m:g}'] = None if step != step else step
    result[f'wall_s_to_{m:g}'] = None if sec != sec else sec
  return result


def markdown(results, milestones, level: int, max_steps: int, last_n: int,
             same_wall: float) -> str:
  head = ['samples per sequence', 'env steps', 'learner updates', 'env steps/s', 'policy lag']
  head += [f'steps to {m:.0%}' for m in milestones] + [f'wall to {m:.0%}' for m in milestones]
  head += [f'solved, last {last_n}', f'boxes on target, last {last_n}',
           f'boxes on target at {same_wall / 60:.1f} min']
  lines = [f'Sequence reuse on level {level}, {max_steps:,} env steps per run (`python -m '
           'experiments.studies.sokoban_reuse`); 0 is the queue. Milestones: the trailing '
           f'{last_n} training episodes.', '', '| ' + ' | '.join(head) + ' |',
           '|' + '---|' * len(head)]
  fmt = lambda v, f: '–' if v is None else format(v, f)  # noqa: E731
  for ratio, r in results.items():
    cells = [ratio, fmt(r['steps_reached'], ',.0f'), fmt(r['learner_updates'], ',.0f'),
             fmt(r['env_steps_per_s'], ',.0f'), fmt(r['policy_lag_mean'], '.1f')]
    cells += [fmt(r[f'steps_to_{m:g}'], ',.0f') for m in milestones]
    cells += ['–' if r[f'wall_s_to_{m:g}'] is None else f"{r[f'wall_s_to_{m:g}'] / 60:.1f} min"
              for m in milestones]
    cells += [f"{r['solved_last']:.3f}", f"{r['boxes_on_target_last']:.2f}",
              fmt(r['boxes_on_target_at_same_wall'], '.2f')]
    lines.append('| ' + ' | '.join(cells) + ' |')
  return '\n'.join(lines) + '\n'


def define_flags(fv: flags.FlagValues) -> None:
  flags.DEFINE_list('ratios', ['0', '2', '4', '8'], 'samples_per_insert values (0: the queue).',
                    flag_values=fv)
  flags.DEFINE_integer('level', 7, 'Level index of the shipped 1k set.', flag_values=fv)
  flags.DEFINE_string('reuse_out', 'results/sokoban/reuse', 'Output directory.', flag_values=fv)
  flags.DEFINE_list('milestones', ['0.5', '0.9'], 'Solved fractions (trailing --last_n '
                    'episodes).', flag_values=fv)
  sokoban_gate.add_run_flags(fv)


def parse_args(argv=None):
  args, _ = cli.parse(define_flags, argv, prog='python -m experiments.studies.sokoban_reuse',
                      description=__doc__.split('\n\n')[0])
  try:
    args.ratios = [float(r) for r in args.ratios]
    args.milestones = [float(m) for m in args.milestones]
  except ValueError:
    cli.fail('--ratios and --milestones must be numbers')
  if any(r < 0 for r in args.ratios):
    cli.fail('--ratios must be >= 0')
  return args


def main(argv=None):
  args = parse_args(argv)
  out = os.path.abspath(args.reuse_out)
  os.makedirs(out, exist_ok=True)
  results, run_dirs = {}, {}
  for ratio in args.ratios:
    step = sokoban_gate.level_step(
        args.level, args.max_steps, args.seed, args.num_actors, args.envs_per_actor,
        [*RECIPE, f'--samples_per_insert={ratio:g}', *args.train_arg],
        name=f'spi_{ratio:g}-level_{args.level}', run_path=f'spi_{ratio:g}/level_{args.level}')
    sokoban_gate.run(step, out)
    run_dirs[f'{ratio:g}'] = os.path.join(out, step.run_dir)
    results[f'{ratio:g}'] = run_result(run_dirs[f'{ratio:g}'], args.milestones, args.target,
                                       args.last_n)
  # Learning per wall second: every run's boxes on target at the wall time the fastest-ending
  # run took (its trailing --last_n episodes up to then).
  same_wall = min(r['wall_time_s'] for r in results.values())
  for ratio, r in results.items():
    walls = aggregate.series(run_dirs[ratio], 'boxes_on_target', 'wall_time')
    before = walls.values[walls.xs <= same_wall][-args.last_n:]
    r['boxes_on_target_at_same_wall'] = float(before.mean()) if len(before) else None
  run_state.write_json(os.path.join(out, 'reuse.json'),
                       {'level': args.level, 'max_steps': args.max_steps, 'last_n': args.last_n,
                        'same_wall_s': same_wall, 'runs': results})
  with open(os.path.join(out, 'reuse.md'), 'w') as f:
    f.write(markdown(results, args.milestones, args.level, args.max_steps, args.last_n,
                     same_wall))


if __name__ == '__main__':
  main()

r"""Runs a named experiment (`experiments.registry`) end to end, resumably, and writes its page.

    python -m experiments sokoban --scale small --seeds 3          # results/sokoban/
    python -m experiments sokoban --scale small --seeds 3 --max_steps 300000   # shorter
    python -m experiments sokoban --list                           # the steps, no run

Each step runs as its own process (`python -m ...`), output in OUT/logs/<step>.log. A step whose
`done` file exists is skipped; a training run that was stopped is continued with --resume. So
after Ctrl-C, a crash or the end of a session, the same command goes on where it stopped.
At the end (and with --report_only) the runs are aggregated over seeds into OUT/table.json,
OUT/table.md and OUT/curves_steps.png / curves_wall.png.
"""
import os
import sys

from absl import flags

from envs import cli
from experiments import registry
from experiments.runner import (
  report,
  run_experiment,
  select_steps,
  step_argv,
  step_done,
  table_markdown,
)
from launch.runtime import run_state


def define_flags(fv: flags.FlagValues) -> None:
  scales = '; '.join(f'{name}: {", ".join(exp.scales)}'
                     for name, exp in sorted(registry.EXPERIMENTS.items()))
  flags.DEFINE_string('scale', 'small', f'Scale of every run, one of the experiment\'s own '
                      f'({scales}).', flag_values=fv)
  flags.DEFINE_integer('seeds', 3, 'Seeds of every arm.', flag_values=fv)
  flags.DEFINE_string('out', None, 'output directory (default: results/NAME)', flag_values=fv)
  flags.DEFINE_integer('max_steps', None, 'override the env steps of every training run (a '
                       'shorter or longer budget)', flag_values=fv)
  flags.DEFINE_string('only', '', 'comma-separated shell patterns of step names to run '
                      '(e.g. "impala-s*"); the others are left as they are (default: every step)',
                      flag_values=fv)
  flags.DEFINE_bool('list', False, 'print the steps and their state, run nothing', flag_values=fv)
  flags.DEFINE_bool('report_only', False, 'only aggregate what has run', flag_values=fv)


def main(argv=None):
  args, names = cli.parse(define_flags, argv, prog='python -m experiments',
                          description=__doc__.splitlines()[0],
                          positional=f'NAME ({", ".join(sorted(registry.EXPERIMENTS))})')
  if len(names) != 1:
    cli.fail(f'expected one experiment NAME ({", ".join(sorted(registry.EXPERIMENTS))}), got '
             f'{" ".join(names) or "none"}')
  args.name = names[0]
  try:
    exp = registry.get(args.name)   # exp.steps() below refuses a scale it lacks
    if args.seeds < 1:
      raise ValueError(f'--seeds must be >= 1, got {args.seeds}')
    if args.max_steps is not None and args.max_steps < 1:
      raise ValueError(f'--max_steps must be >= 1, got {args.max_steps}')
    out = os.path.abspath(args.out or os.path.join('results', exp.name))
    only = [p for p in args.only.split(',') if p]
    selected = select_steps(exp.steps(args.scale, args.seeds), only)
    run_state.check_writable(out)
  except ValueError as e:
    print(f'error: {e}', file=sys.stderr)
    sys.exit(2)
  if args.list:
    width = max(len(step.name) for step in selected)
    for step in selected:
      state = 'done' if step_done(step, out, args.max_steps) else (
          'started' if step.is_training and run_state.holds_run(os.path.join(out, step.run_dir))
          else 'to do')
      print(f'{state:8s} {step.name:{width}s} python {" ".join(step_argv(step, out, args.max_steps))}')
    return
  ok = True
  if not args.report_only:
    try:
      ok = run_experiment(exp, args.scale, args.seeds, out, args.max_steps, only)
    except KeyboardInterrupt:
      print('stopped; rerun the same command to continue', file=sys.stderr)
      ok = False
  table = report(exp, args.scale, args.seeds, out)
  print(table_markdown(exp, table, out))
  sys.exit(0 if ok else 1)


if __name__ == '__main__':
  main()

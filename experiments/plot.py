"""Learning curves of runs as a PNG, one subplot per metric.

    python -m experiments.plot runs/turf_rae_s0 runs/turf_rae_s1 --out fig.png
    python -m experiments.plot runs/turf_rae_s* --aggregate --x wall_time --out fig.png
    python -m experiments.plot --group IMPALA=runs/impala_s0,runs/impala_s1 \\
        --group IMPALA+RAE=runs/rae_s0,runs/rae_s1 --metrics episode_return,ruined_grass --out fig.png

Without --aggregate or --group every run is its own line, labelled by its directory name. With
--aggregate the runs are one mean line with a shaded 95% band (Student t across runs); each
--group LABEL=RUN,RUN,... is one such line and band. Curves are those of `experiments.analysis.aggregate`: an
even grid of env steps (or wall time), each point the mean over a trailing window of --smooth
of the x range. The default metrics are those of DEFAULT_METRICS that any run logs; a run that
does not log a metric (intrinsic_return of a run without RAE) is left out of that subplot.
"""
import sys
from typing import Dict, List

from absl import flags

from envs import cli
from experiments.analysis import aggregate as aggregation
from experiments.analysis.plot import DEFAULT_METRICS, plot_runs


def parse_group(spec: str) -> tuple:
  """'LABEL=RUN,RUN' -> ('LABEL', ['RUN', 'RUN'])."""
  label, sep, dirs = spec.partition('=')
  run_dirs = [d for d in dirs.split(',') if d]
  if not sep or not label or not run_dirs:
    raise ValueError(f'--group {spec!r} is not LABEL=RUN_DIR[,RUN_DIR...]')
  return label, run_dirs


def groups_from_args(args) -> Dict[str, List[str]]:
  if args.group and args.run_dirs:
    raise ValueError('give run directories or --group, not both')
  if args.group:
    groups = {}
    for label, run_dirs in map(parse_group, args.group):
      if label in groups:
        raise ValueError(f'--group label {label!r} given twice')
      groups[label] = run_dirs
    return groups
  if not args.run_dirs:
    raise ValueError('no run directories given')
  if args.aggregate:
    return {f'mean of {len(args.run_dirs)} runs': args.run_dirs}
  return {'runs': args.run_dirs}


def define_flags(fv: flags.FlagValues) -> None:
  flags.DEFINE_string('out', None, 'PNG to write', flag_values=fv)
  flags.DEFINE_string('metrics', None, 'comma-separated metrics (default: those of '
                      f'{",".join(DEFAULT_METRICS)} that the runs log)', flag_values=fv)
  flags.DEFINE_enum('x', 'actor_steps', list(aggregation.X_AXES), 'x axis of the curves',
                    flag_values=fv)
  flags.DEFINE_bool('aggregate', False, 'one mean line with a 95% band over all the runs',
                    flag_values=fv)
  flags.DEFINE_multi_string('group', [], 'LABEL=RUN_DIR,...: one mean line with a 95% band per '
                            'group (repeatable)', flag_values=fv)
  flags.DEFINE_float('smooth', aggregation.DEFAULT_SMOOTH, 'trailing window of each point, as a '
                     'fraction of the x range', flag_values=fv)
  flags.DEFINE_string('title', None, 'title of the figure', flag_values=fv)


def main(argv=None) -> int:
  args, run_dirs = cli.parse(define_flags, argv, prog='python -m experiments.plot',
                             description=__doc__.split('\n')[0], positional='[RUN_DIR ...]',
                             required=('out',))
  args.run_dirs = run_dirs
  try:
    groups = groups_from_args(args)
    metrics = [m for m in args.metrics.split(',') if m] if args.metrics else None
    if metrics == []:
      raise ValueError('--metrics names no metric')
    plot_runs(groups, metrics, args.x, args.out, title=args.title,
              aggregate=args.aggregate or bool(args.group), smooth=args.smooth)
  except ValueError as e:
    print(f'error: {e}', file=sys.stderr)
    return 2
  print(f'wrote {args.out}')
  return 0


if __name__ == '__main__':
  sys.exit(main())

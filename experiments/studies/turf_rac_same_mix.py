r"""IMPALA + RAC on Turf behind phi from the SAME psi trained on the start=stone mix (the leak
study's estimators, results/turf/leak/README.md): at beta 0.2, 3 seeds with the learner's mask,
then 3 without; then the beta sweep with the mask (Fig. 7: 0, 0.1, 0.3, 0.4, 0.5, seed 0).

Question: With estimators that no longer leak at the goal's corner, does RAC keep the grass and
still learn the goal, with and without the learner's mask, and how does beta move that?
Reported in RESULTS.md, "Turf", "RAC that keeps the grass and learns the goal": the runs over
training and the beta sweep with the mask (results/turf/rac_same_mix/, runs/*/csv/).

    python -m experiments.studies.turf_rac_same_mix                 # every run, resumable
    python -m experiments.studies.turf_rac_same_mix --list          # the runs and their state
    python -m experiments.studies.turf_rac_same_mix --only 'impala_rac_mask-b0.2-s*'

Each run is `launch.train --mode rac` on the `same_mix` scale's settings (experiments.turf: 500k
env steps, 2 actors x 8 environments), named as that scale names its RAC runs, under
OUT/runs/<run>/, run as an experiment's steps are (`experiments.runner.run_step`, output appended
to OUT/logs/<run>.log). Rerun the same command after a stop: a finished run (its `done` file, or
a summary of a completed run in the run directory or its committed export RUN/csv) is skipped, a
stopped one continues with --resume (from its export's checkpoint where this machine lacks the
run).
"""
import dataclasses
import fnmatch
import os
import sys
from typing import List, Optional, Tuple

from absl import flags

from envs import cli
from envs.cli import field
from experiments import pages, runner, turf
from experiments.spec import TrainStep, train_step
from launch.runtime import run_export, run_state

SCALE = turf.TURF_SCALES['same_mix']
SEEDS = (0, 1, 2)                         # of the runs at beta 0.2, each arm
SWEEP = (0.0, 0.1, 0.3, 0.4, 0.5)         # the other betas, seed 0, with the mask
CHECKPOINT = '{out}/../leak/same_mix_phi_s1.ckpt'   # where the leak study trained it


@dataclasses.dataclass(frozen=True)
class RacSameMix:
  """One flag per field (envs.cli field flags)."""
  out: str = field('results/turf/rac_same_mix', 'Output directory (runs under OUT/runs/, their '
                   'logs under OUT/logs/).')
  checkpoint: Optional[str] = field(None, 'psi and phi of the shield (default: OUT/../leak/'
                                    'same_mix_phi_s1.ckpt, the leak study\'s).')
  max_steps: int = field(SCALE['max_steps'], 'Env steps per run.')
  only: Tuple[str, ...] = field((), 'Shell patterns of run names to run, comma-separated '
                                '(default: every run).')
  list: bool = field(False, 'Print the runs, their state and command lines; run nothing.')


def define_flags(fv: flags.FlagValues) -> None:
  cli.define_field_flags(fv, (cli.Section('', RacSameMix),))


def rac_steps(max_steps: int = SCALE['max_steps'], checkpoint: str = CHECKPOINT) -> List[TrainStep]:
  """The runs in the order they are trained: beta 0.2 with the mask over SEEDS, then without,
  then the sweep with the mask."""
  runs = ([(turf.TURF_RAC_BETA, seed, True) for seed in SEEDS]
          + [(turf.TURF_RAC_BETA, seed, False) for seed in SEEDS]
          + [(beta, 0, True) for beta in SWEEP])
  return [train_step(turf.rac_run(beta, seed, mask), turf.rac_group(beta, mask), seed, max_steps,
                     SCALE['run_seconds'], '--env', 'turf', '--num_actors', str(SCALE['actors']),
                     '--envs_per_actor', str(SCALE['envs_per_actor']), '--mode', 'rac',
                     '--estimator_checkpoint', checkpoint, '--beta', f'{beta:g}',
                     *(('--learner_mask',) if mask else ()), '--noprogress')
          for beta, seed, mask in runs]


def finished(step: TrainStep, out: str) -> bool:
  """The runner's `done` file, or a completed run at the budget in the run directory or its
  export (runs trained before the runner wrote `done` files)."""
  if runner.step_done(step, out):
    return True
  logs = pages.logs_dir(os.path.join(out, step.run_dir))
  summary = (run_state.read_json(os.path.join(logs, run_state.SUMMARY), {}) or {}) if logs else {}
  return (summary.get('status') == run_state.COMPLETED
          and summary.get('actor_steps', 0) >= step.max_steps)


def check_args(o: RacSameMix) -> List[TrainStep]:
  """The selected runs; a bad flag is the one-line usage error."""
  if o.max_steps < 1:
    cli.fail(f'--max_steps must be >= 1, got {o.max_steps}')
  steps = rac_steps(o.max_steps, os.path.abspath(o.checkpoint) if o.checkpoint else CHECKPOINT)
  unmatched = [p for p in o.only if not any(fnmatch.fnmatchcase(s.name, p) for s in steps)]
  if unmatched:
    cli.fail(f'--only {",".join(unmatched)} matches no run (--list shows them)')
  return runner.select_steps(steps, o.only)


def run(steps: List[TrainStep], out: str) -> int:
  """Trains the runs that are not finished, in order; 1 at the first that fails."""
  for step in steps:
    if finished(step, out):
      print(f'{step.name}: finished, skipped', flush=True)
      continue
    restored = run_export.restore(os.path.join(out, step.run_dir))
    if restored:
      print(restored, flush=True)
    print(f'{step.name}: python {" ".join(runner.step_argv(step, out))} '
          f'(log: {os.path.join(out, "logs", step.name + ".log")})', flush=True)
    code = runner.run_step(step, out)
    if code:
      print(f'error: {step.name} failed (exit code {code}); see '
            f'{os.path.join(out, "logs", step.name + ".log")}. Rerun the same command to go on.',
            file=sys.stderr)
      return 1
  return 0


def main(argv=None) -> int:
  args, _ = cli.parse(define_flags, argv, prog='python -m experiments.studies.turf_rac_same_mix',
                      description=__doc__.split('\n\n')[0])
  names = {f.name for f in dataclasses.fields(RacSameMix)}
  o = RacSameMix(**{k: tuple(v) if isinstance(v, list) else v for k, v in vars(args).items()
                    if k in names})
  steps = check_args(o)
  out = os.path.abspath(o.out)
  if o.list:
    for step in steps:
      state = 'done' if finished(step, out) else (
          'started' if run_state.holds_run(os.path.join(out, step.run_dir)) else 'to do')
      print(f'{state:8s} {step.name:24s} python {" ".join(runner.step_argv(step, out))}')
    return 0
  checkpoint = os.path.abspath(o.checkpoint or CHECKPOINT.replace('{out}', out))
  if not all(finished(step, out) for step in steps) and not os.path.isfile(checkpoint):
    cli.fail(f'no estimator checkpoint at {checkpoint}: train it as results/turf/leak/README.md '
             'shows (same_mix_phi_s1.ckpt), or give --checkpoint')
  os.makedirs(out, exist_ok=True)
  try:
    return run(steps, out)
  except KeyboardInterrupt:
    print('stopped; rerun the same command to continue', file=sys.stderr)
    return 1


if __name__ == '__main__':
  raise SystemExit(main())

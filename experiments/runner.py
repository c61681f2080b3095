"""Runs an experiment's steps resumably (each as its own process, output in OUT/logs/<step>.log),
then aggregates its runs over seeds into its page: OUT/table.json, OUT/table.md and
OUT/curves_steps.png / curves_wall.png. A step whose `done` file exists is skipped; a training
run that was stopped is continued with --resume, from its committed export (RUN/csv with a
checkpoint, launch.runtime.run_export) where this machine lacks the run. The entry module is
`experiments`.
"""
import fnmatch
import math
import os
import subprocess
import sys
import time
from typing import Callable, Dict, List, Optional, Sequence

from experiments import pages
from experiments.spec import AnyStep, Experiment
from launch.runtime import run_export, run_state
from launch.runtime import summary as summary_lib


def _fmt_duration(seconds: float) -> str:
  seconds = max(0, int(seconds))
  return f'{seconds // 3600}h{(seconds % 3600) // 60:02d}m' if seconds >= 3600 else \
      f'{seconds // 60}m{seconds % 60:02d}s'


def step_done(step: AnyStep, out: str, max_steps_override=None) -> bool:
  path = os.path.join(out, step.done)
  if not os.path.exists(path):
    return False
  if step.is_training and max_steps_override is not None:
    # A run finished at a smaller budget goes on (with --resume) to the larger one.
    reached = (run_state.read_json(path, {}) or {}).get('summary', {}).get('actor_steps', 0)
    return reached >= max_steps_override
  return True


def step_argv(step: AnyStep, out: str, max_steps_override=None) -> List[str]:
  """The step's command line (after `python`), with a training run's budget overridden."""
  if step.is_training:
    return step.with_max_steps(max_steps_override).argv(out)
  return step.argv(out)


# How often `run_step` asks its `stop_when` whether a training run should stop.
STOP_POLL_S = 20.0


def _wait(proc: subprocess.Popen, records: run_state.RunRecords, stop_when) -> int:
  """Waits for `proc`; every STOP_POLL_S asks `stop_when()` (when given) for a reason to stop
  the run, and once it gives one asks the run to stop gracefully (its stop request)."""
  while True:
    try:
      return proc.wait(timeout=STOP_POLL_S if stop_when is not None else None)
    except subprocess.TimeoutExpired:
      reason = stop_when()
      if reason:
        records.request_stop(reason)
        stop_when = None   # asked once; the coordinator stops the run


def run_step(step: AnyStep, out: str, max_steps_override=None,
             stop_when: Optional[Callable[[], Optional[str]]] = None) -> int:
  """Runs one step to completion (or until interrupted); returns its exit code. `stop_when`
  (training runs only): polled while the run goes on; a reason it returns ends the run early
  (e.g. the Sokoban gate's 'passed the gate'), as a stop request does."""
  if stop_when is not None and not step.is_training:
    raise ValueError(f'{step.name}: only a training run can be stopped early')
  if step.is_training:
    argv = step.with_max_steps(max_steps_override).argv(
        out, resume=run_state.holds_run(os.path.join(out, step.run_dir)))
  else:
    argv = step.argv(out)
  os.makedirs(os.path.join(out, 'logs'), exist_ok=True)
  log_path = os.path.join(out, 'logs', f'{step.name}.log')
  with open(log_path, 'ab') as log:
    log.write(f'\n$ python {" ".join(argv)}\n'.encode())
    log.flush()
    proc = subprocess.Popen([sys.executable] + argv, stdin=subprocess.DEVNULL, stdout=log,
                            stderr=subprocess.STDOUT)
    try:
      code = _wait(proc, run_state.RunRecords(os.path.join(out, step.run_dir)), stop_when)
    except KeyboardInterrupt:
      # The child got the same Ctrl-C (one process group) and stops gracefully; wait for it.
      code = proc.wait()
      raise
  if code == 0 and step.is_training:
    summary = run_state.read_json(os.path.join(out, step.run_dir, 'summary.json'), {}) or {}
    if summary.get('status') == run_state.COMPLETED:
      run_state.write_json(os.path.join(out, step.done), {'summary': summary})
  elif code == 0 and not step_done(step, out, max_steps_override):
    # Steps whose output is a file they create themselves (datasets, checkpoints) are done when
    # it exists; a zero exit without it is a failure.
    code = 1
  return code


def select_steps(steps: List[AnyStep], only: Sequence[str]) -> List[AnyStep]:
  """The steps whose names match one of the shell patterns in `only` (all when it is empty)."""
  if not only:
    return list(steps)
  unmatched = [p for p in only if not any(fnmatch.fnmatchcase(s.name, p) for s in steps)]
  if unmatched:
    raise ValueError(f'--only {",".join(unmatched)} matches no step (--list shows them)')
  return [s for s in steps if any(fnmatch.fnmatchcase(s.name, p) for p in only)]


def run_experiment(exp: Experiment, scale: str, seeds: int, out: str,
                   max_steps_override=None, only: Sequence[str] = ()) -> bool:
  steps = select_steps(exp.steps(scale, seeds), only)
  # A run this machine lacks but whose export (RUN/csv, committed) holds a checkpoint goes on
  # from there: the same command continues an experiment on a new machine.
  for step in steps:
    if step.is_training:
      restored = run_export.restore(os.path.join(out, step.run_dir))
      if restored:
        print(restored, flush=True)
  todo = [s for s in steps if not step_done(s, out, max_steps_override)]
  print(f'{exp.name} ({scale}, {seeds} seed{"s" * (seeds != 1)}): {len(steps) - len(todo)}/'
        f'{len(steps)} steps done, output in {out}', flush=True)
  measured: Dict[str, float] = {}
  for k, step in enumerate(todo):
    est_left = sum(seconds_left(s, out, max_steps_override, measured) for s in todo[k:])
    print(f'[{len(steps) - len(todo) + k + 1}/{len(steps)}] {step.name} '
          f'(ETA for what is left: {_fmt_duration(est_left)})', flush=True)
    start, steps_before = time.time(), _steps_reached(step, out)
    code = run_step(step, out, max_steps_override)
    if code != 0:
      log = os.path.join(out, 'logs', f'{step.name}.log')
      print(f'error: step {step.name} failed (exit code {code}); its output: {log}. '
            'Rerun the same command to retry from there.', file=sys.stderr)
      return False
    advanced = _steps_reached(step, out) - steps_before
    if not step.is_training or advanced > 0:
      measured[step.module] = (time.time() - start) / (advanced if step.is_training else 1)
  return True


def _steps_reached(step: AnyStep, out: str) -> float:
  if not step.is_training:
    return 0
  return run_state.RunRecords(os.path.join(out, step.run_dir)).saved_actor_steps()


def seconds_left(step: AnyStep, out: str, max_steps_override=None,
                 measured: Optional[Dict[str, float]] = None) -> float:
  """How long the step should take: a training run only for the env steps it has left to its
  budget; `measured` (per module: seconds per env step of a training run, seconds of any other
  step) replaces the step's own estimate once this invocation has run one of its module."""
  measured = measured or {}
  if not step.is_training:
    return measured.get(step.module, step.est_seconds)
  left = max(0.0, step.with_max_steps(max_steps_override).max_steps - _steps_reached(step, out))
  return left * measured.get(step.module, step.est_seconds / step.max_steps)


def report(exp: Experiment, scale: str, seeds: int, out: str) -> dict:
  """Aggregates the training runs present over seeds into table.json / table.md / figures."""
  from experiments.analysis import aggregate
  groups = pages.runs_by_group(exp.steps(scale, seeds), out)
  rows = []
  for group, run_dirs in groups.items():
    records = [run_state.RunRecords(d) for d in run_dirs]
    row = {'group': group, 'runs': len(run_dirs),
           'env_steps': [r.saved_actor_steps() for r in records],
           'wall_time_s': [summary_lib.wall_time(r) for r in records],
           'completed': [os.path.exists(os.path.join(d, 'done')) for d in run_dirs]}
    for metric in exp.table_metrics:
      values = [_final_value(aggregate, d, metric, exp.table_last_n) for d in run_dirs]
      mean, half = aggregate.mean_ci(values)
      # A run that does not log the metric (RAE penalties of plain IMPALA) has None, not NaN:
      # table.json stays valid JSON.
      row[metric] = {'per_seed': [_num(v) for v in values], 'mean': _num(mean), 'ci95': _num(half)}
    for column, filename, policy, key in exp.evaluations:
      values = [_eval_value(os.path.join(pages.run_home(d), filename), policy, key)
                for d in run_dirs]
      mean, half = aggregate.mean_ci([v for v in values if v is not None] or [float('nan')])
      row[column] = {'per_seed': values, 'mean': _num(mean), 'ci95': _num(half)}
    rows.append(row)
  table = {'experiment': exp.name, 'scale': scale, 'seeds': seeds, 'paper': exp.paper,
           'rows': rows, 'written_at': time.strftime('%Y-%m-%d %H:%M:%S')}
  run_state.write_json(os.path.join(out, 'table.json'), table)
  with open(os.path.join(out, 'table.md'), 'w') as f:
    f.write(table_markdown(exp, table, out))
  # Curves of the metrics some run logs: a partial experiment (--only) may lack a group that
  # is the only one to log a metric (intrinsic_return without an RAE run).
  logged = set().union(*(aggregate.metric_names(d) for ds in groups.values() for d in ds))
  metrics = [m for m in exp.metrics if m in logged]
  if groups and metrics:
    from experiments.analysis import plot
    references = exp.reference_figures()
    drawn = {**groups, **_reference_runs(exp, scale)}
    for x, suffix in (('actor_steps', 'steps'), ('wall_time', 'wall')):
      plot.plot_runs(drawn, metrics, x, os.path.join(out, f'curves_{suffix}.png'),
                     title=f'{exp.name} ({scale})', aggregate=True, references=references)
  return table


def _reference_runs(exp: Experiment, scale: str) -> Dict[str, List[str]]:
  return exp.reference_runs(scale) if exp.reference_runs is not None else {}


def _final_value(aggregate, run_dir: str, metric: str, last_n: int) -> float:
  try:
    return aggregate.final_value(run_dir, metric, last_n)
  except ValueError:  # the run does not log this metric (e.g. rejections without RAC)
    return float('nan')


def _eval_value(path: str, policy: str, key: str):
  result = run_state.read_json(path)
  if not result:
    return None
  return result.get('policies', {}).get(policy, {}).get(key)


def _num(v):
  return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


def table_markdown(exp: Experiment, table: dict, out: str = '') -> str:
  episodes = ('all training episodes' if exp.table_last_n >= 10**6 else
              f'the last {exp.table_last_n} training episodes')
  lines = [f'# {exp.name}: {exp.description}', '',
           f'Scale `{table["scale"]}`, {table["seeds"]} seed(s) requested; values are means over '
           f'seeds (± 95% t-interval) of {episodes} of each run, and of the evaluations of its '
           'final policy.', '',
           f'Paper: {exp.paper}', '']
  columns = list(exp.table_metrics) + [e[0] for e in exp.evaluations]
  header = ['group', 'runs (completed)', 'env steps reached', 'wall time'] + columns
  lines += ['| ' + ' | '.join(header) + ' |', '|' + '---|' * len(header)]
  for row in table['rows']:
    cells = [row['group'], f'{row["runs"]} ({sum(row["completed"])})',
             ', '.join(f'{s:,.0f}' for s in row['env_steps']),
             ', '.join(_fmt_duration(w) for w in row['wall_time_s'])]
    for metric in columns:
      m = row[metric]
      cells.append('–' if m['mean'] is None else
                   f'{m["mean"]:.3f}' + ('' if m['ci95'] is None else f' ± {m["ci95"]:.3f}'))
    lines.append('| ' + ' | '.join(cells) + ' |')
  lines += ['', 'Curves: mean and 95% band over the seeds, against env steps and against wall '
            'time.', '', '![curves against env steps](curves_steps.png)', '',
            '![curves against wall time](curves_wall.png)', '']
  reference_runs = _reference_runs(exp, table['scale'])
  if reference_runs:
    drawn = ', '.join(f'{label} ({len(dirs)} run{"s" * (len(dirs) != 1)})'
                      for label, dirs in reference_runs.items())
    lines += [f'Also on the curves, for reference (not in the table): {drawn}, from their '
              'committed exports.', '']
  for figure in exp.reference_figures():
    lines += [f'Grey, on the {figure.metric} panel against env steps: the authors\' {figure.figure}, '
              f'{figure.accuracy}; source: {figure.source}.', '']
  if exp.extra_markdown is not None:
    lines += [exp.extra_markdown(table, out)]
  return '\n'.join(lines)

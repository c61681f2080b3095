"""Helpers the experiments' extra page sections share: which run directories a group has, what a
run logged, JSON reports, number formats. Pages are built from what is on disk, so they describe
whatever part of an experiment has run."""
import math
import os
from typing import Dict, List, Optional, Sequence

from experiments.spec import Step
from launch.runtime import run_export, run_state


def runs_by_group(steps: Sequence[Step], out: str) -> Dict[str, List[str]]:
  """{group: [directories that hold the runs' logs]} of the training steps, in step order (see
  `logs_dir`)."""
  groups: Dict[str, List[str]] = {}
  for step in steps:
    logs = logs_dir(os.path.join(out, step.run_dir)) if step.is_training else None
    if logs is not None:
      groups.setdefault(step.group, []).append(logs)
  return groups


def logs_dir(run_dir: str) -> Optional[str]:
  """Where a page reads a run's logs, counts and run state: the run directory itself, or, on a
  machine that lacks the run, its committed export (RUN/csv), so that a fresh checkout redraws
  the page it was given instead of an empty one. None when neither holds logs."""
  for d in (run_dir, os.path.join(run_dir, run_export.EXPORT_SUBDIR)):
    if os.path.isdir(os.path.join(d, 'logs')):
      return d
  return None


def run_home(logs: str) -> str:
  """The run directory of a `logs_dir` result: where its evaluations and GIFs are written."""
  return os.path.dirname(logs) if os.path.basename(logs) == run_export.EXPORT_SUBDIR else logs


def write_report(out: str, result: dict, text: str) -> None:
  """A study's or probe's result: JSON at `out` and the markdown `text` beside it (same name,
  .md), the directory made first."""
  os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
  run_state.write_json(out, result)
  with open(os.path.splitext(out)[0] + '.md', 'w') as f:
    f.write(text)


def show_report(out: Optional[str], result: dict, text: str) -> None:
  """A study's markdown on stdout, and written with its JSON (write_report) when `out` is given."""
  print(text, end='')
  if out:
    write_report(out, result, text)


def read_json(path: str) -> Optional[dict]:
  """run_state.read_json, None also for a file that is not JSON (a page shows what it can)."""
  try:
    return run_state.read_json(path)
  except (OSError, ValueError):
    return None


def episode_values(run_dir: str, metric: str) -> List[float]:
  """The metric of every finished episode of the run, in env-step order ([] if not logged)."""
  from experiments.analysis import aggregate
  try:
    return [float(v) for v in aggregate.series(run_dir, metric, 'actor_steps').values]
  except ValueError:
    return []


def fmt(value, digits: int = 1) -> str:
  if value is None or (isinstance(value, float) and math.isnan(value)):
    return '–'
  # + 0.0 turns the -0.0 that a small negative rounds to into 0.0, so no '-0.000' is printed.
  return f'{round(value, digits) + 0.0:,.{digits}f}'


def mean_ci_text(values: Sequence[float], digits: int = 1) -> str:
  """'m ± h' over the finite values (t-interval), 'm' for one, '–' for none."""
  from experiments.analysis import aggregate
  finite = [v for v in values if v is not None and not math.isnan(v)]
  if not finite:
    return '–'
  mean, half = aggregate.mean_ci(finite)
  return fmt(float(mean), digits) + ('' if math.isnan(half) else f' ± {fmt(float(half), digits)}')

"""Learning curves of runs, read back from their CSV logs, and their mean and confidence band
across seeds. Pure numpy; `experiments.plot` draws them.

A curve is sampled on an even grid of `num_points` x values from 0 to the run's last logged x.
ys[i] is the mean of the metric over the rows (episodes, for actor metrics) whose x lies in the
trailing window (xs[i] - w, xs[i]], w = smooth * (last x of the grid). The window is a stretch of
x, not a number of episodes, so that runs whose episodes differ in length (an agent that learns
to survive logs fewer, longer episodes) are averaged over the same stretch of training. A window
holding no row gives NaN: before the first episode, or a stretch in which none ended.

x is 'actor_steps' (the run-wide env steps when the row was written) or 'wall_time' (seconds
the run's launches had been running at the row's unix_time: the segments of run_state.json
summed, so the gap between a stop and a resume does not count).

Rows of a thinned export stand for several episodes each (summary.EPISODES_PER_ROW): window
means weigh them so; milestones and final values stay on the last N rows, as many samples as N
logged episodes (BUILD_NOTES, "Milestones from thinned logs": fewer, weighted, cross early).

A metric is looked for in the actor episode logs first, then in the precedence and learner logs.
Rows of those two are placed on env steps by their actor_steps column (the run-wide counts the
nodes log with their own), or on their own step count ('precedence_steps') where the log has
none; on wall time by their unix_time, or else by interpolating their actor_steps between the
episodes' (actor_steps, wall time) pairs, as those nodes log no time of day.
"""
import glob
import os
import warnings
from typing import Any, Dict, List, NamedTuple, Sequence, Tuple, Union

import numpy as np

from launch.runtime import run_state, summary

X_AXES = ('actor_steps', 'wall_time')
NODE_LOGS = ('precedence', 'learner')
DEFAULT_SMOOTH = 0.05


class RunLogs(NamedTuple):
  """A run directory's logs, read once: functions below take this or the directory path."""
  run_dir: str
  episodes: List[Dict[str, float]]  # all actors' rows, by actor_steps
  nodes: Dict[str, List[Dict[str, float]]]  # 'precedence' / 'learner' rows
  segments: List[Dict[str, Any]]


class Series(NamedTuple):
  xs: np.ndarray  # sorted
  values: np.ndarray
  x_name: str  # 'actor_steps', 'wall_time', or a log's own step count ('precedence_steps')
  weights: np.ndarray  # logged episodes (rows) each value stands for: > 1 in a thinned log


class Aggregate(NamedTuple):
  xs: np.ndarray  # the common grid
  per_seed: np.ndarray  # [runs, num_points]
  mean: np.ndarray
  half_width: np.ndarray  # of the 95% interval; NaN where fewer than 2 runs have a value
  x_name: str


RunLike = Union[str, RunLogs]


def log_labels(run_dir: str) -> List[str]:
  """Nodes with a log in the run directory ('actor_0', 'learner', ...)."""
  paths = glob.glob(os.path.join(run_dir, 'logs', '*', 'logs.csv'))
  return sorted(os.path.basename(os.path.dirname(p)) for p in paths)


def check_run_dir(run_dir: str) -> None:
  """Raises ValueError (one line) when RUN_DIR is not a run directory with logs."""
  if not os.path.isdir(run_dir):
    raise ValueError(f'run directory {run_dir} does not exist')
  if not log_labels(run_dir):
    raise ValueError(f'run directory {run_dir} holds no logs (no logs/<node>/logs.csv)')


def load(run_dir: str) -> RunLogs:
  check_run_dir(run_dir)
  return RunLogs(run_dir, summary.actor_episodes(run_dir),
                 {label: summary.read_log(run_dir, label) for label in NODE_LOGS},
                 run_state.RunRecords(run_dir).segments())


def _as_run(run: RunLike) -> RunLogs:
  return run if isinstance(run, RunLogs) else load(run)


def metric_names(run: RunLike) -> set:
  """Every column holding a number in any of the run's logs."""
  run = _as_run(run)
  names = set()
  for rows in [run.episodes, *run.nodes.values()]:
    for row in rows:
      names.update(row)
  return names - {summary.EPISODES_PER_ROW}


def wall_time(unix_times, segments: Sequence[Dict[str, Any]], seen=None) -> np.ndarray:
  """Seconds of the run's launches elapsed at each unix time: the part of each segment before t,
  summed. A segment without an end (still running, or killed) ends at the last time in `seen`
  inside it (default: `unix_times`), as in run_state.segment_spans."""
  t = np.asarray(unix_times, float)
  spans = run_state.segment_spans(segments, np.ravel(t if seen is None else seen).tolist())
  starts = np.array([start for start, _ in spans], float)
  ends = np.array([end for _, end in spans], float)
  return np.clip(np.minimum(t[..., None], ends) - starts, 0.0, None).sum(-1)


def _column(rows, name) -> np.ndarray:
  return np.array([r.get(name, np.nan) for r in rows], float)


def _sorted_finite(xs, values, x_name, weights=None) -> Series:
  weights = np.ones(len(values)) if weights is None else np.asarray(weights, float)
  keep = np.isfinite(xs) & np.isfinite(values)
  order = np.argsort(xs[keep], kind='stable')
  return Series(xs[keep][order], values[keep][order], x_name, weights[keep][order])


def wall_time_at(run: RunLike, steps) -> np.ndarray:
  """Seconds of the run's launches by each of `steps` env steps (NaN past its last episode)."""
  xs, walls = _episode_wall_times(_as_run(run))
  steps = np.asarray(steps, float)
  return np.where(steps <= xs[-1], np.interp(steps, xs, walls), np.nan)


def _episode_wall_times(run: RunLogs) -> Tuple[np.ndarray, np.ndarray]:
  """(actor_steps, wall time) of the episodes, wall time made non-decreasing in steps (the
  actors' clocks and step counts are read at slightly different moments)."""
  s = _sorted_finite(_column(run.episodes, 'actor_steps'),
                     _column(run.episodes, 'unix_time'), 'actor_steps')
  if not len(s.xs):
    raise ValueError(f'run {run.run_dir} has no episode with actor_steps and unix_time')
  return s.xs, np.maximum.accumulate(wall_time(s.values, run.segments))


def series(run: RunLike, metric: str, x: str = 'actor_steps') -> Series:
  """The run's logged values of `metric` against x, sorted by x (rows without either dropped)."""
  run = _as_run(run)
  if x not in X_AXES:
    raise ValueError(f'unknown x axis {x!r} (expected one of {", ".join(X_AXES)})')
  logs = [('actor', run.episodes)] + [(node, run.nodes[node]) for node in NODE_LOGS]
  label, rows = next(((label, [r for r in rows if metric in r]) for label, rows in logs
                      if any(metric in r for r in rows)), (None, []))
  if not rows:
    raise ValueError(f'run {run.run_dir} logs no {metric!r}')
  values = _column(rows, metric)
  weights = np.nan_to_num(_column(rows, summary.EPISODES_PER_ROW), nan=1.0)  # node rows: 1
  has = lambda column: any(column in r for r in rows)
  if x == 'wall_time' and not run.segments:
    raise ValueError(f'run {run.run_dir} has no segments in {run_state.RUN_STATE}: '
                     'its wall time is unknown')
  if x == 'wall_time' and has('unix_time'):
    times = _column(rows, 'unix_time')
    seen = np.concatenate([times, _column(run.episodes, 'unix_time')])
    out = _sorted_finite(wall_time(times, run.segments, seen[np.isfinite(seen)]), values, x,
                         weights)
  elif x == 'wall_time' and has('actor_steps'):
    steps, walls = _episode_wall_times(run)
    out = _sorted_finite(np.interp(_column(rows, 'actor_steps'), steps, walls), values, x,
                         weights)
  elif x == 'wall_time':
    raise ValueError(f'run {run.run_dir}: the {label} log has neither unix_time nor actor_steps '
                     f'to place {metric!r} on wall time')
  elif has('actor_steps'):
    out = _sorted_finite(_column(rows, 'actor_steps'), values, 'actor_steps', weights)
  elif has(f'{label}_steps'):
    out = _sorted_finite(_column(rows, f'{label}_steps'), values, f'{label}_steps', weights)
  else:
    raise ValueError(f'run {run.run_dir}: the {label} log has no step count for {metric!r}')
  if not len(out.xs):
    raise ValueError(f'run {run.run_dir} logs no finite {metric!r} against {out.x_name}')
  return out


def window_means(xs, values, grid, width: float, weights=None) -> np.ndarray:
  """For each grid point g, the mean of the values whose x lies in (g - width, g], weighted by
  `weights` (default 1); NaN where none does. xs sorted. Width 0 takes the values at x == g."""
  xs, values, grid = (np.asarray(a, float) for a in (xs, values, grid))
  weights = np.ones(len(values)) if weights is None else np.asarray(weights, float)
  sums = np.concatenate([[0.0], np.cumsum(weights * values)])
  mass = np.concatenate([[0.0], np.cumsum(weights)])
  hi = np.searchsorted(xs, grid, side='right')
  lo = np.searchsorted(xs, grid - width, side='right' if width > 0 else 'left')
  n = mass[hi] - mass[lo]
  return np.where(hi > lo, (sums[hi] - sums[lo]) / np.where(hi > lo, n, 1.0), np.nan)


def _grid(last_x: float, num_points: int) -> np.ndarray:
  if num_points < 2:
    raise ValueError(f'num_points must be at least 2, got {num_points}')
  return np.linspace(0.0, max(float(last_x), 0.0), num_points)


def _check_smooth(smooth: float) -> None:
  if not 0 <= smooth <= 1:
    raise ValueError(f'smooth must be a fraction of the x range in [0, 1], got {smooth}')


def curve(run: RunLike, metric: str, x: str = 'actor_steps', num_points: int = 100,
          smooth: float = DEFAULT_SMOOTH) -> Tuple[np.ndarray, np.ndarray]:
  """(xs, ys): the run's learning curve of `metric` (module docstring), xs an even grid from 0 to
  the last logged x, ys the mean over the trailing window of smooth * (last x)."""
  _check_smooth(smooth)
  s = series(run, metric, x)
  grid = _grid(s.xs[-1], num_points)
  return grid, window_means(s.xs, s.values, grid, smooth * grid[-1], s.weights)


def _t_quantile(q: float, df) -> np.ndarray:
  # Imported here: scipy.stats takes a while to import, and only intervals need it (scipy is
  # always installed: jax requires it).
  from scipy import stats
  return stats.t.ppf(q, df)


def mean_ci(values, axis: int = 0, confidence: float = 0.95):
  """(mean, half-width of the Student-t interval) across `axis`, NaN ignored; the half-width is
  NaN where fewer than 2 values are finite, the mean where none is."""
  if not 0 < confidence < 1:
    raise ValueError(f'confidence must be in (0, 1), got {confidence}')
  v = np.asarray(values, float)
  n = np.sum(~np.isnan(v), axis=axis)
  with warnings.catch_warnings():
    warnings.simplefilter('ignore', RuntimeWarning)  # all-NaN slices: NaN is the answer
    mean = np.nanmean(v, axis=axis)
    std = np.nanstd(v, axis=axis, ddof=1)
  t = _t_quantile(0.5 + confidence / 2, np.maximum(n - 1, 1))
  half = np.where(n >= 2, t * std / np.sqrt(np.maximum(n, 1)), np.nan)
  return mean, half[()]  # scalars for 1-D values


def aggregate_curves(runs: Sequence[RunLike], metric: str, x: str = 'actor_steps',
                     num_points: int = 100, smooth: float = DEFAULT_SMOOTH) -> Aggregate:
  """The runs' curves on a common grid, from 0 to the smallest last x among them (so that every
  point is an average over all runs), with their mean and 95% interval half-width."""
  _check_smooth(smooth)
  if not runs:
    raise ValueError('no runs to aggregate')
  all_series = [series(r, metric, x) for r in runs]
  x_names = sorted({s.x_name for s in all_series})
  if len(x_names) > 1:
    raise ValueError(f'the runs log {metric!r} against different x ({", ".join(x_names)})')
  grid = _grid(min(s.xs[-1] for s in all_series), num_points)
  per_seed = np.stack([window_means(s.xs, s.values, grid, smooth * grid[-1], s.weights)
                       for s in all_series])
  mean, half = mean_ci(per_seed, axis=0)
  return Aggregate(grid, per_seed, mean, half, x_names[0])


def final_value(run: RunLike, metric: str, last_n: int = 100) -> float:
  """Mean of the metric over the last `last_n` rows (episodes) by env steps (all if fewer)."""
  if last_n < 1:
    raise ValueError(f'last_n must be at least 1, got {last_n}')
  return float(np.mean(series(run, metric, 'actor_steps').values[-last_n:]))


def first_reaching(xs, values, target: float, last_n: int) -> float:
  """The x (env steps) of the row at which the mean of the trailing `last_n` rows (episodes,
  sorted by x) first reaches `target`; NaN if it never does (or there are fewer rows)."""
  values = np.asarray(values, float)
  if last_n < 1:
    raise ValueError(f'last_n must be at least 1, got {last_n}')
  if len(values) < last_n:
    return float('nan')
  trailing = np.convolve(values, np.ones(last_n) / last_n, mode='valid')  # [i]: rows i..i+n-1
  hits = np.nonzero(trailing >= target - 1e-9)[0]
  return float(np.asarray(xs, float)[hits[0] + last_n - 1]) if len(hits) else float('nan')


def steps_to(run: RunLike, metric: str, target: float, last_n: int) -> float:
  """Env steps at which the run's trailing `last_n` episodes first averaged >= target."""
  s = series(run, metric, 'actor_steps')
  return first_reaching(s.xs, s.values, target, last_n)


def mean_over_budget(run: RunLike, metric: str, budget: float, num_points: int = 100,
                     smooth: float = DEFAULT_SMOOTH) -> float:
  """The area under the run's curve of `metric` from 0 to `budget` env steps, divided by the
  budget: the mean of the trailing-window curve on an even grid over (0, budget]. NaN where the
  run has not reached the budget."""
  _check_smooth(smooth)
  s = series(run, metric, 'actor_steps')
  if s.xs[-1] < budget:
    return float('nan')
  grid = np.linspace(budget / num_points, budget, num_points)
  return float(np.nanmean(window_means(s.xs, s.values, grid, smooth * budget, s.weights)))

"""Learning curves of runs (`experiments.analysis.aggregate`'s) drawn into a PNG, one subplot per
metric; `experiments.plot` is the command, and its docstring says what is drawn."""
import io
import math
import os
from typing import Dict, List, Optional, Sequence

# Imported under another name: plot_runs' `aggregate` flag would hide the module.
from envs import paths
from experiments.analysis import aggregate as aggregation
from experiments.analysis import reference_curves

DEFAULT_METRICS = ('episode_return', 'episode_length', 'intrinsic_return', 'ruined_grass',
                   'rejections', 'solved', 'boxes_on_target', 'psi_accuracy')
X_LABELS = {'actor_steps': 'env steps', 'wall_time': 'wall time (s)'}
MAX_COLS = 3


def x_label(x_name: str) -> str:
  return X_LABELS.get(x_name, x_name.replace('_', ' '))


def run_labels(run_dirs: Sequence[str]) -> List[str]:
  """Directory names, or the paths as given where two runs share a name."""
  names = [os.path.basename(os.path.normpath(d)) for d in run_dirs]
  return [n if names.count(n) == 1 else d for n, d in zip(names, run_dirs)]


def choose_metrics(runs: Sequence[aggregation.RunLogs], metrics: Optional[Sequence[str]]) -> List[str]:
  logged = set().union(*(aggregation.metric_names(r) for r in runs))
  if metrics is None:
    chosen = [m for m in DEFAULT_METRICS if m in logged]
    if not chosen:
      raise ValueError(f'the runs log none of the default metrics ({", ".join(DEFAULT_METRICS)})')
    return chosen
  unknown = [m for m in metrics if m not in logged]
  if unknown:
    raise ValueError(f'no run logs metric {", ".join(map(repr, unknown))}')
  return list(dict.fromkeys(metrics))  # one subplot per metric, however often it is named


def check_out(out_path: str) -> None:
  """Raises ValueError (one line) when the PNG cannot go to OUT (the write itself is checked too)."""
  directory = os.path.dirname(os.path.abspath(out_path))
  if os.path.isdir(out_path):
    raise ValueError(f'--out {out_path} is a directory')
  if not os.path.isdir(directory):
    raise ValueError(f'--out {out_path}: directory {directory} does not exist')


def _write_png(path: str, data: bytes) -> None:
  # A temporary file renamed into place: an interrupted or failed write leaves no partial PNG.
  try:
    with paths.atomic_write(path, 'wb') as f:
      f.write(data)
  except OSError as e:
    raise ValueError(f'cannot write --out {path}: {e.strerror or e}') from None


def line_colours(groups: Dict[str, List[str]], aggregate_runs: bool) -> Dict[str, str]:
  """One colour per line label, fixed for the whole figure: per group when runs are aggregated,
  else per run, so a panel that lacks some group's metric keeps the others' colours."""
  keys = []
  for group, run_dirs in groups.items():
    if aggregate_runs:
      keys.append(group)
    else:
      keys += [_run_line_label(groups, group, name) for name in run_labels(run_dirs)]
  return {key: f'C{i % 10}' for i, key in enumerate(keys)}


def _run_line_label(groups, group, name) -> str:
  return name if len(groups) == 1 else f'{group}: {name}'


# A paper's curve is drawn in grey, dashed, with its read points marked: a reading, not a run.
REFERENCE_STYLES = ({'color': '0.25', 'ls': '--'}, {'color': '0.25', 'ls': ':'},
                    {'color': '0.55', 'ls': '-.'})


def _draw_references(ax, curves, x_max: float) -> List[str]:
  labels = []
  for curve, style in zip(curves, REFERENCE_STYLES * len(curves)):
    curve = curve.clipped(x_max)
    if len(curve.points) < 2:
      continue
    xs, ys = zip(*curve.points)
    ax.plot(xs, ys, label=curve.label, lw=1.2, marker='o', markersize=2.5, **style)
    if len(curve.band) >= 2:
      bx, lo, hi = zip(*curve.band)
      ax.fill_between(bx, lo, hi, color=style['color'], alpha=0.08, hatch='//', lw=0)
    labels.append(curve.label)
  return labels


def _draw_metric(ax, runs, groups, metric, x, aggregate_runs, num_points, smooth,
                 references=()) -> List[str]:
  """Draws one subplot; returns the labels of its lines."""
  labels, x_names = [], set()
  x_max = 0.0
  colours = line_colours(groups, aggregate_runs)
  for group, run_dirs in groups.items():
    having = [d for d in run_dirs if metric in aggregation.metric_names(runs[d])]
    if not having:
      continue
    if aggregate_runs:
      agg = aggregation.aggregate_curves([runs[d] for d in having], metric, x, num_points, smooth)
      ax.plot(agg.xs, agg.mean, label=group, lw=1.5, color=colours[group])
      x_max = max(x_max, float(max(agg.xs)))
      ax.fill_between(agg.xs, agg.mean - agg.half_width, agg.mean + agg.half_width,
                      color=colours[group], alpha=0.2, lw=0)
      labels.append(group)
      x_names.add(agg.x_name)
      continue
    names = dict(zip(run_dirs, run_labels(run_dirs)))
    for d in having:
      xs, ys = aggregation.curve(runs[d], metric, x, num_points, smooth)
      label = _run_line_label(groups, group, names[d])
      ax.plot(xs, ys, label=label, lw=1.0, color=colours[label])
      x_max = max(x_max, float(max(xs)))
      labels.append(label)
      x_names.add(aggregation.series(runs[d], metric, x).x_name)
  if references and x_max > 0:
    labels += _draw_references(ax, references, x_max)
  ax.set_title(metric, fontsize=10)
  ax.set_xlabel(' / '.join(x_label(n) for n in sorted(x_names)), fontsize=9)
  ax.tick_params(labelsize=8)
  ax.grid(alpha=0.3)
  return labels


def plot_runs(groups: Dict[str, List[str]], metrics: Optional[Sequence[str]] = None,
              x: str = 'actor_steps', out_path: str = 'curves.png', title: Optional[str] = None,
              aggregate: bool = True, num_points: int = 100,
              smooth: float = aggregation.DEFAULT_SMOOTH,
              references=()) -> Dict[str, List[str]]:
  """Draws the groups' runs (one mean + 95% band per group, or with aggregate=False one line per
  run) in one subplot per metric, writes the PNG to out_path, and returns {metric: labels of the
  lines drawn}. `references`: `reference_curves.ReferenceFigure`s, each drawn on its metric's
  panel when plotted against its x, up to the runs' furthest x. Raises ValueError (one line) on
  bad input; nothing is written then."""
  if x not in aggregation.X_AXES:
    raise ValueError(f'unknown --x {x!r} (expected one of {", ".join(aggregation.X_AXES)})')
  if not groups or not all(groups.values()):
    raise ValueError('no runs to plot')
  check_out(out_path)
  runs = {d: aggregation.load(d) for ds in groups.values() for d in ds}
  metrics = choose_metrics(list(runs.values()), metrics)
  # Imported once the input is checked, so that refusals come at once; the Agg canvas of a bare
  # Figure, not pyplot, so that a caller's matplotlib backend and state are left alone.
  from matplotlib.backends.backend_agg import FigureCanvasAgg
  from matplotlib.figure import Figure
  ncols = min(MAX_COLS, len(metrics))
  nrows = math.ceil(len(metrics) / ncols)
  fig = Figure(figsize=(4 * ncols, 3 * nrows), dpi=100)
  FigureCanvasAgg(fig)
  axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
  drawn = {m: _draw_metric(ax, runs, groups, m, x, aggregate, num_points, smooth,
                          reference_curves.for_panel(references, m, x))
           for m, ax in zip(metrics, axes)}
  for ax in axes[len(metrics):]:
    ax.set_visible(False)
  # The legend goes where most lines are: a metric some groups do not log has fewer.
  axes[max(range(len(metrics)), key=lambda i: len(drawn[metrics[i]]))].legend(fontsize=7)
  if title:
    fig.suptitle(title, fontsize=11)
  fig.tight_layout()
  buf = io.BytesIO()
  fig.savefig(buf, format='png', dpi=100)
  _write_png(out_path, buf.getvalue())
  return drawn

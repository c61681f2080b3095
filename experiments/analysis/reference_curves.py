"""Curves read off a paper's figure, drawn beside ours as a reference: a small JSON file per
figure (points read by eye, an optional band, and where the figure was found), never fitted to
our runs. `experiments/reference/` holds the files."""
import dataclasses
import json
from typing import List, Optional, Sequence, Tuple

import numpy as np

Point = Tuple[float, float]


@dataclasses.dataclass(frozen=True)
class ReferenceCurve:
  label: str
  points: Tuple[Point, ...]                              # (x, y), x increasing
  band: Tuple[Tuple[float, float, float], ...] = ()      # (x, low, high), where the figure shows one

  def clipped(self, x_max: float) -> 'ReferenceCurve':
    """The part at x <= x_max, its last point interpolated at x_max, so that a reference to 100M
    does not squeeze runs that have reached 10M into a tenth of the panel."""
    return ReferenceCurve(self.label, _clip([(x, y) for x, y in self.points], x_max),
                          tuple((x, lo, hi) for x, lo, hi in self.band if x <= x_max))


@dataclasses.dataclass(frozen=True)
class ReferenceFigure:
  figure: str
  source: str
  accuracy: str
  metric: str
  x: str
  curves: Tuple[ReferenceCurve, ...]


def _clip(points: Sequence[Point], x_max: float) -> Tuple[Point, ...]:
  kept = [p for p in points if p[0] <= x_max]
  if len(kept) < len(points) and kept and kept[-1][0] < x_max:
    xs, ys = zip(*points)
    kept.append((x_max, float(np.interp(x_max, xs, ys))))
  return tuple(kept)


def load(path: str) -> ReferenceFigure:
  """Reads a reference file; raises ValueError (one line) naming the file and what is wrong."""
  try:
    with open(path) as f:
      raw = json.load(f)
  except OSError as e:
    raise ValueError(f'reference curve file {path}: {e.strerror or e}') from None
  except ValueError as e:
    raise ValueError(f'reference curve file {path} is not JSON: {e}') from None
  try:
    curves = []
    for c in raw['curves']:
      points = tuple((float(x), float(y)) for x, y in c['points'])
      if len(points) < 2 or any(b[0] <= a[0] for a, b in zip(points, points[1:])):
        raise ValueError(f"curve {c['label']!r} needs 2+ points with x increasing")
      band = tuple((float(x), float(lo), float(hi)) for x, lo, hi in c.get('band', ()))
      curves.append(ReferenceCurve(str(c['label']), points, band))
    return ReferenceFigure(str(raw['figure']), str(raw['source']), str(raw['accuracy']),
                           str(raw['metric']),
                           str(raw['x']), tuple(curves))
  except (KeyError, TypeError) as e:
    raise ValueError(f'reference curve file {path} lacks {e}') from None
  except ValueError as e:
    raise ValueError(f'reference curve file {path}: {e}') from None


def for_panel(figures: Optional[Sequence[ReferenceFigure]], metric: str,
              x: str) -> List[ReferenceCurve]:
  """The reference curves that belong on the panel of `metric` against `x`."""
  return [c for f in figures or () if f.metric == metric and f.x == x for c in f.curves]

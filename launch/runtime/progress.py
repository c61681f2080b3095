"""The line a training run prints every interval while it goes: env steps against the budget,
the speed over the last minute and over the launch, the time left at the recent speed, the
environment's own measures over the last episodes (envs.presets.watched) and the learner's
steps. Before the launch's first env step, one line says what the program is waiting for,
printed again only when that changes. The same figures go to TensorBoard
(RUN_DIR/logs/progress/).

The actor logs are read as they grow (only the rows added since the last line), so a line costs
the same at 50M env steps as at the start; the counts come from the coordinator's counts.json.
Reads the run's records through its launch.runtime.run_state.RunRecords."""
import collections
import csv
import io
import math
import os
import time
from typing import Callable, Deque, Dict, List, Optional, Sequence, Tuple

from launch.runtime import run_state, termination
from launch.runtime.summary import LAST_EPISODES

RECENT_S = 60.0       # "the recent speed": env steps/s over about this many seconds


class LogTail:
  """The rows a growing CSV log gained since the last `read` (its header kept across reads). A
  file that shrank (replaced, as a restored export is) is read again from its start."""

  def __init__(self, path: str):
    self.path = path
    self._offset = 0
    self._header: Optional[List[str]] = None

  def read(self) -> List[Dict[str, str]]:
    try:
      size = os.path.getsize(self.path)
    except OSError:
      return []
    if size < self._offset:
      self._offset, self._header = 0, None
    with open(self.path, 'rb') as f:
      f.seek(self._offset)
      chunk = f.read(size - self._offset)
    end = chunk.rfind(b'\n')
    if end < 0:
      return []   # no whole line yet: a row being written is read next time
    self._offset += end + 1
    lines = _csv_rows(chunk[:end + 1].decode('utf-8', 'replace'))
    if self._header is None and lines:
      self._header, lines = lines[0], lines[1:]
    return [dict(zip(self._header, line)) for line in lines
            if line and len(line) == len(self._header)]


def _csv_rows(text: str) -> List[List[str]]:
  """The rows of CSV `text`; where a line is no CSV (a row cut by a full disk or a kill, the
  next appended to it), each line on its own, the broken ones left out."""
  try:
    return list(csv.reader(io.StringIO(text)))
  except csv.Error:
    rows = []
    for line in text.splitlines():
      try:
        rows += list(csv.reader([line]))
      except csv.Error:
        continue
    return rows


def _number(value) -> float:
  try:
    return float(value)
  except (TypeError, ValueError):
    return math.nan


def duration(seconds: float) -> str:
  """'1h05m', '12m30s', '45s'."""
  seconds = max(0, int(seconds))
  if seconds >= 3600:
    return f'{seconds // 3600}h{seconds % 3600 // 60:02d}m'
  return f'{seconds // 60}m{seconds % 60:02d}s' if seconds >= 60 else f'{seconds}s'


class Progress:
  """The progress lines of one launch of the run whose records are `records`. `measures`: (actor
  log column, label) pairs; `line()` returns the next line, or None when there is nothing new to
  say."""

  def __init__(self, records: run_state.RunRecords, max_steps: int,
               measures: Sequence[Tuple[str, str]],
               last_n: int = LAST_EPISODES, recent_s: float = RECENT_S,
               clock: Callable[[], float] = time.time):
    self._records, self._max_steps, self._measures = records, max_steps, tuple(measures)
    self._last_n, self._recent_s, self._clock = last_n, recent_s, clock
    self._start = clock()   # the launch's start: its nodes start after this
    self._start_steps = records.saved_actor_steps()
    self._tails: Dict[str, LogTail] = {}
    self._episodes: Deque[Dict[str, float]] = collections.deque(maxlen=last_n)
    self._samples: Deque[Tuple[float, float]] = collections.deque()
    self._said = ''

  def _new_episodes(self) -> None:
    logs = self._records.path('logs')
    try:
      actors = sorted(d for d in os.listdir(logs) if d.startswith('actor_'))
    except OSError:
      actors = []
    rows = []
    for actor in actors:
      tail = self._tails.setdefault(actor, LogTail(os.path.join(logs, actor, 'logs.csv')))
      rows += tail.read()
    rows.sort(key=lambda r: _number(r.get('actor_steps')))
    for row in rows:
      self._episodes.append({column: _number(row.get(column)) for column, _ in self._measures})

  def means(self) -> Dict[str, float]:
    """Per measured column, its mean over the last episodes read (NaN where none has it)."""
    out = {}
    for column, _ in self._measures:
      values = [e[column] for e in self._episodes if not math.isnan(e[column])]
      out[column] = sum(values) / len(values) if values else math.nan
    return out

  def figures(self) -> Dict[str, float]:
    """Reads what is new and returns the launch's figures now: env_steps, learner_steps,
    env_steps_per_second (over the last recent_s; the launch's at the first call),
    env_steps_per_second_launch, seconds_left (at the recent speed; NaN while it is 0), episodes (read so far, at most last_n) and every measure's mean."""
    now = self._clock()
    counts = self._records.load_counts()
    steps = float(counts.get('actor_steps', 0))
    self._new_episodes()
    self._samples.append((now, steps))
    while len(self._samples) > 2 and now - self._samples[1][0] >= self._recent_s:
      self._samples.popleft()
    then, steps_then = self._samples[0]
    launch = (steps - self._start_steps) / max(now - self._start, 1e-9)
    recent = (steps - steps_then) / (now - then) if now > then else launch   # first: the launch's
    left = max(0.0, self._max_steps - steps)
    return {'elapsed_s': now - self._start, 'env_steps': steps,
            'learner_steps': float(counts.get('learner_steps', 0)),
            'env_steps_per_second': recent, 'env_steps_per_second_launch': launch,
            'seconds_left': left / recent if recent > 0 else math.nan,
            'episodes': float(len(self._episodes)),
            **{f'mean_{column}_last': v for column, v in self.means().items()}}

  def started(self, figures: Dict[str, float]) -> bool:
    """Whether the launch has taken an env step by these figures."""
    return figures['env_steps'] > self._start_steps

  def line(self, f: Dict[str, float]) -> Optional[str]:
    """The line for figures `f` (from `figures()`); None when there is nothing new to say."""
    stamp = f"[{f['elapsed_s']:7.0f}s]"
    if not self.started(f):
      waiting = self.waiting_for()
      if waiting == self._said:
        return None
      self._said = waiting
      return f'{stamp} starting: {waiting}'
    speed = f"{f['env_steps_per_second']:,.0f}/s"
    eta = duration(f['seconds_left']) if not math.isnan(f['seconds_left']) else '-'
    measures = '  '.join(f"{label} {self._format(f[f'mean_{column}_last'])}"
                         for column, label in self._measures)
    return (f"{stamp} env steps {f['env_steps']:,.0f}/{self._max_steps:,}  {speed} (launch "
            f"{f['env_steps_per_second_launch']:,.0f}/s)  left {eta}  |  "
            + (f"last {len(self._episodes)} episodes: {measures}  |  " if self._measures else '')
            + f"learner steps {f['learner_steps']:,.0f}")

  @staticmethod
  def _format(value: float) -> str:
    return '-' if math.isnan(value) else f'{value:.3g}'

  def waiting_for(self) -> str:
    """What the launch waits for before its first env step, from the nodes' own records: which
    nodes have started, whether the replay has restored its tables, and the first episodes."""
    starts = [e for e in self._records.read_records(run_state.SUPERVISOR_LOG)
              if e.get('event') == 'start' and e.get('time', 0) >= self._start]
    up = sorted({e.get('node', '?') for e in starts})
    if not up:
      return 'the nodes to start'
    parts = [f'nodes up: {", ".join(up)}']
    if 'replay' in up:
      restores = [e for e in self._records.read_records(run_state.REPLAY_LOG)
                  if e.get('event') == 'start' and e.get('time', 0) >= self._start]
      if not restores:
        # Restoring only where an earlier launch left checkpoints; else it is still starting.
        saved = os.path.isdir(self._records.path(run_state.REPLAY_CHECKPOINTS))
        parts.append('the replay restoring its tables' if saved else 'the replay starting')
    if any(node.startswith('actor') for node in up):
      parts.append('the actors compiling their policy and playing their first episodes')
    if 'learner' in up:
      parts.append('the learner waiting for its first batch')
    return '; '.join(parts)


class TensorBoard:
  """The progress figures as TensorBoard scalars, 'progress/<figure>' under the names of
  `Progress.figures` (and of the summary's means) against env steps, in RUN_DIR/logs/progress/
  beside the nodes' own event files. They are a view of the logs, not a record: a write that
  fails (a full disk) prints one warning and the run goes on; the nodes' own writes decide
  whether it can."""

  def __init__(self, run_dir: str):
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    self._tf = tf
    self._warned = False
    with termination.stop_signals_deferred():
      self._writer = tf.summary.create_file_writer(os.path.join(run_dir, 'logs', 'progress'))

  def _attempt(self, write: Callable[[], None]) -> None:
    try:
      with termination.stop_signals_deferred():
        write()
    except self._tf.errors.OpError as e:
      if not self._warned:
        self._warned = True
        print(f'warning: progress not written to TensorBoard: {e.message.splitlines()[0]}',
              flush=True)

  def write(self, figures: Dict[str, float]) -> None:
    def scalars():
      step = int(figures['env_steps'])
      with self._writer.as_default():
        for name, value in figures.items():
          if name != 'env_steps' and not math.isnan(value):
            self._tf.summary.scalar(f'progress/{name}', value, step=step)
      self._writer.flush()
    self._attempt(scalars)

  def close(self) -> None:
    self._attempt(self._writer.close)

"""The nodes' loggers: CSV (every row) and TensorBoard event files under RUN_DIR/logs/<label>/."""
import csv
import os

from acme.utils import loggers
from acme.utils.loggers import tf_summary

from launch.program.config import RunConfig

# Node label -> the counter that is its x axis in TensorBoard.
_TB_STEPS = {'learner': 'learner_steps', 'precedence': 'precedence_steps'}


class AppendingCSVLogger(loggers.CSVLogger):
  """Acme's CSV logger takes its columns from the first row it writes; a node restarted or
  resumed onto an existing log would write rows whose columns do not match the file's header.
  This one keeps the header already in the file, and cuts a last row left unfinished (a node
  killed, or a full disk, while it wrote) so that the next row starts a line of its own."""

  def write(self, data):
    if self._writer is None and self._file.tell() > 0:
      _cut_unfinished_row(self.file_path)
      with open(self.file_path) as f:
        header = next(csv.reader(f), None)
      if header:
        self._writer = csv.DictWriter(self._file, fieldnames=header, extrasaction='ignore')
    super().write(data)


def _cut_unfinished_row(path: str) -> None:
  """Truncates `path` after its last newline (appends after the cut, as the logger's file is
  opened for appending)."""
  with open(path, 'rb') as f:
    f.seek(0, os.SEEK_END)
    size = f.tell()
    f.seek(max(0, size - 65536))
    tail = f.read()
  if tail.endswith(b'\n'):
    return
  last = tail.rfind(b'\n')
  os.truncate(path, size - len(tail) + last + 1 if last >= 0 else 0)


class NumbersOnly(loggers.Logger):
  """Passes on the numeric values of each row: TensorBoard's scalars cannot take text (an
  environment's `episode_info` may hold some, e.g. Turf's ruined cells, which the CSV keeps)."""

  def __init__(self, to: loggers.Logger):
    self._to = to

  def write(self, data):
    self._to.write({k: v for k, v in data.items() if not isinstance(v, (str, bytes))})

  def close(self):
    self._to.close()


def make_logger(cfg: RunConfig, label: str, time_delta: float = 0.0) -> loggers.Logger:
  """CSV (every row) and TensorBoard event files (at most one row a second per node, so
  actors with short episodes do not pay for it) under RUN_DIR/logs/<label>/."""
  logger = AppendingCSVLogger(cfg.run_dir, label=label, add_uid=False,
                              time_delta=time_delta, flush_every=1)
  tensorboard = tf_summary.TFSummaryLogger(os.path.join(cfg.run_dir, 'logs', label), label=label,
                                        steps_key=_TB_STEPS.get(label, 'actor_steps'))
  return loggers.NoneFilter(loggers.Dispatcher(
      [logger, loggers.TimeFilter(NumbersOnly(tensorboard), max(1.0, time_delta))]))

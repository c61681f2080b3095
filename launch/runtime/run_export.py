"""A run's export (`launch.export_logs`) as a place to continue the run from.

An export is a run directory cut small enough to commit: the run's JSON files, its CSV logs cut
to the columns the curves read (episode rows thinned), and, with --checkpoint, each learner's
newest checkpoint. A run whose directory is lost with its machine (a checkpoint is too big to
commit at every save; its export is committed at every stop) is continued from its export:
`restore` copies it back into the run directory, and the run resumes from that checkpoint with
its logs appended to the exported ones.

By convention a run's export is RUN/csv (EXPORT_SUBDIR), so that the run and the copy that
travels with the repository sit together.

The episode rows of an exported log are already thinned: each exported log carries a record of
how many leading rows are, and how many logged episodes each of them stands for
(logs/<node>/thinned.json), so that exporting a continued run again keeps those rows and thins
only the ones logged since, and the "last N episodes" figures read from a thinned log span N
episodes, not N rows (`episode_weights`).
"""
import glob
import os
import shutil
from typing import List, Optional, Sequence

from launch.runtime import run_state

EXPORT_SUBDIR = 'csv'
# Beside a logs.csv: {"rows": N, "episodes": [[count, per_row], ...]}: its first N rows are
# thinned, and the run-length pairs say how many logged episodes each of them stands for.
THINNED = 'thinned.json'
EARLIER_FORMAT_READER = '08cf5a1fe9'   # the last commit that reads a record without the weights
CHECKPOINTS = 'checkpoints'
CHECKPOINT_PATTERN = 'state-*.npz'


def thinned_rows(log_path: str) -> int:
  """How many leading data rows of `log_path` were thinned by an earlier export (0: none)."""
  record = run_state.read_json(os.path.join(os.path.dirname(log_path), THINNED), {}) or {}
  return int(record.get('rows', 0))


def episode_weights(log_path: str, num_rows: int) -> List[int]:
  """How many logged episodes each of the first `num_rows` data rows of `log_path` stands for: as
  recorded for the rows an export thinned, 1 for the rows after them. A record without the
  weights (an earlier version's) is ValueError, one line."""
  path = os.path.join(os.path.dirname(log_path), THINNED)
  record = run_state.read_json(path, {}) or {}
  rows = int(record.get('rows', 0))
  if rows and record.get('episodes') is None:
    raise ValueError(f'{path} lacks the episodes each thinned row stands for (an export of an '
                     f'earlier version); commit {EARLIER_FORMAT_READER} is the last that reads it')
  weights = [int(per_row) for count, per_row in record.get('episodes') or []
             for _ in range(int(count))]
  if len(weights) != rows:
    raise ValueError(f'{path}: its episode weights cover {len(weights)} rows, not the {rows} '
                     'it records')
  return (weights + [1] * max(num_rows - len(weights), 0))[:num_rows]


def write_thinned_rows(log_path: str, weights: Sequence[int]) -> None:
  """Records that every data row of `log_path` is thinned, row i standing for weights[i] logged
  episodes (kept run-length encoded: one pair for a long stretch thinned alike)."""
  runs: List[List[int]] = []
  for w in weights:
    if runs and runs[-1][1] == int(w):
      runs[-1][0] += 1
    else:
      runs.append([1, int(w)])
  run_state.write_json(os.path.join(os.path.dirname(log_path), THINNED),
                       {'rows': len(weights), 'episodes': runs})


def checkpoint_steps(export_dir: str) -> Optional[int]:
  """The steps of the newest learner checkpoint the export holds (None: it holds none)."""
  names = glob.glob(os.path.join(export_dir, CHECKPOINTS, '*', CHECKPOINT_PATTERN))
  if not names:
    return None
  return max(int(os.path.basename(n)[len('state-'):-len('.npz')]) for n in names)


def _copy(src: str, dst: str) -> None:
  """A file copied whole or not at all (to a temporary name, then renamed)."""
  shutil.copy2(src, dst + '.part')
  os.replace(dst + '.part', dst)


def restore(run_dir: str, export_dir: Optional[str] = None) -> Optional[str]:
  """Copies `export_dir` (default RUN/csv) back into `run_dir` when the directory does not hold
  its run any more but the export holds a checkpoint to continue it from. Returns what was done
  in one line, or None when there is nothing to restore (the run is there, or no export with a
  checkpoint is). Files the run directory already has are kept."""
  export_dir = export_dir or os.path.join(run_dir, EXPORT_SUBDIR)
  if run_state.holds_run(run_dir) or not run_state.holds_run(export_dir):
    return None
  steps = checkpoint_steps(export_dir)
  if steps is None:
    return None
  for dirpath, dirnames, filenames in os.walk(export_dir):
    rel = os.path.relpath(dirpath, export_dir)
    target = os.path.normpath(os.path.join(run_dir, rel))
    os.makedirs(target, exist_ok=True)
    for name in filenames:
      if (rel, name) != ('.', run_state.CONFIG) and not os.path.exists(os.path.join(target, name)):
        _copy(os.path.join(dirpath, name), os.path.join(target, name))
  # The config last: a copy cut short is not mistaken for a run, and is redone at the next call.
  _copy(os.path.join(export_dir, run_state.CONFIG), os.path.join(run_dir, run_state.CONFIG))
  env_steps = run_state.RunRecords(export_dir).saved_actor_steps()   # an export keeps them too
  return (f'restored {run_dir} from its export {export_dir}: learner checkpoint at step {steps}, '
          f'{env_steps:,} env steps')


"""What a run directory says about its run: whether it holds one, its counters, how each launch
of it ended, and a stop request. Every file is JSON, written to a temporary file and renamed.

  config.json        the resolved RunConfig of the run (written at its first launch)
  flags.json         the command-line flags of the first launch (what --resume starts from)
  counts.json        the counter node's counts, kept up to date by the coordinator
  run_state.json     one record per launch ("segment"): start, end, status, steps reached
  stop_request.json  written by the CLI on Ctrl-C / SIGTERM / SIGHUP: the coordinator then
                     checkpoints the learners and stops the program
  final_state.json   the coordinator's record of the end it made (status, counts, tables)
  failure.json       the node failure that stopped the run (on a full disk written into
                     disk_reserve's space, which each launch sets aside: launch.runtime.disk)
  summary.json       the run's summary at the end of its last launch (launch.runtime.summary)

Event logs (supervisor.jsonl, replay.jsonl) are the exception: one timestamped JSON line appended
per event (`RunRecords.append_record` / `read_records`), a line cut by a kill skipped on reading.

A process that works on a run builds one `RunRecords` from its directory where it starts (the
CLI's launch, a node, the cluster's node wrapper) and passes it down; the functions here that take
a path are for a directory not known to hold a run yet (holds_run, check_writable,
check_run_dir_use) or for a JSON file anywhere (read_json, write_json).

The launch's life (launch.runtime.lifecycle) and the summary (launch.runtime.summary) call down
into this module; it imports neither, nor anything else of launch/.
"""
import bisect
import json
import os
import tempfile
import time
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

# The run directory's JSON files go through the project's one writer (whole or not at all).
from envs.paths import write_json

CONFIG = 'config.json'
FLAGS_FILE = 'flags.json'
COUNTS = 'counts.json'
RUN_STATE = 'run_state.json'
STOP_REQUEST = 'stop_request.json'
FAILURE = 'failure.json'          # the first node failure that stopped the run (node, reason)
FINAL_STATE = 'final_state.json'  # written by the coordinator just before it stops the program
SUMMARY = 'summary.json'
SUPERVISOR_LOG = 'supervisor.jsonl'  # the supervisors' starts and failures of nodes
REPLAY_LOG = 'replay.jsonl'         # the replay's starts (what it restored) and checkpoints
REPLAY_CHECKPOINTS = os.path.join('checkpoints', 'replay')   # the replay's table checkpoints
RUN_TMP = 'tmp'                      # the program's temporary files (TMPDIR of its processes)
LAUNCHER_SESSION = 'launcher_session.txt'   # the launchers' pids: each leads its nodes' session

# What --resume may change: how much longer and on how many workers, not what is learned.
RESUMABLE_CHANGES = ('max_steps', 'num_actors', 'envs_per_actor', 'launch_type',
                     'checkpoint_period_s', 'max_node_failures', 'node_failure_window_s',
                     'vectorised_env', 'replay_checkpoint_period_s', 'actor_threads',
                     'hang_timeout_s', 'checkpoints_kept', 'max_skipped_updates', 'run_dir',
                     'learner_device', 'learner_host_devices', 'precedence_device')

COMPLETED = 'completed'
STOPPED = 'stopped by user'
UNRECORDED_END = 'ended unrecorded'   # its launcher was killed before it could close the segment


def read_json(path: str, default=None):
  """A JSON file anywhere (`default` when there is none)."""
  try:
    with open(path) as f:
      return json.load(f)
  except FileNotFoundError:
    return default


# Asked of a directory before it is known to hold a run (a --run_dir flag, an export, an
# experiment's step): a path, not a RunRecords.
def holds_run(run_dir: str) -> bool:
  return os.path.exists(os.path.join(run_dir, CONFIG))


def check_run_dir_use(run_dir: Optional[str], resume: bool) -> None:
  """A training CLI's --run_dir / --resume rule: --resume needs the run directory, and a
  directory that already holds a run is only ever continued (raises ValueError, one line)."""
  if resume and not run_dir:
    raise ValueError('--resume needs --run_dir (the run to continue)')
  if not resume and run_dir and holds_run(run_dir):
    raise ValueError(f'{run_dir} already holds a run; pass --resume to continue it, or '
                     'choose another --run_dir')


def check_writable(directory: str) -> None:
  """Raises ValueError (one line) when `directory` (a run's, before anything is written to it;
  an experiment's output) cannot be created or written."""
  try:
    os.makedirs(directory, exist_ok=True)
    fd, probe = tempfile.mkstemp(dir=directory, prefix='.write-test-')
    os.close(fd)
    os.remove(probe)
  except OSError as e:
    raise ValueError(f'run directory {directory} is not writable: {e.strerror or e}') from None


def config_differences(saved: Dict[str, Any], new: Dict[str, Any], prefix: str = '') -> List[str]:
  """Dotted keys whose values differ between two config dicts, except RESUMABLE_CHANGES."""
  out = []
  for key in sorted(set(saved) | set(new)):
    name = prefix + key
    if not prefix and key in RESUMABLE_CHANGES:
      continue
    a, b = saved.get(key), new.get(key)
    if isinstance(a, dict) and isinstance(b, dict):
      out += config_differences(a, b, name + '.')
    elif _normal(a) != _normal(b):
      out.append(name)
  return out


def _normal(v):
  return [_normal(x) for x in v] if isinstance(v, (list, tuple)) else v


def segment_spans(segs: Sequence[Dict[str, Any]], seen: Iterable[float]) -> List[Tuple[float, float]]:
  """(start, end) of each launch. A segment without an end (still running, or from before
  begin_segment closed killed launches) ends at the last of the times in `seen` (unix times at
  which the run's nodes logged) that falls inside it, never after the next launch began, and
  at its own start when none does."""
  seen = sorted(seen)
  spans = []
  for i, seg in enumerate(segs):
    start, end = seg['start'], seg.get('end')
    if end is None:
      limit = segs[i + 1]['start'] if i + 1 < len(segs) else float('inf')
      inside = seen[bisect.bisect_left(seen, start):bisect.bisect_left(seen, limit)]
      end = inside[-1] if inside else start
    spans.append((start, end))
  return spans


class RunRecords:
  """The records of the run in `run_dir` (the files above), read and written by their names.

  Built once where a process starts on the run and passed down. A Launchpad node is given the
  run directory's path instead (its arguments cross into its process pickled) and builds its
  own where it starts (launch.program.layout)."""

  def __init__(self, run_dir: str):
    self.run_dir = run_dir

  def __repr__(self) -> str:
    return f'RunRecords({self.run_dir!r})'

  def path(self, name: str) -> str:
    """Where the run keeps `name` (a file or directory above, or another of its own)."""
    return os.path.join(self.run_dir, name)

  def exists(self, name: str) -> bool:
    return os.path.exists(self.path(name))

  def read(self, name: str, default=None):
    """The run's JSON file `name` (`default` when there is none)."""
    return read_json(self.path(name), default)

  def write(self, name: str, obj: Any) -> None:
    write_json(self.path(name), obj)

  def remove(self, name: str) -> None:
    try:
      os.remove(self.path(name))
    except FileNotFoundError:
      pass

  def append_record(self, log_name: str, record: Dict[str, Any]) -> None:
    with open(self.path(log_name), 'a') as f:
      f.write(json.dumps({'time': time.time(), **record}) + '\n')
      f.flush()

  def read_records(self, log_name: str) -> List[Dict[str, Any]]:
    try:
      with open(self.path(log_name)) as f:
        lines = f.read().splitlines()
    except FileNotFoundError:
      return []
    records = []
    for line in lines:
      try:
        records.append(json.loads(line))
      except ValueError:
        pass  # a line cut by a kill
    return records

  def load_counts(self) -> Dict[str, float]:
    return self.read(COUNTS, {}) or {}

  def save_counts(self, counts: Dict[str, float]) -> None:
    self.write(COUNTS, counts)

  def saved_actor_steps(self) -> float:
    """The run's actor steps as the coordinator last saved them."""
    return self.load_counts().get('actor_steps', 0)

  def request_stop(self, reason: str = STOPPED) -> None:
    self.write(STOP_REQUEST, {'reason': reason, 'time': time.time()})

  def stop_requested(self) -> Optional[str]:
    req = self.read(STOP_REQUEST)
    return None if req is None else req.get('reason', STOPPED)

  def clear_stop_request(self) -> None:
    self.remove(STOP_REQUEST)

  def clear_launch_end(self) -> None:
    """Before a launch: the previous launch's stop request, final state and failure go (the new
    launch's end is its own to record)."""
    for stale in (STOP_REQUEST, FINAL_STATE, FAILURE):
      self.remove(stale)

  def failure_reason(self) -> Optional[str]:
    """Why a node failure stopped the run (failure.json), None when none did."""
    return (self.read(FAILURE, {}) or {}).get('reason')

  def end_status(self, status: Optional[str] = None) -> str:
    """How the current launch ended: `status` when given, else the coordinator's final state,
    else a recorded node failure, else stopped."""
    final = self.read(FINAL_STATE, {}) or {}
    failure = self.failure_reason()
    return status or final.get('status') or (f'failed: {failure}' if failure else None) or STOPPED

  def segments(self) -> List[Dict[str, Any]]:
    return self.read(RUN_STATE, {}).get('segments', [])

  def begin_segment(self, resumed_from_steps: float) -> None:
    """Opens a launch's segment. A previous launch killed before it could close its own (SIGKILL,
    the machine's session ending) is closed first, at the last time the coordinator saved the
    counts: otherwise that launch would count as running ever after."""
    segs = self.segments()
    if segs and segs[-1].get('end') is None:
      try:
        last_saved = os.path.getmtime(self.path(COUNTS))
      except OSError:
        last_saved = segs[-1]['start']
      segs[-1].update(end=min(max(last_saved, segs[-1]['start']), time.time()),
                      status=UNRECORDED_END, actor_steps=self.saved_actor_steps())
    segs.append({'start': time.time(), 'end': None, 'status': 'running',
                 'resumed_from_steps': resumed_from_steps})
    self.write(RUN_STATE, {'segments': segs})

  def end_segment(self, status: Optional[str] = None, actor_steps: Optional[float] = None) -> str:
    """Closes the current launch's segment at `status` (else as end_status reads it) and
    `actor_steps` (else the saved counts'); returns the status."""
    status = self.end_status(status)
    segs = self.segments()
    if segs:
      segs[-1].update(end=time.time(), status=status, actor_steps=(
          self.saved_actor_steps() if actor_steps is None else actor_steps))
      self.write(RUN_STATE, {'segments': segs})
    return status

  def total_wall_time(self, seen: Iterable[float] = ()) -> float:
    """Seconds the run's launches lasted (the gaps between launches left out); `seen` as in
    segment_spans."""
    return sum(end - start for start, end in segment_spans(self.segments(), seen))

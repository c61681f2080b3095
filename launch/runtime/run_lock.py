"""One launch per run directory: the launch that owns RUN_DIR holds an exclusive flock on
RUN_DIR/launch.lock for as long as it lives. The kernel drops the lock when its holder dies
(kill -9, a crashed host's process, a requeued Slurm job), so a dead launch's lock never blocks;
a live one makes any second launch on the directory, with or without --resume, a one-line
refusal naming its pid and host. Node processes do not inherit the lock (subprocesses close
inherited descriptors), so it is the launching process's own. On a shared file system the lock
holds across hosts where the file system supports flock (NFSv4, Lustre with flock enabled).

Who holds it: `launch.train` for a local run and while it packages a cluster launch (for the
whole run with --cluster_start); the coordinator replica's wrapper for the life of a cluster
job (launch.cluster.replica), so a packaged, Slurm or Kubernetes job excludes local runs and
other jobs too. The lock file records its holder (pid, host, since, and for cluster launches
the launch and job it holds the directory for)."""
import datetime
import fcntl
import json
import os
import socket
from typing import Optional

LOCK_FILE = 'launch.lock'

_held = {}   # run dir -> the open file whose flock this process holds


class RunDirInUse(ValueError):
  """Another live launch holds the run directory."""


def holder(run_dir: str) -> Optional[dict]:
  """What the lock file says of its last holder ({pid, host, since}), or None."""
  try:
    with open(os.path.join(run_dir, LOCK_FILE)) as f:
      return json.loads(f.read() or 'null')
  except (OSError, ValueError):
    return None


def in_use(run_dir: str) -> RunDirInUse:
  """The one-line refusal naming the lock's live holder."""
  who = holder(run_dir) or {}
  return RunDirInUse(f'{run_dir} is in use by a live launch (pid {who.get("pid", "?")} on '
                     f'{who.get("host", "?")}, since {who.get("since", "?")}); stop it '
                     'first, or wait for it to end')


def _try_lock(f) -> bool:
  try:
    fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    return True
  except BlockingIOError:
    return False


def acquire(run_dir: str, **record) -> None:
  """Takes RUN_DIR's lock for this process (creating RUN_DIR); raises RunDirInUse (one line)
  when a live launch holds it. `record`: more of the holder's record (JSON values).
  Idempotent within a process."""
  run_dir = os.path.abspath(run_dir)
  if run_dir in _held:
    return
  os.makedirs(run_dir, exist_ok=True)
  f = open(os.path.join(run_dir, LOCK_FILE), 'a+')
  if not _try_lock(f):
    f.close()
    raise in_use(run_dir)
  _held[run_dir] = f
  _write_record(f, {'pid': os.getpid(), 'host': socket.gethostname(),
                    'since': datetime.datetime.now().isoformat(timespec='seconds'), **record})


def _write_record(f, record: dict) -> None:
  f.seek(0)
  f.truncate()
  f.write(json.dumps(record))
  f.flush()


def annotate(run_dir: str, **record) -> None:
  """Adds to the record of a lock this process holds (a launcher naming the launch and job it
  holds the directory for, launch.cluster.start)."""
  f = _held[os.path.abspath(run_dir)]
  _write_record(f, {**(holder(run_dir) or {}), **record})


def check_free(run_dir: str) -> None:
  """Raises RunDirInUse (one line) when a live launch other than this process holds RUN_DIR's
  lock; takes nothing and writes nothing (a missing directory is free). For steps that write
  into a run directory without being its launch, such as packaging a cluster launch."""
  run_dir = os.path.abspath(run_dir)
  if run_dir in _held:
    return
  try:
    f = open(os.path.join(run_dir, LOCK_FILE))   # read-only: flock needs no write access
  except FileNotFoundError:
    return
  with f:
    if not _try_lock(f):
      raise in_use(run_dir)
    fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def release(run_dir: str) -> None:
  """Drops this process's lock on RUN_DIR (it also goes when the process ends)."""
  f = _held.pop(os.path.abspath(run_dir), None)
  if f is not None:
    fcntl.flock(f.fileno(), fcntl.LOCK_UN)
    f.close()

"""One launch per run directory: the launch that owns RUN_DIR holds an exclusive flock on
RUN_DIR/launch.lock for as long as it lives. The kernel drops the lock when its holder dies
(kill -9, a crashed host's process, a requeued Slurm job), so a dead launch's lock never blocks;
a live one makes any second launch on the directory, with or without --resume, a one-line
refusal naming its pid and host. Node processes do not inherit the lock (subprocesses close
inherited descriptors), so it is the launching process's own. On a shared file system the lock
holds across hosts where the file system supports flock (NFSv4, Lustre with flock enabled)."""
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


def acquire(run_dir: str) -> None:
  """Takes RUN_DIR's lock for this process (creating RUN_DIR); raises RunDirInUse (one line)
  when a live launch holds it. Idempotent within a process."""
  run_dir = os.path.abspath(run_dir)
  if run_dir in _held:
    return
  os.makedirs(run_dir, exist_ok=True)
  f = open(os.path.join(run_dir, LOCK_FILE), 'a+')
  try:
    fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
  except BlockingIOError:
    f.close()
    who = holder(run_dir) or {}
    raise RunDirInUse(f'{run_dir} is in use by a live launch (pid {who.get("pid", "?")} on '
                      f'{who.get("host", "?")}, since {who.get("since", "?")}); stop it '
                      'first, or wait for it to end') from None
  f.seek(0)
  f.truncate()
  f.write(json.dumps({'pid': os.getpid(), 'host': socket.gethostname(),
                      'since': datetime.datetime.now().isoformat(timespec='seconds')}))
  f.flush()
  _held[run_dir] = f


def release(run_dir: str) -> None:
  """Drops this process's lock on RUN_DIR (it also goes when the process ends)."""
  f = _held.pop(os.path.abspath(run_dir), None)
  if f is not None:
    fcntl.flock(f.fileno(), fcntl.LOCK_UN)
    f.close()

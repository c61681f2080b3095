"""Process helpers shared by the local launcher, the node supervisor, distributed collection and
the cluster wrappers. Light imports only: a cluster replica's wrapper process imports this."""
import ctypes
import os
import signal
import subprocess
import threading
import time
from typing import Callable, Optional

import psutil

_PR_SET_PDEATHSIG = 1

# After a stop request (Ctrl-C, SIGTERM, scancel): time for the coordinator to end the run (the
# learners save their final checkpoints); then whatever is left is stopped.
GRACEFUL_STOP_S = 150.0


class RunFailed(RuntimeError):
  """A run ended because a node failed; the message names the node and why."""


def die_with_parent(sig=signal.SIGKILL, parent: Optional[int] = None):
  """preexec_fn: the child gets `sig` when its parent dies (`functools.partial` it for another
  signal). A node child gets SIGKILL by default: a node blocked in C++ (a learner waiting on
  Reverb) ignores SIGTERM, and with its parent gone nothing is left that would stop it.
  `parent`: the parent's pid, taken before the fork, so that a parent that died before the
  child asked (between fork and prctl) is not missed."""
  try:
    ctypes.CDLL('libc.so.6', use_errno=True).prctl(_PR_SET_PDEATHSIG, sig)
  except OSError:
    pass
  if parent is not None and os.getppid() != parent:
    os.kill(os.getpid(), sig)


def session_launcher(sessions_file: str) -> Optional[int]:
  """The pid of this process's session leader when `sessions_file` (a run's launcher pids, as
  written by its CLI) names it, else None. The leader may be gone already."""
  try:
    with open(sessions_file) as f:
      launchers = [int(word) for word in f.read().split()]
  except (OSError, ValueError):
    return None
  return os.getsid(0) if os.getsid(0) in launchers else None


def call_when_gone(pid: int, callback: Callable[[], None], poll_s: float = 2.0) -> threading.Thread:
  """Calls `callback` (once, in a daemon thread) when process `pid` has ended: exited, killed, a
  zombie its parent has not reaped, or gone already. psutil tells a reused pid from the process
  it first saw."""
  def poll():
    try:
      process = psutil.Process(pid)
      while process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
        time.sleep(poll_s)
    except psutil.Error:
      pass
    callback()
  thread = threading.Thread(target=poll, daemon=True)
  thread.start()
  return thread


def _is_exception_line(line: str) -> bool:
  """'SomeError: ...' or 'package.module.SomeError: ...': the last line of a Python traceback."""
  head = line.split(':', 1)[0]
  return (':' in line and all(part.isidentifier() for part in head.split('.'))
          and head.endswith(('Error', 'Exception', 'Exit')))


def _is_glog_error(line: str) -> bool:
  """A C++ error or fatal line of absl/glog logging: 'E1126 12:00:00.000000 ...'."""
  return len(line) > 5 and line[0] in 'EF' and line[1:5].isdigit() and line[5] == ' '


def log_size(log_path: str) -> int:
  """The bytes `log_path` holds now (0 when it does not exist): where what a process started
  next writes to it begins (`last_error_line`'s `since`)."""
  try:
    return os.path.getsize(log_path)
  except OSError:
    return 0


def last_error_line(log_path: str, max_bytes: int = 65536, since: int = 0) -> str:
  """Why a process ended, read from the last `max_bytes` of its log after byte `since` (a log
  that several processes append to in turn holds the earlier ones' errors before it): the last
  exception line (a traceback's last line), else the last line that names an error or is a C++
  error line, else the last line; '' for an empty or unreadable log, or one the process added
  nothing to. At most 500 characters."""
  try:
    with open(log_path, 'rb') as f:
      f.seek(0, os.SEEK_END)
      f.seek(max(since, f.tell() - max_bytes, 0))
      lines = [l.strip() for l in f.read().decode(errors='replace').splitlines() if l.strip()]
  except OSError:
    return ''
  for looks_like_error in (_is_exception_line,
                           lambda l: 'Error' in l or 'Exception' in l or _is_glog_error(l),
                           lambda l: True):
    for line in reversed(lines):
      if looks_like_error(line):
        return line[:500]
  return ''


def signal_group(pid: int, sig) -> None:
  try:
    os.killpg(pid, sig)
  except (ProcessLookupError, PermissionError):
    pass


def kill_session(child: subprocess.Popen) -> None:
  """Kills whatever is left of the child's session (there should be nothing)."""
  if child.poll() is None:
    signal_group(child.pid, signal.SIGTERM)
    try:
      child.wait(timeout=15)
    except subprocess.TimeoutExpired:
      pass
  signal_group(child.pid, signal.SIGKILL)
  try:
    child.wait(timeout=5)
  except subprocess.TimeoutExpired:
    pass
  deadline = time.time() + 10  # SIGKILL is asynchronous: wait until the session is empty
  while leftover_processes(child.pid) and time.time() < deadline:
    time.sleep(0.1)


def leftover_processes(session_id: int):
  """Live (non-zombie) processes of session `session_id`."""
  out = []
  for p in psutil.process_iter(['pid', 'status']):
    try:
      if os.getsid(p.pid) == session_id and p.info['status'] != psutil.STATUS_ZOMBIE:
        out.append(p.pid)
    except (ProcessLookupError, PermissionError, psutil.Error):
      pass
  return out


def node_label(command: str) -> Optional[str]:
  """The Launchpad node label ('replay/0') in a node process's command line, or None.

  Local launches start each node as `decorate_output COLOUR LABEL python process_entry.py ...`;
  the watched process is that wrapper, whose pid no node records (each node's pid file holds
  its own Python process), so a dead wrapper is named from its command."""
  words = command.split()
  for i, word in enumerate(words[:-2]):
    if os.path.basename(word) == 'decorate_output':
      return words[i + 2]
  return None


def node_processes(launcher_pid: int, min_age_s: float = 5.0):
  """pid -> command of the Launchpad node processes started by `launcher_pid` (its children:
  a supervised node's own child is the supervisor's business). Only processes alive
  for `min_age_s` count: a node that forks (before exec'ing a helper such as ldconfig) briefly
  has a child with the node's own command line, which must not be taken for a node."""
  nodes = {}
  now = time.time()
  for p in psutil.Process(launcher_pid).children(recursive=False):
    try:
      cmd = ' '.join(p.cmdline())
      old_enough = now - p.create_time() >= min_age_s
    except psutil.Error:
      continue
    if 'process_entry' in cmd and old_enough:
      nodes[p.pid] = cmd
  return nodes

"""A hung node: alive, so no supervisor hears of it, but doing nothing (stopped by SIGSTOP, stuck
in a deadlock or an NFS read). The supervisor samples its node's process from /proc every few
seconds and judges it by what the node is for:

- every node: *stopped* (state T) for `timeout_s` is hung;
- workers (actors, the IMPALA learner), whose work is to run: CPU time that has not moved by
  `MIN_PROGRESS_CPU_S` in `timeout_s`, while some other worker's moved by `PEER_PROGRESS_CPU_S`,
  is hung. A worker that waits because everyone waits (the learner hung, the actors held back by
  the rate limiter) is not blamed: the stopped one is found by the first rule. A worker's process
  is judged so only once it has started: once it has written its log since its process began
  (`reported`), or `startup_s` after it began. Before that it may wait for its peers (a learner
  restarted under load waits for its first batch, its courier port, a checkpoint) without
  being taken for hung again.
- the replay, counter, coordinator and precedence learner (throttled to the env steps) wait by
  design: only the first rule applies to them.

CPU time is the progress measure because it needs nothing from the node: a hung node cannot be
asked, and its peers' counters stall with it."""
import dataclasses
import os
from typing import Dict, Optional, Tuple

WORKER_PREFIXES = ('actor', 'learner')
MIN_PROGRESS_CPU_S = 0.5   # a hung process's threads still tick a little (gRPC, Python's timers)
PEER_PROGRESS_CPU_S = 5.0
STARTUP_S = 180.0          # the longest start a worker gets before its first log row (see above)
_TICKS = os.sysconf('SC_CLK_TCK')


def is_worker(name: str) -> bool:
  return name.startswith(WORKER_PREFIXES)


@dataclasses.dataclass(frozen=True)
class Sample:
  time: float
  stopped: bool
  cpu_s: float


def sample(pid: int, now: float) -> Optional[Sample]:
  """The process's state and CPU time (user + system, all threads); None when it is gone."""
  try:
    with open(f'/proc/{pid}/stat') as f:
      stat = f.read()
  except OSError:
    return None
  fields = stat[stat.rindex(')') + 2:].split()   # after "pid (comm) "
  return Sample(now, fields[0] in 'Tt', (int(fields[11]) + int(fields[12])) / _TICKS)


def peer_pids(run_dir: str, name: str) -> Dict[str, int]:
  """The other workers' current processes, from RUN_DIR/pids."""
  out = {}
  pid_dir = os.path.join(run_dir, 'pids')
  try:
    names = os.listdir(pid_dir)
  except OSError:
    return out
  for file in names:
    peer = file[:-len('.pid')]
    if file.endswith('.pid') and peer != name and is_worker(peer):
      try:
        with open(os.path.join(pid_dir, file)) as f:
          out[peer] = int(f.read().strip())
      except (OSError, ValueError):
        continue
  return out


class HangWatch:
  """Fed one sample of its node (and of its peers) at a time; says when the node is hung."""

  def __init__(self, name: str, timeout_s: float, startup_s: Optional[float] = None):
    self._name = name
    self._timeout_s = timeout_s
    self._startup_s = startup_s if startup_s is not None else startup_grace_s(timeout_s)
    self._began: Optional[float] = None    # the first sample's time: the process's start
    self._stopped_since: Optional[float] = None
    self._history = []                     # own samples within the window
    self._peers: Dict[Tuple[str, int], list] = {}   # (peer, pid) -> samples within the window

  def observe(self, own: Sample, peers: Dict[Tuple[str, int], Sample],
              reported: bool = True) -> Optional[str]:
    """A one-line verdict when the node is hung, else None. `peers`: (name, pid) -> sample (a
    restarted peer is a new process, its CPU time counted from its own start). `reported`:
    whether the node has written its log since its process began."""
    self._began = own.time if self._began is None else self._began
    if own.stopped:
      self._stopped_since = self._stopped_since if self._stopped_since is not None else own.time
      if own.time - self._stopped_since >= self._timeout_s:
        return f'node {self._name} was stopped (SIGSTOP) for {own.time - self._stopped_since:.0f} s'
    else:
      self._stopped_since = None
    if not is_worker(self._name):
      return None
    if not reported and own.time - self._began < self._startup_s:
      self._history, self._peers = [], {}   # judged from when it has started
      return None
    self._history = _window(self._history + [own], own.time, self._timeout_s)
    self._peers = {key: _window(self._peers.get(key, []) + [s], own.time, self._timeout_s)
                   for key, s in peers.items()}
    span, moved = _progress(self._history)
    if span < self._timeout_s or moved >= MIN_PROGRESS_CPU_S:
      return None
    busy = [(key[0], m) for key, (_, m) in ((k, _progress(h)) for k, h in self._peers.items())
            if m >= PEER_PROGRESS_CPU_S]
    if not busy:
      return None
    peer, peer_cpu = max(busy, key=lambda pm: pm[1])
    return (f'node {self._name} made no progress for {span:.0f} s ({moved:.1f} s of CPU) while '
            f'{peer} used {peer_cpu:.0f} s')


def startup_grace_s(timeout_s: float) -> float:
  """How long a worker that has not yet written its log may wait before the CPU rule applies."""
  return max(3 * timeout_s, STARTUP_S)


def log_written_since(run_dir: str, name: str, since: float) -> bool:
  """Whether node `name` has written its log (RUN_DIR/logs/NAME/logs.csv) since `since`."""
  try:
    return os.path.getmtime(os.path.join(run_dir, 'logs', name, 'logs.csv')) >= since
  except OSError:
    return False


def _window(samples, now: float, timeout_s: float):
  # Keep the newest sample at least timeout_s old and everything after it.
  old = [i for i, s in enumerate(samples) if now - s.time >= timeout_s]
  return samples[old[-1]:] if old else samples


def _progress(samples) -> Tuple[float, float]:
  """(seconds covered, CPU seconds used) over the samples."""
  if len(samples) < 2:
    return 0.0, 0.0
  return samples[-1].time - samples[0].time, samples[-1].cpu_s - samples[0].cpu_s

"""Node supervision: restart a node's process when it dies, stop the run when it keeps dying.

`SupervisedNode(node, ...)` takes the node's place in the Launchpad program. Its own process runs
the node in a child process (Launchpad's own python-node entry point, the node cloudpickled, its
addresses resolved once so a restarted node serves on the same port) and restarts the child when
it exits abnormally (a crash, kill -9). The supervisor's process never unpickles the node itself,
so it stays small (Launchpad and this module, not the program's TensorFlow and JAX). A node that
fails `max_failures` times within `window_s` seconds (or once, fatally) stops the program: the
supervisor writes RUN_DIR/failure.json naming the node and why, then calls `lp.stop()`.

Every node of the program is supervised: learners restart from their checkpoints, the replay
from its tables' checkpoint (launch.program.replay), the counter from counts.json; actors and the
coordinator keep no state of their own.

Every start and failure is appended to RUN_DIR/supervisor.jsonl (read back by the summary);
each node's output goes to RUN_DIR/node_logs/<name>.log; RUN_DIR/pids/<name>.pid holds the
current process of each node (what the fault-injection tests kill).

This is Launchpad's MultiProcessingColocation idea for one node, with a failure window and
records; the pip build of Launchpad 0.5.2 lacks the entry script that class starts.
"""
import functools
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import List

import cloudpickle
import launchpad as lp
from launchpad import address as lp_address
from launchpad.nodes.python import node as python

from envs import paths
from launch.runtime import disk, hangs, launchpad_internals, processes, run_state
from launch.runtime.processes import die_with_parent, last_error_line, log_size

SUPERVISOR_LOG = run_state.SUPERVISOR_LOG
STOP_GRACE_S = 2.0   # after a node exits: time for a program stop to become visible
HANG_POLL_S = 5.0    # how often a supervised node's process is sampled for a hang
ORPHAN_STOP_S = 10.0  # its launcher gone: time for the node's child to act on SIGTERM
MAX_HANGS = 2        # a node that hangs again after its restart stops the run


class _Resolved(lp_address.AbstractAddressBuilder):
  def __init__(self, address: str):
    self._address = address

  def build(self) -> str:
    return self._address


def write_pid(run_dir: str, name: str) -> None:
  """Records this process as node `name` (called by the node's own process)."""
  d = os.path.join(run_dir, 'pids')
  os.makedirs(d, exist_ok=True)
  with paths.atomic_write(os.path.join(d, f'{name}.pid')) as f:
    f.write(str(os.getpid()))


def append_event(records: run_state.RunRecords, event: dict) -> None:
  try:
    records.append_record(SUPERVISOR_LOG, event)
  except OSError:
    pass   # a full disk: the event is lost, not the supervision (which then stops the run)


def read_events(records: run_state.RunRecords):
  return records.read_records(SUPERVISOR_LOG)


# Failures a restart would only repeat: no valid checkpoint to start from, or a learner whose
# updates are no longer finite. The run stops at the first, saying why.
FATAL_ERRORS = ('CheckpointError', 'CorruptCheckpoint', 'DivergenceError')


def is_fatal(error_line: str) -> bool:
  """A failure that a restart would repeat: a corrupt checkpoint, divergence, a full disk."""
  return any(name in error_line for name in FATAL_ERRORS) or disk.is_disk_full(error_line)


def _run_ending(records: run_state.RunRecords) -> bool:
  # The coordinator writes final_state.json just before it stops the program, a supervisor that
  # gives up failure.json: the stop may not have reached this supervisor yet, and a node
  # restarted now would meet the other's cause (a full disk) or be killed at once.
  return any(records.exists(name) for name in (run_state.FINAL_STATE, run_state.FAILURE))


def _run_node(node_bytes: bytes, addresses: List[str]):
  """A supervised node's child: the node, unpickled here rather than in its supervisor, serving
  on the addresses the supervisor resolved (the same ones after every restart)."""
  node = cloudpickle.loads(node_bytes)
  for address, resolved in zip(node.addresses, addresses):
    address.bind(_Resolved(resolved))
  return node.function()


class SupervisedNode(python.PyNode):
  """Runs `node` (a PyNode: CourierNode, ...) in a child process and restarts it on failure."""

  def __init__(self, node: python.PyNode, name: str, run_dir: str, max_failures: int = 3,
               window_s: float = 60.0, hang_timeout_s: float = 0.0):
    super().__init__(self._supervise)
    self._node = node
    self._name = name
    self._run_dir = run_dir
    self._max_failures = max_failures
    self._window_s = window_s
    self._hang_timeout_s = hang_timeout_s   # 0: hangs are not looked for
    self.addresses.extend(node.addresses)  # Launchpad allocates the node's ports through us

  def create_handle(self):
    return self._node.create_handle()  # peers talk to the node itself

  @property
  def input_handles(self):
    if '_node' in self.__dict__:
      return self._node.input_handles
    return self.__dict__.get('_input_handles', [])  # unpickled: the node itself stays bytes

  def _initialize_context(self, launch_type, launch_config):   # launchpad_internals.CONTEXT_HOOK
    launchpad_internals.initialize_context(self, launch_type, launch_config, cls=python.PyNode)
    launchpad_internals.initialize_context(self._node, launch_type, launch_config)

  def _wait(self, child: subprocess.Popen, stopping: threading.Event):
    """(exit code, None) when the child exits; (kill's exit code, verdict) when it hung and was
    killed (launch.runtime.hangs). While the program stops, nothing is judged (a stopped child
    cannot act on its SIGTERM: it is killed)."""
    if not self._hang_timeout_s:
      return child.wait(), None
    watch = hangs.HangWatch(self._name, self._hang_timeout_s)
    began = time.time()
    while True:
      try:
        return child.wait(timeout=HANG_POLL_S), None
      except subprocess.TimeoutExpired:
        pass
      if stopping.is_set():
        child.kill()
        return child.wait(), None
      now = time.time()
      own = hangs.sample(child.pid, now)
      if own is None:
        continue
      peers = {(peer, pid): s for peer, pid in hangs.peer_pids(self._run_dir, self._name).items()
               if (s := hangs.sample(pid, now)) is not None}
      verdict = watch.observe(own, peers,
                              reported=hangs.log_written_since(self._run_dir, self._name, began))
      if verdict:
        child.kill()   # SIGKILL ends a stopped process too
        return child.wait(), verdict

  def __getstate__(self):
    # The node travels pickled inside this object's pickle: the supervisor's process never
    # imports the program's modules (TensorFlow, JAX, Reverb: ~6 s of CPU, ~0.5 GB); its child does.
    state = dict(self.__dict__)
    if '_node' in state:
      node = state.pop('_node')
      state['_node_bytes'] = cloudpickle.dumps(node)
      # Handles are addresses only (no program modules), so they can travel outside the bytes.
      state['_input_handles'] = list(node.input_handles)
    return state

  def _supervise(self):
    self._records = run_state.RunRecords(self._run_dir)   # the node's process starts here
    fn_path, log_path = self._write_child_task()
    entry = launchpad_internals.PROCESS_ENTRY
    stopping = threading.Event()
    running: List[subprocess.Popen] = []   # the current child, once started
    self._stop_child_on_program_stop(stopping, running)
    self._stop_with_launcher(stopping, running)
    failures, hangs_seen = [], []
    try:
      while not stopping.is_set():
        since = log_size(log_path)   # the log holds earlier starts' output: not this one's end
        with open(log_path, 'ab') as log:
          child = subprocess.Popen(
              [sys.executable, entry, '--lp_task_id', '0', '--data_file', fn_path],
              stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
              preexec_fn=functools.partial(die_with_parent, parent=os.getpid()))
        running[:] = [child]
        # A hang's restart counts as a start too: a launch's first start is its only attempt 1.
        append_event(self._records, {'node': self._name, 'event': 'start', 'pid': child.pid,
                                     'attempt': len(failures) + len(hangs_seen) + 1})
        code, hung = self._wait(child, stopping)
        if hung:
          hangs_seen.append(hung)
          if self._gave_up_on_hang(hung, len(hangs_seen)):
            return
          continue
        # The program stopping kills nodes too (the signal may reach the child before this
        # process hears of the stop): an exit then is no failure.
        if code == 0 or stopping.wait(STOP_GRACE_S) or _run_ending(self._records):
          return
        failures.append(time.time())
        if self._gave_up_on_failure(code, failures, log_path, since):
          return
        time.sleep(1.0)  # let the port be released before the node binds it again
    finally:
      if running and running[0].poll() is None:
        running[0].terminate()
      try:
        os.remove(fn_path)
      except OSError:
        pass

  def _write_child_task(self):
    """(the file holding the node's child task, the node's log file): the node, pickled, run on
    the addresses resolved now (the same ports after a restart)."""
    resolved = [address.resolve() for address in self.addresses]  # same ports after a restart
    node_bytes = self.__dict__.get('_node_bytes') or cloudpickle.dumps(self._node)
    fd, fn_path = tempfile.mkstemp(prefix=f'lp-{self._name}-', suffix='.pkl')
    with os.fdopen(fd, 'wb') as f:
      cloudpickle.dump([functools.partial(_run_node, node_bytes, resolved)], f)
    log_dir = os.path.join(self._run_dir, 'node_logs')
    os.makedirs(log_dir, exist_ok=True)
    return fn_path, os.path.join(log_dir, f'{self._name}.log')

  @staticmethod
  def _stop_child_on_program_stop(stopping: threading.Event,
                                  running: List[subprocess.Popen]) -> None:
    """Sets `stopping` and terminates the running child when the program stops."""
    # Launchpad's worker manager is per thread: taken here (the node's thread), waited on in the
    # helper (lp.wait_for_stop() there raises: the child got the manager's SIGKILL, not SIGTERM).
    manager = launchpad_internals.worker_manager()

    def stop_child():
      manager.wait_for_stop()
      stopping.set()
      if running and running[0].poll() is None:
        running[0].terminate()
    threading.Thread(target=stop_child, daemon=True).start()

  def _stop_with_launcher(self, stopping: threading.Event,
                          running: List[subprocess.Popen]) -> None:
    """Ends this node when the launcher (its session's leader) died with the CLI (kill -9, OOM):
    its parent, Launchpad's output decorator, outlives the launcher (BUILD_NOTES, Pitfalls)."""
    launcher = processes.session_launcher(self._records.path(run_state.LAUNCHER_SESSION))
    if launcher is None:
      return

    def end_node():
      stopping.set()
      print(f'the launcher (pid {launcher}) is gone: stopping', file=sys.stderr, flush=True)
      if running and running[0].poll() is None:
        running[0].terminate()
        try:
          running[0].wait(timeout=ORPHAN_STOP_S)
        except subprocess.TimeoutExpired:
          running[0].kill()
      os._exit(1)
    processes.call_when_gone(launcher, end_node)

  def _give_up(self, reason: str, when: float) -> None:
    """Records why the run stops (failure.json, a gave_up event) and stops the program."""
    disk.write_despite_full(self._run_dir, functools.partial(
        self._records.write, run_state.FAILURE, {'node': self._name, 'reason': reason, 'time': when}))
    append_event(self._records, {'node': self._name, 'event': 'gave_up'})
    lp.stop()

  def _gave_up_on_hang(self, hung: str, times: int) -> bool:
    """Records a hang (the child was killed); the run stops at the MAX_HANGS-th."""
    append_event(self._records, {'node': self._name, 'event': 'hung', 'reason': hung})
    if times >= MAX_HANGS:
      self._give_up(f'{hung}; it hung {times} times, so the run stops', time.time())
      return True
    print(f'{hung}: restarted', file=sys.stderr, flush=True)
    return False

  def _gave_up_on_failure(self, code: int, failures: List[float], log_path: str,
                          since: int = 0) -> bool:
    """Records a failure (an abnormal exit, the last of `failures`, its output `log_path` after
    byte `since`); the run stops at a fatal one, a full disk, or `max_failures` in `window_s`."""
    now = failures[-1]
    error = last_error_line(log_path, since=since)
    append_event(self._records, {'node': self._name, 'event': 'failure', 'exit_code': code,
                                 'error': error})
    recent = [t for t in failures if now - t <= self._window_s]
    # A node may fail on a full disk with another error than ENOSPC (a peer that died of it,
    # a write that failed in a library): the disk itself is asked too.
    disk_full = disk.is_disk_full(error) or disk.is_full(self._run_dir)
    fatal = is_fatal(error) or disk_full
    if not (fatal or len(recent) >= self._max_failures):
      return False
    how = f'exit code {code}'
    if code < 0:
      how += f', killed by {signal.Signals(-code).name}'
    if disk_full:
      reason = disk.disk_full_reason(self._run_dir, self._name)
    elif fatal:
      reason = f'node {self._name} failed ({how}), not restarted: {error}'
    else:
      reason = (f'node {self._name} failed {len(recent)} times in {self._window_s:.0f} s '
                f'({how}); last output line: {error or "none"}')
    self._give_up(reason, now)
    return True

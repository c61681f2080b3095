"""Runs a Launchpad program in a child process and supervises it from the parent.

Why a child: when the run ends, Launchpad's local_mp worker manager waits 10 s for workers that
block in C++ (a learner waiting on Reverb) and then kills its *entire runtime*, launcher
included. The parent survives that, makes sure no node process is left (the child runs in its
own session, which is killed as a whole at the end), and then prints the summary.

Usage (internal): python -m launch.runtime.launcher RUN_DIR/config.pkl
"""
import functools
import glob
import os
import pickle
import shutil
import signal
import subprocess
import sys
import time
from typing import Optional

import psutil

from launch.runtime import disk, loopback, processes, run_state

NODE_DEATH_GRACE_S = 30.0   # a node died but the others did not follow: the run failed


def launch_and_supervise(cfg, records: run_state.RunRecords, log_path: Optional[str] = None,
                         progress=None) -> float:
  """Starts the child launcher of the run whose records are `records` (in cfg.run_dir) and
  waits for it; returns wall time. Raises processes.RunFailed.

  Ctrl-C (and SIGTERM/SIGHUP, which the CLI turns into KeyboardInterrupt) asks the coordinator to
  end the run (final checkpoints, then lp.stop()); a second Ctrl-C stops the nodes at once.
  The child dies with this process (PR_SET_PDEATHSIG), so kill -9 of the CLI stops the run too.
  """
  os.makedirs(cfg.run_dir, exist_ok=True)
  disk.set_aside(cfg.run_dir)   # for why the run stopped, should that be a full disk
  cfg_path = os.path.join(cfg.run_dir, 'config.pkl')
  with open(cfg_path, 'wb') as f:
    pickle.dump(cfg, f)
  log_path = log_path or os.path.join(cfg.run_dir, 'launchpad.log')
  since = processes.log_size(log_path)   # the log holds the run's earlier launches' output too
  log = open(log_path, 'ab')
  start = time.time()
  env = dict(os.environ, _=sys.executable)  # Launchpad starts node processes with $_
  # The program's temporary files (TensorFlow's generated code, the supervisors' node pickles)
  # stay in the run directory: a launch killed without warning leaves them there, and the next
  # launch of the run (the lock says there is no other) clears them.
  tmp = records.path(run_state.RUN_TMP)
  shutil.rmtree(tmp, ignore_errors=True)
  os.makedirs(tmp)
  env['TMPDIR'] = tmp
  env, warning = loopback.preload_env(env)    # every node listens on 127.0.0.1 only
  if warning:
    print(warning, flush=True)
  child = subprocess.Popen([sys.executable, '-m', 'launch.runtime.launcher', cfg_path],
                           stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                           start_new_session=True, cwd=os.getcwd(), env=env,
                           # SIGTERM: the child then stops the program as on Ctrl-C of Launchpad.
                           preexec_fn=functools.partial(processes.die_with_parent, signal.SIGTERM))
  with open(records.path(run_state.LAUNCHER_SESSION), 'w') as f:
    f.write(str(child.pid))   # the session id of every node process of this run
  failure, interrupted = None, False
  try:
    try:
      failure = watch(child, records, progress)
    except KeyboardInterrupt:
      interrupted = True
      print('stopping: the learners save their final checkpoints (Ctrl-C again to stop at once)',
            flush=True)
      records.request_stop()
      try:
        child.wait(timeout=processes.GRACEFUL_STOP_S)
      except subprocess.TimeoutExpired:
        pass
  except KeyboardInterrupt:
    interrupted = True   # second interrupt: kill_session below
  finally:
    processes.kill_session(child)
    log.close()
  failure = failure or records.failure_reason()
  if not failure and not interrupted and child.returncode:
    # The launcher itself died (building the program, before or while starting its nodes): not a
    # stop, and its traceback is in launchpad.log.
    failure = (f'the launcher process exited with code {child.returncode}: '
               f'{processes.last_error_line(log_path, since=since) or "an empty log"} '
               '(launchpad.log)')
  if failure:
    raise processes.RunFailed(failure)
  return time.time() - start


def node_names(run_dir: str):
  """pid -> node name, from the pid files the nodes write."""
  names = {}
  for path in glob.glob(os.path.join(run_dir, 'pids', '*.pid')):
    try:
      with open(path) as f:
        names[int(f.read().strip())] = os.path.basename(path)[:-len('.pid')]
    except (OSError, ValueError):
      pass
  return names


def watch(child: subprocess.Popen, records: run_state.RunRecords, progress=None,
          progress_every_s: float = 10.0) -> Optional[str]:
  """Waits for the child launcher. If a node process dies (every node's own process is restarted
  by its supervisor, so this is a supervisor that gave up or was killed itself) and the rest have
  not stopped within NODE_DEATH_GRACE_S, stops the program and returns why, naming the node.
  Calls `progress()` every `progress_every_s`."""
  seen = {}
  last_progress = time.time()
  died_at, dead = None, []
  while child.poll() is None:
    try:
      workers = processes.node_processes(child.pid)
    except psutil.NoSuchProcess:
      break
    gone = [pid for pid in seen if pid not in workers]
    if gone and died_at is None:
      died_at, dead = time.time(), gone
      names = node_names(records.run_dir)
      dead = [names.get(pid) or processes.node_label(seen[pid]) or f'pid {pid}' for pid in gone]
    if died_at is not None and workers and time.time() - died_at > NODE_DEATH_GRACE_S:
      recorded = records.failure_reason()
      processes.signal_group(child.pid, signal.SIGTERM)
      child.wait(timeout=30)
      return recorded or (f'node {", ".join(dead)} exited and the run was stopped; its output is '
                          'in launchpad.log and node_logs/')
    seen.update(workers)
    if progress is not None and time.time() - last_progress > progress_every_s:
      last_progress = time.time()
      progress()
    time.sleep(1.0)
  return None


def _child_main(cfg_path: str):
  import launchpad as lp

  from launch.program import layout
  with open(cfg_path, 'rb') as f:
    cfg = pickle.load(f)
  program = layout.build_program(cfg)
  if cfg.launch_type == 'local_mp':
    from launchpad.nodes.python import local_multi_processing

    from launch.program import devices
    resources = {group: local_multi_processing.PythonProcess(env=env) for group, env in
                 devices.node_environment(cfg, devices.probe_host()).items()}
    manager = lp.launch(program, launch_type='local_mp', terminal='current_terminal',
                        local_resources=resources)
  else:
    manager = lp.launch(program, launch_type='local_mt', serialize_py_nodes=False)
  manager.wait()


if __name__ == '__main__':
  _child_main(sys.argv[1])

"""The CLI's part of a cluster launch (`launch.train --launch_type cluster`): package the run,
print each host's command, and with --cluster_start run them all (through each host's "start"
prefix: ssh, `ip netns exec`, ...) and supervise the run to its end like a local run."""
import functools
import os
import signal
import socket
import subprocess
import time

from launch.cluster import description, files
from launch.cluster.description import ClusterDescription
from launch.cluster.package import (
  LOG_DIR,
  Package,
  package,
  quote,
  request_program_stop,
)
from launch.cluster.replica import KILL_AFTER_S, record_failure
from launch.runtime import lifecycle, processes, run_lock, run_state


def run(cfg, records: run_state.RunRecords, description_path: str, start: bool,
        resume: bool = False, goal_mean_length: float = 0.0, show_progress: bool = True) -> dict:
  """--launch_type cluster: packages the run (`records`: its records) for the described hosts;
  with `start`, runs every host's command and waits for the run's end. Returns the summary
  ({'status': 'packaged'} when nothing was started). Raises ValueError (one line) on a bad
  description."""
  desc = description.load_description(description_path)
  # Held while this process packages (and, with `start`, runs) the launch; launch.train has
  # taken it already, and then this is a no-op.
  run_lock.acquire(cfg.run_dir)
  # The coordinator's wrapper begins the run's segment when it starts.
  lifecycle.prepare_launch(cfg, records, resume)
  pkg = package(cfg, desc)
  print_package(pkg, desc)
  if not start:
    print('started nothing: run each host\'s command above (or the Slurm / Kubernetes files); '
          'the run ends by itself and writes its summary', flush=True)
    return {'status': 'packaged'}
  print(f'{"resuming" if resume else "run directory"}: {cfg.run_dir} (node output: '
        f'{pkg.directory}/logs/)', flush=True)
  # This process holds the run directory's lock (launch.train) for the whole run, so its
  # coordinator cannot take it: the lock's record names the job this process started, and the
  # replicas, given its token, run as that job (launch.cluster.replica.hold_run_dir).
  job = f'launcher-{os.getpid()}@{socket.gethostname()}'
  run_lock.annotate(cfg.run_dir, launch=pkg.launch_id, job=job)
  return lifecycle.supervise_and_record(
      cfg, records, lambda progress: start_and_supervise(records, pkg, progress=progress, job=job),
      goal_mean_length, show_progress)


def print_package(pkg: Package, desc: ClusterDescription) -> None:
  print(f'packaged launch {pkg.launch_id} in {pkg.directory}', flush=True)
  for h, cmd in pkg.commands.items():
    tasks = ', '.join(f'{r.task}@{r.endpoint}' for r in pkg.replicas if r.host == h)
    print(f'  host {h}: {tasks}\n    {" ".join(quote(a) for a in cmd)}')
  print(f'  or Slurm:      sbatch {pkg.directory}/{files.SLURM_DIR}/job.sbatch\n'
        f'  or Kubernetes: kubectl apply -f {pkg.directory}/{files.KUBERNETES_FILE}',
        flush=True)


def start_and_supervise(records: run_state.RunRecords, pkg: Package, progress=None,
                        graceful_stop_s: float = processes.GRACEFUL_STOP_S, job: str = None):
  """Runs every host's command (its "start" prefix) and waits for the run to end; Ctrl-C asks
  for a graceful stop, a second one stops at once. `job`: the token this process's lock record
  names (passed to every replica). Returns {host: exit code}; raises processes.RunFailed when a
  node failed."""
  procs, logs = {}, []
  for h, cmd in pkg.commands.items():
    log = open(os.path.join(pkg.directory, LOG_DIR, f'host-{h}.log'), 'ab')
    logs.append(log)
    procs[h] = subprocess.Popen(cmd + (['--job', job] if job else []), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                cwd=pkg.code_dir, start_new_session=True,
                                preexec_fn=functools.partial(processes.die_with_parent, signal.SIGTERM))
  with open(records.path(run_state.LAUNCHER_SESSION), 'w') as f:
    f.write(' '.join(str(p.pid) for p in procs.values()))  # session ids of the host launchers

  def wait_all(timeout_s):
    deadline = time.time() + timeout_s
    while any(p.poll() is None for p in procs.values()) and time.time() < deadline:
      time.sleep(0.5)

  last_progress = time.time()
  try:
    try:
      while any(p.poll() is None for p in procs.values()):
        if progress is not None and time.time() - last_progress > 10:
          last_progress = time.time()
          progress()
        for h, p in procs.items():
          # A host whose command failed (ssh refused, a replica that could not start) while the
          # program runs on: nothing else would stop the other hosts.
          if p.poll() and not os.path.exists(pkg.stop_file):
            record_failure(records, f'host {h} launcher exited with code {p.returncode}; '
                            f'see {pkg.directory}/{LOG_DIR}/host-{h}.log', pkg.stop_file)
        time.sleep(0.5)
    except KeyboardInterrupt:
      print('stopping: the learners save their final checkpoints (Ctrl-C again to stop at once)',
            flush=True)
      records.request_stop()
      wait_all(graceful_stop_s)
  except KeyboardInterrupt:
    pass
  finally:
    if any(p.poll() is None for p in procs.values()):
      request_program_stop(pkg.stop_file)
      wait_all(KILL_AFTER_S + 15)
    for p in procs.values():
      processes.signal_group(p.pid, signal.SIGKILL)
      try:
        p.wait(timeout=5)
      except subprocess.TimeoutExpired:
        pass
    for log in logs:
      log.close()
  failure = records.read(run_state.FAILURE)
  if failure:
    raise processes.RunFailed(failure.get('reason', 'a node failed'))
  bad = {h: p.returncode for h, p in procs.items() if p.returncode}
  if bad and not records.exists(run_state.FINAL_STATE):
    h, code = next(iter(bad.items()))
    raise processes.RunFailed(f'host {h} launcher exited with code {code}; see '
                             f'{pkg.directory}/{LOG_DIR}/host-{h}.log')
  return {h: p.returncode for h, p in procs.items()}

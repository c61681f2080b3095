"""One replica of a cluster launch and one host's replicas: the wrappers every host runs.

Every replica is `python -m launch.cluster node --run_dir R` with CLUSTER_SPEC in its
environment. That process is a small wrapper around Launchpad's own entry point
(`launchpad/nodes/python/process_entry.py --data_file R/cluster/program/<group>.pkl`, which picks
its entry from CLUSTER_SPEC's task index; every address resolves through Launchpad's
`VertextAiAddressBuilder` from CLUSTER_SPEC). The wrapper adds what a scheduler does not give:
  - the node binds only its own host's address (the bind shim of launch.runtime.loopback, aimed
    at the address CLUSTER_SPEC gives this task), and a bad address or a taken port is one line;
  - program stop: `lp.stop()` in any node (the coordinator at the end, a supervisor giving up)
    writes R/cluster/stopped-<launch>.json; every wrapper watches it and stops its node;
  - SIGTERM (pod deletion, Ctrl-C of a host launcher) asks the coordinator for a graceful stop
    (final checkpoints) and waits for it before stopping the node (a Slurm job cancel signals
    the node processes too, so the Slurm job stops through its batch shell: files.slurm_files);
  - a node process that dies without a program stop records R/failure.json and stops the run
    (every node is restarted by its supervisor first, as locally);
  - the coordinator's wrapper keeps the run record (run_state.json segment, summary.json) and
    holds RUN_DIR's lock (launch.runtime.run_lock) for the life of the job, taken before it
    writes anything: a second job on a run directory in use is refused in one line. Every
    other replica waits, before it starts its node or writes anything, until the lock's record
    names its own launch and job (`job_key`); a job whose coordinator was refused thus ends
    without touching the live job's files.

`python -m launch.cluster host --run_dir R --host H` starts every replica of host H (their
task scripts) and waits for them. Light imports only: the node itself runs in a child.
"""
import errno
import functools
import os
import signal
import socket
import subprocess
import sys
import time
from typing import Optional

from launch.cluster import files, placement
from launch.cluster.description import ClusterSpecError
from launch.cluster.package import (
  LOG_DIR,
  PROGRAM_DIR,
  package_dir,
  read_launch,
  request_program_stop,
)
from launch.runtime import lifecycle, loopback, processes, run_lock, run_state

RESOLVE_TIMEOUT_S = 120.0          # Kubernetes: a pod's DNS record may appear after it starts
KILL_AFTER_S = 30.0                # program stopped: time for a node to exit before SIGKILL
# How long a replica waits for its job's coordinator to hold the run directory: the replicas of
# a job start together, and a wrapper (light imports) starts in seconds even on a loaded host.
COORDINATOR_LOCK_WAIT_S = 180.0


def job_key(job: Optional[str] = None) -> Optional[str]:
  """What tells this job's replicas from another job's replicas of the same package: the
  launcher's token (launch.train --cluster_start passes --job), else the Slurm job id, else
  None (hand-run host commands, Kubernetes: the launch id alone)."""
  if job:
    return job
  slurm_job = os.environ.get('SLURM_JOB_ID')
  return f'slurm-{slurm_job}' if slurm_job else None


def _held_for(record: Optional[dict], launch_id: str, job: Optional[str]) -> bool:
  """Whether a lock record names this launch and job."""
  return bool(record) and record.get('launch') == launch_id and record.get('job') == job


def hold_run_dir(run_dir: str, launch_id: str, job: Optional[str]) -> None:
  """The coordinator's wrapper: takes RUN_DIR's lock for this job (held until the wrapper
  exits). Accepted without it when the launcher that started this job holds it for the job
  (launch.cluster.start); otherwise a live holder is RunDirInUse (one line)."""
  try:
    run_lock.acquire(run_dir, launch=launch_id, job=job)
  except run_lock.RunDirInUse:
    if job is None or not _held_for(run_lock.holder(run_dir), launch_id, job):
      raise


def wait_for_coordinator(run_dir: str, launch_id: str, job: Optional[str], task: str,
                         timeout_s: float) -> None:
  """Every other replica: returns once the lock's record names this launch and job (its
  coordinator holds the run directory); raises RunDirInUse (one line) after `timeout_s`, when
  another launch holds it or this job's coordinator could not start."""
  deadline = time.time() + timeout_s
  while not _held_for(run_lock.holder(run_dir), launch_id, job):
    if time.time() > deadline:
      who = run_lock.holder(run_dir) or {}
      raise run_lock.RunDirInUse(
          f'{task} not started: this job\'s coordinator did not take {run_dir} within '
          f'{timeout_s:.0f} s (its lock names pid {who.get("pid", "?")} on '
          f'{who.get("host", "?")}, launch {who.get("launch", "-")}, job {who.get("job", "-")}); '
          'another launch may be using it')
    time.sleep(0.5)


def _own_address(host: str, port: int, timeout_s: float) -> str:
  """The IP this replica binds: CLUSTER_SPEC's host of this task, resolved here (retried: a
  Kubernetes pod's DNS record may lag its start), which must be an address of this machine and
  have `port` free."""
  deadline = time.time() + timeout_s
  while True:
    try:
      infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
      break
    except socket.gaierror as e:
      if time.time() > deadline:
        raise ClusterSpecError(f'cannot resolve this task\'s host {host!r}: {e.strerror}') from None
      time.sleep(2.0)
  family, _, _, _, sockaddr = infos[0]
  ip = sockaddr[0]
  with socket.socket(family, socket.SOCK_STREAM) as s:
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gRPC servers do
    try:
      s.bind((ip, port))
    except OSError as e:
      if e.errno == errno.EADDRINUSE:
        raise ClusterSpecError(f'port clash: port {port} on {host} ({ip}) is already in use on '
                               'this host') from None
      if e.errno == errno.EADDRNOTAVAIL:
        raise ClusterSpecError(f'{host} ({ip}) is not an address of this machine '
                               f'({socket.gethostname()}): start this task on that host') from None
      raise ClusterSpecError(f'cannot listen on {ip}:{port}: {e.strerror}') from None
  return ip


def record_failure(records: run_state.RunRecords, reason: str, stop_file: str) -> None:
  if not records.exists(run_state.FAILURE):  # the first failure is the cause; later, its effects
    node = reason.split()[1] if reason.startswith('node ') else '?'
    records.write(run_state.FAILURE, {'node': node, 'reason': reason, 'time': time.time()})
  request_program_stop(stop_file)


def _process_entry_path() -> str:
  # Located without importing launchpad: this wrapper stays a small process.
  import importlib.util  # pylint: disable=g-import-not-at-top
  spec = importlib.util.find_spec('launchpad')
  return os.path.join(os.path.dirname(spec.origin), 'nodes', 'python', 'process_entry.py')


def node_main(run_dir: str, grace_s: float = processes.GRACEFUL_STOP_S,
              job: Optional[str] = None) -> int:
  """Runs this process's replica (from CLUSTER_SPEC) until the program stops; exit status.
  `job`: the launcher's token for this job (job_key)."""
  records = run_state.RunRecords(run_dir)
  launch = read_launch(run_dir)
  stop_file = launch['stop_file']
  cluster, group, index = placement.parse_cluster_spec(os.environ.get('CLUSTER_SPEC'))
  task = f'{group}-{index}'
  if launch['groups'].get(group, 0) <= index:
    raise ClusterSpecError(f'CLUSTER_SPEC task {task} is not a replica of the packaged program '
                           f'(groups: {launch["groups"]})')
  if os.path.exists(stop_file):
    raise ClusterSpecError(f'launch {launch["launch_id"]} of {run_dir} has already stopped: '
                           'package a new launch (launch.train --resume --launch_type cluster ...)')
  # The run directory is this job's before anything is written to it (a failure record, the
  # run record, the node's own output): a job refused here leaves the live job's files alone.
  job = job_key(job)
  if group == 'coordinator':
    hold_run_dir(run_dir, launch['launch_id'], job)
  else:
    wait_for_coordinator(run_dir, launch['launch_id'], job, task, COORDINATOR_LOCK_WAIT_S)
  directory = package_dir(run_dir)
  try:
    host, port = placement.split_endpoint(cluster[group][index])
    ip = _own_address(host, port, RESOLVE_TIMEOUT_S)
  except ClusterSpecError as e:
    record_failure(records, f'node {task} could not start: {e}', stop_file)
    raise
  if group == 'coordinator':  # the coordinator's wrapper keeps the run record
    records.begin_segment(records.saved_actor_steps())
  env, warning = loopback.preload_env(dict(os.environ), ip)
  if warning:
    print(f'{task}: {warning}', flush=True)
  entry = _process_entry_path()
  log_path = os.path.join(directory, LOG_DIR, f'{task}.log')
  terms = []
  for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(sig, lambda *_: terms.append(time.time()))
  # The log is appended to by every start of this task: its failure is read from this start's part.
  log_start = processes.log_size(log_path)
  with open(log_path, 'ab') as log:
    child = subprocess.Popen(
        [sys.executable, entry, f'--data_file={os.path.join(directory, PROGRAM_DIR, group + ".pkl")}'],
        env=env, cwd=launch['code_dir'], stdin=subprocess.DEVNULL, stdout=log,
        stderr=subprocess.STDOUT, preexec_fn=processes.die_with_parent)
  print(f'{task}: pid {child.pid} listening on {cluster[group][index]} ({ip}); output {log_path}',
        flush=True)
  asked_graceful = stopping_since = None
  while child.poll() is None:
    now = time.time()
    if stopping_since is None and os.path.exists(stop_file):
      stopping_since = now   # the program stopped: Launchpad's worker manager ends the node
      child.send_signal(signal.SIGTERM)
    elif terms and asked_graceful is None:
      asked_graceful = now   # let the coordinator end the run: learners save their last step
      records.request_stop()
    if stopping_since is None and asked_graceful is not None and (
        len(terms) > 1 or now - asked_graceful > grace_s):
      stopping_since = now   # a second signal, or no stop in time: stop this node now
      child.send_signal(signal.SIGTERM)
    if stopping_since is not None and now - stopping_since > KILL_AFTER_S:
      child.kill()
    time.sleep(0.25)
  code = child.returncode
  stopped = os.path.exists(stop_file) or asked_graceful is not None
  rc = 0
  if code != 0 and not stopped:
    how = f'exit code {code}' + (f', killed by {signal.Signals(-code).name}' if code < 0 else '')
    record_failure(records, f'node {task} on host {host} exited ({how}); last output line: '
                    f'{processes.last_error_line(log_path, since=log_start) or "none"}', stop_file)
    rc = 1
  if group == 'coordinator':
    if code != 0 and not os.path.exists(stop_file):
      request_program_stop(stop_file)
    lifecycle.record_end(records)
  print(f'{task}: node exited with code {code}', flush=True)
  return rc


def host_main(run_dir: str, host: str, job: Optional[str] = None) -> int:
  """Runs every replica of `host` and waits for them; `job`: the launcher's token, passed on to
  each replica (job_key)."""
  launch = read_launch(run_dir)
  tasks = [r['task'] for r in launch['replicas'] if r['host'] == host]
  if not tasks:
    hosts = sorted({r['host'] for r in launch['replicas']})
    raise ClusterSpecError(f'host {host!r} runs no replica of this launch (hosts: {hosts})')
  directory = package_dir(run_dir)
  children = {}
  for task in tasks:
    children[task] = subprocess.Popen(
        ['bash', os.path.join(directory, files.TASK_DIR, f'{task}.sh')]
        + (['--job', job] if job else []),
        stdin=subprocess.DEVNULL, preexec_fn=functools.partial(processes.die_with_parent, signal.SIGTERM))

  def forward(signum, frame):
    del frame
    for child in children.values():
      if child.poll() is None:
        child.send_signal(signal.SIGTERM if signum != signal.SIGINT else signal.SIGINT)
  for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(sig, forward)
  codes = {}
  while len(codes) < len(children):
    for task, child in children.items():
      if task not in codes and child.poll() is not None:
        codes[task] = child.returncode
    time.sleep(0.25)
  print(f'host {host}: ' + ', '.join(f'{t} exit {c}' for t, c in codes.items()), flush=True)
  return next((c if c > 0 else 128 - c for c in codes.values() if c), 0)

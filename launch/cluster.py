r"""Cluster launch: the program on many hosts through Launchpad's own CLUSTER_SPEC runtime.

`python -m launch.train --launch_type cluster --cluster_description hosts.json --run_dir R`
packages the run into R/cluster/ (R must be readable and writable from every host):

  program/<group>.pkl   the group's nodes, pickled by Launchpad's serializer; entry i is replica i
  launch.json           this launch: id, replicas (group, index, host, endpoint), code dir, python
  tasks/<task>.sh       one script per replica: sets CLUSTER_SPEC, runs `launch.cluster node`
  hosts/<host>.sh       one script per host: runs `launch.cluster host` (all its replicas)
  slurm/                job.sbatch, multi_prog.conf, hostfile (`sbatch R/cluster/slurm/job.sbatch`)
  kubernetes.yaml       headless Service + an Indexed Job per group (`kubectl apply -f`)
  commands.txt          the per-host commands
  logs/                 each replica's node output (<task>.log), host launchers' output

and prints the per-host commands; with `--cluster_start` it also runs them (through each host's
"start" prefix: ssh, `ip netns exec`, ...) and supervises the run to its end like a local run.

Every replica is `python -m launch.cluster node --run_dir R` with CLUSTER_SPEC in its
environment. That process is a small wrapper around Launchpad's own entry point
(`launchpad/nodes/python/process_entry.py --data_file R/cluster/program/<group>.pkl`, which picks
its entry from CLUSTER_SPEC's task index; every address resolves through Launchpad's
`VertextAiAddressBuilder` from CLUSTER_SPEC). The wrapper adds what a scheduler does not give:
  - the node binds only its own host's address (the bind shim of launch.runtime.loopback, aimed at the
    address CLUSTER_SPEC gives this task), and a bad address or a taken port is one line;
  - program stop: `lp.stop()` in any node (the coordinator at the end, a supervisor giving up)
    writes R/cluster/stopped-<launch>.json; every wrapper watches it and stops its node;
  - SIGTERM (scancel, pod deletion, Ctrl-C of a host launcher) asks the coordinator for a
    graceful stop (final checkpoints) and waits for it before stopping the node;
  - a node process that dies without a program stop records R/failure.json and stops the run
    (learners and actors are restarted by their supervisors first, as locally);
  - the coordinator's wrapper keeps the run record (run_state.json segment, summary.json).

`python -m launch.cluster host --run_dir R --host H` starts every replica of host H (their
task scripts) and waits for them.
"""
import argparse
import dataclasses
import errno
import functools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from typing import Dict, List, Optional

from launch import cluster_launchers
from launch import cluster_spec
from launch.runtime import lifecycle
from launch.runtime import loopback
from launch.runtime import processes
from launch.runtime import run_state
from launch.cluster_spec import ClusterDescription, ClusterSpecError, Replica

PACKAGE_DIR = 'cluster'
LAUNCH_FILE = 'launch.json'
PROGRAM_DIR = 'program'
LOG_DIR = 'logs'
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESOLVE_TIMEOUT_S = 120.0          # Kubernetes: a pod's DNS record may appear after it starts
KILL_AFTER_S = 30.0                # program stopped: time for a node to exit before SIGKILL


def package_dir(run_dir: str) -> str:
  return os.path.join(run_dir, PACKAGE_DIR)


def request_program_stop(stop_path: str) -> None:
  """The program stopper of cluster launches (what `lp.stop()` calls in a node): every node's
  wrapper watches this file and stops its node when it appears."""
  try:
    run_state.write_json(stop_path, {'time': time.time(), 'host': socket.gethostname(),
                                     'pid': os.getpid()})
  except OSError:
    pass  # the run directory is gone: nothing left to stop


# ---------------------------------------------------------------------------------------------
# Packaging (runs where launch.train runs; imports the program, so it is heavy).

@dataclasses.dataclass(frozen=True)
class Package:
  directory: str
  launch_id: str
  replicas: List[Replica]
  stop_file: str
  code_dir: str
  python: str
  host_scripts: Dict[str, str]    # host -> path of its script
  commands: Dict[str, List[str]]  # host -> command that runs its script from here


def _cluster_nodes(node):
  """A node and the node it wraps (launch.runtime.supervisor.SupervisedNode runs its `_node` in a child
  process, whose own launch context must carry the same program stopper)."""
  inner = getattr(node, '_node', None)
  return [node] + ([inner] if inner is not None else [])


def bind_program(program, stopper) -> Dict[str, int]:
  """Prepares a built program for CLUSTER_SPEC: Launchpad's Vertex AI addressing (each node's
  address is cluster[group][index]) with our program stopper. Returns group -> replicas."""
  from launchpad import context as lp_context
  vertex = lp_context.LaunchType.VERTEX_AI
  for label, nodes in program.groups.items():
    for node in nodes:
      node._initialize_context(vertex, launch_config=None)  # pylint: disable=protected-access
      for n in _cluster_nodes(node):
        n.launch_context.initialize(vertex, None, stopper)
  for label, nodes in program.groups.items():
    for node in nodes:
      for handle in node.input_handles:
        handle.connect(node, label)
  for label, nodes in program.groups.items():
    for index, node in enumerate(nodes):
      node.bind_addresses(cluster=label, instance=index)
  return {label: len(nodes) for label, nodes in program.groups.items()}


def group_sizes(cfg) -> Dict[str, int]:
  """Replicas per node group of the program `cfg` builds."""
  from launch.program import build as program_lib
  return {label: len(nodes) for label, nodes in program_lib.build_program(cfg).groups.items()}


def check_placement(cfg, desc: ClusterDescription) -> None:
  """Raises ClusterSpecError when the description does not fit the program (before anything
  is written to the run directory)."""
  cluster_spec.place(desc, group_sizes(cfg))


def package(cfg, desc: ClusterDescription, code_dir: Optional[str] = None,
            python: Optional[str] = None) -> Package:
  """Writes RUN_DIR/cluster/ for one launch of `cfg` on the hosts of `desc`."""
  from launch.program import build as program_lib
  from launchpad.launch import serialization

  code_dir = code_dir or desc.code_dir or ROOT
  python = python or desc.python or sys.executable
  directory = package_dir(cfg.run_dir)
  # A new launch: the previous launch's files go (its logs stay).
  for old in (PROGRAM_DIR, cluster_launchers.TASK_DIR, cluster_launchers.HOST_DIR,
              cluster_launchers.SLURM_DIR):
    shutil.rmtree(os.path.join(directory, old), ignore_errors=True)
  for name in os.listdir(directory) if os.path.isdir(directory) else []:
    if name.startswith('stopped-'):
      os.remove(os.path.join(directory, name))
  for d in (PROGRAM_DIR, cluster_launchers.TASK_DIR, cluster_launchers.HOST_DIR,
            cluster_launchers.SLURM_DIR, LOG_DIR):
    os.makedirs(os.path.join(directory, d), exist_ok=True)

  launch_id = uuid.uuid4().hex[:12]
  stop_file = os.path.join(directory, f'stopped-{launch_id}.json')
  program = program_lib.build_program(cfg)
  sizes = bind_program(program, functools.partial(request_program_stop, stop_file))
  replicas = cluster_spec.place(desc, sizes)
  k8s_text = cluster_launchers.kubernetes_manifests(desc, sizes, cfg.run_dir, code_dir, python)
  for label, nodes in program.groups.items():
    serialization.serialize_functions(os.path.join(directory, PROGRAM_DIR, f'{label}.pkl'), label,
                                      [node.function for node in nodes])

  def write(rel, text, mode=0o644):
    path = os.path.join(directory, rel)
    with open(path, 'w') as f:
      f.write(text)
    os.chmod(path, mode)
    return path

  for r in replicas:
    write(f'{cluster_launchers.TASK_DIR}/{r.task}.sh', cluster_launchers.task_script(
        r, cluster_spec.task_spec(replicas, r.group, r.index), cfg.run_dir, code_dir, python), 0o755)
  host_scripts, commands = {}, {}
  hosts = [h for h in desc.hosts if any(r.host == h for r in replicas)]
  for h in hosts:
    tasks = [r.task for r in replicas if r.host == h]
    host_scripts[h] = write(f'{cluster_launchers.HOST_DIR}/{h}.sh', cluster_launchers.host_script(
        h, tasks, cfg.run_dir, code_dir, python), 0o755)
    commands[h] = cluster_launchers.host_command(desc, h, host_scripts[h])
  for name, text in cluster_launchers.slurm_files(desc, replicas, cfg.run_dir, directory).items():
    write(f'{cluster_launchers.SLURM_DIR}/{name}', text, 0o755 if name.endswith('.sbatch') else 0o644)
  write(cluster_launchers.KUBERNETES_FILE, k8s_text)
  lines = []
  for h in hosts:
    lines.append(f'# host {h} ({desc.hosts[h].address}): '
                 + ', '.join(f'{r.task} :{r.port}' for r in replicas if r.host == h))
    lines.append(' '.join(_quote(a) for a in commands[h]))
  write('commands.txt', '\n'.join(lines) + '\n')
  run_state.write_json(os.path.join(directory, LAUNCH_FILE), {
      'launch_id': launch_id, 'stop_file': stop_file, 'run_dir': cfg.run_dir,
      'code_dir': code_dir, 'python': python, 'groups': sizes,
      'replicas': [dict(dataclasses.asdict(r), task=r.task, endpoint=r.endpoint) for r in replicas],
      'description': cluster_spec.description_json(desc)})
  return Package(directory, launch_id, replicas, stop_file, code_dir, python, host_scripts, commands)


def _quote(arg: str) -> str:
  import shlex
  return shlex.quote(arg)


def read_launch(run_dir: str) -> dict:
  launch = run_state.read_json(os.path.join(package_dir(run_dir), LAUNCH_FILE))
  if launch is None:
    raise ClusterSpecError(f'{package_dir(run_dir)}/{LAUNCH_FILE} not found: package the run first '
                           '(python -m launch.train --launch_type cluster --cluster_description ...)')
  return launch


# ---------------------------------------------------------------------------------------------
# One replica (`launch.cluster node`): light imports only; the node itself runs in a child.

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


def _record_failure(run_dir: str, reason: str, stop_file: str) -> None:
  path = os.path.join(run_dir, run_state.FAILURE)
  if not os.path.exists(path):  # the first failure is the cause; later ones are its effects
    run_state.write_json(path, {'node': reason.split()[1] if reason.startswith('node ') else '?',
                                'reason': reason, 'time': time.time()})
  request_program_stop(stop_file)


def _process_entry_path() -> str:
  # Located without importing launchpad: this wrapper stays a small process.
  import importlib.util  # pylint: disable=g-import-not-at-top
  spec = importlib.util.find_spec('launchpad')
  return os.path.join(os.path.dirname(spec.origin), 'nodes', 'python', 'process_entry.py')


def node_main(run_dir: str, grace_s: float = processes.GRACEFUL_STOP_S) -> int:
  """Runs this process's replica (from CLUSTER_SPEC) until the program stops; exit status."""
  launch = read_launch(run_dir)
  stop_file = launch['stop_file']
  cluster, group, index = cluster_spec.parse_cluster_spec(os.environ.get('CLUSTER_SPEC'))
  task = f'{group}-{index}'
  if launch['groups'].get(group, 0) <= index:
    raise ClusterSpecError(f'CLUSTER_SPEC task {task} is not a replica of the packaged program '
                           f'(groups: {launch["groups"]})')
  if os.path.exists(stop_file):
    raise ClusterSpecError(f'launch {launch["launch_id"]} of {run_dir} has already stopped: '
                           'package a new launch (launch.train --resume --launch_type cluster ...)')
  directory = package_dir(run_dir)
  try:
    host, port = cluster_spec.split_endpoint(cluster[group][index])
    ip = _own_address(host, port, RESOLVE_TIMEOUT_S)
  except ClusterSpecError as e:
    _record_failure(run_dir, f'node {task} could not start: {e}', stop_file)
    raise
  if group == 'coordinator':  # the coordinator's wrapper keeps the run record
    run_state.begin_segment(run_dir, run_state.load_counts(run_dir).get('actor_steps', 0))
  env, warning = loopback.preload_env(dict(os.environ), ip)
  if warning:
    print(f'{task}: {warning}', flush=True)
  entry = _process_entry_path()
  log_path = os.path.join(directory, LOG_DIR, f'{task}.log')
  terms = []
  signal.signal(signal.SIGTERM, lambda *_: terms.append(time.time()))
  signal.signal(signal.SIGINT, lambda *_: terms.append(time.time()))
  signal.signal(signal.SIGHUP, lambda *_: terms.append(time.time()))
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
      run_state.request_stop(run_dir)
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
    _record_failure(run_dir, f'node {task} on host {host} exited ({how}); last output line: '
                    f'{processes.last_error_line(log_path) or "none"}', stop_file)
    rc = 1
  if group == 'coordinator':
    if code != 0 and not os.path.exists(stop_file):
      request_program_stop(stop_file)
    lifecycle.record_end(run_dir)
  print(f'{task}: node exited with code {code}', flush=True)
  return rc


# ---------------------------------------------------------------------------------------------
# One host (`launch.cluster host`): starts its replicas' scripts and waits.

def host_main(run_dir: str, host: str) -> int:
  launch = read_launch(run_dir)
  tasks = [r['task'] for r in launch['replicas'] if r['host'] == host]
  if not tasks:
    hosts = sorted({r['host'] for r in launch['replicas']})
    raise ClusterSpecError(f'host {host!r} runs no replica of this launch (hosts: {hosts})')
  directory = package_dir(run_dir)
  children = {}
  for task in tasks:
    children[task] = subprocess.Popen(
        ['bash', os.path.join(directory, cluster_launchers.TASK_DIR, f'{task}.sh')],
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


# ---------------------------------------------------------------------------------------------
# The CLI's part (launch.train --launch_type cluster).

def run(cfg, description_path: str, start: bool, resume: bool = False) -> dict:
  """--launch_type cluster: packages the run for the described hosts; with `start`, runs every
  host's command and waits for the run's end. Returns the summary ({'status': 'packaged'}
  when nothing was started). Raises ValueError (one line) on a bad description."""
  desc = cluster_spec.load_description(description_path)
  run_state.check_writable(cfg.run_dir)
  if not resume:
    lifecycle.write_config(cfg)
  # The coordinator's wrapper begins the run's segment when it starts.
  lifecycle.clear_stale_end(cfg.run_dir)
  pkg = package(cfg, desc)
  print_package(pkg, desc)
  if not start:
    print('started nothing: run each host\'s command above (or the Slurm / Kubernetes files); '
          'the run ends by itself and writes its summary', flush=True)
    return {'status': 'packaged'}
  print(f'{"resuming" if resume else "run directory"}: {cfg.run_dir} (node output: '
        f'{pkg.directory}/logs/)', flush=True)
  return lifecycle.supervise_and_record(
      cfg, lambda progress: start_and_supervise(cfg, pkg, progress=progress))


def print_package(pkg: Package, desc: ClusterDescription) -> None:
  print(f'packaged launch {pkg.launch_id} in {pkg.directory}', flush=True)
  for h, cmd in pkg.commands.items():
    tasks = ', '.join(f'{r.task}@{r.endpoint}' for r in pkg.replicas if r.host == h)
    print(f'  host {h}: {tasks}\n    {" ".join(_quote(a) for a in cmd)}')
  print(f'  or Slurm:      sbatch {pkg.directory}/{cluster_launchers.SLURM_DIR}/job.sbatch\n'
        f'  or Kubernetes: kubectl apply -f {pkg.directory}/{cluster_launchers.KUBERNETES_FILE}',
        flush=True)


def start_and_supervise(cfg, pkg: Package, progress=None, graceful_stop_s: float = processes.GRACEFUL_STOP_S):
  """Runs every host's command (its "start" prefix) and waits for the run to end; Ctrl-C asks
  for a graceful stop, a second one stops at once. Returns {host: exit code}; raises
  processes.RunFailed when a node failed."""
  procs, logs = {}, []
  for h, cmd in pkg.commands.items():
    log = open(os.path.join(pkg.directory, LOG_DIR, f'host-{h}.log'), 'ab')
    logs.append(log)
    procs[h] = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                cwd=pkg.code_dir, start_new_session=True,
                                preexec_fn=functools.partial(processes.die_with_parent, signal.SIGTERM))
  with open(os.path.join(cfg.run_dir, 'launcher_session.txt'), 'w') as f:
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
            _record_failure(cfg.run_dir, f'host {h} launcher exited with code {p.returncode}; '
                            f'see {pkg.directory}/{LOG_DIR}/host-{h}.log', pkg.stop_file)
        time.sleep(0.5)
    except KeyboardInterrupt:
      print('stopping: the learners save their final checkpoints (Ctrl-C again to stop at once)',
            flush=True)
      run_state.request_stop(cfg.run_dir)
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
  failure = run_state.read_json(os.path.join(cfg.run_dir, run_state.FAILURE))
  if failure:
    raise processes.RunFailed(failure.get('reason', 'a node failed'))
  bad = {h: p.returncode for h, p in procs.items() if p.returncode}
  if bad and not os.path.exists(os.path.join(cfg.run_dir, run_state.FINAL_STATE)):
    h, code = next(iter(bad.items()))
    raise processes.RunFailed(f'host {h} launcher exited with code {code}; see '
                             f'{pkg.directory}/{LOG_DIR}/host-{h}.log')
  return {h: p.returncode for h, p in procs.items()}


VERTEX_AI_NEEDS = (
    "--launch_type vertex_ai needs Launchpad's XManager runtime, which is not installed here: "
    '`pip install -c constraints.txt xmanager google-cloud-aiplatform` (their protobuf must stay '
    '3.19), a local Docker daemon, a GCP project with Vertex AI enabled and credentials '
    '(`gcloud auth application-default login`, GOOGLE_CLOUD_PROJECT), and --run_dir on storage '
    'every container mounts (e.g. /gcs/BUCKET/... through Cloud Storage FUSE); see README '
    '"Running on a cluster"')


def launch_vertex_ai(cfg, requirements: str) -> None:
  """Passes the program to Launchpad's own Vertex AI launcher (one Docker image, built by
  XManager from this checkout and `requirements`)."""
  try:
    import xmanager  # noqa: F401  pylint: disable=unused-import,g-import-not-at-top
    from launchpad.nodes.python import xm_docker  # pylint: disable=g-import-not-at-top
  except Exception:  # xm_docker raises a bare Exception when xmanager is missing
    raise ValueError(VERTEX_AI_NEEDS) from None
  import launchpad as lp  # pylint: disable=g-import-not-at-top
  from launch.program import build as program_lib  # pylint: disable=g-import-not-at-top
  program = program_lib.build_program(cfg)
  config = xm_docker.DockerConfig(code_directory=ROOT, docker_requirements=requirements)
  lp.launch(program, launch_type='vertex_ai',
            xm_resources={label: config for label in program.groups})


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(
      prog='python -m launch.cluster',
      description='Cluster replicas of a packaged run (see launch.train --launch_type cluster).')
  sub = parser.add_subparsers(dest='command', required=True)
  node = sub.add_parser('node', help='run the replica named by CLUSTER_SPEC')
  node.add_argument('--run_dir', required=True)
  node.add_argument('--grace_s', type=float, default=processes.GRACEFUL_STOP_S,
                    help='after SIGTERM: seconds to wait for a graceful program stop')
  host = sub.add_parser('host', help="run every replica of one host and wait for them")
  host.add_argument('--run_dir', required=True)
  host.add_argument('--host', required=True)
  args = parser.parse_args(argv)
  run_dir = os.path.abspath(args.run_dir)
  try:
    if args.command == 'node':
      return node_main(run_dir, args.grace_s)
    return host_main(run_dir, args.host)
  except ClusterSpecError as e:
    print(f'error: {e}', file=sys.stderr, flush=True)
    return 2


if __name__ == '__main__':
  sys.exit(main())

"""Packaging a run for many hosts (where `launch.train --launch_type cluster` runs): RUN_DIR/cluster/

  program/<group>.pkl   the group's nodes, pickled by Launchpad's serializer; entry i is replica i
  launch.json           this launch: id, replicas (group, index, host, endpoint), code dir, python
  tasks/<task>.sh       one script per replica: sets CLUSTER_SPEC, runs `launch.cluster node`
  hosts/<host>.sh       one script per host: runs `launch.cluster host` (all its replicas)
  slurm/                job.sbatch, multi_prog.conf, hostfile (`sbatch R/cluster/slurm/job.sbatch`)
  kubernetes.yaml       headless Service + an Indexed Job per group (`kubectl apply -f`)
  commands.txt          the per-host commands
  logs/                 each replica's node output (<task>.log), host launchers' output

The package's layout constants and the program stopper are read by every replica's wrapper, so
this module imports the program (heavy) only inside the functions that build it.
"""
import dataclasses
import functools
import os
import shutil
import socket
import sys
import time
import uuid
from typing import Dict, List, Optional

from launch.cluster import description, files, placement
from launch.cluster.description import ClusterDescription, ClusterSpecError, Replica
from launch.runtime import run_lock, run_state

PACKAGE_DIR = 'cluster'
LAUNCH_FILE = 'launch.json'
PROGRAM_DIR = 'program'
LOG_DIR = 'logs'
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the checkout


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

  from launch.runtime import launchpad_internals
  vertex = lp_context.LaunchType.VERTEX_AI
  for label, nodes in program.groups.items():
    for node in nodes:
      launchpad_internals.initialize_context(node, vertex)
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
  from launch.program import layout
  return {label: len(nodes) for label, nodes in layout.build_program(cfg).groups.items()}


def check_placement(cfg, desc: ClusterDescription) -> None:
  """Raises ClusterSpecError when the description does not fit the program (before anything
  is written to the run directory)."""
  placement.place(desc, group_sizes(cfg))


def _group_host(desc: ClusterDescription, group: str):
  """What the description says of the (first) host of `group`: its GPUs; the CUDA plugin is
  taken to be there (nothing on that host can be asked from here), its cores are counted where
  the node starts."""
  from launch.program import devices
  name = desc.groups[group].hosts[0] if group in desc.groups else None
  gpus = desc.hosts[name].gpus if name in desc.hosts else 0
  return devices.Host(gpus=gpus, cuda_plugin=True, cores=0)


def node_placement(cfg, desc: ClusterDescription) -> Dict[str, str]:
  """{node group: where it runs} on the described hosts (--show_config); a learner asked onto
  a GPU its host does not have is a ClusterSpecError (one line)."""
  from launch.program import devices
  try:
    return devices.plan(cfg, _group_host(desc, 'learner'),
                        precedence_host=_group_host(desc, 'precedence_learner'))
  except ValueError as e:
    raise ClusterSpecError(f'{e} (the cluster description gives its host no "gpus")') from None


def node_environments(cfg, desc: ClusterDescription) -> Dict[str, Dict[str, str]]:
  """{node group: environment its replicas' scripts export}."""
  from launch.program import devices
  node_placement(cfg, desc)
  return devices.node_environment(cfg, _group_host(desc, 'learner'),
                                  precedence_host=_group_host(desc, 'precedence_learner'))


def gpu_hosts(cfg, desc: ClusterDescription) -> Dict[str, int]:
  """{host name: GPUs its nodes use}: the learners' hosts where they run on a GPU."""
  where = node_placement(cfg, desc)
  out: Dict[str, int] = {}
  for group in ('learner', 'precedence_learner'):
    if where.get(group) == 'gpu':
      out[desc.groups[group].hosts[0]] = 1
  return out


def package(cfg, desc: ClusterDescription, code_dir: Optional[str] = None,
            python: Optional[str] = None) -> Package:
  """Writes RUN_DIR/cluster/ for one launch of `cfg` on the hosts of `desc`; RunDirInUse (one
  line) when a live launch holds the run directory (a running job's files are never replaced)."""
  run_lock.check_free(cfg.run_dir)
  from launchpad.launch import serialization

  from launch.program import layout

  code_dir = code_dir or desc.code_dir or ROOT
  python = python or desc.python or sys.executable
  directory = package_dir(cfg.run_dir)
  # A new launch: the previous launch's files go (its logs stay).
  for old in (PROGRAM_DIR, files.TASK_DIR, files.HOST_DIR,
              files.SLURM_DIR):
    shutil.rmtree(os.path.join(directory, old), ignore_errors=True)
  for name in os.listdir(directory) if os.path.isdir(directory) else []:
    if name.startswith('stopped-'):
      os.remove(os.path.join(directory, name))
  for d in (PROGRAM_DIR, files.TASK_DIR, files.HOST_DIR,
            files.SLURM_DIR, LOG_DIR):
    os.makedirs(os.path.join(directory, d), exist_ok=True)

  launch_id = uuid.uuid4().hex[:12]
  stop_file = os.path.join(directory, f'stopped-{launch_id}.json')
  program = layout.build_program(cfg)
  sizes = bind_program(program, functools.partial(request_program_stop, stop_file))
  replicas = placement.place(desc, sizes)
  k8s_text = files.kubernetes_manifests(desc, sizes, cfg.run_dir, code_dir, python)
  for label, nodes in program.groups.items():
    serialization.serialize_functions(os.path.join(directory, PROGRAM_DIR, f'{label}.pkl'), label,
                                      [node.function for node in nodes])

  def write(rel, text, mode=0o644):
    path = os.path.join(directory, rel)
    with open(path, 'w') as f:
      f.write(text)
    os.chmod(path, mode)
    return path

  environments = node_environments(cfg, desc)
  for r in replicas:
    write(f'{files.TASK_DIR}/{r.task}.sh', files.task_script(
        r, placement.task_spec(replicas, r.group, r.index), cfg.run_dir, code_dir, python,
        environments.get(r.group, {})), 0o755)
  host_scripts, commands = {}, {}
  hosts = [h for h in desc.hosts if any(r.host == h for r in replicas)]
  for h in hosts:
    tasks = [r.task for r in replicas if r.host == h]
    host_scripts[h] = write(f'{files.HOST_DIR}/{h}.sh', files.host_script(
        h, tasks, cfg.run_dir, code_dir, python), 0o755)
    commands[h] = files.host_command(desc, h, host_scripts[h])
  for name, text in files.slurm_files(desc, replicas, cfg.run_dir, directory, code_dir,
                                     python, gpu_hosts(cfg, desc)).items():
    write(f'{files.SLURM_DIR}/{name}', text, 0o755 if name.endswith('.sbatch') else 0o644)
  write(files.KUBERNETES_FILE, k8s_text)
  lines = []
  for h in hosts:
    lines.append(f'# host {h} ({desc.hosts[h].address}): '
                 + ', '.join(f'{r.task} :{r.port}' for r in replicas if r.host == h))
    lines.append(' '.join(quote(a) for a in commands[h]))
  write('commands.txt', '\n'.join(lines) + '\n')
  run_state.write_json(os.path.join(directory, LAUNCH_FILE), {
      'launch_id': launch_id, 'stop_file': stop_file, 'run_dir': cfg.run_dir,
      'code_dir': code_dir, 'python': python, 'groups': sizes,
      'replicas': [dict(dataclasses.asdict(r), task=r.task, endpoint=r.endpoint) for r in replicas],
      'description': description.description_json(desc)})
  return Package(directory, launch_id, replicas, stop_file, code_dir, python, host_scripts, commands)


def quote(arg: str) -> str:
  import shlex
  return shlex.quote(arg)


def read_launch(run_dir: str) -> dict:
  launch = run_state.read_json(os.path.join(package_dir(run_dir), LAUNCH_FILE))
  if launch is None:
    raise ClusterSpecError(f'{package_dir(run_dir)}/{LAUNCH_FILE} not found: package the run first '
                           '(python -m launch.train --launch_type cluster --cluster_description ...)')
  return launch

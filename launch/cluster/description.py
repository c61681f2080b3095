"""The cluster description (which hosts, which node groups run where, on which ports) and the
CLUSTER_SPEC each replica of the program is started with.

CLUSTER_SPEC is Launchpad's own contract (its Vertex AI runtime, `VertextAiAddressBuilder` and
`process_entry.py` in launchpad 0.5.2): a JSON object

    {"cluster": {pool: ["host:port", ...], ...}, "task": {"type": pool, "index": i}}

in the environment of every replica. A replica runs entry `index` of its pool's pickled nodes,
and every address of the program resolves to `cluster[pool][index]`. Here a pool is a node group
of the program (a Launchpad group label: replay, counter, coordinator, learner,
precedence_learner, actor), so any scheduler that starts one process per replica with this
variable set runs the program (`launch.cluster.placement` makes it): the launchers in
`launch.cluster.files` only differ in how they start processes and how they name hosts.

A description is a JSON object (YAML too, where PyYAML is installed):

    {
      "name": "ntb",                                   # job name for Slurm / Kubernetes
      "hosts": {"a": "10.0.0.1",                       # host name -> address peers connect to
                "b": {"address": "10.0.0.2",
                      "start": ["ssh", "b"],           # prefix that runs a command on the host
                      "gpus": 1}},                     # the learner runs on its GPU
      "base_port": 17100,                              # first port given out on each address
      "groups": {"replay": {"host": "a", "port": 17000},
                 "counter": {"host": "a"}, "coordinator": {"host": "a"},
                 "learner": {"host": "b"}, "precedence_learner": {"host": "b"},
                 "actor": {"hosts": ["b", "a"]}},      # replicas round-robin over these hosts
      "code_dir": "/shared/noturningback",             # code + venv on every host (default: here)
      "python": "/shared/noturningback/.venv/bin/python",
      "slurm": {"partition": "cpu", "time": "04:00:00"},
      "kubernetes": {"image": "registry/ntb:1", "namespace": "default",
                     "run_volume_claim": "ntb-runs"}
    }

A group's replicas take ports `port + i` when `port` is given, the listed `ports` when given,
else the next free ports from `base_port` on their host's address. Every error is a
ClusterSpecError (a ValueError) with a one-line message naming the problem.
"""
import dataclasses
import json
import os
import re
from typing import Any, Dict, Optional, Tuple

# Node groups of launch.program.layout.build_program, in the order the program adds them.
GROUPS = ('replay', 'counter', 'learner', 'precedence_learner', 'coordinator', 'actor')
DEFAULT_BASE_PORT = 17100
_NAME = re.compile(r'^[A-Za-z0-9][A-Za-z0-9._-]*$')
_TOP_KEYS = {'name', 'hosts', 'groups', 'base_port', 'code_dir', 'python', 'slurm', 'kubernetes'}
_GROUP_KEYS = {'host', 'hosts', 'port', 'ports'}


class ClusterSpecError(ValueError):
  """A malformed cluster description (one line, naming the problem)."""


@dataclasses.dataclass(frozen=True)
class Host:
  name: str                       # ssh target / Slurm node name; also names files
  address: str                    # what peers connect to: an IP literal or a DNS name
  start: Tuple[str, ...] = ()     # command prefix that runs a command there (ssh, ip netns exec)
  gpus: int = 0                   # GPUs the learners may use there (launch.program.devices)


@dataclasses.dataclass(frozen=True)
class GroupPlacement:
  hosts: Tuple[str, ...]          # replica i runs on hosts[i % len(hosts)]
  port: Optional[int] = None      # replica i listens on port + i
  ports: Tuple[int, ...] = ()     # or exactly these, one per replica


@dataclasses.dataclass(frozen=True)
class SlurmOptions:
  partition: Optional[str] = None
  time: str = '04:00:00'
  account: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class KubernetesOptions:
  image: str = 'noturningback:latest'   # holds the code and its venv at code_dir
  namespace: str = 'default'
  run_volume_claim: str = 'ntb-runs'    # a ReadWriteMany claim mounted where the run dir lives
  port: Optional[int] = None            # every pod's port (pods have their own addresses)


@dataclasses.dataclass(frozen=True)
class ClusterDescription:
  name: str
  hosts: Dict[str, Host]
  groups: Dict[str, GroupPlacement]
  base_port: int = DEFAULT_BASE_PORT
  code_dir: Optional[str] = None
  python: Optional[str] = None
  slurm: SlurmOptions = SlurmOptions()
  kubernetes: KubernetesOptions = KubernetesOptions()


@dataclasses.dataclass(frozen=True)
class Replica:
  """One process of the program: entry `index` of group `group`'s pickled nodes."""
  group: str
  index: int
  host: str      # a host name of the description (Kubernetes: the pod's name)
  address: str
  port: int

  @property
  def task(self) -> str:
    return f'{self.group}-{self.index}'

  @property
  def endpoint(self) -> str:
    return f'{format_host(self.address)}:{self.port}'


def format_host(address: str) -> str:
  return f'[{address}]' if ':' in address else address


def check_port(value, where: str) -> int:
  if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
    raise ClusterSpecError(f'{where}: port must be an integer in 1..65535, got {value!r}')
  return value


def _str(value, where: str) -> str:
  if not isinstance(value, str) or not value.strip() or any(c.isspace() for c in value):
    raise ClusterSpecError(f'{where} must be a non-empty string without spaces, got {value!r}')
  return value


def _options(cls, raw, where: str):
  if raw is None:
    return cls()
  if not isinstance(raw, dict):
    raise ClusterSpecError(f'{where} must be an object, got {type(raw).__name__}')
  known = {f.name for f in dataclasses.fields(cls)}
  unknown = sorted(set(raw) - known)
  if unknown:
    raise ClusterSpecError(f'unknown key {unknown[0]!r} in {where}; expected one of {sorted(known)}')
  return cls(**raw)


def _reject_unknown_keys(raw: dict, allowed, where: str) -> None:
  unknown = sorted(set(raw) - allowed)
  if unknown:
    raise ClusterSpecError(f'unknown key {unknown[0]!r} in {where}; expected some of '
                           f'{sorted(allowed)}')


def parse_description(raw: Any) -> ClusterDescription:
  """Validates a description (a dict as read from JSON/YAML)."""
  if not isinstance(raw, dict):
    raise ClusterSpecError(f'a cluster description must be an object, got {type(raw).__name__}')
  _reject_unknown_keys(raw, _TOP_KEYS, 'the cluster description')
  name = raw.get('name', 'ntb')
  if not isinstance(name, str) or not re.fullmatch(r'[a-z]([a-z0-9-]{0,28}[a-z0-9])?', name):
    raise ClusterSpecError(f"name must be a DNS label of at most 30 characters (a-z, 0-9, '-'), "
                           f'got {name!r}')
  raw_hosts = raw.get('hosts')
  if not isinstance(raw_hosts, dict) or not raw_hosts:
    raise ClusterSpecError('the cluster description needs "hosts": {name: address, ...}')
  hosts = {}
  for host_name, value in raw_hosts.items():
    if not _NAME.match(str(host_name)):
      raise ClusterSpecError(f'host name {host_name!r} may only hold letters, digits, ".", "_", "-"')
    if isinstance(value, str):
      value = {'address': value}
    if not isinstance(value, dict) or set(value) - {'address', 'start', 'gpus'}:
      raise ClusterSpecError(f'host {host_name}: expected an address or {{"address": ..., '
                             f'"start": [...], "gpus": N}}, got {value!r}')
    gpus = value.get('gpus', 0)
    if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < 0:
      raise ClusterSpecError(f'host {host_name}: "gpus" must be a whole number >= 0, got {gpus!r}')
    start = value.get('start', [])
    if not isinstance(start, list) or not all(isinstance(s, str) and s for s in start):
      raise ClusterSpecError(f'host {host_name}: "start" must be a list of strings, got {start!r}')
    hosts[host_name] = Host(host_name, _str(value.get('address'), f'host {host_name} address'),
                            tuple(start), gpus)
  raw_groups = raw.get('groups')
  if not isinstance(raw_groups, dict) or not raw_groups:
    raise ClusterSpecError('the cluster description needs "groups": {group: {"host": ...}, ...}')
  groups = {}
  for group, value in raw_groups.items():
    if group not in GROUPS:
      raise ClusterSpecError(f'unknown node group {group!r}; expected one of {list(GROUPS)}')
    if isinstance(value, str):
      value = {'host': value}
    if not isinstance(value, dict):
      raise ClusterSpecError(f'node group {group}: expected {{"host": ...}}, got {value!r}')
    _reject_unknown_keys(value, _GROUP_KEYS, f'node group {group}')
    if ('host' in value) == ('hosts' in value):
      raise ClusterSpecError(f'node group {group} needs exactly one of "host" or "hosts"')
    group_hosts = [value['host']] if 'host' in value else value['hosts']
    if not isinstance(group_hosts, list) or not group_hosts:
      raise ClusterSpecError(f'node group {group}: "hosts" must be a non-empty list of host names')
    for h in group_hosts:
      if h not in hosts:
        raise ClusterSpecError(f'node group {group}: unknown host {h!r} (hosts: {sorted(hosts)})')
    if 'port' in value and 'ports' in value:
      raise ClusterSpecError(f'node group {group}: give "port" or "ports", not both')
    port = check_port(value['port'], f'node group {group}') if 'port' in value else None
    ports = value.get('ports', [])
    if not isinstance(ports, list):
      raise ClusterSpecError(f'node group {group}: "ports" must be a list, got {ports!r}')
    groups[group] = GroupPlacement(tuple(group_hosts), port,
                                   tuple(check_port(p, f'node group {group}') for p in ports))
  base_port = check_port(raw.get('base_port', DEFAULT_BASE_PORT), 'base_port')
  for key in ('code_dir', 'python'):
    if raw.get(key) is not None and (not isinstance(raw[key], str) or not os.path.isabs(raw[key])):
      raise ClusterSpecError(f'{key} must be an absolute path, got {raw[key]!r}')
  return ClusterDescription(
      name=name, hosts=hosts, groups=groups, base_port=base_port, code_dir=raw.get('code_dir'),
      python=raw.get('python'), slurm=_options(SlurmOptions, raw.get('slurm'), 'slurm'),
      kubernetes=_options(KubernetesOptions, raw.get('kubernetes'), 'kubernetes'))


def load_description(path: str) -> ClusterDescription:
  """Reads a description file: JSON, or YAML (.yaml/.yml) where PyYAML is installed."""
  try:
    with open(path) as f:
      text = f.read()
  except OSError as e:
    raise ClusterSpecError(f'cannot read cluster description {path}: {e.strerror or e}') from None
  if path.endswith(('.yaml', '.yml')):
    try:
      import yaml  # not a dependency of the project: JSON descriptions need nothing
    except ImportError:
      raise ClusterSpecError(f'{path}: reading YAML needs PyYAML (pip install -c constraints.txt '
                             'pyyaml); or write the description as JSON') from None
    try:
      raw = yaml.safe_load(text)
    except yaml.YAMLError as e:
      raise ClusterSpecError(f'{path} is not valid YAML: {str(e).splitlines()[0]}') from None
  else:
    try:
      raw = json.loads(text)
    except ValueError as e:
      raise ClusterSpecError(f'{path} is not valid JSON: {e}') from None
  return parse_description(raw)


def description_json(desc: ClusterDescription) -> Dict[str, Any]:
  """The description as a JSON object (what the package records)."""
  return dataclasses.asdict(desc)

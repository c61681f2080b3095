"""Replicas onto hosts and ports (from a ClusterDescription and the program's group sizes),
and the CLUSTER_SPEC each replica's task reads (Launchpad's Vertex AI addressing)."""
import json
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from launch.cluster.description import (
  ClusterDescription,
  ClusterSpecError,
  Host,
  Replica,
  check_port,
  format_host,
)


def place(desc: ClusterDescription, group_sizes: Mapping[str, int]) -> List[Replica]:
  """Every replica of the program (groups in `group_sizes` order), with host and port.

  Raises when a group of the program has no place in the description, or two replicas would
  listen on the same address and port."""
  missing = [g for g in group_sizes if g not in desc.groups]
  if missing:
    raise ClusterSpecError(f'node group {missing[0]} of the program has no host in the cluster '
                           f'description (add "groups": {{"{missing[0]}": {{"host": ...}}}})')
  taken: Dict[Tuple[str, int], str] = {}
  pending: List[Tuple[str, int, Host]] = []
  replicas: Dict[Tuple[str, int], Replica] = {}

  def claim(group, index, host, port):
    key = (host.address, port)
    task = f'{group}-{index}'
    if key in taken:
      raise ClusterSpecError(f'port clash: {taken[key]} and {task} both listen on '
                             f'{format_host(host.address)}:{port} (host {host.name})')
    taken[key] = task
    replicas[(group, index)] = Replica(group, index, host.name, host.address, port)

  for group, size in group_sizes.items():
    p = desc.groups[group]
    if p.ports and len(p.ports) != size:
      raise ClusterSpecError(f'node group {group} has {size} replicas in this program but '
                             f'{len(p.ports)} ports in the description')
    for i in range(size):
      host = desc.hosts[p.hosts[i % len(p.hosts)]]
      if p.ports:
        claim(group, i, host, p.ports[i])
      elif p.port is not None:
        claim(group, i, host, check_port(p.port + i, f'node group {group}'))
      else:
        pending.append((group, i, host))
  # Automatic ports after every explicit one, so that an explicit port is never taken first.
  next_port: Dict[str, int] = {}
  for group, i, host in pending:
    port = next_port.get(host.address, desc.base_port)
    while (host.address, port) in taken:
      port += 1
    claim(group, i, host, check_port(port, f'node group {group} (from base_port)'))
    next_port[host.address] = port + 1
  return [replicas[(g, i)] for g, size in group_sizes.items() for i in range(size)]


def cluster_of(replicas: Sequence[Replica]) -> Dict[str, List[str]]:
  """The "cluster" part of CLUSTER_SPEC: group -> endpoints in replica order."""
  out: Dict[str, List[str]] = {}
  for r in replicas:
    out.setdefault(r.group, []).append(r.endpoint)
  return out


def task_spec(replicas: Sequence[Replica], group: str, index: int) -> Dict[str, Any]:
  """CLUSTER_SPEC of one replica."""
  return {'cluster': cluster_of(replicas), 'task': {'type': group, 'index': index}}


def parse_cluster_spec(text: Optional[str]) -> Tuple[Dict[str, List[str]], str, int]:
  """(cluster, task type, task index) of a CLUSTER_SPEC value; one-line errors."""
  if not text:
    raise ClusterSpecError('CLUSTER_SPEC is not set: start this process through a launcher '
                           '(launch.cluster host, Slurm, Kubernetes) or set it by hand')
  try:
    spec = json.loads(text)
    cluster, task = spec['cluster'], spec['task']
    group, index = task['type'], task['index']
  except (ValueError, KeyError, TypeError) as e:
    raise ClusterSpecError(f'CLUSTER_SPEC is malformed ({type(e).__name__}: {e}); expected '
                           '{"cluster": {pool: ["host:port", ...]}, "task": {"type": pool, '
                           '"index": i}}') from None
  if not isinstance(cluster, dict) or group not in cluster:
    raise ClusterSpecError(f'CLUSTER_SPEC task type {group!r} is not a pool of its cluster '
                           f'({sorted(cluster) if isinstance(cluster, dict) else cluster!r})')
  if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(cluster[group]):
    raise ClusterSpecError(f'CLUSTER_SPEC task index {index!r} is out of range for pool {group} '
                           f'({len(cluster[group])} replicas)')
  return cluster, group, index


def split_endpoint(endpoint: str) -> Tuple[str, int]:
  """'host:port' or '[v6]:port' -> (host, port)."""
  host, _, port = endpoint.rpartition(':')
  if not host or not port.isdigit():
    raise ClusterSpecError(f'endpoint {endpoint!r} is not host:port')
  return host.strip('[]'), int(port)

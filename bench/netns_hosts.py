"""Hosts on one machine, for testing cluster launches: each host is a Linux network namespace
with its own address, all joined by veth pairs to a bridge that lives in one more namespace (the
"switch"), so nothing of the machine's own network is touched and deleting the namespaces
deletes every link. Needs root (CAP_NET_ADMIN) and iproute2.

    with NetnsHosts(['a', 'b', 'c']) as hosts:
      hosts.address('a')            # '10.213.0.1'
      hosts.start_prefix('a')       # ['ip', 'netns', 'exec', 'ntb-...-a']: runs a command there
      hosts.pids('a')               # processes living in that namespace
"""
import os
import shutil
import subprocess
import time
import uuid
from typing import Dict, List, NamedTuple, Optional, Sequence


class Listener(NamedTuple):
  """A listening TCP socket: its process, local address and port, and the process's name."""
  pid: int
  ip: str
  port: int
  command: str


class NetnsUnavailable(RuntimeError):
  """Network namespaces cannot be created here (not root, no iproute2, no kernel support)."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
  r = subprocess.run(['ip', *args], capture_output=True, text=True)
  if check and r.returncode != 0:
    raise RuntimeError(f'ip {" ".join(args)}: {r.stderr.strip()}')
  return r


def unavailable_reason() -> Optional[str]:
  """Why namespaces cannot be made here, or None."""
  if shutil.which('ip') is None:
    return 'iproute2 (`ip`) is not installed'
  if os.geteuid() != 0:
    return 'creating network namespaces needs root (CAP_NET_ADMIN)'
  probe = f'ntbprobe{os.getpid()}'
  r = _ip('netns', 'add', probe, check=False)
  if r.returncode != 0:
    return f'ip netns add failed: {r.stderr.strip()}'
  _ip('netns', 'del', probe, check=False)
  return None


class NetnsHosts:
  """Namespaces named ntb<id>-<host> on subnet 10.213.<subnet>.0/24 behind a bridge."""

  def __init__(self, hosts: Sequence[str], subnet: int = 0):
    if not 1 <= len(hosts) <= 250:
      raise ValueError('between 1 and 250 hosts')
    self._id = uuid.uuid4().hex[:6]
    self._hosts = list(hosts)
    self._subnet = subnet
    self._created: List[str] = []

  def namespace(self, host: str) -> str:
    return f'ntb{self._id}-{host}'

  @property
  def switch(self) -> str:
    return f'ntb{self._id}-switch'

  def address(self, host: str) -> str:
    return f'10.213.{self._subnet}.{self._hosts.index(host) + 1}'

  def addresses(self) -> Dict[str, str]:
    return {h: self.address(h) for h in self._hosts}

  def start_prefix(self, host: str) -> List[str]:
    return ['ip', 'netns', 'exec', self.namespace(host)]

  def enter_prefix(self, host: str) -> List[str]:
    """Like start_prefix, but only the network namespace changes: the command keeps this
    machine's mounts (`ip netns exec` remounts /sys, which drops /sys/fs/cgroup; slurmd needs it)."""
    return ['nsenter', f'--net=/run/netns/{self.namespace(host)}']

  def pids(self, host: str) -> List[int]:
    r = _ip('netns', 'pids', self.namespace(host), check=False)
    return [int(p) for p in r.stdout.split()]

  def listening(self, host: str) -> List[Listener]:
    """Every listening TCP socket in a host's namespace (psutil reads /proc/net of the caller's
    namespace, so `ss` runs inside it)."""
    r = subprocess.run(self.start_prefix(host) + ['ss', '-Hltnp'], capture_output=True, text=True)
    out = []
    for line in r.stdout.splitlines():
      local = line.split()[3]
      ip, _, port = local.rpartition(':')
      for part in line.split('pid=')[1:]:
        pid = int(part.split(',')[0])
        try:
          with open(f'/proc/{pid}/comm') as f:
            command = f.read().strip()
        except OSError:
          command = '?'
        out.append(Listener(pid, ip.strip('[]'), int(port), command))
    return out

  def create(self) -> 'NetnsHosts':
    why = unavailable_reason()
    if why:
      raise NetnsUnavailable(why)
    try:
      self._add(self.switch)
      _ip('-n', self.switch, 'link', 'add', 'br0', 'type', 'bridge')
      _ip('-n', self.switch, 'link', 'set', 'br0', 'up')
      for i, host in enumerate(self._hosts):
        ns = self.namespace(host)
        self._add(ns)
        # One veth pair per host: 'eth0' in the host, 'p<i>' on the switch's bridge.
        _ip('-n', self.switch, 'link', 'add', f'p{i}', 'type', 'veth', 'peer', 'name', 'eth0',
            'netns', ns)
        _ip('-n', self.switch, 'link', 'set', f'p{i}', 'master', 'br0', 'up')
        _ip('-n', ns, 'addr', 'add', f'{self.address(host)}/24', 'dev', 'eth0')
        _ip('-n', ns, 'link', 'set', 'eth0', 'up')
        _ip('-n', ns, 'link', 'set', 'lo', 'up')
    except Exception:
      self.delete()
      raise
    return self

  def _add(self, ns: str) -> None:
    _ip('netns', 'add', ns)
    self._created.append(ns)

  def kill_processes(self, timeout_s: float = 10.0) -> None:
    """SIGKILLs whatever still lives in the hosts' namespaces (only processes started there)."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
      left = [p for h in self._hosts for p in self.pids(h)]
      if not left:
        return
      for pid in left:
        try:
          os.kill(pid, 9)
        except ProcessLookupError:
          pass
      time.sleep(0.2)

  def delete(self) -> None:
    """Removes every namespace this object made (and with them the veths and the bridge)."""
    for ns in reversed(self._created):
      _ip('netns', 'del', ns, check=False)
    self._created = []

  def exists(self) -> bool:
    listed = _ip('netns', 'list', check=False).stdout
    return any(f'ntb{self._id}-' in line for line in listed.splitlines())

  def __enter__(self) -> 'NetnsHosts':
    return self.create()

  def __exit__(self, *exc) -> None:
    self.kill_processes()
    self.delete()

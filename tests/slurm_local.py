"""A throwaway Slurm cluster on this machine, for running the generated Slurm job for real.

Every Slurm node is a network namespace (bench.netns_hosts) with its own address and its
own slurmd; one more namespace holds munged and slurmctld. The daemons share nothing with the
machine's own Slurm or munge (if any): their key, sockets, state, spool, logs and slurm.conf all
live in one temporary directory, and client commands are run with SLURM_CONF pointing there, in
the controller's namespace (the only network that reaches slurmctld).

    with LocalSlurm(['a', 'b', 'c']) as slurm:
      slurm.address('a')                       # the node's address (NodeAddr in slurm.conf)
      job = slurm.submit('/path/job.sbatch')   # sbatch; returns the job id
      slurm.wait(job, timeout_s=1800)          # final state, e.g. 'COMPLETED'

Needs root (namespaces; the daemons run as root and so do the jobs) and Debian's `slurm-wlm` and
`munge` (`make test-slurm` installs them). `python -m tests.slurm_local a b c` starts
one and keeps it up until Ctrl-C, printing how to use it.

Choices for this container (BUILD_NOTES "Slurm on one machine"): proctrack/linuxproc and
task/none (its cgroups are not ours to write); the daemons enter their namespace with nsenter,
network only, since slurmd reads /sys/fs/cgroup, which `ip netns exec` remounts away; several
slurmd on one host through `-N NAME`, each on port 6818 of its own namespace; every node given
this machine's CPU count; no accounting database (job states from `scontrol show job`).
"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Sequence

from absl import flags

from bench import netns_hosts
from envs import cli

DAEMONS = ('munged', 'slurmctld', 'slurmd')
CONTROLLER = 'ctl'               # the controller's namespace (not a Slurm node)
FINAL_STATES = {'COMPLETED', 'FAILED', 'CANCELLED', 'TIMEOUT', 'NODE_FAIL', 'OUT_OF_MEMORY',
                'PREEMPTED', 'BOOT_FAIL', 'DEADLINE'}


class SlurmUnavailable(RuntimeError):
  """A local Slurm cluster cannot be started here (one line saying why)."""


def unavailable_reason() -> Optional[str]:
  """Why a LocalSlurm cannot start here, or None."""
  missing = [d for d in DAEMONS if shutil.which(d) is None]
  if missing:
    return (f'{", ".join(missing)} not installed (Debian: apt-get install slurm-wlm munge; or '
            '`make test-slurm`)')
  return netns_hosts.unavailable_reason()


def slurm_version() -> str:
  """`slurmctld -V`, e.g. 'slurm-wlm 22.05.8'."""
  return subprocess.run(['slurmctld', '-V'], capture_output=True, text=True).stdout.strip()


def slurm_conf(directory: str, controller: str, controller_address: str,
               nodes: Dict[str, str], cpus: int, munge_socket: str) -> str:
  """slurm.conf of a cluster whose nodes are {name: address}; every path under `directory`."""
  names = ','.join(nodes)
  lines = [
      '# A throwaway cluster (tests/slurm_local.py); every path is in this directory.',
      'ClusterName=ntblocal',
      f'SlurmctldHost={controller}({controller_address})',
      'SlurmUser=root',
      'SlurmdUser=root',
      'SlurmctldPort=6817',
      'SlurmdPort=6818',
      'AuthType=auth/munge',
      'CredType=cred/munge',
      f'AuthInfo=socket={munge_socket}',
      f'StateSaveLocation={directory}/state',
      f'SlurmdSpoolDir={directory}/spool/%n',
      f'SlurmctldPidFile={directory}/slurmctld.pid',
      f'SlurmdPidFile={directory}/slurmd-%n.pid',
      f'SlurmctldLogFile={directory}/slurmctld.log',
      f'SlurmdLogFile={directory}/slurmd-%n.log',
      'SlurmctldDebug=info',
      'SlurmdDebug=info',
      'ProctrackType=proctrack/linuxproc',
      'TaskPlugin=task/none',
      'JobAcctGatherType=jobacct_gather/none',
      'AccountingStorageType=accounting_storage/none',
      'JobCompType=jobcomp/none',
      'MpiDefault=none',
      'SchedulerType=sched/builtin',
      'SelectType=select/cons_tres',
      'SelectTypeParameters=CR_Core',
      'ReturnToService=2',
      'MinJobAge=3600',
      'KillWait=30',
  ]
  for name, address in nodes.items():
    lines.append(f'NodeName={name} NodeAddr={address} CPUs={cpus} State=UNKNOWN')
  lines.append(f'PartitionName=local Nodes={names} Default=YES MaxTime=INFINITE State=UP')
  return '\n'.join(lines) + '\n'


class LocalSlurm:
  """munged + slurmctld in namespace `ctl`, one slurmd per node namespace; see the module doc."""

  def __init__(self, nodes: Sequence[str], directory: Optional[str] = None):
    if CONTROLLER in nodes:
      raise ValueError(f'{CONTROLLER!r} names the controller namespace, not a node')
    self.nodes = list(nodes)
    self.hosts = netns_hosts.NetnsHosts([CONTROLLER, *self.nodes], subnet=1)
    self._own_dir = directory is None
    self.directory = directory   # made by start() when None
    self.procs: Dict[str, subprocess.Popen] = {}
    self._logs = []

  def address(self, node: str) -> str:
    return self.hosts.address(node)

  @property
  def conf(self) -> str:
    return os.path.join(self.directory, 'slurm.conf')

  @property
  def munge_socket(self) -> str:
    return os.path.join(self.directory, 'munge', 'munge.socket')

  def env(self) -> Dict[str, str]:
    return dict(os.environ, SLURM_CONF=self.conf)

  def client(self, *args: str, check: bool = True, cwd: Optional[str] = None) -> str:
    """Runs a Slurm client command (sbatch, squeue, scontrol, ...) against this cluster."""
    r = subprocess.run(self.hosts.start_prefix(CONTROLLER) + list(args), env=self.env(), cwd=cwd,
                       capture_output=True, text=True, timeout=60)
    if check and r.returncode != 0:
      raise RuntimeError(f'{" ".join(args)}: {(r.stderr or r.stdout).strip()}')
    return r.stdout

  def daemon_pids(self) -> Dict[str, int]:
    return {name: p.pid for name, p in self.procs.items() if p.poll() is None}

  def start(self, timeout_s: float = 120) -> 'LocalSlurm':
    why = unavailable_reason()
    if why:
      raise SlurmUnavailable(why)
    # munged wants its socket's directory, and every directory above, searchable by all: pytest's
    # tmp_path (0700) is not, so the default is a fresh directory in /tmp.
    self.directory = self.directory or tempfile.mkdtemp(prefix='ntb-slurm-')
    os.chmod(self.directory, 0o755)
    for sub in ('munge', 'state', 'spool'):
      os.makedirs(os.path.join(self.directory, sub), exist_ok=True)
    for node in self.nodes:
      os.makedirs(os.path.join(self.directory, 'spool', node), exist_ok=True)
    key = os.path.join(self.directory, 'munge', 'munge.key')
    with open(os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 'wb') as f:
      f.write(os.urandom(1024))   # this cluster's own key: nothing else can talk to it
    controller = socket.gethostname().split('.')[0]   # slurmctld checks it runs on this name
    with open(self.conf, 'w') as f:
      f.write(slurm_conf(self.directory, controller, self.address(CONTROLLER),
                         {n: self.address(n) for n in self.nodes}, os.cpu_count() or 1,
                         self.munge_socket))
    try:
      self.hosts.create()
      self._daemon('munged', CONTROLLER, [
          'munged', '--foreground', f'--socket={self.munge_socket}', f'--key-file={key}',
          f'--pid-file={self.directory}/munge/munged.pid',
          f'--seed-file={self.directory}/munge/munged.seed'])
      self._wait_for(lambda: os.path.exists(self.munge_socket), 30, 'munged socket')
      self._daemon('slurmctld', CONTROLLER, ['slurmctld', '-D', '-i', '-f', self.conf])
      for node in self.nodes:
        self._daemon(f'slurmd-{node}', node, ['slurmd', '-D', '-N', node, '-f', self.conf])
      self._wait_for(self._all_idle, timeout_s, 'every node idle in sinfo')
    except Exception:
      self.stop()
      raise
    return self

  def _daemon(self, name: str, host: str, cmd: List[str]) -> None:
    log = open(os.path.join(self.directory, f'{name}.out'), 'ab')
    self._logs.append(log)
    self.procs[name] = subprocess.Popen(self.hosts.enter_prefix(host) + cmd, env=self.env(),
                                        stdin=subprocess.DEVNULL, stdout=log,
                                        stderr=subprocess.STDOUT, start_new_session=True)

  def _wait_for(self, ready, timeout_s: float, what: str) -> None:
    deadline = time.time() + timeout_s
    while not ready():
      dead = [n for n, p in self.procs.items() if p.poll() is not None]
      if dead:   # the directory goes with the cluster: its log's last line goes in the error
        raise SlurmUnavailable(f'{dead[0]} exited with code {self.procs[dead[0]].returncode} '
                               f'before {what}: {self._last_line(dead[0])}')
      if time.time() > deadline:
        raise SlurmUnavailable(f'no {what} after {timeout_s:.0f} s (nodes: {self.node_states()})')
      time.sleep(0.5)

  def _last_line(self, name: str) -> str:
    try:
      with open(os.path.join(self.directory, f'{name}.out'), errors='replace') as f:
        lines = [l.strip() for l in f if l.strip()]
    except OSError:
      lines = []
    return lines[-1] if lines else 'no output'

  def node_states(self) -> Dict[str, str]:
    out = self.client('sinfo', '-h', '-N', '-o', '%N %T', check=False)
    return dict(line.split()[:2] for line in out.splitlines() if len(line.split()) >= 2)

  def _all_idle(self) -> bool:
    states = self.node_states()
    return all(states.get(n, '').rstrip('*') == 'idle' for n in self.nodes)

  def stop(self) -> None:
    """Stops every daemon, everything left in the namespaces, and deletes them (and the
    directory, when this object made it)."""
    for proc in self.procs.values():
      if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.time() + 30
    for proc in self.procs.values():
      try:
        proc.wait(timeout=max(0.1, deadline - time.time()))
      except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    self.hosts.kill_processes()
    self.hosts.delete()
    for log in self._logs:
      log.close()
    self._logs = []
    if self._own_dir and self.directory:
      shutil.rmtree(self.directory, ignore_errors=True)

  def __enter__(self) -> 'LocalSlurm':
    return self.start()

  def __exit__(self, *exc) -> None:
    self.stop()

  def submit(self, script: str, *args: str, cwd: Optional[str] = None) -> str:
    """sbatch SCRIPT; returns the job id."""
    return self.client('sbatch', '--parsable', *args, script, cwd=cwd).strip().split(';')[0]

  def job(self, job_id: str) -> Dict[str, str]:
    """`scontrol show job` as {key: value} ({} once the job is forgotten)."""
    out = self.client('scontrol', '-o', 'show', 'job', job_id, check=False)
    return dict(item.split('=', 1) for item in out.split() if '=' in item)

  def wait(self, job_id: str, timeout_s: float, poll_s: float = 2.0) -> Dict[str, str]:
    """Waits for a job's end; returns its `scontrol show job` fields (JobState, ExitCode, ...)."""
    deadline = time.time() + timeout_s
    while True:
      fields = self.job(job_id)
      if fields.get('JobState') in FINAL_STATES:
        return fields
      if time.time() > deadline:
        raise TimeoutError(f'job {job_id} still {fields.get("JobState")} after {timeout_s:.0f} s')
      time.sleep(poll_s)


def define_flags(fv: flags.FlagValues) -> None:
  flags.DEFINE_string('dir', None, 'config, state and logs here (kept); default: a fresh '
                      'directory in /tmp, removed at the end', flag_values=fv)


def main(argv=None) -> int:
  args, nodes = cli.parse(
      define_flags, argv, prog='python -m tests.slurm_local',
      description='Start a throwaway Slurm cluster (nodes in network namespaces) until Ctrl-C.',
      positional='NODE [NODE ...] (node names, e.g. a b c)')
  if not nodes:
    cli.fail('name at least one node, e.g. a b c')
  args.nodes = nodes
  if args.dir:
    os.makedirs(args.dir, exist_ok=True)
  try:
    slurm = LocalSlurm(args.nodes, directory=args.dir and os.path.abspath(args.dir)).start()
  except (SlurmUnavailable, ValueError) as e:
    print(f'error: {e}', file=sys.stderr)
    return 2
  try:
    prefix = ' '.join(slurm.hosts.start_prefix(CONTROLLER))
    print(f'{slurm_version()}: nodes ' + ', '.join(f'{n} ({slurm.address(n)})' for n in slurm.nodes)
          + f'; config and logs in {slurm.directory}\n'
          f'  e.g. SLURM_CONF={slurm.conf} {prefix} sbatch JOB.sbatch\n'
          'Ctrl-C stops every daemon and removes the namespaces.', flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
      time.sleep(3600)
  except (KeyboardInterrupt, SystemExit):
    pass
  finally:
    slurm.stop()
  return 0


if __name__ == '__main__':
  sys.exit(main())

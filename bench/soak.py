"""A chaos soak: one real training run under random faults for a wall time, then every file it
wrote checked against invariants (bench.soak_check).

    python -m bench.soak --duration_s 7200 --seed 0      # the 2-hour soak (root: a tmpfs)
    python -m bench.soak --duration_s 600 --mean_gap_s 35 # the 10-minute one (make test-slow)

The run is `launch.train` on reward-free Cartpole (2 actors, RAE with psi learned online) or on
Sokoban with a frozen psi (`--workload sokoban`), with --hang_timeout_s on. Its run directory
lies on a small tmpfs of its own (as root), so that the disk can be filled and grown again.
Faults come at random times from a schedule drawn from `--seed` (gaps exponential with mean
`--mean_gap_s`), each of a kind drawn uniformly from `--kinds`:

  kill_node            kill -9 of a random node (actor, learner, precedence learner, replay,
                       counter, coordinator): its supervisor restarts it
  stop_node            SIGSTOP of a random node: found hung after --hang_timeout_s, restarted
  sigterm_cli          SIGTERM of the CLI (a clean stop), then --resume with the same command
  kill_cli             kill -9 of the CLI (the nodes die with it), then --resume
  kill_launcher        kill -9 of the CLI and its launcher at once (as the OOM killer takes
                       both): every node ends on its own; then --resume
  second_launch        a second launch.train --resume on the same run directory: refused
                       while a launch is live; one that finds none (the launch beside it
                       ended meanwhile: another fault stopped it) takes the run, and is the
                       launch in flight from then on
  disk_full            the tmpfs filled: the run stops in one line; grown again, then --resume
  truncate_checkpoint  the run stopped (SIGTERM), its newest learner checkpoint cut in half,
                       then --resume (from the checkpoint before)

A fault may land while an earlier one is still being recovered (a node restarting, a launch
starting): it is then marked `overlapped`. A fault with nothing to act on (no live node, no
checkpoint yet) is tried again RETRY_S later, up to RETRIES times (`put_off` says why each try did
nothing), then recorded as not applied. When the time is up, the run is stopped and resumed
to a few more env steps so that it ends "completed"; then the checker reads the files.

The record (JSON, `--out`): the seed, every fault's time, kind, target, whether it overlapped
another and was applied, each launch's exit, and the invariants with their figures. Replaying a
failing soak is the same command with the same seed (the schedule is the seed's; the targets
drawn at each fault are the seed's too, among the nodes alive then).
"""
import dataclasses
import datetime
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional

from absl import app, flags

from bench import common, soak_check
from launch.runtime import run_lock

KINDS = ('kill_node', 'stop_node', 'sigterm_cli', 'kill_cli', 'kill_launcher', 'second_launch',
         'disk_full', 'truncate_checkpoint')
NODES = ('actor_0', 'actor_1', 'learner', 'precedence_learner', 'replay', 'counter',
         'coordinator')
RECOVERY_S = 60.0      # a fault within this long of the last one overlaps it
RETRY_S, RETRIES = 10.0, 3   # a fault with nothing to act on is tried again, this often
FINAL_STEPS = 5_000    # env steps the closing launch adds, to end "completed"
# The SIGSTOP rule needs the timeout and a poll: a node still stopped after 3 timeouts and this
# long was missed by its supervisor.
STOPPED_SLACK_S = 30.0
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))

WORKLOADS = {
    'cartpole': ('--env', 'cartpole', '--reward_free', '--mode', 'rae', '--num_actors', '2',
                 '--precedence_env_steps_per_update', '10'),
    'sokoban': ('--env', 'sokoban', '--mode', 'rae', '--num_actors', '2', '--envs_per_actor', '8',
                '--estimator_checkpoint', os.path.join(ROOT, 'results', 'sokoban_30m', 'psi.ckpt')),
}


def define_flags():
  flags.DEFINE_float('duration_s', 600.0, 'Wall time of the faults (the run then closes).')
  flags.DEFINE_integer('seed', 0, 'Seed of the fault schedule and of the targets.')
  flags.DEFINE_enum('workload', 'cartpole', list(WORKLOADS), 'The run under the faults.')
  flags.DEFINE_float('mean_gap_s', 75.0, 'Mean time between two faults.')
  flags.DEFINE_list('kinds', list(KINDS), 'Fault kinds to draw from.')
  flags.DEFINE_float('hang_timeout_s', 20.0, 'The run\'s --hang_timeout_s.')
  flags.DEFINE_float('checkpoint_every_s', 20.0, 'The run\'s learner checkpoint period.')
  flags.DEFINE_integer('tmpfs_mb', 768, 'Size of the tmpfs the run directory lies on.')
  flags.DEFINE_string('workdir', None, 'Where the run goes (default: a new temp dir).')
  flags.DEFINE_string('out', None, 'The JSON record (default: results/soak/WORKLOAD-sSEED.json).')


class SoakAborted(RuntimeError):
  """The soak cannot go on: its run does not start, for a reason no fault explains."""


@dataclasses.dataclass
class Fault:
  time: float            # seconds since the soak began
  kind: str
  target: Optional[str] = None
  overlapped: bool = False
  applied: bool = False
  detail: str = ''
  refused: Optional[bool] = None   # second_launch: refused in one line, exit code 2
  took_run: bool = False           # second_launch: found no live launch and took the run
  put_off: List[str] = dataclasses.field(default_factory=list)  # why each earlier try did nothing


def fill_disk(path: str, chunk: int = 64 * 2 ** 20) -> int:
  """Fills the file system of `path` with the file `path`; returns the bytes it holds. In
  chunks: one allocation of all the free space fails as a whole, and keeps nothing, when the run
  writes a few bytes meanwhile (tmpfs undoes a failed fallocate)."""
  size = 0
  with open(path, 'wb') as f:
    while chunk >= 4096:
      try:
        os.posix_fallocate(f.fileno(), size, chunk)
        size += chunk
      except OSError:   # ENOSPC: a smaller chunk may still fit
        chunk //= 4
  return size


def schedule(seed: int, duration_s: float, mean_gap_s: float, kinds) -> List[Fault]:
  rng = random.Random(seed)
  out, t = [], rng.expovariate(1.0 / mean_gap_s)
  while t < duration_s:
    out.append(Fault(round(t, 1), rng.choice(list(kinds))))
    t += rng.expovariate(1.0 / mean_gap_s)
  return out


class Soak:
  """The run's launches and the faults dealt to them."""

  def __init__(self, workdir: str, workload: str, hang_timeout_s: float,
               checkpoint_every_s: float, tmpfs_mb: int, seed: int):
    self.workdir = workdir
    self.mount = os.path.join(workdir, 'disk')
    self.run_dir = os.path.join(self.mount, 'run')
    # The launches' cwd, HOME and TMPDIR: empty at the end, or something was written outside.
    self.outside = [os.path.join(workdir, d) for d in ('cwd', 'home', 'tmp')]
    for d in [self.mount] + self.outside:
      os.makedirs(d, exist_ok=True)
    self.tmpfs = os.geteuid() == 0
    self.tmpfs_mb = self.first_tmpfs_mb = tmpfs_mb
    if self.tmpfs:
      subprocess.run(['mount', '-t', 'tmpfs', '-o', f'size={tmpfs_mb}m', 'tmpfs', self.mount],
                     check=True)
    self.args = [*WORKLOADS[workload], '--run_dir', self.run_dir, '--noprogress',
                 '--hang_timeout_s', f'{hang_timeout_s:g}',
                 '--checkpoint_period_s', f'{checkpoint_every_s:g}']
    self.rng = random.Random(seed + 1)
    self.proc: Optional[subprocess.Popen] = None
    self.entry: Optional[Dict] = None       # the launch in flight's record in `launches`
    self.launches: List[Dict] = []
    self.sessions: List[int] = []
    self.stopped_pids: Dict[int, float] = {}
    self.second: Optional[subprocess.Popen] = None
    self.second_fault: Optional[Fault] = None
    self.second_entry: Dict = {}
    # The run lock's holders seen: (pid, the holder record's `since`); and the times at which
    # a launch that had held it was alive while another held it (two launches at once).
    self.holders: List[tuple] = []
    self.held_at_once: List[Dict] = []
    self.filler: Optional[str] = None
    self.stopping: Optional[Fault] = None   # a fault's SIGTERM sent, its launch not yet ended
    self.t0 = time.time()

  # --- launches ---------------------------------------------------------------------------

  def _env(self):
    env = dict(os.environ, HOME=self.outside[1], TMPDIR=self.outside[2],
               PYTHONPATH=ROOT + os.pathsep + os.environ.get('PYTHONPATH', ''))
    return env

  def _cmd(self, max_steps: int, resume: bool) -> List[str]:
    return [sys.executable, '-m', 'launch.train', *self.args, '--max_steps', str(max_steps),
            *(['--resume'] if resume else [])]

  def launch(self, max_steps: int):
    resume = bool(self.launches)
    log = open(os.path.join(self.workdir, f'cli_{len(self.launches)}.log'), 'w')
    self.proc = subprocess.Popen(self._cmd(max_steps, resume), cwd=self.outside[0],
                                 env=self._env(), stdin=subprocess.DEVNULL, stdout=log,
                                 stderr=subprocess.STDOUT, start_new_session=True)
    log.close()   # the launch writes to its own copy
    self.sessions.append(self.proc.pid)   # its own session: every process it starts is in it
    self.entry = {'at': self.now(), 'pid': self.proc.pid, 'resume': resume, 'log': log.name}
    self.launches.append(self.entry)

  def note_session(self) -> None:
    """The launcher's node session (RUN_DIR/launcher_session.txt), once per launch."""
    try:
      with open(os.path.join(self.run_dir, 'launcher_session.txt')) as f:
        sid = int(f.read().strip())
    except (OSError, ValueError):
      return
    if sid not in self.sessions:
      self.sessions.append(sid)
      if self.proc is not None:
        self.entry['launcher'] = sid

  def ended(self) -> Optional[int]:
    """The exit code of the launch in flight once it has ended (recorded once), else None."""
    if self.proc is None or self.proc.poll() is None:
      return None
    code, self.proc = self.proc.returncode, None
    self._record_end(self.entry, code)
    return code

  def _record_end(self, entry: Dict, code: int) -> List[str]:
    """A launch's end in its record; returns its output's non-blank lines."""
    with open(entry['log']) as f:
      lines = [line for line in f.read().splitlines() if line.strip()]
    entry.update(ended=self.now(), exit_code=code, last_line=(lines or [''])[-1][-300:])
    return lines

  def check_launch_failure(self) -> None:
    """Ends the soak when the last launch's flags were refused, or when 3 launches in a row
    ended within 30 s of their start with no env step: faults cannot explain either. (A launch
    refused in one line, exit 2, is launched again: the checker counts them.)"""
    last = self.entry
    if last['last_line'].startswith('FATAL Flags parsing error'):
      raise SoakAborted(f'launch {len(self.launches) - 1} refused: {last["last_line"]}')
    quick = [l for l in self.launches[-3:] if l.get('ended', 1e9) - l['at'] < 30.0]
    if len(quick) == 3 and not self.counts().get('actor_steps'):
      raise SoakAborted(f'3 launches in a row ended within 30 s, none with an env step; last: '
                        f'{last["last_line"]}')

  def stop_launch(self, sig=signal.SIGTERM, timeout=300.0) -> Optional[int]:
    if self.proc is None:
      return None
    self.proc.send_signal(sig)
    try:
      self.proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
      self.proc.kill()
      self.proc.wait()
    return self.ended()

  def now(self) -> float:
    return round(time.time() - self.t0, 1)

  def counts(self) -> Dict:
    try:
      with open(os.path.join(self.run_dir, 'counts.json')) as f:
        return json.load(f)
    except (OSError, ValueError):
      return {}

  # --- faults -----------------------------------------------------------------------------

  def _live_nodes(self) -> Dict[str, int]:
    out = {}
    for name in NODES:
      try:
        with open(os.path.join(self.run_dir, 'pids', f'{name}.pid')) as f:
          pid = int(f.read().strip())
        os.kill(pid, 0)
        if pid not in self.stopped_pids:
          out[name] = pid
      except (OSError, ValueError):
        continue
    return out

  def inject(self, fault: Fault) -> None:
    getattr(self, f'_{fault.kind}')(fault)

  def _kill_node(self, fault: Fault, sig=signal.SIGKILL):
    nodes = self._live_nodes() if self.proc is not None else {}
    if not nodes:
      fault.detail = 'no live node'
      return
    target = self.rng.choice(sorted(nodes))
    try:
      os.kill(nodes[target], sig)
    except ProcessLookupError:   # it ended since it was looked up (a restart, the run ending)
      fault.detail = f'{target} gone before the signal'
      return
    fault.target = target
    if sig == signal.SIGSTOP:
      self.stopped_pids[nodes[fault.target]] = time.time()
    fault.applied = True

  def _stop_node(self, fault: Fault):
    self._kill_node(fault, signal.SIGSTOP)

  def _sigterm_cli(self, fault: Fault):
    # Not waited for: the launch stops while other faults may come; the loop resumes it.
    if self.proc is None or self.stopping is not None:
      fault.detail = 'no launch in flight' if self.proc is None else 'a stop in progress'
      return
    fault.target, fault.applied = 'cli', True
    self.proc.send_signal(signal.SIGTERM)
    self.stopping = fault

  def _kill_cli(self, fault: Fault):
    if self.proc is None:
      fault.detail = 'no launch in flight'
      return
    fault.target, fault.applied = 'cli', True
    code = self.stop_launch(signal.SIGKILL)
    fault.detail = f'exit {code}'
    self.stopped(code)   # a stop in progress (and its truncation) ends here too

  def _kill_launcher(self, fault: Fault):
    launcher = self._launcher_pid()
    if self.proc is None or launcher is None:
      fault.detail = 'no launch in flight' if self.proc is None else 'no launcher yet'
      return
    try:
      os.kill(launcher, signal.SIGKILL)
    except ProcessLookupError:   # the launch is ending (a stop in progress): its launcher first
      fault.detail = 'launcher gone already'
      return
    fault.target, fault.applied = 'cli+launcher', True
    code = self.stop_launch(signal.SIGKILL)
    fault.detail = f'launcher pid {launcher}; exit {code}'
    self.stopped(code)

  def _launcher_pid(self) -> Optional[int]:
    """The launch in flight's launcher (its pid leads the nodes' session), once it has one."""
    self.note_session()
    return None if self.proc is None else self.entry.get('launcher')

  def _second_launch(self, fault: Fault):
    if self.second is not None or self.proc is None:
      fault.detail = 'a second launch in flight already' if self.second else 'no launch in flight'
      return
    fault.target, fault.applied = 'cli', True
    log = open(os.path.join(self.workdir, f'second_{len(self.launches)}.log'), 'w')
    self.second = subprocess.Popen(self._cmd(10**9, True), cwd=self.outside[0], env=self._env(),
                                   stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    log.close()   # the launch writes to its own copy
    self.sessions.append(self.second.pid)
    self.second_fault = fault
    self.second_entry = {'at': self.now(), 'pid': self.second.pid, 'resume': True,
                         'log': log.name, 'second_launch': True}

  def watch_second(self) -> None:
    """The second launch in flight, once it is decided: refused in one line (exit 2) while a
    launch was live; or it found none (the launch beside it ended meanwhile), took the run lock
    and the run, and is the launch in flight from then on; or it ended otherwise (neither: the
    checker says so)."""
    second, fault = self.second, self.second_fault
    if second is None:
      return
    self.watch_lock()
    if second.poll() is None:
      if self.proc is None and self._held_lock(second, self.second_entry):
        fault.took_run, fault.refused = True, False
        fault.detail = f'found no live launch: took the run as launch {len(self.launches)}'
        self.proc, self.entry, self.second = second, self.second_entry, None
        self.launches.append(self.entry)
      return
    self.second = None
    lines = self._record_end(self.second_entry, second.returncode)
    fault.refused = (second.returncode == 2 and len(lines) == 1 and lines[0].startswith('error: ')
                     and 'in use by a live launch' in lines[0])
    fault.detail = f'exit {second.returncode}: {(lines or [""])[-1][:200]}'
    if not fault.refused and (self._held_lock(second, self.second_entry) or
                              any(line.startswith('resuming: ') for line in lines)):
      fault.took_run = True    # and ended before it was seen to: a launch of the run all the same
      self.launches.append(self.second_entry)

  def watch_lock(self) -> None:
    """Notes the run lock's holder (its record: pid, since). A launch of the soak's that held the
    lock before and is still alive while another holds it means two launches held the run at
    once (recorded in `held_at_once`)."""
    record = run_lock.holder(self.run_dir) or {}
    try:
      holder = (int(record['pid']), datetime.datetime.fromisoformat(record['since']).timestamp())
    except (KeyError, TypeError, ValueError):
      return   # no launch took it yet, or its holder is writing its record
    if holder not in self.holders:
      self.holders.append(holder)
    for proc, entry in ((self.proc, self.entry), (self.second, self.second_entry)):
      if (proc is not None and proc.pid != holder[0] and self._held_lock(proc, entry, holder[1])
          and proc.poll() is None):
        pids = [proc.pid, holder[0]]
        if all(e['pids'] != pids for e in self.held_at_once):
          self.held_at_once.append({'time': self.now(), 'pids': pids})

  def _held_lock(self, proc: subprocess.Popen, entry: Dict, before: float = float('inf')) -> bool:
    """Whether `proc`, the launch `entry` records, was seen holding the run lock (taken no
    later than `before`). Pids are reused over a long soak: a holder counts only when its record
    is no older than the launch."""
    started = self.t0 + entry['at'] - 1.0   # `since` is in whole seconds
    return any(pid == proc.pid and started <= since <= before for pid, since in self.holders)

  def _disk_full(self, fault: Fault):
    if not self.tmpfs or self.filler is not None:
      fault.detail = 'not root: no tmpfs' if not self.tmpfs else 'the disk is full already'
      return
    free = self._free_bytes()
    self.filler = os.path.join(self.mount, 'filler')
    fill_disk(self.filler)
    left = self._free_bytes()
    if left > 2 ** 20:   # the fill failed: the fault did not happen, and is not counted
      os.remove(self.filler)
      self.filler = None
      fault.detail = (fault.detail or 'not filled') + f' ({left / 2**20:.0f} MB still free)'
      return
    fault.target, fault.applied = 'disk', True
    fault.detail = f'{free / 2**20:.0f} MB filled'

  def _free_bytes(self) -> int:
    st = os.statvfs(self.mount)
    return st.f_bavail * st.f_frsize

  def free_disk(self) -> None:
    """Grows the full disk again: the filler goes and the tmpfs gets its first size again beyond
    what the run holds (never more: the tmpfs is memory, and the next fill takes all it has)."""
    if self.filler is None:
      return
    os.remove(self.filler)
    self.filler = None
    st = os.statvfs(self.mount)
    used_mb = (st.f_blocks - st.f_bfree) * st.f_frsize // 2 ** 20
    self.tmpfs_mb = max(self.tmpfs_mb, used_mb + self.first_tmpfs_mb)
    subprocess.run(['mount', '-o', f'remount,size={self.tmpfs_mb}m', self.mount], check=False)

  def _truncate_checkpoint(self, fault: Fault):
    """Stops the launch (SIGTERM, not waited for); `stopped` cuts the newest checkpoint once it
    has ended, before the loop resumes the run."""
    if self.proc is None or self.stopping is not None or len(self._checkpoints()) < 2:
      fault.detail = ('no launch in flight' if self.proc is None else 'a stop in progress'
                      if self.stopping is not None else 'fewer than 2 checkpoints')
      return
    fault.applied = True
    self.proc.send_signal(signal.SIGTERM)
    self.stopping = fault

  def _checkpoints(self) -> List[str]:
    from launch.program import checkpointing
    return checkpointing.checkpoint_files(os.path.join(self.run_dir, 'checkpoints', 'learner'))

  def stopped(self, code: int) -> None:
    """The launch a fault stopped has ended (exit `code`): a truncation is done now."""
    fault, self.stopping = self.stopping, None
    if fault is None:
      return
    fault.detail = f'stop exit {code}'
    if fault.kind == 'truncate_checkpoint':
      newest = self._checkpoints()[0]
      size = os.path.getsize(newest)
      with open(newest, 'r+b') as f:
        f.truncate(size // 2)
      fault.target = os.path.basename(newest)
      fault.detail += f'; cut from {size} to {size // 2} bytes'

  def release_stopped(self, hang_timeout_s: float) -> List[int]:
    """Stopped nodes that no supervisor killed in time are continued (and named: a miss)."""
    missed = []
    for pid, since in list(self.stopped_pids.items()):
      try:
        os.kill(pid, 0)
      except OSError:
        del self.stopped_pids[pid]
        continue
      if time.time() - since > 3 * hang_timeout_s + STOPPED_SLACK_S:
        os.kill(pid, signal.SIGCONT)
        del self.stopped_pids[pid]
        missed.append(pid)
    return missed

  def close(self):
    for proc in (self.proc, self.second):
      if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait()
    if self.tmpfs:
      subprocess.run(['umount', '-l', self.mount], check=False)


def run(duration_s: float, seed: int, workload: str = 'cartpole', mean_gap_s: float = 75.0,
        kinds=KINDS, hang_timeout_s: float = 20.0, checkpoint_every_s: float = 20.0,
        tmpfs_mb: int = 768, workdir: Optional[str] = None, out: Optional[str] = None) -> Dict:
  workdir = workdir or tempfile.mkdtemp(prefix='soak-')
  faults = schedule(seed, duration_s, mean_gap_s, kinds)
  soak = Soak(workdir, workload, hang_timeout_s, checkpoint_every_s, tmpfs_mb, seed)
  record: Dict = {'seed': seed, 'workload': workload, 'duration_s': duration_s, 'kinds': list(kinds),
            'mean_gap_s': mean_gap_s, 'hang_timeout_s': hang_timeout_s, 'run_dir': soak.run_dir,
            'workdir': workdir}
  try:
    record.update(_drive(soak, faults, duration_s, hang_timeout_s))
  except Exception as e:   # the record keeps what was done, for the replay; a bug re-raised
    record.update(aborted=str(e) if isinstance(e, SoakAborted) else repr(e),
                  faults=[dataclasses.asdict(f) for f in faults], launches=soak.launches,
                  held=False)
    if not isinstance(e, SoakAborted):
      raise
  finally:
    soak.close()
    if out:
      common.write_json(out, record)
  if record.get('held'):
    shutil.rmtree(workdir, ignore_errors=True)   # kept to look at when an invariant failed
  return record


def _drive(soak: Soak, faults: List[Fault], duration_s: float, hang_timeout_s: float) -> Dict:
  """The faults dealt to the run for `duration_s`, the closing launch and the invariants."""
  record: Dict = {}
  missed_hangs, last_fault_at = [], -RECOVERY_S
  soak.launch(10**9)
  pending = list(faults)
  while soak.now() < duration_s:
    soak.note_session()
    soak.watch_lock()
    code = soak.ended()
    if code is not None:
      soak.stopped(code)
      soak.check_launch_failure()
      if soak.filler is not None:
        soak.free_disk()
    # A second launch in flight is refused or takes the run before the soak resumes it: a
    # resume started beside it would only race it for the lock.
    soak.watch_second()
    if soak.proc is None and soak.second is None:
      soak.launch(10**9)
    missed_hangs += soak.release_stopped(hang_timeout_s)
    if pending and soak.now() >= pending[0].time:
      fault = pending.pop(0)
      fault.time = soak.now()
      fault.overlapped = (fault.time - last_fault_at < RECOVERY_S or soak.proc is None
                          or bool(soak.stopped_pids) or soak.stopping is not None)
      soak.inject(fault)
      print(f'[{fault.time:7.1f}s] {fault.kind} {fault.target or "-"} '
            f'{"(overlapping) " if fault.overlapped else ""}{fault.detail}', flush=True)
      if fault.applied:
        last_fault_at = fault.time
      elif len(fault.put_off) < RETRIES and not fault.detail.startswith('not '):
        # Nothing to act on yet (a node or a launch starting again): tried again a little later.
        fault.put_off.append(fault.detail)
        fault.time, fault.detail = fault.time + RETRY_S, ''
        pending = sorted(pending + [fault], key=lambda f: f.time)
      if soak.proc is None and soak.second is None:   # killed by the fault: resume
        soak.launch(10**9)
    time.sleep(0.5)
  # Close: let a full disk stop the run, free it; stop cleanly and run to a few more steps.
  deadline = time.time() + 300
  while soak.second is not None and time.time() < deadline:
    soak.watch_second()
    time.sleep(0.5)
  if soak.stopping is not None and soak.proc is not None:
    soak.proc.wait(timeout=600)
    soak.stopped(soak.ended())
  if soak.filler is not None:
    soak.stop_launch(signal.SIGTERM)
    soak.free_disk()
  for pid in list(soak.stopped_pids):
    try:
      os.kill(pid, signal.SIGCONT)
    except OSError:
      pass
  soak.stop_launch(signal.SIGTERM)
  record['env_steps_under_faults'] = int(soak.counts().get('actor_steps', 0))
  soak.launch(record['env_steps_under_faults'] + FINAL_STEPS)
  soak.proc.wait(timeout=900)
  final_code = soak.ended()
  last_stop = time.time()   # the run's last stop: its end
  time.sleep(2.0)
  record.update(
      faults=[dataclasses.asdict(f) for f in faults],
      launches=soak.launches, final_exit_code=final_code, hangs_missed=missed_hangs,
      actual_duration_s=soak.now(), env_steps=soak.counts().get('actor_steps', 0))
  record['invariants'] = soak_check.soak_invariants(soak.run_dir, record['faults'], len(soak.launches),
                                          soak.sessions, soak.outside, last_stop)
  record['invariants']['closing_launch_completed'] = {'held': final_code == 0}
  record['invariants']['second_launches_refused'] = soak_check.second_launches(
      record['faults'], soak.held_at_once)
  record['invariants']['every_stopped_node_found'] = {'held': not missed_hangs,
                                                      'missed': missed_hangs}
  record['held'] = all(v['held'] for v in record['invariants'].values())
  record['summary'] = summarize(record)
  return record


def summarize(record: Dict) -> Dict:
  applied = [f for f in record['faults'] if f['applied']]
  by_kind = {}
  for f in applied:
    by_kind[f['kind']] = by_kind.get(f['kind'], 0) + 1
  inv = record['invariants']
  losing = [f for f in applied if f['kind'] in soak_check.COUNT_LOSING]
  diff = abs(inv['counter_equals_logged_episodes']['difference'])
  return {'faults_applied': len(applied), 'faults_by_kind': by_kind,
          'faults_overlapping': sum(f['overlapped'] for f in applied),
          'launches': len(record['launches']), 'env_steps': record['env_steps'],
          'env_steps_under_faults': record['env_steps_under_faults'],
          'env_steps_lost_per_losing_fault': diff / len(losing) if losing else float(diff),
          'invariants_held': sum(v['held'] for v in inv.values()), 'invariants': len(inv)}


def main(argv):
  del argv
  f = flags.FLAGS
  out = f.out or os.path.join(ROOT, 'results', 'soak', f'{f.workload}-s{f.seed}.json')
  record = run(f.duration_s, f.seed, f.workload, f.mean_gap_s, f.kinds, f.hang_timeout_s,
               f.checkpoint_every_s, f.tmpfs_mb, f.workdir, out)
  if 'aborted' in record:
    print(f'error: the soak stopped: {record["aborted"]}', file=sys.stderr)
    sys.exit(1)
  print(json.dumps(record['summary'], indent=2))
  for name, inv in record['invariants'].items():
    print(f'{"held" if inv["held"] else "FAILED":7s} {name}')
  print(f'record: {out}')
  sys.exit(0 if record['held'] else 1)


if __name__ == '__main__':
  define_flags()
  app.run(main)

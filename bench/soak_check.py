"""The chaos soak's verdict (bench.soak): invariants over everything a run wrote, read from the
files themselves; no summary is trusted for a figure it could be checked against.

Each invariant is {'held': bool, ...its measured figures}. The bound on env steps that a fault
may lose between the counter and the actors' episode logs, and why:

  An actor sends the counts of the episodes that ended at one step of its loop to the counter
  node, which saves counts.json at once, before it logs them (launch.program.layout: no sync
  period). So a logged episode is always counted, and a process killed without warning (the
  actor, the counter, or the whole program with the CLI) leaves at most those episodes counted
  and not logged, or sent and never answered. A stop (SIGTERM, a full disk that stops the run, a hang's kill) loses nothing:
  the actors stop before the counts are final (launch.program.coordinator). Episodes under way
  are neither counted nor logged. We bound the difference by one unroll per actor per fault that
  kills a process (`sequence_length x envs_per_actor` env steps for each actor); an episode is
  longer than that in Cartpole, so the bound can be missed by a kill that lands between the
  count and the log lines, which the soak then reports.
"""
import collections
import json
import os
import time
from typing import Dict, List

from launch.program import checkpointing
from launch.runtime import processes, run_state, summary

# Faults after which the counter may miss what actors logged (or the reverse): a process killed
# without warning that holds or receives counts.
COUNT_LOSING = ('kill_node', 'kill_cli', 'kill_launcher', 'stop_node')


def steps_bound(config: Dict, faults: List[Dict]) -> int:
  """Env steps the counter and the logs may differ by after `faults` (module docstring)."""
  per_fault = int(config['impala']['sequence_length'] * config['envs_per_actor']
                  * config['num_actors'])
  losing = [f for f in faults if f.get('applied') and f['kind'] in COUNT_LOSING]
  return per_fault * len(losing)


def _actor_logs(run_dir: str) -> Dict[str, List[Dict[str, float]]]:
  return {name: summary.read_log(run_dir, name) for name in summary.actor_names(run_dir)}


def counts_against_logs(run_dir: str, bound: int) -> Dict:
  counter = run_state.RunRecords(run_dir).saved_actor_steps()
  logged = sum(r.get('episode_length', 0) for rows in _actor_logs(run_dir).values() for r in rows)
  return {'held': abs(logged - counter) <= bound, 'counter_env_steps': counter,
          'logged_env_steps': logged, 'difference': logged - counter, 'bound': bound}


def logs_never_go_back(run_dir: str, bound: int) -> Dict:
  """Per actor log: no row twice (its time and step count repeated) and the step count never
  lower than an earlier row's by more than `bound`."""
  worst_back, duplicates = 0, 0
  for rows in _actor_logs(run_dir).values():
    seen = collections.Counter((r.get('unix_time'), r.get('actor_steps')) for r in rows)
    duplicates += sum(n - 1 for n in seen.values())
    high = float('-inf')
    for r in rows:
      steps = r.get('actor_steps', 0)
      worst_back = max(worst_back, high - steps)
      high = max(high, steps)
  return {'held': duplicates == 0 and worst_back <= bound, 'duplicate_rows': duplicates,
          'most_steps_back': max(worst_back, 0), 'bound': bound}


def checkpoints_valid(run_dir: str, period_s: float, last_stop: float) -> Dict:
  """Every kept learner checkpoint reads whole and matches its checksum; the newest was saved
  no earlier than one period before the run's last stop."""
  out = {'held': True, 'files': 0, 'corrupt': [], 'newest_age_at_stop_s': {}}
  for learner in ('learner', 'precedence_learner'):
    directory = os.path.join(run_dir, 'checkpoints', learner)
    files = checkpointing.checkpoint_files(directory)
    if not files:
      continue
    for path in files:
      out['files'] += 1
      try:
        checkpointing.verify(path)
      except checkpointing.CheckpointError as e:
        out['corrupt'].append(str(e))
    header = checkpointing.read_header(directory)
    age = last_stop - header['saved_at'] if header else float('inf')
    out['newest_age_at_stop_s'][learner] = round(age, 1)
    out['held'] &= age <= period_s + 5.0
  out['held'] &= not out['corrupt'] and out['files'] > 0
  return out


def precedence_table_restored(run_dir: str) -> Dict:
  """The last launch's replay start restored the precedence table its last checkpoint held (its
  size at the checkpoint lies between the sizes just before and just after it was taken)."""
  records = run_state.RunRecords(run_dir).read_records(run_state.REPLAY_LOG)
  starts = [i for i, r in enumerate(records) if r.get('event') == 'start']
  if not starts:
    return {'held': False, 'reason': 'no replay start recorded'}
  start = records[starts[-1]]
  before = [r for r in records[:starts[-1]] if r.get('event') == 'checkpoint']
  saved = [r for r in before if r.get('path') == start.get('checkpoint')]
  if not saved:
    # Nothing restored is right only when no checkpoint had been recorded before (checkpoint
    # names are times: a newer one than the last recorded may exist, an older one may not).
    newest = max((r['path'] for r in before), default=None)
    restored_newer = start.get('checkpoint') is not None and (newest is None or
                                                              start['checkpoint'] > newest)
    return {'held': restored_newer or (newest is None and not start.get('restored')),
            'restored': start.get('restored'), 'checkpoint': start.get('checkpoint'),
            'newest_recorded': newest}
  low = saved[-1]['sizes_before'].get('precedence', 0)
  high = saved[-1]['sizes'].get('precedence', 0)
  got = (start.get('restored') or {}).get('precedence', 0)
  return {'held': low <= got <= high, 'restored': got, 'checkpoint_sizes': [low, high],
          'checkpoint': start['checkpoint']}


def records_agree(run_dir: str, launches: int) -> Dict:
  """summary.json, run_state.json and supervisor.jsonl agree on launches, restarts and the
  final status; the soak's own count of launches is at least theirs."""
  records = run_state.RunRecords(run_dir)
  s = records.read(run_state.SUMMARY, {}) or {}
  segments = records.segments()
  events = records.read_records(run_state.SUPERVISOR_LOG)
  restarts = summary.restarts(records)
  final = records.read(run_state.FINAL_STATE, {}) or {}
  # Launches that started their nodes (each one's counter starts at attempt 1); a launch the
  # soak stopped while it was still starting may have opened no segment, or started no node.
  started = sum(e.get('event') == 'start' and e.get('node') == 'counter' and e.get('attempt') == 1
                for e in events)
  checks = {
      'launches': s.get('launches') == len(segments) and started <= len(segments) <= launches,
      'restarts': all(s.get(k) == v for k, v in restarts.items()),
      'status': s.get('status') == (segments[-1].get('status') if segments else None)
      == final.get('status') == run_state.COMPLETED,
      'failures_recorded': sum(e.get('event') in ('failure', 'hung') for e in events)
      >= restarts.get('restarts', 0),
  }
  return {'held': all(checks.values()), **checks, 'summary_launches': s.get('launches'),
          'segments': len(segments), 'soak_launches': launches, 'launches_started': started,
          'summary_status': s.get('status'), 'restarts': restarts.get('restarts', 0)}


def second_launches(faults: List[Dict], held_at_once: List[Dict]) -> Dict:
  """Each second launch met a live launch and was refused in one line, or met none (the launch
  beside it had ended meanwhile, another fault having stopped it) and took the run lock and the
  run: a launch like any other. `held_at_once`: when a launch that had held the run lock was
  still alive while another held it (bench.soak watches the lock's holder): never."""
  applied = [f for f in faults if f['kind'] == 'second_launch' and f['applied']]
  neither = [f['time'] for f in applied if not f.get('refused') and not f.get('took_run')]
  return {'held': not neither and not held_at_once,
          'refused': sum(bool(f.get('refused')) for f in applied),
          'took_the_run': sum(bool(f.get('took_run')) for f in applied),
          'neither_refused_nor_took_the_run': neither, 'held_at_once': held_at_once[:10]}


def no_process_left(sessions: List[int], run_dir: str) -> Dict:
  left = sorted({pid for sid in sessions for pid in processes.leftover_processes(sid)})
  pid_dir = os.path.join(run_dir, 'pids')
  for name in os.listdir(pid_dir) if os.path.isdir(pid_dir) else ():
    try:
      with open(os.path.join(pid_dir, name)) as f:
        pid = int(f.read().strip())
      os.kill(pid, 0)
      left.append(pid)
    except (OSError, ValueError):
      pass
  return {'held': not left, 'processes_left': sorted(set(left))}


# Written once per machine, not per run, under HOME: the loopback shim this project compiles
# (launch.runtime.loopback) and TensorFlow's default Keras config, written at its first import.
PER_MACHINE = (os.path.join('.cache', 'noturningback'), '.keras')


def nothing_outside(dirs: List[str], home: str = None) -> Dict:
  """The launches' working directory, HOME and TMPDIR (fresh and empty when the soak began)
  hold nothing at the end but the per-machine files under HOME (PER_MACHINE)."""
  found, per_machine = [], []
  for d in dirs:
    for dirpath, dirnames, filenames in os.walk(d):
      for name in filenames + dirnames:
        path = os.path.join(dirpath, name)
        rel = os.path.relpath(path, home) if home else None
        if rel and any(rel == p or rel.startswith(p + os.sep) or p.startswith(rel + os.sep)
                       for p in PER_MACHINE):
          per_machine.append(rel)
        else:
          found.append(path)
  return {'held': not found, 'written_outside': found[:20], 'per_machine': per_machine[:20]}


def soak_invariants(run_dir: str, faults: List[Dict], launches: int, sessions: List[int],
          outside: List[str], last_stop: float = None) -> Dict[str, Dict]:
  config = run_state.read_json(os.path.join(run_dir, run_state.CONFIG), {}) or {}
  if not config:
    return {'run_written': {'held': False, 'reason': f'no {run_state.CONFIG} in {run_dir}'}}
  bound = steps_bound(config, faults)
  return {
      'counter_equals_logged_episodes': counts_against_logs(run_dir, bound),
      'logs_never_go_back': logs_never_go_back(run_dir, bound),
      'learner_checkpoints_valid': checkpoints_valid(
          run_dir, config.get('checkpoint_period_s', 300.0), last_stop or time.time()),
      'precedence_table_restored': precedence_table_restored(run_dir),
      'records_agree': records_agree(run_dir, launches),
      'no_process_left': no_process_left(sessions, run_dir),
      'nothing_written_outside': nothing_outside(outside, home=outside[1]),
  }


if __name__ == '__main__':
  import sys
  record = json.load(open(sys.argv[1]))
  print(json.dumps(soak_invariants(record['run_dir'], record['faults'], record['launches'],
                         record['sessions'], record['outside']), indent=2))

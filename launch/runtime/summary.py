"""What a run has done, read back from its per-node CSV logs and run records: the one-screen
summary at its end (RUN_DIR/summary.json) and the progress line while it runs. Reads and writes
the run directory through launch.runtime.run_state."""
import csv
import glob
import os
from typing import Dict, List, Optional

import numpy as np

from launch.runtime import run_export, run_state

# Not a logged column: how many logged episodes an episode row stands for, more than 1 in a log an
# export thinned (launch.runtime.run_export.episode_weights); actor_episodes adds it to each row.
EPISODES_PER_ROW = 'episodes_per_row'


def read_log(run_dir: str, label: str) -> List[Dict[str, float]]:
  path = os.path.join(run_dir, 'logs', label, 'logs.csv')
  if not os.path.exists(path):
    return []
  rows = []
  with open(path) as f:
    for row in csv.DictReader(f):
      parsed = {}
      for k, v in row.items():
        try:
          parsed[k] = float(v)
        except (TypeError, ValueError):
          pass
      rows.append(parsed)
  return rows


def actor_episodes(run_dir: str) -> List[Dict[str, float]]:
  """All actors' episode rows, ordered by the global actor step count at which they ended, each
  with the number of logged episodes it stands for (EPISODES_PER_ROW)."""
  rows = []
  for d in sorted(glob.glob(os.path.join(run_dir, 'logs', 'actor_*'))):
    actor = read_log(run_dir, os.path.basename(d))
    weights = run_export.episode_weights(os.path.join(d, 'logs.csv'), len(actor))
    for row, weight in zip(actor, weights):
      row[EPISODES_PER_ROW] = float(weight)
    rows += actor
  return sorted(rows, key=lambda r: r.get('actor_steps', 0))


def wall_time(run_dir: str, episodes: Optional[List[Dict[str, float]]] = None) -> float:
  """Seconds the run's launches lasted; a launch left open ends at its last logged episode
  (`episodes`: the run's actor_episodes, when already read)."""
  episodes = actor_episodes(run_dir) if episodes is None else episodes
  return run_state.total_wall_time(run_dir, [e['unix_time'] for e in episodes if 'unix_time' in e])


def summarize(run_dir: str, with_wall_time: bool = False, last_n: int = 50) -> Dict[str, float]:
  episodes = actor_episodes(run_dir)
  learner = read_log(run_dir, 'learner')
  precedence = read_log(run_dir, 'precedence')
  out = {'episodes': len(episodes)}
  if episodes:
    lengths = np.array([e.get('episode_length', np.nan) for e in episodes])
    out['actor_steps'] = max(e.get('actor_steps', 0) for e in episodes)
    out['mean_episode_length_last'] = float(np.nanmean(lengths[-last_n:]))
    out['mean_episode_return_last'] = float(np.nanmean([e.get('episode_return', np.nan) for e in episodes[-last_n:]]))
    for key in ('intrinsic_return', 'rejections', 'ruined_grass', 'penalised_steps'):
      if key in episodes[-1]:
        out[f'mean_{key}_last'] = float(np.nanmean([e.get(key, np.nan) for e in episodes[-last_n:]]))
    sps = [e['steps_per_second'] for e in episodes[-last_n:] if 'steps_per_second' in e]
    if sps:
      out['actor_steps_per_second_each'] = float(np.mean(sps))
  if learner:
    out['learner_steps'] = max(r.get('learner_steps', 0) for r in learner)
  if precedence:
    out['precedence_steps'] = max(r.get('precedence_steps', 0) for r in precedence)
    out['psi_accuracy_last'] = precedence[-1].get('psi_accuracy', float('nan'))
  if with_wall_time:
    out['wall_time_s'] = wall_time(run_dir, episodes)
  return out


def write_summary(run_dir: str, status: str) -> dict:
  """summary.json from the run's logs and records, with the launch's end `status`."""
  summary = summarize(run_dir, with_wall_time=True)
  summary['status'] = status
  summary['launches'] = len(run_state.segments(run_dir))
  summary.update(restarts(run_dir))
  run_state.write_json(os.path.join(run_dir, run_state.SUMMARY), summary)
  return summary


def exists(run_dir: str) -> bool:
  return os.path.exists(os.path.join(run_dir, run_state.SUMMARY))


def progress_line(run_dir: str, max_steps: int, elapsed_s: float) -> str:
  p = summarize(run_dir, last_n=20)
  return (f"[{elapsed_s:6.0f}s] actor steps {p.get('actor_steps', 0):>9,.0f}/{max_steps:,}"
          f"  episodes {p['episodes']:>6}  mean length (last 20) {p.get('mean_episode_length_last', 0):7.1f}"
          f"  learner steps {p.get('learner_steps', 0):>6,.0f}")


def first_reaching(run_dir: str, threshold: float, window: int = 50):
  """(actor_steps, walltime-ordinal) at which the moving mean episode length first >= threshold."""
  episodes = actor_episodes(run_dir)
  lengths = np.array([e.get('episode_length', 0.0) for e in episodes])
  for i in range(window, len(lengths) + 1):
    if lengths[i - window:i].mean() >= threshold:
      return episodes[i - 1].get('actor_steps'), i
  return None, None


def format_summary(summary: Dict[str, float]) -> str:
  lines = ['=' * 60, 'run summary', '-' * 60]
  for k, v in summary.items():
    lines.append(f'{k:>32s}: {v:,.3f}' if isinstance(v, float) else f'{k:>32s}: {v}')
  lines.append('=' * 60)
  return '\n'.join(lines)


def restarts(run_dir: str) -> Dict[str, float]:
  """Node restarts recorded by the supervisors (launch.runtime.supervisor), e.g. {'restarts': 1,
  'restarts_actor_0': 1}; empty when no node failed."""
  events = run_state.read_records(run_dir, run_state.SUPERVISOR_LOG)
  gave_up = {e.get('node') for e in events if e.get('event') == 'gave_up'}
  failures = [e for e in events if e.get('event') == 'failure' and e.get('node') not in gave_up]
  if not failures:
    return {}
  out = {'restarts': len(failures)}
  for e in failures:
    key = f"restarts_{e.get('node', '?')}"
    out[key] = out.get(key, 0) + 1
  return out

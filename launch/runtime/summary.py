"""What a run has done, read back from its per-node CSV logs and run records: the one-screen
summary at its end (RUN_DIR/summary.json), and the log readers the progress line shares. The log
readers take the directory (a run's or an export's); what also reads the run's records takes
its run_state.RunRecords."""
import csv
import glob
import os
from typing import Dict, List, Optional, Sequence

import numpy as np

from envs import presets
from launch.runtime import run_export, run_state

# Not a logged column: how many logged episodes an episode row stands for, more than 1 in a log an
# export thinned (launch.runtime.run_export.episode_weights); actor_episodes adds it to each row.
EPISODES_PER_ROW = 'episodes_per_row'
LAST_EPISODES = 100   # the progress line's and the summary's means are over this many episodes


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


def actor_rows(run_dir: str, actor: str) -> List[Dict[str, float]]:
  """One actor's episode rows, each with the number of logged episodes it stands for
  (EPISODES_PER_ROW)."""
  rows = read_log(run_dir, actor)
  weights = run_export.episode_weights(os.path.join(run_dir, 'logs', actor, 'logs.csv'), len(rows))
  for row, weight in zip(rows, weights):
    row[EPISODES_PER_ROW] = float(weight)
  return rows


def actor_names(run_dir: str) -> List[str]:
  return sorted(os.path.basename(d) for d in glob.glob(os.path.join(run_dir, 'logs', 'actor_*')))


def actor_episodes(run_dir: str, per_actor: Optional[Dict[str, List[Dict[str, float]]]] = None
                   ) -> List[Dict[str, float]]:
  """All actors' episode rows (actor_rows; `per_actor`: them, when already read), ordered by
  the global actor step count at which they ended."""
  if per_actor is None:
    per_actor = {actor: actor_rows(run_dir, actor) for actor in actor_names(run_dir)}
  rows = [row for actor_rows_ in per_actor.values() for row in actor_rows_]
  return sorted(rows, key=lambda r: r.get('actor_steps', 0))


def wall_time(records: run_state.RunRecords,
              episodes: Optional[List[Dict[str, float]]] = None) -> float:
  """Seconds the run's launches lasted; a launch left open ends at its last logged episode
  (`episodes`: the run's actor_episodes, when already read)."""
  episodes = actor_episodes(records.run_dir) if episodes is None else episodes
  return records.total_wall_time([e['unix_time'] for e in episodes if 'unix_time' in e])


def summarize(records: run_state.RunRecords, with_wall_time: bool = False,
              last_n: int = LAST_EPISODES, measures: Sequence[str] = ()) -> Dict[str, float]:
  """The run's figures from its logs: episodes, actor steps, the means over the last `last_n`
  episodes of the length, the return, the RAE/RAC statistics and `measures` (actor log columns,
  `mean_<column>_last`), learner and precedence steps; `with_wall_time`: the launches' wall time
  and env steps per second over it, of the whole run and per actor process."""
  run_dir = records.run_dir
  per_actor = {actor: actor_rows(run_dir, actor) for actor in actor_names(run_dir)}
  episodes = actor_episodes(run_dir, per_actor)
  learner = read_log(run_dir, 'learner')
  precedence = read_log(run_dir, 'precedence')
  out = {'episodes': len(episodes)}
  if episodes:
    lengths = np.array([e.get('episode_length', np.nan) for e in episodes])
    out['actor_steps'] = max(e.get('actor_steps', 0) for e in episodes)
    out['last_episodes'] = min(last_n, len(episodes))
    out['mean_episode_length_last'] = float(np.nanmean(lengths[-last_n:]))
    out['mean_episode_return_last'] = float(np.nanmean([e.get('episode_return', np.nan) for e in episodes[-last_n:]]))
    for key in ('intrinsic_return', 'rejections', 'ruined_grass', 'penalised_steps', *measures):
      if key in episodes[-1]:
        out[f'mean_{key}_last'] = float(np.nanmean([e.get(key, np.nan) for e in episodes[-last_n:]]))
  if learner:
    out['learner_steps'] = max(r.get('learner_steps', 0) for r in learner)
  if precedence:
    out['precedence_steps'] = max(r.get('precedence_steps', 0) for r in precedence)
    out['psi_accuracy_last'] = precedence[-1].get('psi_accuracy', float('nan'))
  if with_wall_time:
    out['wall_time_s'] = wall_time(records, episodes)
    out.update(speed(records, per_actor, out['wall_time_s']))
  return out


def speed(records: run_state.RunRecords, per_actor: Dict[str, List[Dict[str, float]]],
          wall_time_s: float) -> Dict[str, float]:
  """Env steps per second over the run's wall time: of the whole run (the counter's env steps
  as the coordinator last saved them, else the logs' newest count), and per actor process (the
  env steps of the episodes each logged, a thinned row counted for the episodes it stands for;
  the mean over the actor processes). `per_actor`: each actor's rows (actor_rows)."""
  rows = [r for actor in per_actor.values() for r in actor]
  if wall_time_s <= 0 or not rows:
    return {}
  steps = records.saved_actor_steps() or max(r.get('actor_steps', 0) for r in rows)
  each = [sum(r.get('episode_length', 0) * r[EPISODES_PER_ROW] for r in actor)
          for actor in per_actor.values()]
  return {'env_steps_per_second': steps / wall_time_s, 'actor_processes': len(each),
          'env_steps_per_second_per_actor': float(np.mean(each)) / wall_time_s}


def watched_columns(config: Dict) -> List[str]:
  """The actor log columns a run's users watch (envs.presets.watched), from its config.json;
  none for a config without an environment that has a preset."""
  try:
    measures = presets.watched(config.get('env', ''),
                               (config.get('reversibility') or {}).get('mode', 'none'))
  except presets.PresetError:
    return []
  return [column for column, _ in measures]


def write_summary(records: run_state.RunRecords, status: str) -> dict:
  """summary.json from the run's logs and records, with the launch's end `status`."""
  config = records.read(run_state.CONFIG, {}) or {}
  summary = summarize(records, with_wall_time=True, measures=watched_columns(config))
  summary['status'] = status
  summary['launches'] = len(records.segments())
  summary.update(restarts(records))
  records.write(run_state.SUMMARY, summary)
  return summary


def format_summary(summary: Dict[str, float]) -> str:
  lines = ['=' * 60, 'run summary', '-' * 60]
  for k, v in summary.items():
    lines.append(f'{k:>32s}: {v:,.3f}' if isinstance(v, float) else f'{k:>32s}: {v}')
  lines.append('=' * 60)
  return '\n'.join(lines)


def restarts(records: run_state.RunRecords) -> Dict[str, float]:
  """Node restarts recorded by the supervisors (launch.runtime.supervisor), e.g. {'restarts': 1,
  'restarts_actor_0': 1}; empty when no node failed. A failure, or a hang (the node killed), is a
  restart unless it is the one its node gave up on (that node's next event is its gave_up): a
  node that gave up in one launch still counts the restarts it made before, and in other
  launches."""
  by_node: Dict[str, List[str]] = {}
  for e in records.read_records(run_state.SUPERVISOR_LOG):
    by_node.setdefault(e.get('node', '?'), []).append(e.get('event'))
  out: Dict[str, float] = {}
  for node, events in by_node.items():
    count = sum(1 for event, following in zip(events, events[1:] + [None])
                if event in ('failure', 'hung') and following != 'gave_up')
    if count:
      out[f'restarts_{node}'] = count
  if out:
    out = {'restarts': sum(out.values()), **out}
  return out

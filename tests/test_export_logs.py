"""launch.export_logs: a run cut to the columns its curves read is still a run the aggregation
reads, with the same curves."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from launch import export_logs
from launch.analysis import aggregate

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(tmp_path):
  run = tmp_path / 'run'
  (run / 'logs' / 'actor_0').mkdir(parents=True)
  (run / 'logs' / 'learner').mkdir(parents=True)
  with open(run / 'logs' / 'actor_0' / 'logs.csv', 'w') as f:
    f.write('actor_steps,unix_time,episode_return,solved,loop_s_env,psi_change\n')
    for i in range(50):
      f.write(f'{(i + 1) * 100},{1000 + i},{i * 0.1},{float(i > 25)},{i * 0.5},0.1\n')
  with open(run / 'logs' / 'learner' / 'logs.csv', 'w') as f:
    f.write('learner_steps,actor_steps,policy_entropy,param_norm\n1,100,1.3,20\n2,200,1.2,21\n')
  for name, obj in (('run_state.json', {'segments': [{'start': 1000.0, 'end': 1100.0}]}),
                    ('counts.json', {'actor_steps': 5000}), ('config.json', {'env': 'sokoban'})):
    (run / name).write_text(json.dumps(obj))
  return str(run)


def test_export_keeps_the_chosen_columns_and_the_curves(tmp_path):
  run = _run(tmp_path)
  out = str(tmp_path / 'out')
  export_logs.export_run(run, out, ['actor_steps', 'unix_time', 'solved', 'episode_return'],
                         ['learner_steps', 'actor_steps', 'policy_entropy'])
  with open(os.path.join(out, 'logs', 'actor_0', 'logs.csv')) as f:
    assert f.readline().strip() == 'actor_steps,unix_time,solved,episode_return'
  with open(os.path.join(out, 'logs', 'learner', 'logs.csv')) as f:
    assert f.readline().strip() == 'learner_steps,actor_steps,policy_entropy'
  for metric in ('solved', 'episode_return'):
    for x in ('actor_steps', 'wall_time'):
      np.testing.assert_allclose(aggregate.curve(out, metric, x)[1], aggregate.curve(run, metric, x)[1])
  assert aggregate.steps_to(out, 'solved', 0.5, 10) == aggregate.steps_to(run, 'solved', 0.5, 10)
  with pytest.raises(ValueError, match='already holds logs'):
    export_logs.export_run(run, out, ['actor_steps'], ['learner_steps'])


def test_cli_refuses_a_directory_without_logs_in_one_line(tmp_path):
  proc = subprocess.run([sys.executable, '-m', 'launch.export_logs', str(tmp_path), '--out',
                         str(tmp_path / 'x')], cwd=REPO, capture_output=True, text=True, timeout=60)
  assert proc.returncode == 2
  assert proc.stderr.strip().splitlines()[-1] == f'error: {tmp_path} holds no logs (logs/<node>/logs.csv)'


def test_compact_number_rounds_numbers_only():
  assert export_logs.compact_number('-11.000000201165676', 3) == '-11'
  assert export_logs.compact_number('1795728058.5652893', 1) == '1795728058.6'
  assert export_logs.compact_number('0.04999', 2) == '0.05'
  assert export_logs.compact_number('-0.0001', 2) == '0'
  assert export_logs.compact_number('120', 3) == '120'
  assert export_logs.compact_number('nan', 3) == 'nan'
  assert export_logs.compact_number('actor', 3) == 'actor'


def test_thinned_export_keeps_every_nth_episode_and_nearly_the_curves(tmp_path):
  run = _run(tmp_path)
  out = str(tmp_path / 'thin')
  export_logs.export_run(run, out, ['actor_steps', 'unix_time', 'solved', 'episode_return'],
                         ['learner_steps', 'actor_steps', 'policy_entropy'], actor_every=5,
                         digits=2)
  with open(os.path.join(out, 'logs', 'actor_0', 'logs.csv')) as f:
    rows = f.read().splitlines()[1:]
  assert [r.split(',')[0] for r in rows] == [str((i + 1) * 100) for i in range(0, 50, 5)]
  assert rows[3].split(',')[3] == '1.5'       # episode 15: return 1.5000000000000002
  with open(os.path.join(out, 'logs', 'learner', 'logs.csv')) as f:
    assert len(f.read().splitlines()) == 3    # learner rows are all kept
  full = aggregate.curve(run, 'solved', 'actor_steps')[1]
  thin = aggregate.curve(out, 'solved', 'actor_steps')[1]
  for curve in (full, thin):   # the same story from a fifth of the episodes: 0 early, 1 late
    values = curve[~np.isnan(curve)]
    assert values[0] == 0.0 and values[-1] == 1.0
  with pytest.raises(ValueError, match='actor_every'):
    export_logs.export_run(run, str(tmp_path / 'bad'), ['actor_steps'], ['learner_steps'],
                           actor_every=0)
  assert not os.path.exists(tmp_path / 'bad')

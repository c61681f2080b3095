"""launch.export_logs: a run cut to the columns its curves read is still a run the aggregation
reads, with the same curves."""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from experiments.analysis import aggregate
from launch import export_logs
from launch.program import checkpointing
from launch.runtime import run_export, run_state

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


def _checkpointed_run(tmp_path):
  """A hand-made run with two learner checkpoints (the real checkpoint writer) and a replay one."""
  run = _run(tmp_path)
  state = {'params': np.arange(6, dtype=np.float32).reshape(2, 3), 'count': np.int32(7)}
  checkpointing.save_state(os.path.join(run, 'checkpoints', 'learner'), state, 10)
  state['params'] = state['params'] + 1
  checkpointing.save_state(os.path.join(run, 'checkpoints', 'learner'), state, 20)
  os.makedirs(os.path.join(run, 'checkpoints', 'replay'))
  with open(os.path.join(run, 'checkpoints', 'replay', 'tables.tfrecord'), 'w') as f:
    f.write('reverb')
  for name, obj in (('flags.json', {'env': 'sokoban'}), ('done', {'summary': {'actor_steps': 5000}})):
    with open(os.path.join(run, name), 'w') as f:
      json.dump(obj, f)
  return run, state


def _rows(path):
  with open(path) as f:
    return f.read().splitlines()[1:]


def test_an_export_with_its_checkpoint_continues_the_run_on_a_machine_that_lacks_it(tmp_path):
  run, state = _checkpointed_run(tmp_path)
  csv_dir = os.path.join(run, run_export.EXPORT_SUBDIR)
  written = export_logs.export_run(run, csv_dir, ['actor_steps', 'unix_time', 'solved'],
                                   ['learner_steps', 'actor_steps'], actor_every=5, digits=2,
                                   checkpoint=True)
  assert any(w.startswith('checkpoints/learner/state-000000000020.npz') for w in written)
  # Only the newest learner checkpoint travels; Reverb's replay does not.
  assert sorted(os.listdir(os.path.join(csv_dir, 'checkpoints'))) == ['learner']
  assert run_export.checkpoint_steps(csv_dir) == 20
  assert run_export.restore(run) is None            # the run is still here: nothing to do
  # The machine is replaced: only the committed export is left.
  for name in os.listdir(run):
    if name != run_export.EXPORT_SUBDIR:
      path = os.path.join(run, name)
      shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
  assert not run_state.holds_run(run)
  message = run_export.restore(run)
  assert message.startswith(f'restored {run} from its export {csv_dir}: learner checkpoint at '
                            'step 20, 5,000 env steps')
  assert run_state.holds_run(run) and run_state.RunRecords(run).saved_actor_steps() == 5000
  restored, steps = checkpointing.load_state(os.path.join(run, 'checkpoints', 'learner'), state)
  assert steps == 20
  np.testing.assert_array_equal(restored['params'], state['params'])
  assert json.load(open(os.path.join(run, 'done'))) == {'summary': {'actor_steps': 5000}}
  # The run goes on and appends 50 episodes to the exported 10 (the logger keeps the file's
  # header); a new export keeps the 10 as they are and thins only the 50.
  log = os.path.join(run, 'logs', 'actor_0', 'logs.csv')
  assert len(_rows(log)) == 10 and run_export.thinned_rows(log) == 10
  with open(log, 'a') as f:
    for i in range(50):
      f.write(f'{5100 + i * 100},{2000 + i},1\n')
  export_logs.export_run(run, csv_dir, ['actor_steps', 'unix_time', 'solved'],
                         ['learner_steps', 'actor_steps'], actor_every=5, digits=2,
                         checkpoint=True, replace=True)
  rows = _rows(os.path.join(csv_dir, 'logs', 'actor_0', 'logs.csv'))
  assert [r.split(',')[0] for r in rows] == (
      [str((i + 1) * 100) for i in range(0, 50, 5)] + [str(5100 + i * 100) for i in range(0, 50, 5)])
  exported = os.path.join(csv_dir, 'logs', 'actor_0', 'logs.csv')
  assert run_export.thinned_rows(exported) == 20
  assert run_export.episode_weights(exported, 20) == [5] * 20   # 50 + 50 episodes, 5 a row
  assert not os.path.exists(csv_dir + '.new') and not os.path.exists(csv_dir + '.old')


def test_an_export_without_a_checkpoint_is_not_restored(tmp_path):
  run = _run(tmp_path)
  out = str(tmp_path / 'fresh' / 'csv')
  export_logs.export_run(run, out, ['actor_steps'], ['learner_steps'])
  assert run_export.restore(str(tmp_path / 'fresh')) is None
  assert not run_state.holds_run(str(tmp_path / 'fresh'))
  with pytest.raises(ValueError, match='holds no learner checkpoint'):
    export_logs.export_run(run, str(tmp_path / 'other'), ['actor_steps'], ['learner_steps'],
                           checkpoint=True)


def test_replace_keeps_the_old_export_when_the_new_one_fails(tmp_path):
  run = _run(tmp_path)
  out = str(tmp_path / 'out')
  export_logs.export_run(run, out, ['actor_steps'], ['learner_steps'])
  with pytest.raises(ValueError, match='pass --replace'):
    export_logs.export_run(run, out, ['actor_steps'], ['learner_steps'])
  with pytest.raises(ValueError, match='holds no learner checkpoint'):
    export_logs.export_run(run, out, ['actor_steps'], ['learner_steps'], checkpoint=True,
                           replace=True)
  assert len(_rows(os.path.join(out, 'logs', 'actor_0', 'logs.csv'))) == 50
  assert not os.path.exists(out + '.new')


def test_each_exported_row_records_the_episodes_it_stands_for(tmp_path):
  run = _run(tmp_path)                       # 50 episodes in actor_0
  log = os.path.join(run, 'logs', 'actor_0', 'logs.csv')
  out = str(tmp_path / 'out')
  export_logs.export_run(run, out, ['actor_steps', 'solved'], ['learner_steps'], actor_every=8)
  exported = os.path.join(out, 'logs', 'actor_0', 'logs.csv')
  # Rows 0, 8, ..., 48: six stand for 8 episodes, the last for the 2 left (48 and 49).
  assert run_export.episode_weights(exported, 7) == [8] * 6 + [2]
  assert json.load(open(os.path.join(out, 'logs', 'actor_0', run_export.THINNED))) == {
      'rows': 7, 'episodes': [[6, 8], [1, 2]]}
  assert run_export.episode_weights(exported, 9) == [8] * 6 + [2, 1, 1]   # rows logged since
  # The run's weights sum to its episodes, in the aggregation's rows as well.
  assert sum(r['episodes_per_row'] for r in aggregate.load(out).episodes) == 50
  # Exported again with another factor: the thinned rows keep their weights.
  run_export.write_thinned_rows(log, [3] * 10)
  export_logs.export_run(run, out, ['actor_steps'], ['learner_steps'], actor_every=4,
                         replace=True)
  assert run_export.episode_weights(exported, 20) == [3] * 10 + [4] * 10
  # A record without the weights (an earlier version's), or whose weights do not cover its
  # rows, is refused in one line naming the file.
  with open(os.path.join(out, 'logs', 'actor_0', run_export.THINNED), 'w') as f:
    json.dump({'rows': 3}, f)
  with pytest.raises(ValueError, match='thinned.json lacks the episodes each thinned row') as e:
    run_export.episode_weights(exported, 4)
  assert f'commit {run_export.EARLIER_FORMAT_READER} is the last that reads it' in str(e.value)
  with open(os.path.join(out, 'logs', 'actor_0', run_export.THINNED), 'w') as f:
    json.dump({'rows': 3, 'episodes': [[2, 4]]}, f)
  with pytest.raises(ValueError, match='thinned.json: its episode weights cover 2 rows, not the 3'):
    run_export.episode_weights(exported, 4)

"""The progress line (launch.runtime.progress) on run directories written by hand, with a clock
the test moves: the speed, the time left and the measures are hand-computed; and the summary's
speed figures (launch.runtime.summary.speed)."""
import json
import os

import pytest

from envs import presets
from launch.runtime import progress, run_state, summary

HEADER = 'actor_steps,episode_length,episode_return,solved,unix_time\n'


class Clock:
  def __init__(self, t: float = 1000.0):
    self.t = t

  def __call__(self) -> float:
    return self.t


def _write_counts(run_dir, steps, learner_steps=0):
  run_state.RunRecords(str(run_dir)).save_counts({'actor_steps': steps, 'learner_steps': learner_steps})


def _append(run_dir, actor, rows, header=True):
  path = run_dir / 'logs' / actor / 'logs.csv'
  path.parent.mkdir(parents=True, exist_ok=True)
  with open(path, 'a') as f:
    if header and path.stat().st_size == 0:
      f.write(HEADER)
    for r in rows:
      f.write(','.join(str(r[k]) for k in ('actor_steps', 'episode_length', 'episode_return',
                                              'solved', 'unix_time')) + '\n')


def _episode(steps, length=100, ret=-10.0, solved=0.0):
  return dict(actor_steps=steps, episode_length=length, episode_return=ret, solved=solved,
              unix_time=0)


def test_log_tail_reads_only_new_whole_rows_and_starts_again_on_a_replaced_file(tmp_path):
  path = tmp_path / 'logs.csv'
  path.write_text('a,b\n1,2\n3,')
  tail = progress.LogTail(str(path))
  assert tail.read() == [{'a': '1', 'b': '2'}]          # the cut row waits for its end
  with open(path, 'a') as f:
    f.write('4\n5,6\n')
  assert tail.read() == [{'a': '3', 'b': '4'}, {'a': '5', 'b': '6'}]
  assert tail.read() == []
  path.write_text('a,b\n7,8\n')                          # shorter: replaced
  assert tail.read() == [{'a': '7', 'b': '8'}]
  assert progress.LogTail(str(tmp_path / 'missing.csv')).read() == []


def test_log_tail_leaves_out_a_row_cut_short_and_reads_the_rest(tmp_path):
  """A row cut by a full disk or a kill, with the next row appended to it, is no CSV: the
  rows around it are read, the broken ones left out (it once failed every resume of a run)."""
  path = tmp_path / 'logs.csv'
  path.write_bytes(b'a,b\r\n1,2\r\n3,4\r5,6\r\n9\r\n7,8\r\n')
  assert progress.LogTail(str(path)).read() == [
      {'a': '1', 'b': '2'}, {'a': '3', 'b': '4'}, {'a': '5', 'b': '6'}, {'a': '7', 'b': '8'}]


def test_the_line_gives_speed_time_left_and_the_measures_of_the_last_episodes(tmp_path):
  clock = Clock()
  _write_counts(tmp_path, 0)
  p = progress.Progress(run_state.RunRecords(str(tmp_path)), 100_000, (('solved', 'solved'), ('episode_return', 'return')),
                        last_n=3, recent_s=60.0, clock=clock)
  clock.t += 20
  _write_counts(tmp_path, 10_000, learner_steps=5)
  _append(tmp_path, 'actor_0', [_episode(4000, ret=-12), _episode(9000, solved=1.0, ret=8)])
  _append(tmp_path, 'actor_1', [_episode(6000, ret=-11)])
  f = p.figures()
  # One sample so far: the recent speed is the launch's.
  assert f['env_steps'] == 10_000 and f['env_steps_per_second_launch'] == 500.0
  assert f['env_steps_per_second'] == 500.0
  assert f['mean_solved_last'] == pytest.approx(1 / 3)
  assert f['mean_episode_return_last'] == pytest.approx((-12 - 11 + 8) / 3)
  clock.t += 10
  _write_counts(tmp_path, 25_000, learner_steps=9)
  _append(tmp_path, 'actor_1', [_episode(20_000, ret=-10)])   # the oldest (4000) drops out
  f = p.figures()
  assert f['env_steps_per_second'] == pytest.approx(15_000 / 10)
  assert f['env_steps_per_second_launch'] == pytest.approx(25_000 / 30)
  assert f['seconds_left'] == pytest.approx(75_000 / 1500)
  assert f['mean_episode_return_last'] == pytest.approx((-11 + 8 - 10) / 3)
  line = p.line(f)
  assert line == ('[     30s] env steps 25,000/100,000  1,500/s (launch 833/s)  left 50s  |  '
                  'last 3 episodes: solved 0.333  return -4.33  |  learner steps 9')
  # The recent speed forgets samples older than recent_s.
  clock.t += 120
  _write_counts(tmp_path, 85_000)
  p.figures()
  clock.t += 60
  _write_counts(tmp_path, 91_000)
  assert p.figures()['env_steps_per_second'] == pytest.approx(6_000 / 60)


def test_a_resumed_launch_counts_its_speed_from_where_it_resumed(tmp_path):
  clock = Clock()
  _write_counts(tmp_path, 1_000_000)
  p = progress.Progress(run_state.RunRecords(str(tmp_path)), 2_000_000, (), clock=clock)
  clock.t += 100
  _write_counts(tmp_path, 1_050_000)
  f = p.figures()
  assert f['env_steps_per_second_launch'] == pytest.approx(500.0)
  assert p.line(f) == ('[    100s] env steps 1,050,000/2,000,000  500/s (launch 500/s)  '
                              'left 31m40s  |  learner steps 0')


def test_before_the_first_env_step_one_line_says_what_it_waits_for_and_only_when_it_changes(tmp_path):
  clock = Clock()
  records = run_state.RunRecords(str(tmp_path))
  p = progress.Progress(records, 1000, (('episode_length', 'length'),), clock=clock)
  assert p.line(p.figures()) == '[      0s] starting: the nodes to start'
  assert p.line(p.figures()) is None
  # A node start from an earlier launch does not count.
  records.append_record(run_state.SUPERVISOR_LOG, {'time': 900.0, 'node': 'learner', 'event': 'start'})
  assert p.line(p.figures()) is None
  for node in ('replay', 'learner', 'actor_0'):
    records.append_record(run_state.SUPERVISOR_LOG, {'time': 1001.0, 'node': node, 'event': 'start'})
  clock.t += 12
  assert p.line(p.figures()) == (
      '[     12s] starting: nodes up: actor_0, learner, replay; the replay starting; '
      'the actors compiling their policy and playing their first episodes; the learner waiting '
      'for its first batch')
  # Only a run with table checkpoints from an earlier launch has tables to restore.
  os.makedirs(tmp_path / run_state.REPLAY_CHECKPOINTS)
  assert 'the replay restoring its tables;' in p.line(p.figures())
  records.append_record(run_state.REPLAY_LOG, {'time': 1005.0, 'event': 'start'})
  assert 'replay' not in p.line(p.figures()).split('nodes up')[1].split(';', 1)[1]
  _write_counts(tmp_path, 240)
  assert 'env steps 240/1,000' in p.line(p.figures())


def test_every_environment_names_what_its_users_watch_and_each_mode_adds_its_own():
  assert [c for c, _ in presets.watched('sokoban', 'rae')] == [
      'solved', 'boxes_on_target', 'episode_return', 'penalised_steps']
  assert [c for c, _ in presets.watched('turf', 'rac')] == [
      'episode_return', 'ruined_grass', 'rejections']
  assert presets.watched('cartpole', 'none') == (('episode_length', 'length'),)
  for env in presets.names():
    for mode in presets.MODES:
      assert presets.watched(env, mode)
  with pytest.raises(presets.PresetError):
    presets.watched('sokoban', 'shield')


def test_the_summary_speed_is_per_actor_process_from_its_episodes_and_the_wall_time(tmp_path):
  run_state.write_json(str(tmp_path / run_state.RUN_STATE),
                       {'segments': [{'start': 0.0, 'end': 100.0, 'status': 'completed'}]})
  _write_counts(tmp_path, 6_400)
  # Two actor processes of several rooms: 4,000 and 2,000 env steps in whole episodes logged.
  _append(tmp_path, 'actor_0', [_episode(1000 * (i + 1), length=400) for i in range(10)])
  _append(tmp_path, 'actor_1', [_episode(1000 * (i + 1) + 500, length=200) for i in range(10)])
  s = summary.summarize(run_state.RunRecords(str(tmp_path)), with_wall_time=True, measures=('solved',))
  assert s['wall_time_s'] == 100.0
  assert s['env_steps_per_second'] == 64.0                  # the counter's 6,400 over 100 s
  assert s['env_steps_per_second_per_actor'] == 30.0        # (4,000 + 2,000) / 2 / 100 s
  assert s['actor_processes'] == 2 and s['mean_solved_last'] == 0.0


def test_a_summary_reads_the_watched_measures_from_the_run_config(tmp_path):
  with open(tmp_path / run_state.CONFIG, 'w') as f:
    json.dump({'env': 'sokoban', 'reversibility': {'mode': 'none'}}, f)
  assert summary.watched_columns(json.load(open(tmp_path / run_state.CONFIG))) == [
      'solved', 'boxes_on_target', 'episode_return']
  assert summary.watched_columns({'env': 'nosuchenv'}) == []
  assert os.path.exists(tmp_path / run_state.CONFIG)


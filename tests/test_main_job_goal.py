"""The main job (`make run`: launch.train with its defaults) ends when its point is made: the last
100 episodes average 195 steps of reward-free Cartpole's 200 (launch.runtime.lifecycle)."""
import csv
import os
import subprocess
import sys

import pytest

from launch.program.config import RunConfig
from launch.runtime import lifecycle, run_state

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))


def _episodes(run_dir, lengths):
  d = os.path.join(run_dir, 'logs', 'actor_0')
  os.makedirs(d, exist_ok=True)
  with open(os.path.join(d, 'logs.csv'), 'w', newline='') as f:
    w = csv.DictWriter(f, fieldnames=['actor_steps', 'episode_length', 'episode_return'])
    w.writeheader()
    steps = 0
    for n in lengths:
      steps += n
      w.writerow({'actor_steps': steps, 'episode_length': n, 'episode_return': 0.0})


@pytest.mark.parametrize('lengths, goal, reached', [
    ([200] * 100, 195, True),
    ([200] * 99, 195, False),                 # too few episodes to judge
    ([10] * 50 + [200] * 100, 195, True),     # only the last 100 count
    ([200] * 100 + [150] * 20, 195, False),   # mean 190
    ([200] * 100, 0, False),                  # 0: never
])
def test_goal_reached(tmp_path, lengths, goal, reached):
  _episodes(tmp_path, lengths)
  reason = lifecycle.goal_reached(run_state.RunRecords(str(tmp_path)), goal)
  assert bool(reason) == reached
  if reached:
    assert reason.startswith('goal reached') and f'{goal:g}' in reason


def test_progress_asks_the_program_to_end_once(tmp_path, capsys):
  cfg = RunConfig(run_dir=str(tmp_path), max_steps=1_200_000)
  records = run_state.RunRecords(cfg.run_dir)
  _episodes(tmp_path, [200] * 120)
  lifecycle.ProgressReporter(cfg, records)()        # no goal: no stop request
  assert records.stop_requested() is None
  progress = lifecycle.ProgressReporter(cfg, records, goal_mean_length=195)
  progress()
  reason = records.stop_requested()
  assert reason and reason.startswith('goal reached')  # the coordinator's final status
  records.clear_stop_request()
  progress()                                           # asked once
  assert records.stop_requested() is None
  assert 'goal reached' in capsys.readouterr().out


@pytest.mark.parametrize('args, goal', [
    ([], 195.0),                                  # make run
    (['--max_steps', '5000'], 0.0),               # a budget given: run it all
    (['--goal_mean_length', '0'], 0.0),
    (['--goal_mean_length', '150', '--max_steps', '5000'], 150.0),
    (['--env', 'cliff'], 0.0),
    (['--noreward_free'], 0.0),
])
def test_the_default_goal_is_the_main_jobs_only(args, goal):
  code = ('import sys\nfrom absl import flags\nfrom launch import train\n'
          'flags.FLAGS(["train"] + sys.argv[1:])\nprint(train.goal_mean_length())\n')
  r = subprocess.run([sys.executable, '-c', code, *args], cwd=ROOT, capture_output=True,
                     text=True, timeout=120,
                     env=dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get('PYTHONPATH', '')))
  assert r.returncode == 0, r.stderr[-2000:]
  assert float(r.stdout.strip().splitlines()[-1]) == goal

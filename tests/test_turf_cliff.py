"""Turf and windy-cliff environments, factory options, and the render CLI."""
import numpy as np
import pytest
from dm_env import StepType

import envs
from envs import cliff as cliff_lib
from envs import render as render_lib
from envs import turf as turf_lib

UP, DOWN, LEFT, RIGHT = range(4)


# Turf -------------------------------------------------------------------------------------
def test_turf_layout_and_specs():
  env = envs.make('turf', seed=3)
  assert env.num_actions == 4
  spec = env.action_spec()
  assert spec.num_values == 4 and spec.dtype == np.int32
  ospec = env.observation_spec()
  assert ospec.shape == (10, 10, 3) and ospec.dtype == np.uint8
  ts = env.reset()
  assert ts.step_type == StepType.FIRST
  obs = ts.observation
  assert obs.shape == (10, 10, 3) and obs.dtype == np.uint8
  assert tuple(obs[turf_lib.START]) == turf_lib.AGENT
  assert tuple(obs[turf_lib.GOAL_POS]) == turf_lib.GOAL
  assert tuple(obs[1, 2]) == turf_lib.STONE and tuple(obs[0, 0]) == turf_lib.GRASS
  # exactly one agent pixel, one goal pixel, no ruined grass at the start
  colors = obs.reshape(-1, 3).tolist()
  assert colors.count(list(turf_lib.AGENT)) == 1
  assert colors.count(list(turf_lib.GOAL)) == 1
  assert colors.count(list(turf_lib.RUINED)) == 0
  assert env.get_state() == (1, 1, 0)
  assert env.render().shape == (160, 160, 3)


# Moves along the stone road from S=(1,1) to G=(8,8): 20 steps.
ROAD = [RIGHT] * 4 + [DOWN] * 3 + [LEFT] * 3 + [DOWN] * 2 + [RIGHT] * 6 + [DOWN] * 2


def test_turf_road_reaches_goal_without_ruin():
  env = envs.make('turf')
  env.reset()
  for i, a in enumerate(ROAD):
    ts = env.step(a)
    if i < len(ROAD) - 1:
      assert ts.step_type == StepType.MID and ts.reward == 0.0
  assert ts.step_type == StepType.LAST and ts.reward == 1.0 and ts.discount == 0.0
  assert env.episode_info() == {'ruined_grass': 0}
  assert env.get_state()[:2] == turf_lib.GOAL_POS
  assert env.step(UP).step_type == StepType.FIRST  # auto-reset after the end


def test_turf_grass_ruin_count():
  env = envs.make('turf')
  env.reset()
  ts = env.step(UP)  # (0, 1): grass
  assert tuple(ts.observation[0, 1]) == turf_lib.AGENT
  ts = env.step(LEFT)  # (0, 0): grass
  assert tuple(ts.observation[0, 1]) == turf_lib.RUINED
  ts = env.step(RIGHT)  # back on (0, 1): already ruined, not counted twice
  assert env.episode_info() == {'ruined_grass': 2}
  env.step(UP)  # border: stays on (0, 1)
  assert env.get_state()[:2] == (0, 1)
  assert env.episode_info() == {'ruined_grass': 2}
  env.reset()
  assert env.episode_info() == {'ruined_grass': 0}


def test_turf_truncates_at_max_steps():
  env = envs.make('turf')
  env.reset()
  for t in range(1, 121):
    ts = env.step(UP if t % 2 else DOWN)  # shuttle between (0,1) and (1,1)
    if t < 120:
      assert ts.mid()
  assert ts.step_type == StepType.LAST and ts.discount == 1.0 and ts.reward == 0.0
  short = envs.make('turf', max_steps=5)
  short.reset()
  assert [short.step(UP).last() for _ in range(5)] == [False] * 4 + [True]


def test_turf_state_roundtrip():
  env = envs.make('turf')
  env.reset()
  for a in (UP, LEFT, DOWN):
    env.step(a)
  state = env.get_state()
  obs = env.step(RIGHT).observation
  env.reset()
  env.set_state(state)
  assert env.step_count == 0 and env.episode_info() == {'ruined_grass': 3}
  np.testing.assert_array_equal(env.step(RIGHT).observation, obs)
  hash(state)


# Windy cliff ------------------------------------------------------------------------------
def test_cliff_specs_and_per_step_reward():
  env = envs.make('cliff')
  ospec = env.observation_spec()
  assert ospec.shape == (48,) and ospec.dtype == np.float32
  assert env.action_spec().num_values == 4 and env.num_actions == 4
  ts = env.reset()
  assert ts.observation.sum() == 1.0 and ts.observation[0] == 1.0
  ts = env.step(RIGHT)
  assert ts.mid() and ts.reward == 1.0 and ts.observation[1] == 1.0
  assert env.get_state() == (0, 1)
  ts = env.step(UP)  # border
  assert ts.reward == 1.0 and env.get_state() == (0, 1)
  assert env.render().ndim == 3


def test_cliff_falling_terminates():
  env = envs.make('cliff')
  env.reset()
  rewards = [env.step(DOWN).reward for _ in range(4)]
  assert rewards == [1.0] * 4 and env.get_state() == (4, 0)
  ts = env.step(DOWN)
  assert ts.last() and ts.discount == 0.0 and ts.reward == 0.0
  assert env.episode_info() == {'fell': 1}
  env.reset()
  assert env.episode_info() == {'fell': 0}


def test_cliff_truncates_at_max_steps():
  env = envs.make('cliff', max_steps=250)
  env.reset()
  total = 0.0
  for t in range(250):
    ts = env.step(UP)
    total += ts.reward
  assert ts.last() and ts.discount == 1.0 and total == 250.0
  assert env.episode_info() == {'fell': 0}


def test_cliff_wind_zero_is_deterministic():
  traj = []
  for seed in (0, 1):
    env = envs.make('cliff', seed=seed, wind=0.0)
    env.reset()
    rng = np.random.default_rng(7)
    traj.append([(env.step(int(a)).reward, env.get_state()) for a in rng.integers(4, size=40)])
  assert traj[0] == traj[1]
  assert envs.make('cliff').deterministic and not envs.make('cliff', wind=0.1).deterministic


def test_cliff_wind_pushes_down():
  env = envs.make('cliff', wind=1.0)
  env.reset()
  env.step(RIGHT)
  assert env.get_state() == (1, 1)  # moved right, then pushed down


@pytest.mark.parametrize('wind', [0.0, 0.2])
def test_cliff_random_policy_matches_paper(wind):
  from bench.envs_bench import PAPER_CLIFF_RANDOM, cliff_random_scores
  mean = cliff_random_scores(wind, episodes=500, seed=0).mean()
  assert abs(mean / PAPER_CLIFF_RANDOM[wind] - 1.0) < 0.2, mean


# Factory ----------------------------------------------------------------------------------
@pytest.mark.parametrize('name, options', [
    ('turf', {'foo': 1}),
    ('turf', {'max_steps': 0}),
    ('cliff', {'wind': 1.5}),
    ('cliff', {'wind': -0.1}),
    ('cliff', {'max_steps': 0}),
    ('cliff', {'reward_free': True}),
    ('nonexistent', {}),
])
def test_factory_option_errors(name, options):
  with pytest.raises(envs.EnvError):
    envs.make(name, **options)


def test_factory_builds_with_options():
  assert isinstance(envs.make('turf', max_steps=7), turf_lib.Turf)
  assert isinstance(envs.make('cliff', wind=0.3, max_steps=10), cliff_lib.WindyCliff)


# Render CLI -------------------------------------------------------------------------------
def test_render_cli_writes_gif_and_png(tmp_path):
  from PIL import Image
  out = tmp_path / 'sub' / 'turf.gif'
  rc = render_lib.main(['--env', 'turf', '--policy', 'random', '--episodes', '2',
                        '--out', str(out), '--seed', '1', '--fps', '20', '--max_frames', '50',
                        '--option', 'max_steps=10'])
  assert rc == 0
  gif = Image.open(out)
  assert gif.format == 'GIF' and 2 <= gif.n_frames <= 22
  # 2 episodes x (reset + 10 steps) at 20 fps; PIL merges identical consecutive frames (bumps
  # into the border) and adds up their durations, so the total duration counts all 22 frames.
  total_ms = 0
  for i in range(gif.n_frames):
    gif.seek(i)
    total_ms += gif.info['duration']
  assert total_ms == 22 * 50
  png = Image.open(tmp_path / 'sub' / 'turf.png')
  assert png.format == 'PNG' and png.size == (160, 160)


def test_render_cli_unknown_env(tmp_path, capsys):
  assert render_lib.main(['--env', 'nope', '--out', str(tmp_path / 'x.gif')]) == 2
  err = capsys.readouterr().err.strip()
  assert err.startswith('error: unknown environment') and '\n' not in err
  assert not (tmp_path / 'x.gif').exists()


def test_render_option_parsing():
  assert render_lib.parse_options(['a=1', 'b=0.5', 'c=true', 'd=False', 'e=x']) == {
      'a': 1, 'b': 0.5, 'c': True, 'd': False, 'e': 'x'}
  with pytest.raises(envs.EnvError):
    render_lib.parse_options(['novalue'])

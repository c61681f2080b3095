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
# The authors' released map (S stone, G grass, * goal; start on stone at (9, 0)).
PAPER_MAP = """
G G G G G G G G S *
G G G G S S S S S G
G G S S S S S S G G
G S S S G G G G G G
G S S G G G G G G G
G S S G G G G G G G
S S G G G G G G G G
S S G G G G G G G G
S S G G G G G G G G
S G G G G G G G G G
"""


def _paper_grass():
  rows = [line.split() for line in PAPER_MAP.strip().splitlines()]
  return np.array([[ch == 'G' for ch in row] for row in rows])


def test_turf_default_is_the_paper_layout():
  env = envs.make('turf', seed=3)
  assert env.layout.name == 'paper' and env.ruin == 'leave'
  assert env.num_actions == 4
  spec = env.action_spec()
  assert spec.num_values == 4 and spec.dtype == np.int32
  ospec = env.observation_spec()
  assert ospec.shape == (10, 10, 3) and ospec.dtype == np.uint8
  ts = env.reset()
  assert ts.step_type == StepType.FIRST
  obs = ts.observation
  assert obs.shape == (10, 10, 3) and obs.dtype == np.uint8
  expected = np.empty((10, 10, 3), np.uint8)
  expected[:] = turf_lib.STONE
  expected[_paper_grass()] = turf_lib.GRASS
  expected[0, 9] = turf_lib.GOAL
  expected[9, 0] = turf_lib.AGENT
  np.testing.assert_array_equal(obs, expected)
  assert env.get_state() == (9, 0, 0)
  assert turf_lib.START == (9, 0) and turf_lib.GOAL_POS == (0, 9)
  assert not turf_lib.GRASS_MASK[0, 9] and not turf_lib.GRASS_MASK[9, 0]  # goal, start: not grass
  assert env.render().shape == (160, 160, 3)


# Along the stone road from (9, 0) to the goal (0, 9): 18 moves, a shortest path.
PAPER_ROAD = ([UP] * 3 + [RIGHT] + [UP] * 3 + [RIGHT] + [UP] + [RIGHT] * 2 + [UP] + [RIGHT] * 4
              + [UP] + [RIGHT])


def _walk(env, actions):
  out = []
  for a in actions:
    out.append(env.step(a))
  return out


def test_turf_paper_road_reaches_goal_without_ruin():
  env = envs.make('turf')
  env.reset()
  grass = _paper_grass()
  steps = _walk(env, PAPER_ROAD)
  for ts in steps[:-1]:
    assert ts.step_type == StepType.MID and ts.reward == 0.0 and ts.discount == 1.0
    r, c = np.argwhere(np.all(ts.observation == turf_lib.AGENT, axis=-1))[0]
    assert not grass[r, c]  # the road is stone all along
  ts = steps[-1]
  assert ts.step_type == StepType.LAST and ts.reward == 1.0 and ts.discount == 0.0
  assert len(PAPER_ROAD) == 18 and env.episode_info()['ruined_grass'] == 0
  assert env.get_state()[:2] == (0, 9)
  assert env.step(UP).step_type == StepType.FIRST  # auto-reset after the end


def test_turf_paper_shortcut_over_grass_is_as_short_and_ruins_what_it_leaves():
  env = envs.make('turf')
  env.reset()
  steps = _walk(env, [RIGHT] * 9 + [UP] * 9)  # along the bottom row, then up the right column
  assert [ts.reward for ts in steps] == [0.0] * 17 + [1.0] and steps[-1].discount == 0.0
  # Every grass cell left is ruined: (9, 1..9) and (8..1, 9); the goal cell is not grass.
  assert env.episode_info()['ruined_grass'] == 17
  obs = steps[-1].observation
  assert all(tuple(obs[9, c]) == turf_lib.RUINED for c in range(1, 10))
  assert all(tuple(obs[r, 9]) == turf_lib.RUINED for r in range(1, 9))
  assert tuple(obs[0, 9]) == turf_lib.AGENT and tuple(obs[9, 0]) == turf_lib.STONE


def test_turf_grass_is_ruined_when_left():
  env = envs.make('turf')
  env.reset()
  ts = env.step(RIGHT)  # onto (9, 1): fresh grass, not ruined yet
  assert tuple(ts.observation[9, 1]) == turf_lib.AGENT
  assert env.get_state() == (9, 1, 0) and env.episode_info()['ruined_grass'] == 0
  env.step(DOWN)  # border: stays on (9, 1), does not leave it
  assert env.get_state() == (9, 1, 0)
  ts = env.step(RIGHT)  # leaves (9, 1)
  assert tuple(ts.observation[9, 1]) == turf_lib.RUINED
  assert env.get_state() == (9, 2, 1 << 91) and env.episode_info()['ruined_grass'] == 1
  env.step(LEFT)  # leaves (9, 2), back on the ruined (9, 1)
  assert env.episode_info()['ruined_grass'] == 2
  ts = env.step(LEFT)  # onto the stone start: (9, 1) was already ruined, not counted twice
  assert env.get_state() == (9, 0, (1 << 91) | (1 << 92))
  assert tuple(ts.observation[9, 1]) == turf_lib.RUINED
  _walk(env, [UP, DOWN, LEFT])  # stone never ruins; LEFT bumps into the border
  assert env.get_state() == (9, 0, (1 << 91) | (1 << 92))
  env.reset()
  assert env.episode_info()['ruined_grass'] == 0


def test_turf_ruin_on_enter_option():
  env = envs.make('turf', ruin='enter')
  env.reset()
  ts = env.step(RIGHT)  # onto (9, 1): ruined at once
  assert env.get_state() == (9, 1, 1 << 91) and env.episode_info()['ruined_grass'] == 1
  assert tuple(ts.observation[9, 1]) == turf_lib.AGENT
  ts = env.step(LEFT)
  assert tuple(ts.observation[9, 1]) == turf_lib.RUINED
  assert env.episode_info()['ruined_grass'] == 1


def test_turf_truncates_at_max_steps():
  env = envs.make('turf')
  env.reset()
  for t in range(1, 121):
    ts = env.step(UP if t % 2 else DOWN)  # shuttle between (8, 0) and (9, 0), both stone
    assert ts.reward == 0.0
    if t < 120:
      assert ts.mid()
  assert ts.step_type == StepType.LAST and ts.discount == 1.0 and ts.reward == 0.0
  assert env.episode_info()['ruined_grass'] == 0
  short = envs.make('turf', max_steps=5)
  short.reset()
  assert [short.step(UP).last() for _ in range(5)] == [False] * 4 + [True]


def test_turf_state_roundtrip():
  env = envs.make('turf')
  env.reset()
  _walk(env, [RIGHT, RIGHT, UP, UP])  # grass (9,1) -> (9,2) -> (8,2) -> (7,2): three cells left
  state = env.get_state()
  assert state[:2] == (7, 2)
  obs = env.step(RIGHT).observation
  env.reset()
  env.set_state(state)
  assert env.step_count == 0 and env.episode_info()['ruined_grass'] == 3
  np.testing.assert_array_equal(env.step(RIGHT).observation, obs)
  hash(state)
  with pytest.raises(ValueError):
    env.set_state((10, 0, 0))
  with pytest.raises(ValueError):
    env.set_state((0, 0, 1 << 100))


def test_turf_random_walks_are_deterministic_and_ruin_only_grass():
  rng = np.random.default_rng(0)
  actions = rng.integers(4, size=400)
  runs = []
  for seed in (0, 1):
    env = envs.make('turf', seed=seed)
    env.reset()
    runs.append([(env.step(int(a)).step_type, env.get_state()) for a in actions])
  assert runs[0] == runs[1]
  grass_bits = sum(1 << (r * 10 + c) for r, c in np.argwhere(_paper_grass()))
  assert any(s[2] for _, s in runs[0])
  assert all(s[2] & ~grass_bits == 0 for _, s in runs[0])


@pytest.mark.parametrize('layout', ['paper', 'winding'])
def test_turf_ruin_rules_look_the_same(layout):
  # The agent covers its own cell, so both rules give the same images, rewards and ends; only
  # the true state differs (checked on a random walk that does ruin grass).
  rng = np.random.default_rng(2)
  leave = envs.make('turf', layout=layout)
  enter = envs.make('turf', layout=layout, ruin='enter')
  np.testing.assert_array_equal(leave.reset().observation, enter.reset().observation)
  states_differ = 0
  for a in rng.integers(4, size=600):
    t1, t2 = leave.step(int(a)), enter.step(int(a))
    np.testing.assert_array_equal(t1.observation, t2.observation)
    assert (t1.step_type, t1.reward, t1.discount) == (t2.step_type, t2.reward, t2.discount)
    states_differ += leave.get_state() != enter.get_state()
  assert states_differ > 0


# The layout this project used before the released map: a winding road from (1, 1) to (8, 8).
# With ruin='enter' it is exactly the environment of that time.
WINDING_ROAD = [RIGHT] * 4 + [DOWN] * 3 + [LEFT] * 3 + [DOWN] * 2 + [RIGHT] * 6 + [DOWN] * 2


def test_turf_winding_layout():
  env = envs.make('turf', layout='winding', ruin='enter')
  assert env.layout.name == 'winding'
  obs = env.reset().observation
  assert tuple(obs[1, 1]) == turf_lib.AGENT and tuple(obs[8, 8]) == turf_lib.GOAL
  assert tuple(obs[1, 2]) == turf_lib.STONE and tuple(obs[0, 0]) == turf_lib.GRASS
  assert env.get_state() == (1, 1, 0)
  steps = _walk(env, WINDING_ROAD)
  assert all(ts.mid() for ts in steps[:-1])
  assert steps[-1].last() and steps[-1].reward == 1.0 and steps[-1].discount == 0.0
  assert env.episode_info()['ruined_grass'] == 0


@pytest.mark.parametrize('ruin, counts', [('enter', [1, 2, 2]), ('leave', [0, 1, 2])])
def test_turf_winding_grass_ruin(ruin, counts):
  env = envs.make('turf', layout='winding', ruin=ruin)
  env.reset()
  got = []
  for a in (UP, LEFT, RIGHT):  # (0, 1) grass, (0, 0) grass, back on (0, 1)
    env.step(a)
    got.append(env.episode_info()['ruined_grass'])
  assert got == counts
  env.step(UP)  # border: stays on (0, 1)
  assert env.get_state()[:2] == (0, 1) and env.episode_info()['ruined_grass'] == 2


@pytest.mark.parametrize('options, message', [
    ({'layout': 'nope'}, "unknown turf layout 'nope'; known: paper, winding"),
    ({'layout': 1}, 'unknown turf layout 1'),
    ({'ruin': 'sometimes'}, "ruin must be one of leave, enter, got 'sometimes'"),
])
def test_turf_bad_options_are_one_line(options, message):
  with pytest.raises(envs.EnvError, match=message) as info:
    envs.make('turf', **options)
  assert '\n' not in str(info.value)


def test_turf_layout_from_command_line_options():
  env = envs.make('turf', **envs.parse_options(['layout=winding', 'ruin=enter']))
  assert env.layout.start == (1, 1) and env.ruin == 'enter'


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


def cliff_random_scores(wind: float, episodes: int, seed: int = 0) -> np.ndarray:
  """Scores (steps survived) of a uniformly random policy in the windy cliff."""
  env = envs.make('cliff', seed=seed, wind=wind)
  rng = np.random.default_rng(seed + 1)
  scores = np.zeros(episodes)
  for i in range(episodes):
    ts = env.reset()
    while not ts.last():
      ts = env.step(int(rng.integers(4)))
      scores[i] += ts.reward
  return scores


@pytest.mark.parametrize('wind', [0.0, 0.2])
def test_cliff_random_policy_matches_paper(wind):
  # BUILD_NOTES.md's "Windy cliff layout" table, at 500 episodes (it has 5,000, same seeds).
  from experiments.cliff import CLIFF_PAPER_RANDOM
  mean = cliff_random_scores(wind, episodes=500, seed=0).mean()
  assert abs(mean / CLIFF_PAPER_RANDOM[wind] - 1.0) < 0.2, mean


# Factory ----------------------------------------------------------------------------------
@pytest.mark.parametrize('name, options', [
    ('turf', {'foo': 1}),
    ('turf', {'max_steps': 0}),
    ('turf', {'layout': 'nope'}),
    ('turf', {'ruin': 'never'}),
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


def test_turf_stone_start_option():
  env = envs.make('turf', start='stone', seed=5)
  grass = turf_lib.GRASS_MASK
  starts = set()
  for _ in range(300):
    env.reset()
    r, c, ruined = env.get_state()
    assert ruined == 0 and not grass[r, c] and (r, c) != turf_lib.GOAL_POS
    starts.add((r, c))
  assert len(starts) == int((~grass).sum()) - 1   # every stone cell, the goal excluded
  again = envs.make('turf', start='stone', seed=5)
  first = env.__class__(seed=5, start='stone')
  assert [first.reset() and first.get_state() for _ in range(5)] == \
      [again.reset() and again.get_state() for _ in range(5)]
  with pytest.raises(ValueError, match='start must be one of fixed, stone'):
    turf_lib.Turf(start='anywhere')


def test_turf_goal_ends_option():
  # Default: entering the goal from (1, 9) pays 1 and ends the episode.
  env = envs.make('turf')
  env.reset()
  env.set_state((1, 9, 0))
  ts = env.step(UP)
  assert ts.last() and ts.reward == 1.0 and ts.discount == 0.0
  # goal_ends=False (command-line value 'false'): the same move pays 1 and the walk goes on;
  # leaving the goal pays nothing, and the cell left before the goal, (1, 9), shows ruined.
  env = envs.make('turf', **envs.parse_options(['goal_ends=false', 'max_steps=3']))
  env.reset()
  env.set_state((1, 9, 0))
  ts = env.step(UP)
  assert ts.mid() and ts.reward == 1.0 and ts.discount == 1.0
  assert env.get_state() == (0, 9, 1 << 19)
  ts = env.step(UP)    # a bump on the goal: no second reward
  assert ts.mid() and ts.reward == 0.0
  ts = env.step(DOWN)
  assert ts.last() and ts.reward == 0.0 and ts.discount == 1.0   # truncated at max_steps
  assert env.get_state() == (1, 9, 1 << 19)
  assert tuple(ts.observation[1, 9]) == turf_lib.AGENT
  assert tuple(ts.observation[0, 9]) == turf_lib.GOAL

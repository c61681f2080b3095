"""Sokoban: level files, the dm_env wrapper of gym-sokoban, and reversibility oracle cases."""
import collections
import time
from pathlib import Path

import numpy as np
import pytest

import envs
from envs import levels as levels_lib
from envs import oracle, sokoban
from envs.sokoban import DEFAULT_LEVELS, Sokoban

REPO = Path(__file__).resolve().parents[1]
BOXOBAN_FILE = REPO.parent / 'shared/data/boxoban/unfiltered_test_000.txt'
UP, DOWN, LEFT, RIGHT = range(4)

# Two boxes, two targets; used for the reward sequence.
TWO_BOX_ROOM = """\
#######
#     #
#@$.  #
#     #
# $.  #
#     #
#######
"""

# Paper Fig. 5a: pushing the box up against the wall is undone by pushing it left along the wall
# (twice), walking round to the alcove above it, pushing it down, pushing it right (twice) and
# walking back to the start: 17 moves, the minimum.
FIG5A_ROOM = """\
########
#  #####
#      #
#   $ .#
#   @  #
########
"""


# Level files ----------------------------------------------------------------------------------
def test_shipped_level_set():
  levels = levels_lib.load_levels(DEFAULT_LEVELS)
  assert len(levels) == 1000, (f'{DEFAULT_LEVELS} has {len(levels)} levels: generation incomplete?'
                               ' (scripts/generate_sokoban_levels.py resumes)')
  assert [l.name for l in levels] == [f'; {i}' for i in range(1000)]
  for l in levels:
    assert l.shape == (10, 10) and len(l.boxes) == len(l.targets) == 4
    assert set(l.boxes) != set(l.targets)
  assert len(set(levels)) > 990  # essentially all distinct
  assert 100_000 < Path(DEFAULT_LEVELS).stat().st_size < 130_000


@pytest.mark.skipif(not BOXOBAN_FILE.exists(), reason=f'{BOXOBAN_FILE} absent')
def test_parse_boxoban_file_and_round_trip(tmp_path):
  levels = levels_lib.load_levels(BOXOBAN_FILE)
  assert len(levels) == 1000
  assert levels[17].name == '; 17'
  for l in levels:
    assert l.shape == (10, 10) and len(l.boxes) == len(l.targets) == 4
  out = tmp_path / 'copy.txt'
  levels_lib.save_levels(levels, out)
  assert out.read_text() == BOXOBAN_FILE.read_text().rstrip('\n') + '\n\n'
  assert levels_lib.load_levels(out) == levels


def test_level_contents_and_xsb_variants():
  (level,) = levels_lib.parse_levels('; a\n#####\n#@$.#\n#* -#\n#_$.\n####\n')
  assert level.name == '; a' and level.index == 0
  assert level.shape == (5, 5)
  assert level.player == (1, 1)
  assert level.boxes == ((1, 2), (2, 1), (3, 2))
  assert level.targets == ((1, 3), (2, 1), (3, 3))
  assert not level.walls[2, 3] and not level.walls[3, 1]  # '-' and '_' are floor
  assert level.walls[3, 4] and level.walls[4, 4]  # ragged rows padded with wall
  assert level.to_text() == '#####\n#@$.#\n#*  #\n# $.#\n#####\n'


def test_ragged_rows_padded_with_wall_and_headerless_blocks():
  text = '#####\n#@$.#\n###\n\n#####\n#.$@#\n#####\n'
  a, b = levels_lib.parse_levels(text)
  assert (a.name, b.name) == ('#0', '#1')
  assert a.walls.shape == (3, 5) and a.walls[2].all()
  assert b.player == (1, 3)
  assert a.to_text() == '#####\n#@$.#\n#####\n'


@pytest.mark.parametrize('body, line, words', [
    ('#####\n#@$x#\n#####\n', 8, "unknown character 'x'"),
    ('#####\n#@$.#\n#@  #\n#####\n', 9, '2 players'),
    ('######\n#@$$.#\n######\n', 7, '2 boxes but 1 targets'),
    ('#####\n#  .#\n# $ #\n#####\n', 7, 'no player'),
    ('#####\n @$.#\n#####\n', 8, 'not closed'),
    ('#####\n#@$.#\n#    \n#####\n', 9, 'not closed'),  # trailing floor counts
])
def test_malformed_levels_name_file_level_and_line(tmp_path, body, line, words):
  good = '; 16\n#####\n#@$.#\n#####\n\n'  # lines 1-5; '; 17' is line 6
  path = tmp_path / 'levels.txt'
  path.write_text(good + '; 17\n' + body)
  with pytest.raises(levels_lib.LevelFileError) as info:
    levels_lib.load_levels(path)
  message = str(info.value)
  assert isinstance(info.value, ValueError)
  assert message.startswith(f"levels.txt: level '; 17' line {line}: "), message
  assert words in message and '\n' not in message


# Environment ----------------------------------------------------------------------------------
def test_factory_with_level_file(tmp_path):
  path = tmp_path / 'two.txt'
  path.write_text('; 0\n' + TWO_BOX_ROOM + '\n; 1\n' + FIG5A_ROOM)
  env = envs.make('sokoban', seed=0, levels=str(path), max_steps=50)
  assert env.observation_spec().shape == (7, 8, 3)  # shapes padded to the largest level
  seen = set()
  for _ in range(50):
    env.reset()
    seen.add(env.level_index)
  assert seen == {0, 1}
  env.set_state((0, (2, 1), ((2, 2), (4, 2))))
  assert env.to_text() == ''.join(row + '#\n' for row in TWO_BOX_ROOM.splitlines())
  with pytest.raises(ValueError, match='invalid state'):
    env.set_state((0, (2, 1), ((2, 1), (4, 2))))  # box under the player
  with pytest.raises(ValueError, match='invalid state'):
    env.set_state((0, (2, 1), ((0, 0), (4, 2))))  # box in a wall
  with pytest.raises(envs.EnvError, match='level file not found'):
    envs.make('sokoban', levels=str(tmp_path / 'missing.txt'))


def test_specs_and_factory():
  env = envs.make('sokoban', seed=3)
  assert env.num_actions == 4
  assert env.action_spec().num_values == 4 and env.action_spec().dtype == np.int32
  ts = env.reset()
  assert ts.first()
  assert ts.observation.shape == (10, 10, 3) and ts.observation.dtype == np.uint8
  assert env.observation_spec().shape == (10, 10, 3)
  assert env.render().shape == (160, 160, 3)
  assert env.episode_info() == {'solved': 0.0, 'boxes_on_target': 0.0}
  with pytest.raises(envs.EnvError):
    envs.make('sokoban', level_index=10**6)


def test_observation_is_gym_sokobans_tiny_rgb():
  from gym_sokoban.envs.render_utils import room_to_tiny_world_rgb
  env = Sokoban.from_text('#######\n#+$. $#\n#  *  #\n#######\n')
  rng = np.random.default_rng(0)
  ts = env.reset()
  for _ in range(200):
    engine = env._engine  # pylint: disable=protected-access
    expected = room_to_tiny_world_rgb(engine.room_state, engine.room_fixed)
    np.testing.assert_array_equal(ts.observation, expected)
    assert ts.observation.dtype == np.uint8 and ts.observation.shape == (4, 7, 3)
    ts = env.step(int(rng.integers(4)))


def test_rewards_and_termination():
  env = Sokoban.from_text(TWO_BOX_ROOM)
  env.reset()
  plan = [(UP, -0.1), (DOWN, -0.1),
          (RIGHT, 0.9),                      # box onto a target: -0.1 + 1
          (RIGHT, -1.1),                     # box off it: -0.1 - 1
          (UP, -0.1), (RIGHT, -0.1), (RIGHT, -0.1), (DOWN, -0.1),
          (LEFT, 0.9),                       # back onto the target
          (DOWN, -0.1), (LEFT, -0.1), (LEFT, -0.1), (LEFT, -0.1), (DOWN, -0.1)]
  for action, reward in plan:
    ts = env.step(action)
    assert ts.mid() and ts.reward == pytest.approx(reward), env.to_text()
    assert ts.discount == 1.0
  assert env.episode_info() == {'solved': 0.0, 'boxes_on_target': 1.0}
  ts = env.step(RIGHT)  # last box: -0.1 + 1 + 10, solved
  assert ts.last() and ts.discount == 0.0 and ts.reward == pytest.approx(10.9)
  assert env.episode_info() == {'solved': 1.0, 'boxes_on_target': 2.0}
  assert env.step(UP).first()  # auto-reset after the end


@pytest.mark.parametrize('timeout_terminates, discount', [(False, 1.0), (True, 0.0)])
def test_the_120th_step_truncates_or_with_timeout_terminates_ends(timeout_terminates, discount):
  env = Sokoban.from_text(TWO_BOX_ROOM, timeout_terminates=timeout_terminates)
  env.reset()
  for t in range(1, 121):
    ts = env.step(UP if t % 2 else DOWN)
    if t < 120:
      assert ts.mid()
  assert ts.last() and ts.discount == discount and ts.reward == pytest.approx(-0.1)
  assert env.episode_info()['solved'] == 0.0
  assert env.step(UP).first()


def test_set_state_resets_step_counter():
  env = Sokoban.from_text(TWO_BOX_ROOM, max_steps=5)
  env.reset()
  s = env.get_state()
  for _ in range(4):
    assert env.step(UP).mid()
  env.set_state(s)
  for _ in range(4):
    assert env.step(DOWN).mid()
  assert env.step(UP).last()


def test_state_round_trip_on_shipped_levels():
  env = Sokoban(seed=1)
  rng = np.random.default_rng(0)
  seen = []
  for _ in range(300):
    env.step(int(rng.integers(4)))
    seen.append((env.get_state(), env.render().copy()))
  other = Sokoban(seed=2)
  for state, frame in seen[::7]:
    hash(state)
    other.set_state(state)
    assert other.get_state() == state
    np.testing.assert_array_equal(other.render(), frame)
  # Stepping from a restored state matches stepping the original.
  state = seen[-1][0]
  env.set_state(state)
  other.set_state(state)
  for a in rng.integers(4, size=30):
    ta, tb = env.step(int(a)), other.step(int(a))
    assert env.get_state() == other.get_state() and ta.reward == tb.reward


def test_uniform_level_sampling_and_reset_time():
  env = Sokoban(seed=0)
  env.reset()
  n = 1000
  start = time.perf_counter()
  counts = collections.Counter()
  for _ in range(n):
    env.reset()
    counts[env.level_index] += 1
  per_reset = (time.perf_counter() - start) / n
  print(f'reset: {per_reset * 1e3:.3f} ms')
  assert per_reset < 5e-3  # ~0.01-0.02 ms measured; loose to avoid flakes on a loaded machine
  assert len(counts) > 0.5 * min(n, len(env.levels))
  fixed = Sokoban(seed=0, level_index=7)
  fixed.reset()
  assert fixed.level_index == 7


# Reversibility (envs.oracle) ------------------------------------------------------------------
def _bfs_steps_back(env, state, action):
  """Independent check: shortest number of actions from the next state back to `state`."""
  env.set_state(state)
  env.step(action)
  start = env.get_state()
  dist = {start: 0}
  queue = collections.deque([start])
  while queue:
    s = queue.popleft()
    if s == state:
      return dist[s]
    for a in range(env.num_actions):
      env.set_state(s)
      env.step(a)
      t = env.get_state()
      if t not in dist:
        dist[t] = dist[s] + 1
        queue.append(t)
  return None


@pytest.mark.parametrize('use_hints', [True, False])
def test_box_into_corner_is_irreversible(use_hints):
  env = Sokoban.from_text('######\n# $@ #\n#    #\n#.   #\n######\n')
  env.reset()
  s = env.get_state()
  result = oracle.check(env, s, LEFT, use_hints=use_hints)
  assert result.status == 'irreversible' and result.steps_back is None
  assert _bfs_steps_back(env, s, LEFT) is None
  if use_hints:
    env.set_state(s)
    env.step(LEFT)
    assert not env.can_reach(env.get_state(), s)
    assert env.can_reach(s, env.get_state())


def test_box_along_open_floor_is_reversible():
  env = Sokoban.from_text('#######\n#     #\n#     #\n# @$  #\n#     #\n#.    #\n#######\n')
  env.reset()
  s = env.get_state()
  result = oracle.check(env, s, RIGHT)
  # walk round the box (4), push it back (1), walk round again to the start (4)
  assert result.status == 'reversible' and result.steps_back == 9
  assert _bfs_steps_back(env, s, RIGHT) == 9
  assert oracle.check(env, s, UP).steps_back == 1  # a plain move is undone by its opposite


@pytest.mark.parametrize('use_hints', [True, False])
def test_fig5a_push_against_wall_takes_17_moves_to_undo(use_hints):
  env = Sokoban.from_text(FIG5A_ROOM)
  env.reset()
  s = env.get_state()
  result = oracle.check(env, s, UP, use_hints=use_hints)
  assert result.status == 'reversible' and result.steps_back == 17
  assert _bfs_steps_back(env, s, UP) == 17
  # The 17-move undo: right, up, push left x2, round (down, left x2, up x2, right), push down,
  # left, down, push right x2, down, right.
  env.set_state(s)
  env.step(UP)
  for a in [RIGHT, UP, LEFT, LEFT, DOWN, LEFT, LEFT, UP, UP, RIGHT, DOWN, LEFT, DOWN, RIGHT,
            RIGHT, DOWN, RIGHT]:
    env.step(a)
  assert env.get_state() == s


def test_can_reach_never_rules_out_a_reached_state():
  env = Sokoban(seed=4)
  rng = np.random.default_rng(1)
  for _ in range(5):
    env.reset()
    states = [env.get_state()]
    for _ in range(60):
      if env.step(int(rng.integers(4))).last():
        break
      states.append(env.get_state())
    for i in range(0, len(states), 3):
      for j in range(i, len(states), 3):
        assert env.can_reach(states[i], states[j])
  assert env.can_reach(states[0], states[-1])


def test_solving_step_is_irreversible():
  env = Sokoban.from_text('#####\n#@$.#\n#####\n')
  env.reset()
  assert oracle.check(env, env.get_state(), RIGHT).status == 'irreversible'


# Level generation script (no generation here: ~4 s per level) ------------------------------------
def test_generator_resume_drops_partial_level(tmp_path):
  import importlib.util
  spec = importlib.util.spec_from_file_location(
      'generate_sokoban_levels', REPO / 'scripts' / 'generate_sokoban_levels.py')
  gen = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(gen)
  complete = '; 0\n' + TWO_BOX_ROOM + '\n; 1\n' + FIG5A_ROOM + '\n'
  path = tmp_path / 'levels.txt'
  path.write_text(complete + '; 2\n#####\n#@$')  # interrupted while writing level 2
  assert gen.existing_levels(str(path)) == 2
  assert path.read_text() == complete
  assert gen.existing_levels(str(path)) == 2
  path.write_text(complete.replace('; 1', '; 5'))  # out-of-order headers: keep the good prefix
  assert gen.existing_levels(str(path)) == 1


def test_box_cells_reads_boxes_off_observations():
  env = Sokoban.from_text(TWO_BOX_ROOM)
  ts = env.reset()
  assert sorted(map(tuple, np.argwhere(sokoban.box_cells(ts.observation)))) == [(2, 2), (4, 2)]
  ts = env.step(RIGHT)   # pushes the box at (2, 2) onto the target at (2, 3)
  assert sorted(map(tuple, np.argwhere(sokoban.box_cells(ts.observation)))) == [(2, 3), (4, 2)]


def test_push_and_move_action_set_adds_move_only_actions():
  env = Sokoban.from_text(TWO_BOX_ROOM, action_set='push_and_move')
  assert env.action_spec().num_values == 8
  env.reset()
  player, boxes = env.get_state()[1], env.get_state()[2]
  env.step(RIGHT + 4)   # move-only right: the box beside the player stays, so does the player
  assert env.get_state()[1:] == (player, boxes)
  env.step(RIGHT)       # the push action moves it
  assert env.get_state()[1] == (player[0], player[1] + 1)
  assert env.get_state()[2] != boxes
  with pytest.raises(ValueError, match='action_set'):
    Sokoban.from_text(TWO_BOX_ROOM, action_set='moves')

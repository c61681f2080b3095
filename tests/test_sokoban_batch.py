"""envs.sokoban_batch.SokobanBatch plays exactly as K single Sokoban environments.

The property test steps the batch and K `SinglePrecisionWrapper(Sokoban(seed=s_k, **options))`
side by side with the same actions, through thousands of episodes (short time limits, so most
end by truncation; solver-driven and tiny levels, so many end solved) on the shipped 1k set, a
Boxoban file and a mixed set of differently sized levels, and compares everything an actor sees
at every step: step types, float32 rewards and discounts (bit for bit), observations, the level
each environment plays, which episodes end, their `episode_info()` and the next first
observations.
"""
import collections
from pathlib import Path

import dm_env
import numpy as np
import pytest
from acme import wrappers

import envs
from envs import batch as batch_lib
from envs import levels as levels_lib
from envs import sokoban, sokoban_solver
from envs.sokoban_batch import SokobanBatch

REPO = Path(__file__).resolve().parents[1]
BOXOBAN_FILE = REPO.parent / 'shared/data/boxoban/unfiltered_test_000.txt'
needs_boxoban = pytest.mark.skipif(not BOXOBAN_FILE.exists(), reason=f'{BOXOBAN_FILE} absent')

# Small rooms where random play scores: one push solves the first; the second has a box that
# starts on a target (pushing it off costs -1) and a second box one push from its target; the
# third is test_sokoban's two-box room.
TINY_LEVELS = """\
; one push
#####
#@$.#
#####

; off and on
######
#@*  #
#  $.#
#    #
######

; two boxes
#######
#     #
#@$.  #
#     #
# $.  #
#     #
#######
"""
# Levels with short solutions (found with envs.sokoban_solver): shipped set, Boxoban file.
SHORT_SHIPPED = (37, 7)
SHORT_BOXOBAN = (292, 180, 209, 138, 160, 56)


def _mixed_levels():
  """Tiny rooms, short shipped and Boxoban levels in one set (the tiny ones padded to 10 x 10)."""
  mixed = levels_lib.parse_levels(TINY_LEVELS, source='<tiny>')
  shipped = sokoban.load_level_set('default')
  mixed += [shipped[i] for i in SHORT_SHIPPED]
  if BOXOBAN_FILE.exists():
    boxoban = sokoban.load_level_set(str(BOXOBAN_FILE))
    mixed += [boxoban[i] for i in SHORT_BOXOBAN]
  return mixed


def _assert_same_image(got: np.ndarray, want: np.ndarray, where: str):
  """Same shape, dtype and bytes (np.testing's comparison is slow at ~100k calls)."""
  assert got.shape == want.shape and got.dtype == want.dtype == np.uint8, (where, got.shape)
  if got.tobytes() != want.tobytes():
    np.testing.assert_array_equal(got, want, err_msg=where)   # says where they differ


def _assert_same_timestep(got: dm_env.TimeStep, want: dm_env.TimeStep, where: str):
  assert got.step_type == want.step_type, where
  for name in ('reward', 'discount'):
    g, w = getattr(got, name), getattr(want, name)
    if w is None:
      assert g is None, (where, name)
      continue
    assert isinstance(g, np.ndarray) and g.dtype == w.dtype == np.float32 and g.shape == w.shape, (
        where, name, type(g), g.dtype, w.dtype)
    assert g.tobytes() == w.tobytes(), (where, name, g, w)
  _assert_same_image(got.observation, want.observation, where)


class _Solutions:
  """Move-optimal solutions per level index (envs.sokoban_solver), computed once each."""

  def __init__(self, levels):
    self._levels, self._cache = levels, {}

  def __call__(self, index: int):
    if index not in self._cache:
      self._cache[index] = sokoban_solver.solve(self._levels[index], max_steps=30)[0]
    return self._cache[index]


def _play(seeds, steps, policy_seed, solver_envs=(), **options):
  """Steps SokobanBatch(seeds) and the single environments side by side, asserting equality;
  environments in `solver_envs` play their level's solution from each episode's start, the
  others act uniformly at random. Returns what was covered."""
  batch = SokobanBatch(seeds, **options)
  singles = [wrappers.SinglePrecisionWrapper(sokoban.Sokoban(seed=s, **options)) for s in seeds]
  k_envs = len(seeds)
  num_actions = singles[0].action_spec().num_values
  solutions = _Solutions(batch.levels)
  rng = np.random.default_rng(policy_seed)
  seen = collections.Counter()
  levels_played = set()

  firsts = batch.reset()
  for k, env in enumerate(singles):
    _assert_same_timestep(firsts[k], env.reset(), f'reset env {k}')
  np.testing.assert_array_equal(batch.level_index, [e.level_index for e in singles])
  plans = {k: list(solutions(int(batch.level_index[k]))) for k in solver_envs}
  for t in range(steps):
    actions = rng.integers(num_actions, size=k_envs).astype(np.int32)
    for k in solver_envs:
      actions[k] = plans[k].pop(0)
    out = batch.step(actions)
    assert len(out.timesteps) == k_envs
    ended = set()
    for k, env in enumerate(singles):
      where = f'step {t} env {k} level {env.level_index}'
      want = env.step(actions[k])
      _assert_same_timestep(out.timesteps[k], want, where)
      _assert_same_image(out.reached[k], want.observation, where)
      seen['steps'] += 1
      seen[f'reward {float(want.reward):+.1f}'] += 1
      if want.last():
        ended.add(k)
        info = env.episode_info()
        seen['solved' if info['solved'] else 'truncated'] += 1
        seen[f'last discount {float(want.discount):g}'] += 1
        levels_played.add(env.level_index)
        first = env.reset()
        assert k in out.finished, where
        assert out.finished[k].info == info, (where, out.finished[k].info, info)
        _assert_same_timestep(out.finished[k].first, first, where + ' (reset)')
        _assert_same_image(out.observations[k], first.observation, where)
        if k in solver_envs:
          assert info['solved'] and not plans[k], where   # the solution solved it
          plans[k] = list(solutions(env.level_index))
      else:
        _assert_same_image(out.observations[k], want.observation, where)
    assert set(out.finished) == ended, t
    assert batch.level_index.tolist() == [e.level_index for e in singles], t
  seen['levels'] = len(levels_played)
  return seen


def test_shipped_set_random_play_with_short_time_limits():
  seen = _play(list(range(101, 117)), 700, policy_seed=0, max_steps=7)
  assert seen['steps'] == 16 * 700
  assert seen['truncated'] == 1600 and seen['levels'] >= 700   # episodes, distinct levels drawn
  assert seen['reward +0.9'] > 0 and seen['reward -1.1'] > 0   # boxes pushed on and off targets


@needs_boxoban
def test_boxoban_file_push_and_move_actions():
  seen = _play([7, 3, 3, 900, 12, 13, 14, 15, 16, 17, 18, 19], 500, policy_seed=1,
               levels=str(BOXOBAN_FILE), max_steps=13, action_set='push_and_move')
  assert seen['truncated'] >= 400 and seen['levels'] >= 300
  assert seen['reward +0.9'] > 0 and seen['reward -1.1'] > 0


def test_mixed_level_set_with_solved_episodes():
  """Tiny rooms padded to 10 x 10 beside shipped and Boxoban levels; half the environments play
  solutions, so +10 / discount 0 / solved = 1 come up in every one of their episodes."""
  levels = _mixed_levels()
  seen = _play(list(range(16)), 400, policy_seed=2, solver_envs=range(0, 16, 2), levels=levels,
               max_steps=30)
  assert seen['solved'] >= 250 and seen['truncated'] >= 50
  assert seen['reward +10.9'] > 0 and seen['reward -1.1'] > 0 and seen['reward +0.9'] > 0
  assert seen['levels'] == len(levels)


def test_timeouts_that_terminate():
  """With timeout_terminates every episode's last step has discount 0, solved or timed out."""
  seen = _play(list(range(8)), 300, policy_seed=4, solver_envs=(0, 2, 4, 6),
               levels=_mixed_levels(), max_steps=30, timeout_terminates=True)
  assert seen['solved'] >= 4 * (300 // 30) and seen['truncated'] >= 4 * (300 // 30) - 4
  assert seen['last discount 0'] == seen['solved'] + seen['truncated']
  assert seen['last discount 1'] == 0


def test_one_level_option():
  seen = _play([5, 6, 7, 8], 120, policy_seed=3, solver_envs=(1, 3), level_index=7, max_steps=25)
  assert seen['solved'] >= 2 * (120 // 18) and seen['truncated'] >= 2 * (120 // 25)
  assert seen['levels'] == 1


def test_specs_are_those_of_the_wrapped_single_environment():
  for options in ({}, {'action_set': 'push_and_move'}, {'levels': _mixed_levels()}):
    single = wrappers.SinglePrecisionWrapper(sokoban.Sokoban(seed=0, **options))
    batch = SokobanBatch([0, 1], **options)
    for spec in ('observation_spec', 'action_spec', 'reward_spec', 'discount_spec'):
      assert getattr(batch, spec)() == getattr(single, spec)(), (options, spec)
    assert batch.num_envs == 2


def test_make_batch_by_name():
  batch = envs.make_batch('sokoban', [1, 2, 3], max_steps=5, level_index=2)
  assert isinstance(batch, batch_lib.BatchedEnvironment) and batch.num_envs == 3
  batch.reset()
  assert list(batch.level_index) == [2, 2, 2]
  assert envs.has_batch('sokoban') and not envs.has_batch('cartpole')
  with pytest.raises(envs.EnvError, match='no vectorised batch'):
    envs.make_batch('cartpole', [1])
  with pytest.raises(envs.EnvError, match='unknown environment'):
    envs.make_batch('chess', [1])
  with pytest.raises(envs.EnvError, match='no option'):
    envs.make_batch('sokoban', [1], wind=0.2)
  with pytest.raises(envs.EnvError, match='max_steps must be >= 1'):
    envs.make_batch('sokoban', [1], max_steps=0)


def test_bad_input_is_refused_in_one_line():
  batch = SokobanBatch([1, 2])
  with pytest.raises(RuntimeError, match='before reset'):
    batch.step(np.zeros(2, np.int32))
  batch.reset()
  for actions, words in ((np.zeros(3, np.int32), 'must be 2 integers'),
                         (np.zeros(2, np.float32), 'must be 2 integers'),
                         (np.array([0, 4]), r'must be in \[0, 4\)'),
                         (np.array([-1, 0]), r'must be in \[0, 4\)')):
    with pytest.raises(ValueError, match=words) as e:
      batch.step(actions)
    assert '\n' not in str(e.value)
  with pytest.raises(ValueError, match='at least one seed'):
    SokobanBatch([])


def test_a_level_open_to_the_edge_is_refused():
  # A Level built by hand (not parsed, so not checked): floor runs to the right edge.
  walls = np.ones((3, 5), bool)
  walls[1, 1:] = False
  level = levels_lib.Level(name='open', index=0, walls=walls, targets=((1, 3),), boxes=((1, 2),),
                           player=(1, 1))
  with pytest.raises(ValueError, match='not closed'):
    SokobanBatch([0], levels=[level])

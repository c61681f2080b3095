"""envs.sokoban_batch.SokobanBatch plays exactly as K single Sokoban environments.

The property test steps the batch and K `SinglePrecisionWrapper(Sokoban(seed=s_k, **options))`
side by side with the same actions, through thousands of episodes (short time limits, so most
end by truncation; solver-driven and tiny levels, so many end solved) on the shipped 1k set, a
Boxoban file and a mixed set of differently sized levels, and compares everything an actor sees
at every step: step types, float32 rewards and discounts (bit for bit), observations, the level
each environment plays, which episodes end, their `episode_info()` and the next episodes' first
observations, a single environment being reset where the batch resets (the call after its LAST
step).
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


def _assert_same_row(out: batch_lib.BatchStep, k: int, want: dm_env.TimeStep, where: str):
  """Row k of the batch's step is the single environment's timestep `want` (a FIRST one: reward
  0, discount 1)."""
  assert out.step_type[k] == want.step_type, (where, out.step_type[k], want.step_type)
  assert out.reward.dtype == out.discount.dtype == np.float32, where
  for name, first in (('reward', 0.0), ('discount', 1.0)):
    g = getattr(out, name)[k]
    w = np.float32(first) if want.first() else getattr(want, name)
    assert isinstance(w, (np.ndarray, np.float32)) and w.dtype == np.float32, (where, name)
    assert g.tobytes() == w.tobytes(), (where, name, g, w)
  _assert_same_image(out.observation[k], want.observation, where)


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
  assert firsts.shape == (k_envs,) + batch.observation_spec().shape
  for k, env in enumerate(singles):
    _assert_same_image(firsts[k], env.reset().observation, f'reset env {k}')
  np.testing.assert_array_equal(batch.level_index, [e.level_index for e in singles])
  plans = {k: list(solutions(int(batch.level_index[k]))) for k in solver_envs}
  reset_next = [False] * k_envs   # the singles' next-step reset
  for t in range(steps):
    actions = rng.integers(num_actions, size=k_envs).astype(np.int32)
    for k in solver_envs:
      if not reset_next[k]:   # a reset call ignores the action: it stays random
        actions[k] = plans[k].pop(0)
    out = batch.step(actions)
    assert out.step_type.shape == out.reward.shape == out.discount.shape == (k_envs,), t
    assert out.step_type.dtype == np.int8, t
    ended = set()
    for k, env in enumerate(singles):
      where = f'step {t} env {k} level {env.level_index}'
      if reset_next[k]:
        want = env.reset()
        seen['resets'] += 1
        if k in solver_envs:
          plans[k] = list(solutions(env.level_index))
      else:
        want = env.step(actions[k])
        seen['steps'] += 1
        seen[f'reward {float(want.reward):+.1f}'] += 1
      _assert_same_row(out, k, want, where)
      reset_next[k] = want.last()
      if want.last():
        ended.add(k)
        info = env.episode_info()
        seen['solved' if info['solved'] else 'truncated'] += 1
        seen[f'last discount {float(want.discount):g}'] += 1
        levels_played.add(env.level_index)
        assert out.ended.get(k) == info, (where, out.ended.get(k), info)
        if k in solver_envs:
          assert info['solved'] and not plans[k], where   # the solution solved it
    assert set(out.ended) == ended, t
    assert batch.level_index.tolist() == [e.level_index for e in singles], t
  seen['levels'] = len(levels_played)
  return seen


def test_shipped_set_random_play_with_short_time_limits():
  seen = _play(list(range(101, 117)), 700, policy_seed=0, max_steps=7)
  assert seen['steps'] + seen['resets'] == 16 * 700
  # Each episode takes its 7 steps and the call that resets it: 87 end in 700 calls.
  assert seen['truncated'] == 16 * 87 and seen['levels'] >= 700   # episodes, distinct levels
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


def test_an_ended_room_is_reset_by_the_next_call_whatever_its_action():
  """With max_steps 1 every episode is one step long, so every other call resets both rooms:
  their actions are checked as any, then change nothing; the first observations are the single
  environments' next ones."""
  first, last = dm_env.StepType.FIRST, dm_env.StepType.LAST
  a, b = SokobanBatch([1, 2], max_steps=1), SokobanBatch([1, 2], max_steps=1)
  singles = [sokoban.Sokoban(seed=s, max_steps=1) for s in (1, 2)]
  np.testing.assert_array_equal(a.reset(), b.reset())
  for env in singles:
    env.reset()
  for t in range(5):
    out = a.step(np.array([0, 1]))
    b.step(np.array([2, 3]))
    for k, env in enumerate(singles):
      ts = env.step(k)   # room k's action in `a`
      assert out.step_type[k] == ts.step_type == last, (t, k)
      _assert_same_image(out.observation[k], ts.observation, f'{t} {k}')
    assert sorted(out.ended) == [0, 1], t
    with pytest.raises(ValueError, match=r'must be in \[0, 4\)'):
      a.step(np.array([0, 9]))
    out, other = a.step(np.array([0, 1])), b.step(np.array([3, 2]))
    assert out.step_type.tolist() == other.step_type.tolist() == [first, first], t
    assert out.reward.tolist() == [0.0, 0.0] and out.discount.tolist() == [1.0, 1.0], t
    assert not out.ended and not other.ended, t
    _assert_same_image(out.observation, other.observation, str(t))
    for k, env in enumerate(singles):
      _assert_same_image(out.observation[k], env.reset().observation, f'{t} {k} reset')


def test_a_level_open_to_the_edge_is_refused():
  # A Level built by hand (not parsed, so not checked): floor runs to the right edge.
  walls = np.ones((3, 5), bool)
  walls[1, 1:] = False
  level = levels_lib.Level(name='open', index=0, walls=walls, targets=((1, 3),), boxes=((1, 2),),
                           player=(1, 1))
  with pytest.raises(ValueError, match='not closed'):
    SokobanBatch([0], levels=[level])

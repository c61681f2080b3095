"""Exact reversibility oracle on Turf and the windy cliff."""
import dataclasses

import pytest

import envs
from envs import oracle

UP, DOWN, LEFT, RIGHT = range(4)


def _bit(r, c):
  return 1 << (r * 10 + c)


# Default Turf: the paper's layout, grass ruined when the agent leaves it. -----------------
def test_turf_step_onto_fresh_grass_is_irreversible():
  # From the start (9, 0) on stone onto fresh grass (9, 1): nothing is ruined yet, but the only
  # way back is to leave (9, 1), which ruins it, so the start state never comes back.
  env = envs.make('turf')
  env.reset()
  start = env.get_state()
  assert start == (9, 0, 0)
  r = oracle.check(env, start, RIGHT)
  assert r.status == 'irreversible' and r.steps_back is None
  assert r.irreversible and not r.reversible
  # The same answer from the search alone, without the position rule of can_reach: the
  # reachable states that keep the mask are exhausted (a few bumps), then it gives up.
  class MaskHintOnly:
    def __init__(self, env):
      self._env = env
      self.num_actions = env.num_actions

    def __getattr__(self, name):
      return getattr(self._env, name)

    def can_reach(self, a, b):
      return (a[2] & ~b[2]) == 0

  r = oracle.check(MaskHintOnly(envs.make('turf')), start, RIGHT)
  assert r.status == 'irreversible' and r.expansions >= 1


def test_turf_leaving_fresh_grass_is_irreversible_and_a_bump_is_not():
  env = envs.make('turf')
  assert oracle.check(env, (9, 1, 0), RIGHT).status == 'irreversible'  # onto grass (9, 2)
  assert oracle.check(env, (9, 1, 0), LEFT).status == 'irreversible'  # back onto stone (9, 0)
  assert oracle.check(env, (9, 1, 0), DOWN) == oracle.OracleResult('reversible', 0)  # border


def test_turf_stone_step_is_reversible():
  env = envs.make('turf')
  r = oracle.check(env, (9, 0, 0), UP)  # (9,0) -> (8,0), both stone
  assert r == oracle.OracleResult('reversible', 1, r.expansions)
  assert r.reversible
  assert oracle.check(env, (2, 5, 0), RIGHT).steps_back == 1  # along the road, row 2


def test_turf_reversible_detour_over_ruined_grass():
  # With (9, 1) and (9, 2) already ruined, walking on them changes nothing irreversible.
  env = envs.make('turf')
  ruined = _bit(9, 1) | _bit(9, 2)
  assert oracle.check(env, (9, 0, ruined), RIGHT) == oracle.OracleResult('reversible', 1, 1)
  assert oracle.check(env, (9, 1, ruined), RIGHT).steps_back == 1
  assert oracle.check(env, (9, 1, ruined), LEFT).steps_back == 1
  # ... but from ruined (9, 2) onto fresh (9, 3) is irreversible.
  assert oracle.check(env, (9, 2, ruined), RIGHT).status == 'irreversible'


def test_turf_border_step_is_reversible_in_zero():
  env = envs.make('turf')
  for ruined in (0, 1):  # fresh or ruined grass corner (0, 0), bump into the top border
    r = oracle.check(env, (0, 0, ruined), UP)
    assert r.status == 'reversible' and r.steps_back == 0


def test_turf_reaching_goal_is_irreversible():
  env = envs.make('turf')
  assert oracle.check(env, (0, 8, 0), RIGHT).status == 'irreversible'  # from the road
  assert oracle.check(env, (1, 9, 0), UP).status == 'irreversible'  # from grass


def _expected_leave(env, state, action):
  """What reversibility must be under ruin='leave', reasoned from the dynamics: a step that
  keeps the ruined set and lands on stone, ruined grass or the same cell can be undone by the
  opposite move (1 step; 0 for a bump); any other non-terminal step cannot (a grown ruined set
  never shrinks, and standing on fresh grass, the way back ruins it)."""
  env.set_state(state)
  ts = env.step(action)
  if ts.last() and ts.discount == 0.0:
    return ('irreversible', None)
  r, c, ruined = env.get_state()
  if ruined != state[2]:
    return ('irreversible', None)
  if (r, c) == state[:2]:
    return ('reversible', 0)
  if env.layout.grass[r, c] and not ruined & _bit(r, c):
    return ('irreversible', None)
  return ('reversible', 1)


@pytest.mark.parametrize('layout', ['paper', 'winding'])
def test_turf_oracle_matches_the_rule_everywhere(layout):
  env = envs.make('turf', layout=layout)
  probe = envs.make('turf', layout=layout)
  grass = env.layout.grass
  some = sum(_bit(r, c) for r in range(10) for c in range(10) if grass[r, c] and (r + c) % 3 == 0)
  counts = {'reversible': 0, 'irreversible': 0}
  for ruined in (0, some):
    for r in range(10):
      for c in range(10):
        if (r, c) == env.layout.goal:
          continue
        for a in range(4):
          got = oracle.check(env, (r, c, ruined), a, max_expansions=5000)
          assert (got.status, got.steps_back) == _expected_leave(probe, (r, c, ruined), a), \
              ((r, c, ruined), a, got)
          counts[got.status] += 1
  assert counts['reversible'] > 100 and counts['irreversible'] > 100


def test_turf_can_reach_never_rules_out_a_reached_state():
  import numpy as np
  for options in ({}, {'ruin': 'enter'}, {'layout': 'winding'}):
    env = envs.make('turf', **options)
    rng = np.random.default_rng(1)
    env.reset()
    states = [env.get_state()]
    for _ in range(119):
      ts = env.step(int(rng.integers(4)))
      if ts.last():
        break
      states.append(env.get_state())
    assert len({s[2] for s in states}) > 3  # some grass was ruined along the way
    for i in range(len(states)):
      for j in range(i, len(states)):
        assert env.can_reach(states[i], states[j]), (options, i, j)
  env = envs.make('turf')
  assert not env.can_reach((9, 1, 0), (9, 0, 0))  # leaving fresh grass ruins it
  assert env.can_reach((9, 1, 0), (9, 1, 0)) and env.can_reach((9, 1, 0), (9, 0, _bit(9, 1)))
  assert envs.make('turf', ruin='enter').can_reach((9, 1, 0), (9, 0, 0))  # no such rule there


def test_turf_same_images_different_labels():
  # Standing on (9, 1), the image does not show whether (9, 1) is fresh or already ruined
  # (the agent covers it): the same pair of images is irreversible in one history, not in the
  # other. The oracle, working on true states, tells them apart.
  import numpy as np
  env = envs.make('turf')
  pairs, labels = [], []
  for history in ([RIGHT], [RIGHT, UP, DOWN]):  # via stone (8, 1), which ruins (9, 1)
    obs = env.reset().observation
    for a in history:
      obs = env.step(a).observation
    state = env.get_state()
    pairs.append((obs, env.step(LEFT).observation))
    labels.append(oracle.check(envs.make('turf'), state, LEFT).status)
  np.testing.assert_array_equal(pairs[0][0], pairs[1][0])
  np.testing.assert_array_equal(pairs[0][1], pairs[1][1])
  assert labels == ['irreversible', 'reversible']


def test_turf_without_hints_is_unknown_for_grass():
  env = envs.make('turf')
  r = oracle.check(env, (9, 0, 0), RIGHT, max_expansions=200, use_hints=False)
  assert r.status == 'unknown' and r.steps_back is None and r.expansions == 200


# The previous layout with grass ruined on entry (this project's Turf before the paper map). -
def _winding_enter():
  return envs.make('turf', layout='winding', ruin='enter')


def test_winding_enter_grass_step_is_irreversible():
  env = _winding_enter()
  env.reset()
  start = env.get_state()  # (1, 1), on stone; (0, 1) above is grass
  assert start == (1, 1, 0)
  assert oracle.check(env, start, UP).status == 'irreversible'
  r = oracle.check(env, start, RIGHT)  # (1,1) -> (1,2), both stone
  assert r == oracle.OracleResult('reversible', 1, r.expansions)


def test_winding_enter_detour_over_ruined_grass_and_border():
  env = _winding_enter()
  ruined = _bit(0, 1) | _bit(0, 2)
  r = oracle.check(env, (0, 1, ruined), RIGHT)
  assert r.status == 'reversible' and r.steps_back == 1
  assert oracle.check(env, (1, 1, ruined), UP).steps_back == 1
  assert oracle.check(env, (0, 0, 1), UP) == oracle.OracleResult('reversible', 0)
  assert oracle.check(env, (7, 8, 0), DOWN).status == 'irreversible'  # goal


def test_winding_enter_leaving_grass_is_reversible():
  # Ruin on entry: once on (0, 1), it is ruined already, so stepping off it and back is fine.
  env = _winding_enter()
  assert oracle.check(env, (0, 1, _bit(0, 1)), DOWN).steps_back == 1
  # ... whereas with ruin on leave the same step ruins (0, 1) for good.
  leave = envs.make('turf', layout='winding')
  assert oracle.check(leave, (0, 1, 0), DOWN).status == 'irreversible'


def test_unknown_when_max_expansions_tiny():
  env = envs.make('cliff')
  assert oracle.check(env, (2, 3), RIGHT, max_expansions=0).status == 'unknown'
  assert oracle.check(env, (2, 3), RIGHT, max_expansions=1).steps_back == 1


def test_cliff_fall_is_irreversible():
  env = envs.make('cliff', wind=0.0)
  r = oracle.check(env, (4, 3), DOWN)
  assert r.status == 'irreversible'


def test_cliff_moves_and_border():
  env = envs.make('cliff')
  assert oracle.check(env, (0, 0), UP) == oracle.OracleResult('reversible', 0)
  assert oracle.check(env, (0, 0), LEFT).steps_back == 0
  assert oracle.check(env, (3, 3), DOWN).steps_back == 1
  assert oracle.check(env, (4, 0), RIGHT).steps_back == 1


def test_exhausted_search_is_irreversible():
  # A toy chain with a one-way door: 0 -> 1 -> 2 -> 3 (action 1), 2 -> 1 (action 0). From 1 the
  # reachable set {1, 2, 3} is finite and excludes 0, so the search exhausts it.
  class OneWay:
    num_actions = 2

    def __init__(self):
      self.s = 0

    def get_state(self):
      return self.s

    def set_state(self, s):
      self.s = s

    def step(self, a):
      import dm_env
      if a == 1 and self.s < 3:
        self.s += 1
      elif a == 0 and self.s == 2:
        self.s = 1
      return dm_env.transition(0.0, None)

  env = OneWay()
  r = oracle.check(env, 0, 1)
  assert r.status == 'irreversible' and r.expansions == 3
  r = oracle.check(env, 1, 1)
  assert r.status == 'reversible' and r.steps_back == 1


def test_time_limit_does_not_affect_search():
  env = envs.make('turf', max_steps=1)  # every step truncates; set_state resets the counter
  env.reset()
  assert oracle.check(env, (9, 0, 0), UP) == oracle.OracleResult('reversible', 1, 1)
  assert oracle.check(env, (9, 0, 0), RIGHT).status == 'irreversible'
  env = envs.make('cliff', max_steps=1)
  assert oracle.check(env, (2, 2), LEFT).steps_back == 1


def test_stochastic_env_refused():
  with pytest.raises(ValueError):
    oracle.check(envs.make('cliff', wind=0.2), (0, 0), UP)


def test_result_is_frozen_and_labels():
  r = oracle.OracleResult('reversible', 1)
  with pytest.raises(dataclasses.FrozenInstanceError):
    r.status = 'unknown'
  env = envs.make('turf')
  states = [(9, 0, 0), (9, 0, 0), (9, 0, 0)]
  labels = oracle.label_transitions(env, states, [RIGHT, UP, RIGHT], max_expansions=1000)
  assert [x.status for x in labels] == ['irreversible', 'reversible', 'irreversible']
  with pytest.raises(ValueError):
    oracle.label_transitions(env, states, [UP])

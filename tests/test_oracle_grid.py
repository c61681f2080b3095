"""Exact reversibility oracle on Turf and the windy cliff."""
import dataclasses

import pytest

import envs
from envs import oracle

UP, DOWN, LEFT, RIGHT = range(4)


def test_turf_grass_step_is_irreversible():
  env = envs.make('turf')
  env.reset()
  start = env.get_state()  # (1, 1), on stone; (0, 1) above is grass
  r = oracle.check(env, start, UP)
  assert r.status == 'irreversible' and r.steps_back is None
  assert r.irreversible and not r.reversible


def test_turf_stone_step_is_reversible():
  env = envs.make('turf')
  env.reset()
  r = oracle.check(env, env.get_state(), RIGHT)  # (1,1) -> (1,2), both stone
  assert r == oracle.OracleResult('reversible', 1, r.expansions)
  assert r.reversible


def test_turf_reversible_detour_over_ruined_grass():
  # With (0,1) and (0,2) already ruined, stepping on them again changes nothing irreversible.
  env = envs.make('turf')
  ruined = (1 << 1) | (1 << 2)
  r = oracle.check(env, (0, 1, ruined), RIGHT)
  assert r.status == 'reversible' and r.steps_back == 1
  # From (1,1) stepping onto ruined (0,1): back in one step.
  assert oracle.check(env, (1, 1, ruined), UP).steps_back == 1


def test_turf_border_step_is_reversible_in_zero():
  env = envs.make('turf')
  r = oracle.check(env, (0, 0, 1), UP)  # ruined corner, bump into the top border
  assert r.status == 'reversible' and r.steps_back == 0


def test_turf_reaching_goal_is_irreversible():
  env = envs.make('turf')
  assert oracle.check(env, (7, 8, 0), DOWN).status == 'irreversible'


def test_turf_without_hints_is_unknown_for_grass():
  env = envs.make('turf')
  r = oracle.check(env, (1, 1, 0), UP, max_expansions=200, use_hints=False)
  assert r.status == 'unknown' and r.steps_back is None and r.expansions == 200


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
  assert oracle.check(env, (1, 1, 0), RIGHT) == oracle.OracleResult('reversible', 1, 1)
  assert oracle.check(env, (1, 1, 0), UP).status == 'irreversible'
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
  states = [(1, 1, 0), (1, 1, 0), (1, 1, 0)]
  labels = oracle.label_transitions(env, states, [UP, RIGHT, UP], max_expansions=1000)
  assert [x.status for x in labels] == ['irreversible', 'reversible', 'irreversible']
  with pytest.raises(ValueError):
    oracle.label_transitions(env, states, [UP])

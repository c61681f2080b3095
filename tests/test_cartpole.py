import numpy as np
import pytest

import envs


def test_reward_free_cartpole_gives_zero_reward_and_terminates_on_fall():
  env = envs.make('cartpole', seed=3, reward_free=True)
  ts = env.reset()
  assert ts.first() and ts.observation.dtype == np.float32 and ts.observation.shape == (4,)
  steps = 0
  while True:
    ts = env.step(1)   # always push right: the pole falls
    steps += 1
    assert ts.reward == 0.0
    if ts.last():
      break
  assert ts.discount == 0.0 and steps < 200


def test_step_limit_truncates_with_discount_one():
  env = envs.make('cartpole', seed=0, max_steps=5)
  env.reset()
  for i in range(5):
    ts = env.step(i % 2)
  assert ts.last() and ts.discount == 1.0 and ts.reward == 1.0


def test_same_seed_same_episode():
  a, b = envs.make('cartpole', seed=11), envs.make('cartpole', seed=11)
  np.testing.assert_array_equal(a.reset().observation, b.reset().observation)


def test_specs_and_render():
  env = envs.make('cartpole', seed=0, max_steps=50_000)
  assert env.action_spec().num_values == 2 and env.action_spec().dtype == np.int32
  env.reset()
  frame = env.render()
  assert frame.dtype == np.uint8 and frame.ndim == 3 and frame.shape[2] == 3


def test_bad_names_and_options_are_one_line_errors():
  with pytest.raises(envs.EnvError, match="unknown environment 'cartpol'"):
    envs.make('cartpol')
  with pytest.raises(envs.EnvError, match="has no option"):
    envs.make('cartpole', reward=True)
  with pytest.raises(envs.EnvError, match='max_steps must be >= 1'):
    envs.make('cartpole', max_steps=0)


def test_episode_info_names_what_ended_the_episode():
  env = envs.make('cartpole', seed=3, reward_free=True)
  env.reset()
  while not env.step(1).last():   # the pole falls over
    pass
  assert env.episode_info() == {'fell_angle': 1.0, 'fell_position': 0.0}
  # The cart far off centre with the pole upright: the position ends it.
  env.set_state(((2.39, 1.0, 0.0, 0.0), 0))
  assert env.step(1).last()
  assert env.episode_info() == {'fell_angle': 0.0, 'fell_position': 1.0}
  # The step limit ends it: neither.
  env = envs.make('cartpole', seed=0, max_steps=3)
  env.reset()
  for i in range(3):
    ts = env.step(i % 2)
  assert ts.last() and env.episode_info() == {'fell_angle': 0.0, 'fell_position': 0.0}

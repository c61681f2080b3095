"""Episodes of any Gymnasium environment into the project's episode datasets (RLDS,
`estimators.dataset`), for psi and phi (`estimators.train`).

    from estimators import gym_episodes
    gym_episodes.collect('FrozenLake-v1', 2000, 'data/frozenlake', env_kwargs={'is_slippery': False})
    gym_episodes.collect(my_env, 500, 'data/mine', policy=my_policy)   # an env object

The environment needs Discrete actions (phi has one output per action). Observations are kept as
they are when the space is a Box (images stay images, for the conv networks); any other space
(Discrete, MultiDiscrete, Dict, Tuple) is flattened to a vector with Gymnasium's own
`FlattenObservation` (a Discrete state becomes its one-hot, int64), the same wrapper a user puts in
front of the RAE/RAC wrappers (`agents.gym_wrappers`) so that they see what psi and phi saw.
The dataset's environment is recorded as 'gym:<id>' with the `gymnasium.make` options, and
whether observations were flattened.

`policy(observation, action_space, rng) -> action` (None: uniformly random actions, from
`rng`); `max_episode_steps` cuts episodes that would not end (recorded as truncations).
"""
from typing import Any, Callable, Dict, Iterator, Optional, Tuple

import numpy as np

Policy = Callable[[Any, Any, np.random.Generator], Any]


class GymDataError(ValueError):
  """An environment, policy or option that collection cannot use, said in one line."""


def needs_flattening(space) -> bool:
  """Whether observations of `space` are flattened before they are stored (module docstring)."""
  from gymnasium import spaces
  return not isinstance(space, spaces.Box)


def prepare_env(env, env_kwargs: Optional[Dict[str, Any]] = None,
            max_episode_steps: Optional[int] = None) -> Tuple[Any, str, bool]:
  """(the environment to collect from, its dataset name, whether its observations are
  flattened) for a Gymnasium id or env object."""
  import gymnasium
  from gymnasium import spaces
  kwargs = dict(env_kwargs or {})
  if isinstance(env, str):
    name = f'gym:{env}'
    if max_episode_steps:
      kwargs['max_episode_steps'] = int(max_episode_steps)
    try:
      env = gymnasium.make(env, **kwargs)
    except gymnasium.error.Error as e:
      raise GymDataError(f'gymnasium.make({name[4:]!r}): {e}') from None
    except TypeError as e:
      raise GymDataError(f'gymnasium.make({name[4:]!r}) options {kwargs}: {e}') from None
  else:
    if kwargs:
      raise GymDataError('env_kwargs apply to a Gymnasium id, not to an environment object')
    spec = getattr(env, 'spec', None)
    name = f'gym:{spec.id}' if spec is not None else f'gym:{type(env.unwrapped).__name__}'
    if max_episode_steps:
      env = gymnasium.wrappers.TimeLimit(env, int(max_episode_steps))
  if not isinstance(env.action_space, spaces.Discrete):
    raise GymDataError(f'{name} has actions {env.action_space}; psi/phi datasets need Discrete '
                       'actions')
  flattened = needs_flattening(env.observation_space)
  if flattened:
    env = gymnasium.wrappers.FlattenObservation(env)
  return env, name, flattened


def _observation(env, obs) -> np.ndarray:
  return np.asarray(obs, dtype=env.observation_space.dtype)


def episodes(env, count: int, policy: Optional[Policy] = None, seed: int = 0
             ) -> Iterator:
  """`count` episodes of `policy` in the prepared `env`, as `estimators.dataset.Episode`s
  (discount 0 where the environment terminated, 1 where it was truncated)."""
  from estimators.dataset import Episode
  rng = np.random.default_rng(seed)
  env.action_space.seed(int(rng.integers(2**31 - 1)))
  for k in range(count):
    obs, _ = env.reset(seed=int(seed) + k)
    observations, actions, rewards, discounts = [_observation(env, obs)], [], [], []
    while True:
      action = env.action_space.sample() if policy is None else policy(obs, env.action_space, rng)
      if not env.action_space.contains(action):
        raise GymDataError(f'the policy returned {action!r}, not an action of {env.action_space}')
      obs, reward, terminated, truncated, _ = env.step(action)
      observations.append(_observation(env, obs))
      actions.append(int(action))
      rewards.append(float(reward))
      discounts.append(0.0 if terminated else 1.0)
      if terminated or truncated:
        break
    yield Episode(np.stack(observations), np.asarray(actions, np.int32),
                  np.asarray(rewards, np.float32), np.asarray(discounts, np.float32), None)


def collect(env, count: int, out: str, policy: Optional[Policy] = None, seed: int = 0,
            env_kwargs: Optional[Dict[str, Any]] = None, max_episode_steps: Optional[int] = None,
            overwrite: bool = False) -> dict:
  """Writes `count` episodes of a Gymnasium id or env object to the dataset `out`; returns its
  metadata (`estimators.dataset.write_episodes`)."""
  from estimators import dataset
  if count < 1:
    raise GymDataError(f'episodes must be >= 1, got {count}')
  env, name, flattened = prepare_env(env, env_kwargs, max_episode_steps)
  space = env.observation_space
  return dataset.write_episodes(
      out, episodes(env, count, policy, seed), name, dict(env_kwargs or {}),
      int(env.action_space.n), {'shape': list(space.shape), 'dtype': np.dtype(space.dtype).name},
      overwrite=overwrite,
      extra_metadata={'policy': 'random' if policy is None else getattr(policy, '__name__', 'given'),
                      'observations_flattened': bool(flattened), 'seed': int(seed),
                      'max_episode_steps': max_episode_steps})

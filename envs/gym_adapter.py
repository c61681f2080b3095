"""The project's environments as Gymnasium environments: one adapter over the dm_env ones
(`envs.make`), which stay the only implementation.

    import gymnasium
    import envs.gym_adapter   # registers the ids below
    env = gymnasium.make('noturningback/Turf-v0', oracle=True)
    env = gymnasium.make('noturningback/Sokoban-v0', levels='sokoban_7x7_2boxes_train')

Ids and the dm_env environment each one builds (keyword options of `gymnasium.make` are the
environment's own options, `envs.make`; an id's defaults are the paper's setting):

    noturningback/Turf-v0                 turf
    noturningback/WindyCliff-v0           cliff
    noturningback/CartpolePlus-v0         cartpole, reward 1 a step, 50,000-step limit (Sec. 5.4)
    noturningback/CartpoleRewardFree-v0   cartpole, no reward, 200-step limit (Sec. 5.1)
    noturningback/Sokoban-v0              sokoban

A dm_env step becomes Gymnasium's (obs, reward, terminated, truncated, info): discount 0 ends
the episode as `terminated`, the time limit (discount 1) as `truncated`. The step that ends an
episode carries the environment's own episode measures in `info` (`episode_info()`, e.g. Turf's
`ruined_grass`). With `oracle=True` (the discrete deterministic environments only: Turf, the
cliff without wind, Sokoban) every step's `info` also holds the exact oracle's answer for that
transition (`envs.oracle.check` on a second copy of the environment): `reversible` ('reversible',
'irreversible' or 'unknown') and `steps_back` (the shortest way back, -1 when none is known). It
is off by default: a breadth-first search per step costs far more than the step.

Seeding follows Gymnasium: `reset(seed=s)` rebuilds the dm_env environment with seed s; a first
`reset()` without one draws the seed from Gymnasium's own generator.
"""
from typing import Any, Dict, Optional, Tuple

import gymnasium
import numpy as np
from dm_env import specs
from gymnasium import spaces

import envs
from envs import oracle as oracle_lib
from envs import presets

NAMESPACE = 'noturningback'
# id -> (environment name, default options).
IDS: Dict[str, Tuple[str, Dict[str, Any]]] = {
    f'{NAMESPACE}/Turf-v0': ('turf', {}),
    f'{NAMESPACE}/WindyCliff-v0': ('cliff', {}),
    f'{NAMESPACE}/CartpolePlus-v0': ('cartpole', {'reward_free': False, 'max_steps': 50_000}),
    f'{NAMESPACE}/CartpoleRewardFree-v0': ('cartpole', {'reward_free': True, 'max_steps': 200}),
    f'{NAMESPACE}/Sokoban-v0': ('sokoban', {}),
}
# Oracle results that found no way back carry this in `steps_back` (info values stay ints).
NO_WAY_BACK = -1


def observation_space(spec) -> spaces.Box:
  """The Box of a dm_env array spec: its bounds where it has them, else the dtype's range
  (uint8 images 0-255, which Stable-Baselines3 then reads as images) or unbounded floats."""
  dtype = np.dtype(spec.dtype)
  if isinstance(spec, specs.BoundedArray):
    low = np.broadcast_to(spec.minimum, spec.shape).astype(dtype)
    high = np.broadcast_to(spec.maximum, spec.shape).astype(dtype)
  elif dtype.kind in 'ui':
    low = np.full(spec.shape, np.iinfo(dtype).min, dtype)
    high = np.full(spec.shape, np.iinfo(dtype).max, dtype)
  else:
    low = np.full(spec.shape, -np.inf, dtype)
    high = np.full(spec.shape, np.inf, dtype)
  return spaces.Box(low, high, tuple(spec.shape), dtype)


class DmEnvAdapter(gymnasium.Env):
  """One dm_env environment of `envs.make` behind Gymnasium's API (see the module docstring)."""

  metadata = {'render_modes': ['rgb_array'], 'render_fps': 8}

  def __init__(self, name: str, render_mode: Optional[str] = None, oracle: bool = False,
               **options: Any):
    if render_mode is not None and render_mode not in self.metadata['render_modes']:
      raise ValueError(f'render_mode must be one of {self.metadata["render_modes"]} or None, '
                       f'got {render_mode!r}')
    self.name, self.options, self.render_mode = name, dict(options), render_mode
    self._env = envs.make(name, seed=0, **self.options)   # bad names and options fail here
    self._oracle_env = None
    if oracle:
      if not presets.get(name).oracle_states or not getattr(self._env, 'deterministic', True):
        raise ValueError(f'environment {name!r} with options {self.options} has no exact oracle '
                         '(it needs discrete deterministic states: turf, cliff with wind=0, '
                         'sokoban)')
      self._oracle_env = envs.make(name, seed=0, **self.options)
    self._seeded = False
    self.observation_space = observation_space(self._env.observation_spec())
    self.action_space = spaces.Discrete(int(self._env.action_spec().num_values))

  @property
  def dm_env(self):
    """The dm_env environment being stepped (e.g. for `get_state()`)."""
    return self._env

  def _obs(self, timestep) -> np.ndarray:
    return np.asarray(timestep.observation, dtype=self.observation_space.dtype)

  def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
    super().reset(seed=seed)
    if seed is not None or not self._seeded:
      # The dm_env environments take their seed when built: a new seed is a new copy.
      env_seed = seed if seed is not None else int(self.np_random.integers(2**31 - 1))
      self._env = envs.make(self.name, seed=int(env_seed), **self.options)
      self._seeded = True
    return self._obs(self._env.reset()), {}

  def step(self, action):
    if not self.action_space.contains(action):
      raise ValueError(f'action {action!r} is not in {self.action_space}')
    info: Dict[str, Any] = {}
    before = self._env.get_state() if self._oracle_env is not None else None
    ts = self._env.step(int(action))
    if ts.first():
      # A step after the episode ended restarts it, as the dm_env environments do; Gymnasium
      # leaves that step undefined, so say so rather than return a made-up transition.
      raise RuntimeError('step() called after the episode ended; call reset() first')
    if self._oracle_env is not None:
      result = oracle_lib.check(self._oracle_env, before, int(action))
      info['reversible'] = result.status
      info['steps_back'] = NO_WAY_BACK if result.steps_back is None else int(result.steps_back)
    ended = ts.last()
    terminated = bool(ended and float(ts.discount) == 0.0)
    truncated = bool(ended and not terminated)
    if ended:
      info.update(self._env.episode_info())
    reward = 0.0 if ts.reward is None else float(ts.reward)
    return self._obs(ts), reward, terminated, truncated, info

  def render(self):
    if self.render_mode == 'rgb_array':
      return self._env.render()
    return None


def make_id(env_id: str, **kwargs: Any) -> DmEnvAdapter:
  """The environment of a registered id with `kwargs` over its defaults (what the registry's
  entry point calls)."""
  name, defaults = IDS[env_id]
  return DmEnvAdapter(name, **{**defaults, **kwargs})


def register() -> None:
  """Registers every id of IDS with Gymnasium (again is harmless)."""
  for env_id in IDS:
    if env_id not in gymnasium.registry:
      # A string entry point (not a closure), so that the spec pickles for subprocess vector
      # environments.
      gymnasium.register(id=env_id, entry_point=f'{__name__}:make_id', kwargs={'env_id': env_id})


register()

"""K environments stepped together: the interface an actor's loop drives.

An actor steps its K environments in lock-step and acts on all K observations with one call, so
what it needs from them is one batched step: every environment takes its action, those whose
episode ends are reset at once, and the loop gets back each environment's timestep (for its
adder) and the K observations to act on next. `BatchedEnvironment` is that step;

  - `EnvironmentList` does it for any list of dm_env environments, one `step()` after another
    (exactly what the loop did before it had this interface, so every environment without a
    vectorised version behaves as it always did);
  - `envs.sokoban_batch.SokobanBatch` does it for K Sokoban rooms with numpy operations over the
    batch, because there the K Python-level steps were most of an actor's time.

Timesteps are plain `dm_env.TimeStep`s (the adders take them), as after Acme's
`SinglePrecisionWrapper`: float32 rewards and discounts.
"""
import abc
from typing import Dict, List, NamedTuple, Sequence

import dm_env
import numpy as np


class Finished(NamedTuple):
  """An environment whose episode ended on this step, and what it started with."""
  info: Dict[str, float]     # its `episode_info()` at the end of the episode ({} if it has none)
  first: dm_env.TimeStep     # the FIRST timestep of its next episode (it was reset at once)


class BatchStep(NamedTuple):
  """The result of one step of K environments."""
  timesteps: Sequence[dm_env.TimeStep]  # K: each environment's result of its action (MID or LAST)
  observations: np.ndarray   # [K, ...]: what the next actions are chosen from (the first
                             # observation of a new episode where one ended)
  reached: np.ndarray        # [K, ...]: the observations of `timesteps`, the states the actions
                             # led to (the same array as `observations` when no episode ended)
  finished: Dict[int, Finished]   # environment index -> its ended episode (empty on most steps)


class BatchedEnvironment(abc.ABC):
  """K environments of one kind, stepped together; environment k keeps its own episodes.

  The specs are those of one environment. `reset()` starts every environment's first episode;
  `step(actions)` then takes one action per environment and resets, within the same call, every
  environment whose episode ended, so there is no separate reset between episodes.
  """

  @property
  @abc.abstractmethod
  def num_envs(self) -> int:
    """K."""

  @abc.abstractmethod
  def reset(self) -> List[dm_env.TimeStep]:
    """Starts a new episode in every environment; their K FIRST timesteps."""

  @abc.abstractmethod
  def step(self, actions: np.ndarray) -> BatchStep:
    """One action per environment (K integers); see BatchStep."""

  @abc.abstractmethod
  def observation_spec(self):
    """One environment's observation spec."""

  @abc.abstractmethod
  def action_spec(self):
    """One environment's action spec."""

  @abc.abstractmethod
  def reward_spec(self):
    """One environment's reward spec."""

  @abc.abstractmethod
  def discount_spec(self):
    """One environment's discount spec."""


class EnvironmentList(BatchedEnvironment):
  """A list of dm_env environments stepped one after another (the reference behaviour)."""

  def __init__(self, environments: Sequence[dm_env.Environment]):
    self._envs = list(environments)
    if not self._envs:
      raise ValueError('EnvironmentList needs at least one environment')

  @property
  def num_envs(self) -> int:
    return len(self._envs)

  @property
  def environments(self) -> List[dm_env.Environment]:
    return self._envs

  def reset(self) -> List[dm_env.TimeStep]:
    return [env.reset() for env in self._envs]

  def step(self, actions: np.ndarray) -> BatchStep:
    if len(actions) != len(self._envs):
      raise ValueError(f'{len(actions)} actions for {len(self._envs)} environments')
    timesteps, finished = [], {}
    for k, env in enumerate(self._envs):
      ts = env.step(actions[k])
      timesteps.append(ts)
      if ts.last():
        info = env.episode_info() if hasattr(env, 'episode_info') else {}
        finished[k] = Finished(info, env.reset())
    observations = np.stack([finished[k].first.observation if k in finished else ts.observation
                             for k, ts in enumerate(timesteps)])
    reached = observations
    if finished:
      reached = observations.copy()
      for k in finished:
        reached[k] = timesteps[k].observation
    return BatchStep(timesteps, observations, reached, finished)

  def observation_spec(self):
    return self._envs[0].observation_spec()

  def action_spec(self):
    return self._envs[0].action_spec()

  def reward_spec(self):
    return self._envs[0].reward_spec()

  def discount_spec(self):
    return self._envs[0].discount_spec()

"""K environments stepped together: the interface an actor's loop drives.

An actor steps its K environments in lock-step and acts on all K observations with one call, so
what it needs from them is one batched step: every environment takes its action and the loop gets
back K step types, rewards, discounts and observations as arrays, one row per environment.
`BatchedEnvironment` is that step;

  - `EnvironmentList` does it for any list of dm_env environments, one `step()` after another
    (so every environment without a vectorised version plays as it always did);
  - `envs.sokoban_batch.SokobanBatch` does it for K Sokoban rooms with numpy operations over the
    batch, because there the K Python-level steps were most of an actor's time.

Episodes end with next-step reset (as envpool and gymnasium's vector environments do it): an
environment whose step was LAST is reset by the next `step` call instead of being stepped, and
that call's row for it is the FIRST of its new episode. So every call gives exactly one row per
environment, and the actor's writer adds one row per environment per actor step, the
episode-closing LAST row and the next episode's FIRST row each in their own step. Rewards and
discounts are float32, as after Acme's `SinglePrecisionWrapper`.
"""
import abc
from typing import Dict, List, NamedTuple, Sequence

import dm_env
import numpy as np

FIRST = np.int8(dm_env.StepType.FIRST)
MID = np.int8(dm_env.StepType.MID)
LAST = np.int8(dm_env.StepType.LAST)


class BatchStep(NamedTuple):
  """The result of one step of K environments: row k is environment k's."""
  step_type: np.ndarray      # [K] int8 dm_env.StepType values: FIRST where this call reset the
                             # environment (its previous step was LAST; its action was ignored),
                             # LAST where its episode ended on this step, MID otherwise
  reward: np.ndarray         # [K] float32 (0 where FIRST)
  discount: np.ndarray       # [K] float32 (1 where FIRST)
  observation: np.ndarray    # [K, ...]: each environment's observation after this call (the final
                             # one where LAST, the new episode's first where FIRST): what the next
                             # actions are chosen from
  ended: Dict[int, Dict[str, float]]   # environment index -> its `episode_info()` ({} if it has
                                       # none) for each one whose step is LAST (empty on most
                                       # steps)


class BatchedEnvironment(abc.ABC):
  """K environments of one kind, stepped together; environment k keeps its own episodes.

  The specs are those of one environment. `reset()` starts every environment's first episode;
  `step(actions)` then takes one action per environment, except that an environment whose
  previous step was LAST is reset instead (its action is checked like the others, then ignored).
  Resetting on the next call rather than at once keeps every call at one row per environment,
  which is what the actor's writer adds per actor step; each environment still plays the
  episodes, and makes the random draws at its resets, that it would alone.
  """

  @property
  @abc.abstractmethod
  def num_envs(self) -> int:
    """K."""

  @abc.abstractmethod
  def reset(self) -> np.ndarray:
    """Starts a new episode in every environment; their K first observations, stacked."""

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
    self._reset_next = [False] * len(self._envs)   # whose previous step was LAST

  @property
  def num_envs(self) -> int:
    return len(self._envs)

  @property
  def environments(self) -> List[dm_env.Environment]:
    return self._envs

  def reset(self) -> np.ndarray:
    self._reset_next = [False] * len(self._envs)
    return np.stack([env.reset().observation for env in self._envs])

  def step(self, actions: np.ndarray) -> BatchStep:
    if len(actions) != len(self._envs):
      raise ValueError(f'{len(actions)} actions for {len(self._envs)} environments')
    k_envs = len(self._envs)
    step_type = np.empty(k_envs, np.int8)
    reward = np.zeros(k_envs, np.float32)
    discount = np.ones(k_envs, np.float32)
    observations, ended = [], {}
    for k, env in enumerate(self._envs):
      if self._reset_next[k]:
        ts = env.reset()
        step_type[k] = FIRST
      else:
        ts = env.step(actions[k])
        step_type[k] = ts.step_type
        if not ts.first():   # a dm_env environment stepped before its first reset starts one
          reward[k], discount[k] = ts.reward, ts.discount
        if ts.last():
          ended[k] = env.episode_info() if hasattr(env, 'episode_info') else {}
      self._reset_next[k] = ts.last()
      observations.append(ts.observation)
    return BatchStep(step_type, reward, discount, np.stack(observations), ended)

  def observation_spec(self):
    return self._envs[0].observation_spec()

  def action_spec(self):
    return self._envs[0].action_spec()

  def reward_spec(self):
    return self._envs[0].reward_spec()

  def discount_spec(self):
    return self._envs[0].discount_spec()

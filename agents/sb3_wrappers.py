"""RAC and RAE around a Stable-Baselines3 VecEnv (the optional `sb3` extra: `make setup-sb3`):
the same shield and penalty as `agents.gym_wrappers`, scoring all sub-environments in one
batched network call per vector step.

    from stable_baselines3.common.env_util import make_vec_env
    from agents import sb3_wrappers
    venv = sb3_wrappers.shield_vec_env(make_vec_env('noturningback/Turf-v0', n_envs=8),
                                       'ckpt/turf.ckpt', beta=0.2)
    MaskablePPO('MlpPolicy', venv).learn(500_000)   # reads venv's action masks

SB3-contrib reads masks through `env_method('action_masks')` (one call per sub-environment);
the shield answers it from the masks it computed for all copies at the last step. SB3 resets a
finished copy within the same step (its final observation in info['terminal_observation']):
the penalty scores the transition to that final observation. Stable-Baselines3 is imported when
a wrapper is built, so this module imports without it.
"""
import functools
from typing import Optional

import numpy as np

from agents import gym_wrappers

MASK_METHOD = 'action_masks'   # SB3-contrib's name for it


@functools.lru_cache(maxsize=None)
def _shield_class():
  """RAC's wrapper class, built on SB3's VecEnvWrapper on first use."""
  from stable_baselines3.common.vec_env import VecEnvWrapper

  class ShieldVecEnv(VecEnvWrapper):
    """RAC: `action_masks()` [N, A] from one phi call per step; step_mode None or 'replace'."""

    def __init__(self, venv, scores: gym_wrappers.EstimatorScores, beta: float,
                 step_mode: Optional[str]):
      super().__init__(venv)
      self.scores, self.beta, self.step_mode = scores, beta, step_mode
      self._phi = self._mask = None
      self._actions = None

    def _judge(self, obs) -> None:
      self._phi, self._mask = self.scores.phi_and_mask(obs, self.beta)

    def action_masks(self) -> np.ndarray:
      if self._mask is None:
        raise RuntimeError('call reset() before action_masks()')
      return self._mask.copy()

    def reset(self):
      obs = self.venv.reset()
      self._judge(obs)
      return obs

    def step_async(self, actions) -> None:
      actions = np.asarray(actions)
      if self.step_mode == 'replace' and self._mask is not None:
        allowed = self._mask[np.arange(len(actions)), actions.astype(np.int64)]
        actions = np.where(allowed, actions, np.argmax(self._phi, axis=1)).astype(actions.dtype)
      self.venv.step_async(actions)

    def step_wait(self):
      obs, rewards, dones, infos = self.venv.step_wait()
      self._judge(obs)
      return obs, rewards, dones, infos

    def _indices(self, indices):
      if indices is None:
        return range(self.num_envs)
      return [indices] if isinstance(indices, int) else indices

    def env_method(self, method_name, *method_args, indices=None, **method_kwargs):
      if method_name == MASK_METHOD:
        masks = self.action_masks()
        return [masks[i] for i in self._indices(indices)]
      return self.venv.env_method(method_name, *method_args, indices=indices, **method_kwargs)

    def get_attr(self, attr_name, indices=None):
      if attr_name == MASK_METHOD:
        return [self.action_masks for _ in self._indices(indices)]
      return self.venv.get_attr(attr_name, indices)

    def has_attr(self, attr_name) -> bool:
      return attr_name == MASK_METHOD or self.venv.has_attr(attr_name)

  return ShieldVecEnv


@functools.lru_cache(maxsize=None)
def _penalty_class():
  """RAE's wrapper class, built on SB3's VecEnvWrapper on first use."""
  from stable_baselines3.common.vec_env import VecEnvWrapper

  class PenaltyVecEnv(VecEnvWrapper):
    """RAE: reward + r_beta(psi(x, x')), psi of all copies' transitions in one call."""

    def __init__(self, venv, scores: gym_wrappers.EstimatorScores, beta: float, lam: float,
                 reward_form: str):
      super().__init__(venv)
      self.scores, self.beta, self.lam, self.reward_form = scores, beta, lam, reward_form
      self._obs = None

    def reset(self):
      obs = self.venv.reset()
      self._obs = np.array(obs)
      return obs

    def step_wait(self):
      obs, rewards, dones, infos = self.venv.step_wait()
      after = np.array(obs)
      for i in np.flatnonzero(dones):
        after[i] = infos[i]['terminal_observation']
      psi, penalty = self.scores.psi_and_penalty(self._obs, after, self.beta, self.lam,
                                                 self.reward_form)
      for i, info in enumerate(infos):
        info.update(raw_reward=float(rewards[i]), psi=float(psi[i]),
                    rae_penalty=float(penalty[i]))
      self._obs = np.array(obs)
      return obs, (rewards + penalty).astype(rewards.dtype, copy=False), dones, infos

  return PenaltyVecEnv


def shield_vec_env(venv, checkpoint, beta: float, step_mode: Optional[str] = None):
  """`venv` behind RAC (see the module docstring); `checkpoint` as for
  `gym_wrappers.ReversibilityShield`."""
  if step_mode not in (None, 'replace'):
    raise gym_wrappers.WrapperError(f"step_mode of a vector shield must be None or 'replace', "
                                    f'got {step_mode!r}')
  scores = gym_wrappers.checkpoint_scores(checkpoint, need_phi=True)
  scores.check_space(venv.observation_space, gym_wrappers.discrete_actions(venv.action_space))
  return _shield_class()(venv, scores, gym_wrappers.check_beta('beta', beta), step_mode)


def penalty_vec_env(venv, checkpoint, beta: float, lam: float, reward_form: str = 'paper'):
  """`venv` behind RAE (see the module docstring)."""
  scores = gym_wrappers.checkpoint_scores(checkpoint, need_phi=False)
  scores.check_space(venv.observation_space)
  return _penalty_class()(venv, scores, *gym_wrappers.check_penalty(beta, lam, reward_form))

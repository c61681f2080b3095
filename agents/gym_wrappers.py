"""RAE and RAC for any Gymnasium agent: wrappers that load an estimator checkpoint
(`estimators.train --out`) and apply the paper's penalty or shield around an environment.

    import gymnasium
    from agents import gym_wrappers
    env = gym_wrappers.ReversibilityShield(gymnasium.make('noturningback/Turf-v0'),
                                           'ckpt/turf.ckpt', beta=0.2)
    env.action_masks()        # bool [A]: what SB3-contrib's MaskablePPO reads

ReversibilityShield (RAC): `action_masks()` is `agents.shield.allowed_actions` of phi on the
current observation: the actions with phi(x, a) >= beta, or argmax phi alone when none reaches
beta (our shield's fallback; `info['shield_fallback']`). An agent that samples from its policy
restricted to that mask acts with the paper's rejection-sampled policy pi_bar. For agents that
cannot take masks, `step_mode`:
  'replace': an action outside the mask is replaced by argmax phi (the authors' release;
             `info['shield_replaced']`);
  'refuse':  an action outside the mask is not taken: the environment is not stepped, the same
             observation comes back with reward 0 and `info['shield_refused']` (single
             environments only: a vector environment steps all its copies at once).
ReversibilityPenalty (RAE): reward + r_beta(psi(x, x')) (`agents.rewards.rae_reward`, the paper's
-lam 1[psi > beta] psi by default), with the raw reward (`info['raw_reward']`), psi's score
(`info['psi']`) and the penalty (`info['rae_penalty']`).

Each has a vector form (`ReversibilityShieldVector`, `ReversibilityPenaltyVector`, for a
`gymnasium.vector.VectorEnv`, e.g. CleanRL's) that scores all sub-environments in one batched
network call per vector step; `agents.sb3_wrappers` does the same for Stable-Baselines3's VecEnv.
phi is computed once per observation (after reset and after each step), so `action_masks()`
costs nothing.
"""
from typing import Any, Optional, Tuple

import gymnasium
import numpy as np

STEP_MODES = (None, 'replace', 'refuse')


class WrapperError(ValueError):
  """A checkpoint or environment the wrapper cannot use, said in one line."""


def _loaded_checkpoint(checkpoint):
  from estimators import checkpoint as checkpoint_lib
  if isinstance(checkpoint, checkpoint_lib.EstimatorCheckpoint):
    return checkpoint
  return checkpoint_lib.load(str(checkpoint))


class EstimatorScores:
  """psi, and phi with the shield's mask, for a batch of observations: at most one jitted call
  each per batch.

  Both are deterministic functions of the observations, so each answer is kept in a cache keyed
  by the observations' bytes (and the settings): a batch whose rows were all seen before costs
  no network call, and the rows not seen are scored together in one call, padded to the
  batch's size so that each batch size compiles once. In a gridworld such as Turf an agent
  behind the shield meets a few hundred distinct frames, and the network's cost vanishes;
  where observations never repeat (continuous states) the cache only adds the hashing.
  `cache_size` answers are kept (then the cache starts again); 0 turns it off."""

  def __init__(self, checkpoint, need_phi: bool = False, cache_size: int = 100_000):
    import jax

    from agents import rewards, shield
    from estimators import training
    self.ckpt = _loaded_checkpoint(checkpoint)
    if need_phi and self.ckpt.phi_params is None:
      raise WrapperError(f'estimator checkpoint {self.ckpt.path} has no phi (train it with '
                         'estimators.train --phi): the shield needs phi')
    est = self.ckpt.estimators
    self.num_actions = int(self.ckpt.num_actions)
    self.obs_shape = tuple(int(s) for s in self.ckpt.obs_shape)
    self.obs_dtype = np.dtype(self.ckpt.obs_dtype)
    self.cache_size = int(cache_size)
    self._cache: dict = {}
    self.network_calls = 0   # jitted calls made (the cache's misses come in batches)

    def phi_mask(params, x, beta):
      phi = training.phi_prob(est, params, x)
      return phi, shield.allowed_actions(phi, beta)

    def psi_penalty(params, x, y, beta, lam, form):
      psi = training.psi_prob(est, params, x, y)
      return psi, rewards.rae_reward(psi, beta, lam, form)

    self._phi_mask = jax.jit(phi_mask)
    self._psi_penalty = jax.jit(psi_penalty, static_argnums=5)

  def check_space(self, space: gymnasium.Space, num_actions: Optional[int] = None) -> None:
    """WrapperError when observations of `space` (one environment's) or its action count do
    not fit the checkpoint."""
    shape = tuple(getattr(space, 'shape', None) or ())
    if shape != self.obs_shape:
      raise WrapperError(f'the environment\'s observations have shape {list(shape)}; the '
                         f'estimator checkpoint {self.ckpt.path} expects {list(self.obs_shape)}')
    if num_actions is not None and num_actions != self.num_actions:
      raise WrapperError(f'the environment has {num_actions} actions; the estimator checkpoint '
                         f'{self.ckpt.path} has {self.num_actions}')

  def _batch(self, obs) -> np.ndarray:
    obs = np.asarray(obs)
    if obs.shape[1:] != self.obs_shape:
      raise WrapperError(f'observations of shape {list(obs.shape[1:])}; the estimator checkpoint '
                         f'expects {list(self.obs_shape)}')
    return np.ascontiguousarray(obs, dtype=self.obs_dtype)

  def _cached(self, kind: str, keys, arrays, compute):
    """Per row: compute(*arrays restricted to the rows missing from the cache) for those, the
    cache for the others; returns the outputs over all rows. The answers of each `kind` sit in
    arrays (one row per key), so a batch of hits is one dict lookup per row and one gather."""
    if not self.cache_size:
      self.network_calls += 1
      return [np.asarray(o) for o in compute(*arrays)]
    index, tables = self._cache.setdefault(kind, ({}, []))
    if len(index) + len(keys) > self.cache_size:
      index.clear()   # full: start again (before the lookups, so every hit stays)
    ids = [index.get(key, -1) for key in keys]
    if -1 in ids:
      missing = {}
      for i, key in enumerate(keys):
        if ids[i] < 0 and key not in missing:
          missing[key] = i
      rows = list(missing.values())
      rows += rows[:1] * (len(keys) - len(rows))    # pad to the batch's compiled size
      outs = [np.asarray(o)[:len(missing)] for o in compute(*(a[rows] for a in arrays))]
      self.network_calls += 1
      start = len(index)
      if not tables:
        tables.extend(np.empty((max(len(keys), 64),) + o.shape[1:], o.dtype) for o in outs)
      if start + len(missing) > len(tables[0]):     # grow by doubling
        size = max(2 * len(tables[0]), start + len(missing))
        for t, table in enumerate(tables):
          grown = np.empty((size,) + table.shape[1:], table.dtype)
          grown[:start] = table[:start]
          tables[t] = grown
      for t, o in enumerate(outs):
        tables[t][start:start + len(missing)] = o
      for j, key in enumerate(missing):
        index[key] = start + j
      ids = [index[key] for key in keys]
    ids = np.asarray(ids)
    return [table[ids] for table in tables]

  def phi_and_mask(self, obs, beta: float) -> Tuple[np.ndarray, np.ndarray]:
    """phi [N, A] and the shield's mask [N, A] (bool) for observations [N, ...]."""
    x, beta = self._batch(obs), np.float32(beta)
    keys = [(float(beta), row.tobytes()) for row in x] if self.cache_size else None
    phi, mask = self._cached('phi', keys, (x,),
                             lambda xs: self._phi_mask(self.ckpt.phi_params, xs, beta))
    return phi, mask

  def psi_and_penalty(self, obs, next_obs, beta: float, lam: float,
                      form: str = 'paper') -> Tuple[np.ndarray, np.ndarray]:
    """psi(x, x') [N] and the RAE reward r_beta(psi) [N] (<= 0) for transitions [N, ...]."""
    x, y = self._batch(obs), self._batch(next_obs)
    settings = (float(beta), float(lam), form)
    keys = ([settings + (a.tobytes(), b.tobytes()) for a, b in zip(x, y)]
            if self.cache_size else None)
    psi, penalty = self._cached('psi', keys, (x, y), lambda xs, ys: self._psi_penalty(
        self.ckpt.psi_params, xs, ys, np.float32(beta), np.float32(lam), form))
    return psi, penalty


def check_beta(name: str, value: float) -> float:
  value = float(value)
  if not 0.0 <= value <= 1.0:
    raise WrapperError(f'{name} must be in [0, 1], got {value}')
  return value


def check_penalty(beta: float, lam: float, form: str) -> Tuple[float, float, str]:
  from agents import rewards
  if form not in rewards.REWARD_FORMS:
    raise WrapperError(f'reward_form must be one of {", ".join(rewards.REWARD_FORMS)}, '
                       f'got {form!r}')
  lam = float(lam)
  if not np.isfinite(lam) or lam < 0:
    raise WrapperError(f'lam must be a finite number >= 0, got {lam}')
  return check_beta('beta', beta), lam, form


def checkpoint_scores(checkpoint, need_phi: bool) -> EstimatorScores:
  if isinstance(checkpoint, EstimatorScores):
    if need_phi and checkpoint.ckpt.phi_params is None:
      raise WrapperError(f'estimator checkpoint {checkpoint.ckpt.path} has no phi')
    return checkpoint
  return EstimatorScores(checkpoint, need_phi=need_phi)


def discrete_actions(space) -> int:
  if not isinstance(space, gymnasium.spaces.Discrete):
    raise WrapperError(f'the shield needs a Discrete action space, got {space}')
  return int(space.n)


class ReversibilityShield(gymnasium.Wrapper):
  """RAC for one environment (module docstring). `checkpoint`: a path, a loaded
  `EstimatorCheckpoint` or an `EstimatorScores` (to share one compiled network)."""

  def __init__(self, env: gymnasium.Env, checkpoint, beta: float,
               step_mode: Optional[str] = None):
    super().__init__(env)
    if step_mode not in STEP_MODES:
      raise WrapperError(f'step_mode must be one of {STEP_MODES}, got {step_mode!r}')
    self.scores = checkpoint_scores(checkpoint, need_phi=True)
    self.scores.check_space(env.observation_space, discrete_actions(env.action_space))
    self.beta = check_beta('beta', beta)
    self.step_mode = step_mode
    self._obs = self._phi = self._mask = None

  def _judge(self, obs) -> None:
    phi, mask = self.scores.phi_and_mask(np.asarray(obs)[None], self.beta)
    self._obs, self._phi, self._mask = obs, phi[0], mask[0]

  def action_masks(self) -> np.ndarray:
    """bool [A]: the actions the shield allows in the current observation."""
    if self._mask is None:
      raise gymnasium.error.ResetNeeded('call reset() before action_masks()')
    return self._mask.copy()

  @property
  def phi(self) -> np.ndarray:
    """phi [A] of the current observation."""
    return self._phi

  def reset(self, **kwargs):
    obs, info = self.env.reset(**kwargs)
    self._judge(obs)
    return obs, info

  def step(self, action):
    if self._mask is None:
      raise gymnasium.error.ResetNeeded('call reset() before step()')
    allowed = bool(self._mask[int(action)])
    fallback = not bool((self._phi >= np.float32(self.beta)).any())   # as the jitted mask compares
    extra = {'shield_allowed': allowed, 'shield_fallback': fallback}
    if not allowed and self.step_mode == 'refuse':
      return self._obs, 0.0, False, False, dict(extra, shield_refused=True)
    if not allowed and self.step_mode == 'replace':
      action = int(np.argmax(self._phi))
      extra['shield_replaced'] = True
    obs, reward, terminated, truncated, info = self.env.step(action)
    self._judge(obs)
    return obs, reward, terminated, truncated, {**info, **extra}


class ReversibilityPenalty(gymnasium.Wrapper):
  """RAE for one environment (module docstring); the paper's Turf setting is beta 0.8,
  lam 0.1 (`envs.presets.thresholds('turf', 'rae')`)."""

  def __init__(self, env: gymnasium.Env, checkpoint, beta: float, lam: float,
               reward_form: str = 'paper'):
    super().__init__(env)
    self.scores = checkpoint_scores(checkpoint, need_phi=False)
    self.scores.check_space(env.observation_space)
    self.beta, self.lam, self.reward_form = check_penalty(beta, lam, reward_form)
    self._obs = None

  def reset(self, **kwargs):
    obs, info = self.env.reset(**kwargs)
    self._obs = obs
    return obs, info

  def step(self, action):
    if self._obs is None:
      raise gymnasium.error.ResetNeeded('call reset() before step()')
    obs, reward, terminated, truncated, info = self.env.step(action)
    psi, penalty = self.scores.psi_and_penalty(np.asarray(self._obs)[None], np.asarray(obs)[None],
                                               self.beta, self.lam, self.reward_form)
    self._obs = obs
    info = dict(info, raw_reward=reward, psi=float(psi[0]), rae_penalty=float(penalty[0]))
    return obs, float(reward) + float(penalty[0]), terminated, truncated, info


def _autoreset_mode(env) -> str:
  """'next_step' (Gymnasium's default: the step after an episode's end resets that copy and
  ignores its action) or 'same_step' (the reset observation comes back at once, the final one
  in info['final_obs'])."""
  mode = (getattr(env, 'metadata', None) or {}).get('autoreset_mode')
  name = str(getattr(mode, 'value', mode or 'next_step')).lower()
  if name not in ('next_step', 'same_step'):
    raise WrapperError(f'autoreset mode {name!r} is not supported (next_step or same_step)')
  return name


class ReversibilityShieldVector(gymnasium.vector.VectorWrapper):
  """RAC for a Gymnasium vector environment: `action_masks()` is [N, A], from one phi call for
  all N copies per step. `step_mode` None or 'replace' (module docstring)."""

  def __init__(self, env, checkpoint, beta: float, step_mode: Optional[str] = None):
    super().__init__(env)
    if step_mode not in (None, 'replace'):
      raise WrapperError(f'step_mode of a vector shield must be None or \'replace\', '
                         f'got {step_mode!r}')
    self.scores = checkpoint_scores(checkpoint, need_phi=True)
    self.scores.check_space(env.single_observation_space, discrete_actions(env.single_action_space))
    self.beta = check_beta('beta', beta)
    self.step_mode = step_mode
    self._phi = self._mask = None

  def _judge(self, obs) -> None:
    self._phi, self._mask = self.scores.phi_and_mask(obs, self.beta)

  def action_masks(self) -> np.ndarray:
    if self._mask is None:
      raise gymnasium.error.ResetNeeded('call reset() before action_masks()')
    return self._mask.copy()

  def reset(self, **kwargs):
    obs, info = self.env.reset(**kwargs)
    self._judge(obs)
    return obs, info

  def step(self, actions):
    if self._mask is None:
      raise gymnasium.error.ResetNeeded('call reset() before step()')
    actions = np.asarray(actions)
    allowed = self._mask[np.arange(len(actions)), actions.astype(np.int64)]
    if self.step_mode == 'replace':
      actions = np.where(allowed, actions, np.argmax(self._phi, axis=1)).astype(actions.dtype)
    obs, reward, terminated, truncated, info = self.env.step(actions)
    self._judge(obs)
    info = dict(info, shield_allowed=allowed)
    return obs, reward, terminated, truncated, info


class ReversibilityPenaltyVector(gymnasium.vector.VectorWrapper):
  """RAE for a Gymnasium vector environment: psi of all N transitions in one call per step.
  A copy's reset step (next_step autoreset) is no transition: it gets no penalty and psi NaN;
  under same_step autoreset the transition ends at info['final_obs']."""

  def __init__(self, env, checkpoint, beta: float, lam: float, reward_form: str = 'paper'):
    super().__init__(env)
    self.scores = checkpoint_scores(checkpoint, need_phi=False)
    self.scores.check_space(env.single_observation_space)
    self.beta, self.lam, self.reward_form = check_penalty(beta, lam, reward_form)
    self._autoreset = _autoreset_mode(env)
    self._obs = self._resetting = None

  def reset(self, **kwargs):
    obs, info = self.env.reset(**kwargs)
    self._obs = np.array(obs)
    self._resetting = np.zeros(len(self._obs), bool)
    return obs, info

  def step(self, actions):
    if self._obs is None:
      raise gymnasium.error.ResetNeeded('call reset() before step()')
    obs, reward, terminated, truncated, info = self.env.step(actions)
    ended = np.logical_or(terminated, truncated)
    after = np.array(obs)
    if self._autoreset == 'same_step' and ended.any():
      for i in np.flatnonzero(ended):
        after[i] = info['final_obs'][i]
    psi, penalty = self.scores.psi_and_penalty(self._obs, after, self.beta, self.lam,
                                               self.reward_form)
    real = ~self._resetting
    penalty = np.where(real, penalty, 0.0).astype(np.float32)
    psi = np.where(real, psi, np.nan).astype(np.float32)
    self._obs = np.array(obs)
    self._resetting = ended if self._autoreset == 'next_step' else np.zeros_like(ended)
    raw = np.asarray(reward)
    info = dict(info, raw_reward=raw, psi=psi, rae_penalty=penalty)
    return obs, (raw + penalty).astype(raw.dtype, copy=False), terminated, truncated, info


def wrapper_line(wrapper: Any) -> str:
  """One line naming a wrapper's checkpoint and settings (for logs)."""
  parts = [type(wrapper).__name__, f'checkpoint {wrapper.scores.ckpt.path}',
           f'beta {wrapper.beta:g}']
  if hasattr(wrapper, 'lam'):
    parts += [f'lam {wrapper.lam:g}', f'form {wrapper.reward_form}']
  if getattr(wrapper, 'step_mode', None):
    parts.append(f'step_mode {wrapper.step_mode}')
  return ', '.join(parts)

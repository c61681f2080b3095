"""The actor: IMPALA or random policy, with RAE reward shaping and/or the RAC shield.

Per step, one jitted call selects the action (policy forward pass; with RAC also phi for all
actions in the same batched pass and the shield). With RAE, one jitted psi(x_t, x_t+1) call in
`observe` adds r_beta to the reward *written to Reverb*; the environment loop still logs the
extrinsic return, and the intrinsic return is reported separately.
"""
import dataclasses
import time
from typing import Dict, Optional

import dm_env
import jax
import jax.numpy as jnp
import numpy as np
from acme import adders, core
from acme.jax import variable_utils
from acme.utils import observers as observers_lib

from agents import rewards, shield
from agents.networks import DUMMY_CORE_STATE
from estimators import networks as est_nets
from estimators import training as est_training

MODES = ('none', 'rae', 'rac')


@dataclasses.dataclass(frozen=True)
class ReversibilityConfig:
  """How the actors use the estimators. Parsed once from flags (launch.config)."""
  mode: str = 'none'            # 'none' | 'rae' | 'rac'
  beta: float = 0.7             # threshold (RAE: psi > beta is irreversible; RAC: phi < beta rejected)
  lam: float = 1.0              # RAE penalty weight lambda
  reward_form: str = 'paper'    # 'paper': -lam 1[psi>beta] psi ; 'hinge': -lam max(psi-beta, 0)
  shield_mode: str = 'rejection'  # 'rejection' (paper) | 'replace' (authors' release)

  def __post_init__(self):
    if self.mode not in MODES:
      raise ValueError(f'unknown mode {self.mode!r}; expected one of {MODES}')
    if not 0.0 <= self.beta <= 1.0:
      raise ValueError(f'threshold beta={self.beta} is impossible: it must lie in [0, 1]')
    if self.lam < 0:
      raise ValueError(f'RAE weight lambda must be >= 0, got {self.lam}')
    if self.reward_form not in rewards.REWARD_FORMS:
      raise ValueError(f'unknown reward form {self.reward_form!r}; expected {rewards.REWARD_FORMS}')
    if self.shield_mode not in shield.SHIELD_MODES:
      raise ValueError(f'unknown shield mode {self.shield_mode!r}; expected {shield.SHIELD_MODES}')


class ReversibilityAwareActor(core.Actor):

  def __init__(self, num_actions: int, rev: ReversibilityConfig, seed: int,
               policy_forward=None,                 # IMPALANetworks.forward_fn, None = random policy
               policy_client: Optional[variable_utils.VariableClient] = None,
               estimators: Optional[est_nets.Estimators] = None,
               estimator_client: Optional[variable_utils.VariableClient] = None,
               frozen_estimator_params=None,        # (psi, phi) from a checkpoint, overrides client
               adder: Optional[adders.Adder] = None):
    self._rev = rev
    self._num_actions = num_actions
    self._policy_client = policy_client
    self._estimator_client = estimator_client
    self._frozen = frozen_estimator_params
    self._adder = adder
    self._key = jax.random.PRNGKey(seed)
    uses_estimators = rev.mode in ('rae', 'rac')
    if uses_estimators and estimators is None:
      raise ValueError(f'mode {rev.mode!r} needs estimator networks')
    if uses_estimators and estimator_client is None and frozen_estimator_params is None:
      raise ValueError(f'mode {rev.mode!r} needs an estimator source (online node or checkpoint)')

    def logits_fn(policy_params, obs):
      if policy_forward is None:
        return jnp.zeros((num_actions,), jnp.float32)
      (logits, _), _ = policy_forward(policy_params, obs, DUMMY_CORE_STATE)
      return logits

    def select(policy_params, phi_params, key, obs):
      key, sub = jax.random.split(key)
      logits = logits_fn(policy_params, obs)
      if rev.mode == 'rac':
        phi = est_training.phi_prob(estimators, phi_params, obs[None])[0]
        out = shield.shield(sub, logits, phi, rev.beta, rev.shield_mode)
        # Behaviour logits for V-trace: those of pi_bar, the policy that acted.
        return out.action, out.logits, out.rejected, out.fallback, key
      action = jax.random.categorical(sub, logits).astype(jnp.int32)
      return action, logits, jnp.bool_(False), jnp.bool_(False), key

    def intrinsic(psi_params, obs, next_obs):
      p = est_training.psi_prob(estimators, psi_params, obs[None], next_obs[None])[0]
      return rewards.rae_reward(p, rev.beta, rev.lam, rev.reward_form), p

    self._initial_psi = self._last_psi = None
    self._psi_fetches = 0
    self._select = jax.jit(select)
    self._intrinsic = jax.jit(intrinsic)
    self._prev_obs = None
    self._prev_logits = None
    self._reset_episode_stats()

  # Parameters ---------------------------------------------------------------------------------
  def _policy_params(self):
    return self._policy_client.params if self._policy_client is not None else None

  def estimator_params(self):
    """(psi_params, phi_params) currently used by this actor."""
    if self._frozen is not None:
      return self._frozen
    if self._estimator_client is None:
      return None, None
    psi, phi = self._estimator_client.params
    if psi is not self._last_psi:  # a fresh fetch from the precedence learner arrived
      self._last_psi = psi
      if self._initial_psi is None:
        self._initial_psi = psi
      else:
        self._psi_fetches += 1
    return psi, phi

  # Acme Actor API -----------------------------------------------------------------------------
  def select_action(self, observation):
    _, phi = self.estimator_params() if self._rev.mode == 'rac' else (None, None)
    action, logits, rejected, fallback, self._key = self._select(
        self._policy_params(), phi, self._key, observation)
    self._prev_logits = logits
    if self._rev.mode == 'rac':
      self._stats['rejections'] += int(rejected)
      self._stats['shield_fallbacks'] += int(fallback)
    return np.asarray(action)

  def observe_first(self, timestep: dm_env.TimeStep):
    self._prev_obs = timestep.observation
    self._reset_episode_stats()
    if self._adder is not None:
      self._adder.add_first(timestep)

  def observe(self, action, next_timestep: dm_env.TimeStep):
    if self._rev.mode == 'rae':
      psi_params, _ = self.estimator_params()
      r_int, p = self._intrinsic(psi_params, self._prev_obs, next_timestep.observation)
      r_int = float(r_int)
      self._stats['intrinsic_return'] += r_int
      self._stats['penalised_steps'] += int(r_int < 0)
      self._stats['max_psi'] = max(self._stats['max_psi'], float(p))
      next_timestep = next_timestep._replace(
          reward=np.asarray(next_timestep.reward + r_int, dtype=np.float32))
    self._prev_obs = next_timestep.observation
    if self._adder is not None:
      self._adder.add(action, next_timestep,
                      extras={'logits': self._prev_logits, 'core_state': DUMMY_CORE_STATE})

  def update(self, wait: bool = False):
    if self._policy_client is not None:
      self._policy_client.update(wait)
    if self._estimator_client is not None and self._frozen is None:
      self._estimator_client.update(wait)

  # Episode statistics (read by ActorStatsObserver) ---------------------------------------------
  def _reset_episode_stats(self):
    self._stats = {'intrinsic_return': 0.0, 'penalised_steps': 0, 'max_psi': 0.0,
                   'rejections': 0, 'shield_fallbacks': 0}

  def episode_stats(self) -> Dict[str, float]:
    keys = {'rae': ('intrinsic_return', 'penalised_steps', 'max_psi'),
            'rac': ('rejections', 'shield_fallbacks'), 'none': ()}[self._rev.mode]
    stats = {k: self._stats[k] for k in keys}
    if self._estimator_client is not None and self._frozen is None:
      stats['psi_fetches'] = self._psi_fetches
      stats['psi_change'] = self.psi_change()
    return stats

  def psi_change(self) -> float:
    """L2 norm of (current psi params - first psi params this actor received)."""
    if self._initial_psi is None or self._last_psi is self._initial_psi:
      return 0.0
    diffs = jax.tree_util.tree_map(lambda a, b: np.sum(np.square(np.asarray(a) - np.asarray(b))),
                                   self._last_psi, self._initial_psi)
    return float(np.sqrt(sum(jax.tree_util.tree_leaves(diffs))))


class EpisodeMetricsObserver(observers_lib.EnvLoopObserver):
  """Adds the environment's `episode_info()` and the actor's RAE/RAC statistics to episode logs."""

  def __init__(self, actor: Optional[ReversibilityAwareActor] = None):
    self._actor = actor
    self._env = None

  def observe_first(self, env, timestep):
    self._env = env

  def observe(self, env, timestep, action):
    pass

  def get_metrics(self):
    metrics = {'unix_time': time.time()}
    info = getattr(self._env, 'episode_info', None)
    if info is not None:
      metrics.update(info())
    if self._actor is not None:
      metrics.update(self._actor.episode_stats())
    return metrics

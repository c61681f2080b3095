"""IMPALA's V-trace actor-critic loss, with the episode-boundary filler step masked out.

Acme's SequenceAdder (period T-1, no break at episode ends) writes, after the last real step of
an episode, a *filler* step: the final observation with action 0, reward 0, discount 0 and zero
logits; the next episode continues in the same sequence. Acme 0.4.0's loss trains on that step
as if it were real: it regresses V(final observation) to 0 (wrong after a time-limit truncation),
pushes the policy towards action 0, and -- because V-trace corrections are accumulated backwards
-- its error leaks into the last real step's target. On Cartpole that made runs collapse.

Here the filler step t (the step right before a `start_of_episode`) is neutralised: its reward is
set to stop_gradient(V(x_t)) with discount 0, so its TD error and correction are exactly zero and
nothing propagates through it; its policy-gradient, value and entropy terms are masked, and the
mean is taken over real steps only.
"""
from typing import Dict, Tuple

import jax
import jax.numpy as jnp
import rlax


def masked_vtrace(values: jnp.ndarray, logits: jnp.ndarray, behaviour_logits: jnp.ndarray,
                  actions: jnp.ndarray, rewards: jnp.ndarray, discounts: jnp.ndarray,
                  start_of_episode: jnp.ndarray, *, discount: float,
                  max_abs_reward: float = jnp.inf, lambda_: float = 1.0):
  """V-trace over one sequence with the filler step neutralised: (vtrace, rhos, real), where
  real[t] = 1 for the T-1 real steps and 0 for a filler step. lambda_ < 1 mixes each target's
  bootstrap towards the one-step value (Espeholt et al. 2018, Remark 2; c_t = lambda min(1, rho_t)),
  as rlax defines it."""
  rewards = jnp.clip(rewards, -max_abs_reward, max_abs_reward)
  # filler[t] = step t is the dummy step that closes an episode (the next step starts one).
  filler = start_of_episode[1:].astype(bool)
  real = (~filler).astype(jnp.float32)
  v_tm1, v_t = values[:-1], values[1:]
  r_t = jnp.where(filler, jax.lax.stop_gradient(v_tm1), rewards[:-1])
  discount_t = jnp.where(filler, 0.0, discounts[:-1] * discount)
  rhos = rlax.categorical_importance_sampling_ratios(logits[:-1], behaviour_logits[:-1], actions[:-1])
  vtrace = rlax.vtrace_td_error_and_advantage(v_tm1=v_tm1, v_t=v_t, r_t=r_t,
                                              discount_t=discount_t, rho_tm1=rhos,
                                              lambda_=lambda_)
  return vtrace, rhos, real


def vtrace_loss_terms(logits: jnp.ndarray, values: jnp.ndarray, actions: jnp.ndarray, vtrace,
                      rhos: jnp.ndarray, real: jnp.ndarray, *, baseline_cost: float,
                      entropy_cost: float, advantage_shift: float = 0.0,
                      advantage_scale: float = 1.0) -> Tuple[jnp.ndarray, Dict[str, jnp.ndarray]]:
  """The loss of one sequence from its `masked_vtrace` (so a learner that needs the batch's
  advantages first computes V-trace once)."""
  v_tm1 = values[:-1]
  critic = jnp.square(vtrace.errors) * real
  advantages = (vtrace.pg_advantage - advantage_shift) / advantage_scale
  pg = rlax.policy_gradient_loss(logits[:-1], actions[:-1], advantages, real)
  entropy = rlax.entropy_loss(logits[:-1], real)
  n_real = jnp.maximum(jnp.sum(real), 1.0)
  # rlax's pg/entropy losses are means over T-1 weighted by `real`; rescale to a mean over real steps.
  scale = (real.shape[0]) / n_real
  pg, entropy = pg * scale, entropy * scale
  critic = jnp.sum(critic) / n_real
  loss = pg + baseline_cost * critic + entropy_cost * entropy
  return loss, {'policy_loss': pg, 'critic_loss': critic, 'entropy_loss': entropy,
                'real_fraction': n_real / real.shape[0],
                **vtrace_diagnostics(logits[:-1], v_tm1, vtrace, rhos, real)}


def normalising_moments(advantages: jnp.ndarray, real: jnp.ndarray, eps: float = 1e-8):
  """(mean, std + eps) of the advantages of the real steps of a whole batch ([B, T-1] each),
  without gradient: PPO's per-minibatch advantage normalisation."""
  n = jnp.maximum(jnp.sum(real), 1.0)
  mean = jnp.sum(advantages * real) / n
  var = jnp.sum(jnp.square(advantages - mean) * real) / n
  return jax.lax.stop_gradient(mean), jax.lax.stop_gradient(jnp.sqrt(var) + eps)


def vtrace_diagnostics(logits: jnp.ndarray, v_tm1: jnp.ndarray, vtrace, rhos: jnp.ndarray,
                       real: jnp.ndarray) -> Dict[str, jnp.ndarray]:
  """What a learning curve alone does not show, over the real steps of one sequence: how random
  the policy is, what the critic predicts and how well, how large the advantages are, and how
  far the behaviour policy is from the learner's (V-trace's truncation at rho = 1)."""
  n = jnp.maximum(jnp.sum(real), 1.0)
  mean = lambda x: jnp.sum(x * real) / n
  std = lambda x: jnp.sqrt(jnp.maximum(mean(jnp.square(x)) - jnp.square(mean(x)), 0.0))
  log_pi = jax.nn.log_softmax(logits)
  targets = vtrace.errors + v_tm1   # V-trace's value targets v_s
  adv = vtrace.pg_advantage
  return {'policy_entropy': mean(-jnp.sum(jnp.exp(log_pi) * log_pi, axis=-1)),
          'value_mean': mean(v_tm1), 'value_std': std(v_tm1), 'value_target_mean': mean(targets),
          'value_explained_variance': 1.0 - jnp.square(std(vtrace.errors)) /
                                      jnp.maximum(jnp.square(std(targets)), 1e-8),
          'advantage_mean': mean(adv), 'advantage_std': std(adv),
          'advantage_abs_max': jnp.max(jnp.abs(adv) * real),
          'rho_mean': mean(rhos), 'rho_clipped_fraction': mean((rhos > 1.0).astype(jnp.float32)),
          'log_rho_abs_mean': mean(jnp.abs(jnp.log(jnp.maximum(rhos, 1e-8))))}


def self_imitation_loss(logits: jnp.ndarray, values: jnp.ndarray, actions: jnp.ndarray,
                        returns: jnp.ndarray, *, value_cost: float
                        ) -> Tuple[jnp.ndarray, Dict[str, jnp.ndarray]]:
  """Self-imitation (Oh et al., 2018) over a batch of N past steps ([N, A] logits, [N] values,
  actions and discounted returns-to-go): imitate an action, and raise V towards the return, only
  where the return that followed beat the current estimate, (R - V)+. Steps whose return is no
  better than V contribute nothing, so a buffer may hold poor episodes too."""
  gap = returns - values
  positive = jnp.maximum(gap, 0.0)
  log_pi_a = jnp.take_along_axis(jax.nn.log_softmax(logits), actions[:, None], axis=-1)[:, 0]
  policy = -jnp.mean(log_pi_a * jax.lax.stop_gradient(positive))
  value = 0.5 * jnp.mean(jnp.square(positive))
  return policy + value_cost * value, {
      'sil_policy_loss': policy, 'sil_value_loss': value,
      'sil_positive_fraction': jnp.mean((gap > 0).astype(jnp.float32)),
      'sil_gap_mean': jnp.mean(positive)}

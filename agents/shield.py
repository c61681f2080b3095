"""RAC: shields a policy from actions whose estimated reversibility phi(x, a) is below beta.

'rejection' (the paper, eq. rejection-sampling): pi_bar(a|x) = pi(a|x) 1[phi(x,a) >= beta] / Z.
  When *no* action qualifies (Z = 0) the paper's policy is undefined; we fall back to the most
  reversible action (argmax phi), the least bad choice, and count it as a fallback.
'replace' (the authors' release): sample a ~ pi; if phi(x, a) < beta, take argmax_a phi(x, a).

The actor writes the logits of the policy that actually acted (`acting_logits`) as IMPALA's
behaviour logits, so V-trace's importance ratio pi(a|x) / pi_bar(a|x) corrects for the shield.
Those logits also carry the shield's mask: the actions pi_bar may take are exactly those whose
behaviour logit is not NEVER (in both modes: the actions with phi >= beta, or argmax phi alone
when none has), so the learner can restrict its own policy to them (`allowed_by_behaviour`,
`masked_logits`: invalid-action masking, Huang and Ontanon 2020), and then the policy that
learns is the policy that acts.
"""
from typing import NamedTuple

import jax
import jax.numpy as jnp

SHIELD_MODES = ('rejection', 'replace')
# Log-probability standing for "never": finite, so the learner's log-softmax, importance ratios
# and losses stay finite (exp underflows to exactly 0 against any real logit).
NEVER = -1e9


class ShieldOutput(NamedTuple):
  action: jnp.ndarray       # [] the action taken
  rejected: jnp.ndarray     # [] bool: the policy's choice was (or would have been) overridden
  fallback: jnp.ndarray     # [] bool: no action reached beta, argmax phi was taken
  logits: jnp.ndarray       # [A] finite logits of pi_bar, the policy that acted


def shielded_logits(logits: jnp.ndarray, phi: jnp.ndarray, beta: float) -> jnp.ndarray:
  """Logits of pi_bar: -inf on actions below beta; unchanged when no action qualifies."""
  ok = phi >= beta
  any_ok = jnp.any(ok, axis=-1, keepdims=True)
  return jnp.where(ok | ~any_ok, logits, -jnp.inf)


def acting_logits(logits: jnp.ndarray, phi: jnp.ndarray, beta: float,
                  mode: str = 'rejection') -> jnp.ndarray:
  """Finite logits [A] of the shielded policy pi_bar that `shield` samples from.

  'rejection': pi restricted to actions with phi >= beta; when none qualifies, all mass on
  argmax phi. 'replace': pi(a) on qualifying actions, plus the mass of every rejected action on
  argmax phi. Actions pi_bar never takes get NEVER.
  """
  log_pi = jax.nn.log_softmax(logits)
  ok = phi >= beta
  is_best = jnp.arange(logits.shape[-1]) == jnp.argmax(phi)
  if mode == 'rejection':
    return jnp.where(jnp.any(ok), jnp.where(ok, log_pi, NEVER), jnp.where(is_best, 0.0, NEVER))
  if mode == 'replace':
    pi = jnp.exp(log_pi)
    p_bar = jnp.where(ok, pi, 0.0) + jnp.where(is_best, jnp.sum(jnp.where(ok, 0.0, pi)), 0.0)
    return jnp.where(p_bar > 0, jnp.log(jnp.where(p_bar > 0, p_bar, 1.0)), NEVER)
  raise ValueError(f'unknown RAC shield mode {mode!r}; expected one of {SHIELD_MODES}')


def allowed_actions(phi: jnp.ndarray, beta: float) -> jnp.ndarray:
  """The actions pi_bar may take [..., A] (bool): phi >= beta, or argmax phi alone when no
  action reaches beta (the same set in both modes)."""
  ok = phi >= beta
  best = jnp.arange(phi.shape[-1]) == jnp.argmax(phi, axis=-1)[..., None]
  return jnp.where(jnp.any(ok, axis=-1, keepdims=True), ok, best)


def allowed_by_behaviour(behaviour_logits: jnp.ndarray) -> jnp.ndarray:
  """The shield's mask as the actor acted, read back from its behaviour logits [..., A]: the
  actions whose logit is not NEVER. Without a shield (and on the episode-closing filler step,
  whose logits are zero) every action is allowed."""
  return behaviour_logits > NEVER / 2


def masked_logits(logits: jnp.ndarray, allowed: jnp.ndarray) -> jnp.ndarray:
  """The learner's logits restricted to `allowed`: NEVER elsewhere, so a masked action has
  probability 0 and no gradient, and the log-softmax renormalises over the allowed ones. Where
  every action is allowed, `logits` unchanged (bit for bit)."""
  return jnp.where(allowed, logits, NEVER)


def shield(key: jnp.ndarray, logits: jnp.ndarray, phi: jnp.ndarray, beta: float,
           mode: str = 'rejection') -> ShieldOutput:
  """Samples one action for a single state (logits, phi: [A])."""
  k_pi, k_bar = jax.random.split(key)
  proposed = jax.random.categorical(k_pi, logits)
  best = jnp.argmax(phi)
  ok = phi >= beta
  none_ok = ~jnp.any(ok)
  if mode == 'rejection':
    action = jax.random.categorical(k_bar, shielded_logits(logits, phi, beta))
    action = jnp.where(none_ok, best, action)
  elif mode == 'replace':
    action = jnp.where(ok[proposed], proposed, best)
  else:
    raise ValueError(f'unknown RAC shield mode {mode!r}; expected one of {SHIELD_MODES}')
  return ShieldOutput(action.astype(jnp.int32), ~ok[proposed], none_ok,
                      acting_logits(logits, phi, beta, mode))

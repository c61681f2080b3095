"""RAC: shields a policy from actions whose estimated reversibility phi(x, a) is below beta.

'rejection' (the paper, eq. rejection-sampling): pi_bar(a|x) = pi(a|x) 1[phi(x,a) >= beta] / Z.
  When *no* action qualifies (Z = 0) the paper's policy is undefined; we fall back to the most
  reversible action (argmax phi), the least bad choice, and count it as a fallback.
'replace' (the authors' release): sample a ~ pi; if phi(x, a) < beta, take argmax_a phi(x, a).
"""
from typing import NamedTuple

import jax
import jax.numpy as jnp

SHIELD_MODES = ('rejection', 'replace')


class ShieldOutput(NamedTuple):
  action: jnp.ndarray       # [] the action taken
  rejected: jnp.ndarray     # [] bool: the policy's choice was (or would have been) overridden
  fallback: jnp.ndarray     # [] bool: no action reached beta, argmax phi was taken


def shielded_logits(logits: jnp.ndarray, phi: jnp.ndarray, beta: float) -> jnp.ndarray:
  """Logits of pi_bar: -inf on actions below beta; unchanged when no action qualifies."""
  ok = phi >= beta
  any_ok = jnp.any(ok, axis=-1, keepdims=True)
  return jnp.where(ok | ~any_ok, logits, -jnp.inf)


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
  return ShieldOutput(action.astype(jnp.int32), ~ok[proposed], none_ok)

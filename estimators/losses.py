"""Losses of the estimators as small pure functions (Appendix B, eqs. ssl and regression)."""
import jax
import jax.numpy as jnp


def precedence_bce(logits: jnp.ndarray, labels: jnp.ndarray) -> jnp.ndarray:
  """Mean binary cross-entropy of psi's logits against the shuffle labels (1 = in order)."""
  labels = labels.astype(jnp.float32)
  # log(sigmoid(z)) and log(1 - sigmoid(z)) computed stably.
  return jnp.mean(-labels * jax.nn.log_sigmoid(logits) - (1. - labels) * jax.nn.log_sigmoid(-logits))


def _mean(values: jnp.ndarray, weight=None) -> jnp.ndarray:
  """The mean, or with `weight` (0/1 per element) the mean over the weighted elements."""
  if weight is None:
    return jnp.mean(values)
  return jnp.sum(weight * values) / jnp.maximum(jnp.sum(weight), 1.0)


def phi_l2(phi_logits_taken: jnp.ndarray, target_prob: jnp.ndarray, weight=None) -> jnp.ndarray:
  """The paper's L2 regression of phi(x, a) (a probability) onto the psi-derived target."""
  return 0.5 * _mean(jnp.square(jax.nn.sigmoid(phi_logits_taken) - target_prob), weight)


def phi_bce(phi_logits_taken: jnp.ndarray, target_prob: jnp.ndarray, weight=None) -> jnp.ndarray:
  """The authors' released variant: BCE of phi against the soft psi-derived target."""
  return _mean(-target_prob * jax.nn.log_sigmoid(phi_logits_taken)
               - (1. - target_prob) * jax.nn.log_sigmoid(-phi_logits_taken), weight)


PHI_LOSSES = {'l2': phi_l2, 'bce': phi_bce}

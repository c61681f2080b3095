"""RAE: the intrinsic reward r_beta(psi) that penalises transitions judged irreversible."""
import jax.numpy as jnp

REWARD_FORMS = ('paper', 'hinge')


def rae_reward(psi: jnp.ndarray, beta: float, lam: float, form: str = 'paper') -> jnp.ndarray:
  """Penalty for a transition whose precedence probability psi(x_t, x_t+1) is `psi`.

  'paper' (Sec. 5, App. C.2):   -lam * 1[psi > beta] * psi
  'hinge' (authors' release):    -lam * max(psi - beta, 0)
  """
  if form == 'paper':
    return -lam * jnp.where(psi > beta, psi, 0.0)
  if form == 'hinge':
    return -lam * jnp.maximum(psi - beta, 0.0)
  raise ValueError(f'unknown RAE reward form {form!r}; expected one of {REWARD_FORMS}')

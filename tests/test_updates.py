"""estimators.updates: non-finite updates are dropped, on hand-made states."""
import jax
import jax.numpy as jnp
import numpy as np

from estimators import updates


def test_all_finite_looks_at_every_inexact_leaf():
  assert bool(updates.all_finite({'w': jnp.ones(3)}, (jnp.zeros(2), jnp.array(7, jnp.int32))))
  assert not bool(updates.all_finite({'w': jnp.array([1.0, jnp.nan])}))
  assert not bool(updates.all_finite({'w': jnp.ones(2)}, jnp.array(jnp.inf)))
  assert bool(updates.all_finite({}))


def test_a_finite_update_is_kept_a_non_finite_one_dropped():
  old = {'w': jnp.array([1.0, 2.0]), 'count': jnp.array(3, jnp.int32)}
  new = {'w': jnp.array([1.5, 2.5]), 'count': jnp.array(4, jnp.int32)}
  state, finite = jax.jit(updates.keep_if_finite)(new, old, jnp.array(0.3))
  assert bool(finite) and np.allclose(state['w'], [1.5, 2.5]) and int(state['count']) == 4
  # A NaN loss drops the whole update, the step counter included.
  state, finite = jax.jit(updates.keep_if_finite)(new, old, jnp.array(jnp.nan))
  assert not bool(finite) and np.allclose(state['w'], [1.0, 2.0]) and int(state['count']) == 3
  # So does an infinite parameter in the new state itself.
  bad = {'w': jnp.array([1.5, jnp.inf]), 'count': jnp.array(4, jnp.int32)}
  state, finite = updates.keep_if_finite(bad, old)
  assert not bool(finite) and np.allclose(state['w'], [1.0, 2.0])

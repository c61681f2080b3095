"""RAC's mask in the learner (agents.shield.allowed_by_behaviour / masked_logits, LossConfig's
shield_mask): the mask read back from the behaviour logits is the set the shield allowed; a
masked action gets no gradient; with every action allowed the update is bit-identical to the
unmasked one; a step where no action reached beta trains as the fallback acted."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents import impala_step, shield

A = 4


@pytest.mark.parametrize('mode', shield.SHIELD_MODES)
@pytest.mark.parametrize('phi, allowed', [
    ([0.9, 0.1, 0.5, 0.3], [True, False, True, False]),   # beta 0.4: two pass
    ([0.1, 0.3, 0.2, 0.0], [False, True, False, False]),  # none passes: argmax phi alone
    ([0.5, 0.6, 0.7, 0.8], [True, True, True, True]),
])
def test_the_mask_read_from_the_behaviour_logits_is_the_set_the_shield_allowed(mode, phi, allowed):
  logits = jnp.array([0.3, -1.2, 2.0, 0.1])
  phi = jnp.array(phi)
  assert shield.allowed_actions(phi, 0.4).tolist() == allowed
  behaviour = shield.acting_logits(logits, phi, 0.4, mode)
  assert shield.allowed_by_behaviour(behaviour).tolist() == allowed
  # Without a shield, and on a filler step (zero logits), every action is allowed.
  assert bool(jnp.all(shield.allowed_by_behaviour(logits)))
  assert bool(jnp.all(shield.allowed_by_behaviour(jnp.zeros(A))))


def _table_unroll(params, obs, state):
  """A 'network' whose logits and value at observation i are rows i of its parameters: each
  step of the batch has its own logits, so each one's gradient is seen alone."""
  idx = obs.astype(jnp.int32)
  return (params['logits'][idx], params['value'][idx]), state


def _batch(behaviour_logits, actions, start=None):
  b, t = actions.shape
  rng = np.random.default_rng(0)
  return impala_step.Sequences(
      observation=np.arange(b * t, dtype=np.float32).reshape(b, t),
      action=actions.astype(np.int32), reward=rng.normal(size=(b, t)).astype(np.float32),
      discount=np.ones((b, t), np.float32),
      start_of_episode=np.zeros((b, t), bool) if start is None else start,
      extras={'logits': behaviour_logits.astype(np.float32), 'core_state': np.zeros((b, t), np.float32)})


def _params(b, t, seed=1):
  rng = np.random.default_rng(seed)
  return {'logits': jnp.asarray(rng.normal(size=(b * t, A)), jnp.float32),
          'value': jnp.asarray(rng.normal(size=(b * t,)), jnp.float32)}


def _loss_and_grads(data, params, mask):
  loss_fn = impala_step.batch_loss_fn(_table_unroll, impala_step.LossConfig(shield_mask=mask))
  (loss, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, data)
  return loss, metrics, grads


def test_with_every_action_allowed_the_masked_update_is_bit_identical():
  b, t = 3, 5
  rng = np.random.default_rng(2)
  data = _batch(rng.normal(size=(b, t, A)), rng.integers(0, A, size=(b, t)))
  params = _params(b, t)
  plain = _loss_and_grads(data, params, False)
  masked = _loss_and_grads(data, params, True)
  assert np.array_equal(np.asarray(plain[0]), np.asarray(masked[0]))
  for name in ('logits', 'value'):
    assert np.array_equal(np.asarray(plain[2][name]), np.asarray(masked[2][name])), name
  for key in plain[1]:
    assert np.array_equal(np.asarray(plain[1][key]), np.asarray(masked[1][key])), key


def test_a_masked_action_gets_no_gradient_and_the_allowed_ones_do():
  b, t = 2, 4
  rng = np.random.default_rng(3)
  phi = rng.uniform(size=(b, t, A)).astype(np.float32)
  phi[..., 0] = 0.95                                   # some action always passes beta 0.5
  logits_mu = rng.normal(size=(b, t, A)).astype(np.float32)
  behaviour = np.asarray(jax.vmap(jax.vmap(
      lambda l, p: shield.acting_logits(l, p, 0.5, 'rejection')))(logits_mu, phi))
  allowed = phi >= 0.5
  # The actions taken are among the allowed ones, as the shield's are.
  actions = np.argmax(np.where(allowed, rng.uniform(size=allowed.shape), -1.0), axis=-1)
  data = _batch(behaviour, actions)
  _, metrics, grads = _loss_and_grads(data, _params(b, t), True)
  g = np.asarray(grads['logits']).reshape(b, t, A)
  trained = np.ones((b, t), bool)
  trained[:, -1] = False                               # the last step only bootstraps
  assert np.all(g[~allowed & trained[..., None]] == 0.0)
  assert np.any(g[allowed & trained[..., None]] != 0.0)
  # Unmasked, the disallowed actions' logits are pushed (down) by the softmax and the entropy.
  _, _, plain = _loss_and_grads(data, _params(b, t), False)
  assert np.any(np.asarray(plain['logits']).reshape(b, t, A)[~allowed & trained[..., None]] != 0.0)
  # The entropy is over the allowed actions only: at most log(allowed count) per step.
  assert float(metrics['policy_entropy']) <= float(np.mean(np.log(allowed[:, :-1].sum(-1)))) + 1e-6


def test_a_step_where_no_action_reached_beta_trains_as_the_fallback_acted():
  """The fallback took argmax phi with probability 1: under the mask the learner's policy there
  is that action alone, so its importance ratio is 1 and no policy gradient flows at that step
  (the value is still trained)."""
  b, t = 1, 3
  phi = np.full((b, t, A), 0.9, np.float32)
  phi[0, 1] = [0.1, 0.3, 0.2, 0.0]                     # step 1: nothing reaches 0.5; best is 1
  behaviour = np.asarray(jax.vmap(jax.vmap(
      lambda p: shield.acting_logits(jnp.zeros(A), p, 0.5, 'rejection')))(phi))
  actions = np.array([[2, 1, 0]])
  data = _batch(behaviour, actions)
  params = _params(b, t)
  _, metrics, grads = _loss_and_grads(data, params, True)
  assert np.all(np.asarray(grads['logits'])[1] == 0.0)
  assert np.any(np.asarray(grads['logits'])[0] != 0.0)
  assert float(np.asarray(grads['value'])[1]) != 0.0
  # Its ratio: pi_masked(1) / pi_bar(1) = 1 / 1.
  masked = shield.masked_logits(params['logits'][1], shield.allowed_by_behaviour(behaviour[0, 1]))
  assert float(jax.nn.softmax(masked)[1]) == 1.0

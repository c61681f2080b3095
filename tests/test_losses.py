import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import rlax

from agents import losses as agent_losses
from agents import rewards, shield
from estimators import losses


def test_precedence_bce_matches_hand_computation():
  logits = jnp.array([0.0, 2.0, -1.0])
  labels = jnp.array([1.0, 0.0, 0.0])
  sig = lambda z: 1 / (1 + math.exp(-z))
  expected = (-math.log(sig(0.0)) - math.log(1 - sig(2.0)) - math.log(1 - sig(-1.0))) / 3
  assert float(losses.precedence_bce(logits, labels)) == pytest.approx(expected, rel=1e-6)


def test_phi_losses_match_hand_computation():
  logits = jnp.array([0.0, math.log(3.0)])   # sigmoid: 0.5, 0.75
  target = jnp.array([1.0, 0.25])
  assert float(losses.phi_l2(logits, target)) == pytest.approx(0.5 * (0.25 + 0.25) / 2)
  expected_bce = (-math.log(0.5) + (-0.25 * math.log(0.75) - 0.75 * math.log(0.25))) / 2
  assert float(losses.phi_bce(logits, target)) == pytest.approx(expected_bce, rel=1e-6)


def test_rae_reward_forms():
  psi = jnp.array([0.5, 0.7, 0.8, 1.0])
  np.testing.assert_allclose(rewards.rae_reward(psi, 0.7, 0.1, 'paper'), [0, 0, -0.08, -0.1], atol=1e-7)
  np.testing.assert_allclose(rewards.rae_reward(psi, 0.7, 0.1, 'hinge'), [0, 0, -0.01, -0.03], atol=1e-7)
  with pytest.raises(ValueError, match='unknown RAE reward form'):
    rewards.rae_reward(psi, 0.7, 0.1, 'nope')


def test_rejection_shield_renormalises_over_allowed_actions():
  logits = jnp.log(jnp.array([0.6, 0.3, 0.1]))
  phi = jnp.array([0.1, 0.5, 0.9])          # action 0 is irreversible at beta = 0.4
  keys = jax.random.split(jax.random.PRNGKey(0), 4000)
  out = jax.vmap(lambda k: shield.shield(k, logits, phi, 0.4, 'rejection'))(keys)
  actions = np.asarray(out.action)
  assert not np.any(actions == 0)
  assert np.mean(actions == 1) == pytest.approx(0.75, abs=0.03)   # 0.3 / (0.3 + 0.1)
  assert not np.any(np.asarray(out.fallback))


def test_shield_when_no_action_qualifies_takes_most_reversible():
  logits = jnp.zeros(3)
  phi = jnp.array([0.1, 0.3, 0.2])
  for mode in ('rejection', 'replace'):
    out = shield.shield(jax.random.PRNGKey(1), logits, phi, 0.9, mode)
    assert int(out.action) == 1 and bool(out.fallback) and bool(out.rejected)


def test_replace_shield_keeps_allowed_choice_and_replaces_rejected():
  logits = jnp.array([0.0, -1e9, -1e9])     # the policy always proposes action 0
  out = shield.shield(jax.random.PRNGKey(2), logits, jnp.array([0.1, 0.9, 0.5]), 0.4, 'replace')
  assert int(out.action) == 1 and bool(out.rejected)
  out = shield.shield(jax.random.PRNGKey(2), logits, jnp.array([0.8, 0.9, 0.5]), 0.4, 'replace')
  assert int(out.action) == 0 and not bool(out.rejected)


def _reference_loss(logits, values, behaviour, actions, rewards_, discounts, discount, bc, ec):
  rhos = rlax.categorical_importance_sampling_ratios(logits[:-1], behaviour[:-1], actions[:-1])
  vt = rlax.vtrace_td_error_and_advantage(values[:-1], values[1:], rewards_[:-1], discounts[:-1] * discount, rhos)
  pg = -jax.nn.log_softmax(logits[:-1])[jnp.arange(len(actions) - 1), actions[:-1]] * vt.pg_advantage
  ent = -jnp.sum(jax.nn.softmax(logits[:-1]) * jax.nn.log_softmax(logits[:-1]), -1)
  return pg, bc * jnp.square(vt.errors), -ec * ent


def _learner_loss(logits, values, behaviour, actions, rewards_, discounts, start, **loss_config):
  """The learner's loss (agents.impala_step.batch_loss_fn) on a batch of one sequence, with the
  network's logits and values given."""
  from agents import impala_step
  t = len(actions)
  data = impala_step.Sequences(
      observation=jnp.zeros((1, t, 1)), action=jnp.asarray(actions)[None],
      reward=jnp.asarray(rewards_)[None], discount=jnp.asarray(discounts)[None],
      start_of_episode=jnp.asarray(start)[None],
      extras={'logits': jnp.asarray(behaviour)[None], 'core_state': jnp.zeros((1, t))})
  network = lambda params, observations, state: (params, state)  # noqa: E731
  loss = impala_step.batch_loss_fn(network, impala_step.LossConfig(**loss_config))
  return loss((logits, values), data)


def test_masked_vtrace_ignores_filler_step_exactly():
  """A sequence [ep1 (3 steps incl. final obs) | filler | ep2] gives the same per-step losses as
  the two episodes computed separately; the filler contributes nothing."""
  rng = np.random.default_rng(0)
  t = 7
  logits = jnp.asarray(rng.normal(size=(t, 2)), jnp.float32)
  behaviour = jnp.asarray(rng.normal(size=(t, 2)), jnp.float32)
  values = jnp.asarray(rng.normal(size=(t,)), jnp.float32)
  actions = jnp.array([1, 0, 1, 0, 1, 1, 0], jnp.int32)
  rewards_ = jnp.array([1., 2., 3., 0., 1., 1., 1.], jnp.float32)
  # steps 0..2: episode 1 (step 2 truncates with discount 1); step 3: filler (final obs of ep 1);
  # steps 4..6: episode 2.
  discounts = jnp.array([1., 1., 1., 0., 1., 1., 1.], jnp.float32)
  start = jnp.array([1, 0, 0, 0, 1, 0, 0], bool)
  loss, _ = _learner_loss(logits, values, behaviour, actions, rewards_, discounts, start,
                         discount=0.9, baseline_cost=0.5, entropy_cost=0.01)
  pg1, c1, e1 = _reference_loss(logits[:4], values[:4], behaviour[:4], actions[:4], rewards_[:4], discounts[:4], 0.9, 0.5, 0.01)
  pg2, c2, e2 = _reference_loss(logits[4:], values[4:], behaviour[4:], actions[4:], rewards_[4:], discounts[4:], 0.9, 0.5, 0.01)
  total = jnp.concatenate([pg1 + c1 + e1, pg2 + c2 + e2])
  assert float(loss) == pytest.approx(float(jnp.mean(total)), rel=1e-5)
  # Acme's unmasked loss differs (it trains on the filler step).
  unmasked = _reference_loss(logits, values, behaviour, actions, rewards_, discounts, 0.9, 0.5, 0.01)
  assert float(jnp.mean(sum(unmasked))) != pytest.approx(float(loss), rel=1e-3)


def test_policy_network_forward_matches_unroll_for_images_and_vectors():
  """The actor's single-observation forward pass and the learner's unroll use one set of params."""
  from acme import specs

  from agents import networks
  for shape, dtype, env_name in (((4,), np.float32, 'cartpole'), ((10, 10, 3), np.uint8, 'sokoban'),
                                 ((10, 10, 3), np.uint8, 'turf'), ((10, 10, 3), np.uint8, None)):
    spec = specs.EnvironmentSpec(
        observations=specs.Array(shape, dtype), actions=specs.DiscreteArray(4, dtype=np.int32),
        rewards=specs.Array((), np.float32), discounts=specs.BoundedArray((), np.float32, 0., 1.))
    config = None if env_name is None else networks.default_policy_config(env_name, len(shape) == 3)
    net = networks.make_networks(spec, config)
    params = net.unroll_init_fn(jax.random.PRNGKey(0), networks.DUMMY_CORE_STATE)
    obs = np.asarray(np.random.default_rng(0).integers(0, 255, size=(3,) + shape), dtype)
    (logits_seq, values_seq), _ = net.unroll_fn(params, obs, networks.DUMMY_CORE_STATE)
    (logits_1, value_1), _ = net.forward_fn(params, obs[1], networks.DUMMY_CORE_STATE)
    np.testing.assert_allclose(logits_1, logits_seq[1], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(value_1, values_seq[1], rtol=1e-5, atol=1e-5)


def test_policy_lag_skips_fillers_and_the_bootstrap_step():
  from acme.adders.reverb.base import Trajectory

  from agents import learning
  # One sequence of 5 steps: step 2 is the filler closing an episode (step 3 starts one), step 4
  # only bootstraps. Trained steps 0, 1, 3 were acted by versions 6, 7, 9 -> lags 4, 3, 1 at 10.
  data = Trajectory(observation=None, action=None, reward=None, discount=None,
                    start_of_episode=np.array([[1, 0, 0, 1, 0]], bool),
                    extras={'policy_version': np.array([[6, 7, 0, 9, 2]], np.float32)})
  assert learning.policy_lag(10, data) == {'policy_lag_mean': pytest.approx(8 / 3),
                                           'policy_lag_max': 4.0}
  assert learning.policy_lag(10, data._replace(extras={})) == {}


def test_vtrace_diagnostics_on_a_hand_computed_sequence():
  """On-policy (rho = 1), discount 0: the V-trace target is the reward, so the advantages are
  r - v and the explained variance is 1 - var(r - v) / var(r)."""
  logits = jnp.zeros((4, 2))
  values = jnp.array([1.0, 2.0, 0.0, 5.0])
  rewards_ = jnp.array([2.0, 2.0, 4.0, 0.0])
  _, m = _learner_loss(
      logits, values, logits, jnp.array([0, 1, 0, 1], jnp.int32), rewards_, jnp.zeros(4),
      jnp.zeros(4, bool), discount=0.99, baseline_cost=0.5, entropy_cost=0.01)
  adv = np.array([1.0, 0.0, 4.0])
  assert float(m['policy_entropy']) == pytest.approx(math.log(2), rel=1e-6)
  assert float(m['advantage_mean']) == pytest.approx(adv.mean(), rel=1e-6)
  assert float(m['advantage_std']) == pytest.approx(adv.std(), rel=1e-5)
  assert float(m['advantage_abs_max']) == pytest.approx(4.0)
  assert float(m['value_mean']) == pytest.approx(1.0)
  assert float(m['value_target_mean']) == pytest.approx(8 / 3, rel=1e-6)
  targets = np.array([2.0, 2.0, 4.0])
  assert float(m['value_explained_variance']) == pytest.approx(1 - adv.var() / targets.var(), rel=1e-5)
  assert float(m['rho_mean']) == pytest.approx(1.0) and float(m['rho_clipped_fraction']) == 0.0


def test_normalising_moments_skip_fillers_and_carry_no_gradient():
  adv = jnp.array([[1.0, 3.0, 100.0], [5.0, 7.0, 9.0]])
  real = jnp.array([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])   # the 100 is a filler step's
  mean, std = agent_losses.normalising_moments(adv, real)
  assert float(mean) == pytest.approx(5.0)
  assert float(std) == pytest.approx(math.sqrt((16 + 4 + 0 + 4 + 16) / 5), rel=1e-6)
  grad = jax.grad(lambda a: agent_losses.normalising_moments(a, real)[1])(adv)
  assert not np.any(np.asarray(grad))


def test_vtrace_loss_policy_term_uses_shifted_and_scaled_advantages():
  t = 4
  logits = jnp.log(jnp.array([[0.2, 0.8]] * t))
  values = jnp.array([0.5, -0.2, 0.3, 0.1])
  args = (logits, values, logits, jnp.array([1, 0, 1, 0]), jnp.array([1.0, 0.0, -1.0, 0.0]),
          jnp.ones(t), jnp.zeros(t, bool))
  vtrace, rhos, real = agent_losses.masked_vtrace(values, logits, logits, *args[3:], discount=0.9)
  terms = lambda **kw: agent_losses.vtrace_loss_terms(  # noqa: E731
      logits, values, args[3], vtrace, rhos, real, baseline_cost=0.0, entropy_cost=0.0, **kw)
  _, plain = terms()
  _, normed = terms(advantage_shift=0.3, advantage_scale=2.0)
  log_pi = np.log([0.8, 0.2, 0.8])   # actions 1, 0, 1 of the T-1 real steps
  adv = np.asarray(vtrace.pg_advantage)
  assert float(plain['policy_loss']) == pytest.approx(-np.mean(log_pi * adv), rel=1e-5)
  assert float(normed['policy_loss']) == pytest.approx(-np.mean(log_pi * (adv - 0.3) / 2.0),
                                                       rel=1e-5)
  assert float(normed['critic_loss']) == pytest.approx(float(plain['critic_loss']))

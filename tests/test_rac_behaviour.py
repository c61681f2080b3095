"""Under RAC the behaviour policy written for V-trace is pi_bar, the shielded policy that acted:
its logits match the shield's sampling distribution, and the importance ratio of a shielded step
is pi(a|x) / pi_bar(a|x), finite even where pi_bar excludes actions."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import rlax
from acme import wrappers
from acme.utils import loggers
from row_recorder import RowRecorder

import envs
from agents import acting, shield
from agents import adders as agent_adders
from agents import loop as loop_lib
from estimators import networks as est_nets
from estimators import training as est_training

PI = np.array([0.5, 0.3, 0.2], np.float32)
LOGITS = jnp.log(PI)


@pytest.mark.parametrize('mode, phi, pi_bar', [
    ('rejection', [0.9, 0.1, 0.6], [0.5 / 0.7, 0.0, 0.2 / 0.7]),   # action 1 rejected
    ('rejection', [0.1, 0.3, 0.35], [0.0, 0.0, 1.0]),              # none qualifies: argmax phi
    ('replace', [0.9, 0.1, 0.6], [0.8, 0.0, 0.2]),                 # rejected mass -> argmax phi
    ('replace', [0.1, 0.3, 0.35], [0.0, 0.0, 1.0]),
])
def test_importance_ratio_is_taken_against_pi_bar(mode, phi, pi_bar):
  behaviour = shield.acting_logits(LOGITS, jnp.array(phi), 0.4, mode)
  assert np.all(np.isfinite(behaviour))
  np.testing.assert_allclose(jax.nn.softmax(behaviour), pi_bar, atol=1e-6)
  for a in np.flatnonzero(np.array(pi_bar) > 0):
    rho = rlax.categorical_importance_sampling_ratios(LOGITS[None], behaviour[None], jnp.array([a]))
    np.testing.assert_allclose(rho[0], PI[a] / pi_bar[a], rtol=1e-5)


@pytest.mark.parametrize('mode', ['rejection', 'replace'])
def test_acting_logits_are_the_distribution_the_shield_samples(mode):
  phi = jnp.array([0.9, 0.1, 0.6])
  keys = jax.random.split(jax.random.PRNGKey(0), 20_000)
  out = jax.vmap(lambda k: shield.shield(k, LOGITS, phi, 0.4, mode))(keys)
  freq = np.bincount(np.asarray(out.action), minlength=3) / len(keys)
  np.testing.assert_allclose(freq, jax.nn.softmax(out.logits[0]), atol=0.015)


def test_rac_actor_writes_pi_bar_logits_and_vtrace_ratio_uses_them():
  est = est_nets.make_estimators(est_nets.default_estimator_config('cartpole'), num_actions=2)
  obs = np.zeros(4, np.float32)
  state = est_training.init_state(est, est_training.TrainConfig(train_phi=True), obs)
  # phi(x, .) = sigmoid([+20, -20]): action 1 is irreversible everywhere.
  phi_params = jax.tree_util.tree_map(np.asarray, state.phi_params)
  phi_params['phi_out']['w'] = np.zeros_like(phi_params['phi_out']['w'])
  phi_params['phi_out']['b'] = np.array([20.0, -20.0], np.float32)
  recorder = RowRecorder(1)
  rev = acting.ReversibilityConfig(mode='rac', beta=0.5)
  actor = acting.BatchedActor(2, rev, seeds=[0], estimators=est,
                              estimator_source=acting.FixedParams((state.psi_params, phi_params)))
  env = wrappers.SinglePrecisionWrapper(envs.make('cartpole', seed=0, reward_free=False))
  loop_lib.BatchedEnvironmentLoop([env], actor, 'rac', recorder,
                                  logger=loggers.NoOpLogger()).run(num_steps=20)
  # The real steps' actions and behaviour logits (not the filler rows of ended episodes).
  taken = [(agent_adders.unpack_steps(steps), logits) for _, steps, logits in recorder.room(0)]
  taken = [(int(f['action']), logits) for f, logits in taken if f['valid']]
  actions = [a for a, _ in taken]
  assert len(actions) >= 20 and set(actions) == {0}      # the shield never lets action 1 through
  behaviour = np.stack([l for _, l in taken])
  assert np.all(np.isfinite(behaviour))
  # The random policy is uniform (pi = 0.5), pi_bar puts all mass on action 0: rho = 0.5.
  rho = rlax.categorical_importance_sampling_ratios(
      jnp.zeros((len(actions), 2)), jnp.asarray(behaviour), jnp.asarray(actions))
  np.testing.assert_allclose(rho, 0.5, rtol=1e-6)
  # The mask the learner reads back from those logits (--learner_mask) is the shield's.
  assert shield.allowed_by_behaviour(jnp.asarray(behaviour)).tolist() == [[True, False]] * len(actions)
  # With the mask the learner's pi is pi_bar here: rho = 1.
  masked = shield.masked_logits(jnp.zeros((len(actions), 2)), shield.allowed_by_behaviour(behaviour))
  np.testing.assert_allclose(rlax.categorical_importance_sampling_ratios(
      masked, jnp.asarray(behaviour), jnp.asarray(actions)), 1.0, rtol=1e-6)

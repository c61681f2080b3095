"""The networks' folded inference forms (estimators.folding, agents.policy_inference) compute what
the layered networks compute, and the actor acts the same with them."""
import dataclasses

import haiku as hk
import jax
import numpy as np
import pytest

import envs
from agents import acting, policy_inference
from agents import networks as agent_networks
from agents.policy_net import PolicyValueNet
from estimators import folding
from estimators import networks as est_nets


def sokoban_frames(n: int, seed: int = 0) -> np.ndarray:
  """Frames of random play on Sokoban (the player somewhere in each: the policy centres on it)."""
  env = envs.make('sokoban', seed=seed)
  rng = np.random.default_rng(seed)
  frames = [env.reset().observation]
  while len(frames) < n:
    ts = env.step(int(rng.integers(0, 4)))
    frames.append((env.reset() if ts.last() else ts).observation)
  return np.stack(frames)


def test_fold_conv_dense_is_the_conv_then_the_dense_layer():
  rng = np.random.default_rng(0)
  w_conv = rng.standard_normal((3, 3, 4, 5)).astype(np.float32)
  b_conv = rng.standard_normal(5).astype(np.float32)
  for stride, padding in ((1, 'SAME'), (2, 'VALID'), (2, 'SAME')):
    h = rng.standard_normal((7, 6, 6, 4)).astype(np.float32)
    y = folding.conv(h, w_conv, b_conv, stride, padding).reshape(7, -1)
    w_dense = rng.standard_normal((y.shape[1], 3)).astype(np.float32)
    b_dense = rng.standard_normal(3).astype(np.float32)
    w, b = folding.fold_conv_dense(w_conv, b_conv, stride, padding, (6, 6, 4), w_dense, b_dense)
    assert w.shape == (6 * 6 * 4, 3)
    np.testing.assert_allclose(h.reshape(7, -1) @ w + b, y @ w_dense + b_dense,
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize('network', ['sokoban', 'sokoban_paper'])
def test_folded_psi_gives_psi_apply_logits(network):
  config = est_nets.default_estimator_config(network)
  est = est_nets.make_estimators(config, 4)
  frames = sokoban_frames(40)
  x, y = frames[:-1], frames[1:]
  params = est.psi_init(jax.random.PRNGKey(3), x)
  inference = folding.psi_inference(config, frames.shape[1:])
  layered = np.asarray(est.psi_apply(params, None, x, y, False))
  folded = np.asarray(jax.jit(inference.logits)(inference.fold(params), x, y))
  np.testing.assert_allclose(folded, layered, rtol=1e-4, atol=1e-5)
  # Reversed pairs too: the siamese head's two halves are folded apart.
  np.testing.assert_allclose(inference.logits(inference.fold(params), y, x),
                             est.psi_apply(params, None, y, x, False), rtol=1e-4, atol=1e-5)


def test_networks_with_nothing_to_fold_have_no_folded_form():
  assert folding.psi_inference(est_nets.default_estimator_config('cartpole'), (4,)) is None
  relu_last = dataclasses.replace(est_nets.default_estimator_config('sokoban'),
                                  relu_after_last_conv=True)
  assert folding.psi_inference(relu_last, (10, 10, 3)) is None
  cartpole = agent_networks.default_policy_config('cartpole', image=False)
  assert policy_inference.policy_inference(cartpole, (4,)) is None


@pytest.mark.parametrize('changes', [{}, {'init': 'lecun', 'pixel_scale': 1.0, 'centre_on': (),
                                          'canvas_size': 0}])
def test_folded_policy_gives_the_layered_logits_and_values(changes):
  # The preset's network, and App. C.3's as an Acme user may have had it: Haiku's init, the room
  # as drawn, the bytes unscaled.
  config = dataclasses.replace(agent_networks.default_policy_config('sokoban', image=True),
                               **changes)
  net = hk.without_apply_rng(hk.transform(lambda o: PolicyValueNet(4, config)(o)))
  frames = sokoban_frames(32, seed=1)
  params = net.init(jax.random.PRNGKey(0), frames)
  # Trained-looking weights: the policy head's initial gain (0.01) would hide any difference.
  params = jax.tree_util.tree_map(lambda w: w * 3.0, params)
  inference = policy_inference.policy_inference(config, frames.shape[1:])
  logits, values = net.apply(params, frames)
  folded_logits, folded_values = jax.jit(inference.forward)(inference.fold(params), frames)
  np.testing.assert_allclose(folded_logits, logits, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(folded_values, values, rtol=1e-4, atol=1e-4)


class CountingFold:
  def __init__(self, fold):
    self.fold, self.calls = fold, 0

  def __call__(self, params):
    self.calls += 1
    return self.fold(params)


def test_the_actor_acts_the_same_folded_and_folds_once_per_parameter_set():
  env = envs.make('sokoban', seed=0)
  from acme import specs
  spec = specs.make_environment_spec(env)
  config = agent_networks.default_policy_config('sokoban', image=True)
  nets = agent_networks.make_networks(spec, config)
  policy = nets.unroll_init_fn(jax.random.PRNGKey(0), agent_networks.DUMMY_CORE_STATE)
  policy = jax.tree_util.tree_map(lambda w: w * 3.0, policy)
  est_config = est_nets.default_estimator_config('sokoban')
  est = est_nets.make_estimators(est_config, spec.actions.num_values)
  frames = sokoban_frames(9, seed=2)
  psi = est.psi_init(jax.random.PRNGKey(1), frames[:1])
  phi = est.phi_init(jax.random.PRNGKey(2), frames[:1])
  rev = acting.ReversibilityConfig(mode='rae', beta=0.0, lam=1.0)
  folded_policy = policy_inference.policy_inference(config, frames.shape[1:])
  folded_psi = folding.psi_inference(est_config, frames.shape[1:])
  counting_fold = CountingFold(folded_policy.fold)
  folded_policy = folded_policy._replace(fold=counting_fold)
  seeds = [5, 6, 7, 8]

  def actor(**folded):
    source = acting.FixedParams(policy)
    return acting.BatchedActor(spec.actions.num_values, rev, seeds, policy_forward=nets.forward_fn,
                               policy_source=source, estimators=est,
                               estimator_source=acting.FixedParams((psi, phi)), **folded), source

  layered, _ = actor()
  folded, source = actor(policy_inference=folded_policy, psi_inference=folded_psi)
  for t in range(4):
    obs, prev = frames[t + 1:t + 5], frames[t:t + 4]
    a, b = layered.step(obs, prev), folded.step(obs, prev)
    np.testing.assert_array_equal(a.action, b.action)
    np.testing.assert_allclose(b.logits, a.logits, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(b.psi, a.psi, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(b.intrinsic, a.intrinsic, rtol=1e-4, atol=1e-5)
  assert counting_fold.calls == 1            # the same parameters: folded once
  source.params = jax.tree_util.tree_map(lambda w: w * 0.5, policy)
  folded.step(frames[1:5], frames[:4])
  assert counting_fold.calls == 2            # new parameters: folded again


def test_the_trained_sokoban_psi_folded_penalises_the_same_transitions():
  """The psi every Sokoban RAE run uses (committed): over 1,000 transitions of random play, the
  folded form's probabilities within 1e-5 of the layered ones, and the RAE penalty (psi > 0.9)
  given to exactly the same transitions."""
  import os

  from estimators import checkpoint, training
  ckpt = checkpoint.load(os.path.join(os.path.dirname(__file__), '..', 'results', 'sokoban_30m',
                                      'psi.ckpt'))
  frames = np.concatenate([sokoban_frames(501, seed=s) for s in range(2)])
  x, y = frames[:-1], frames[1:]
  inference = folding.psi_inference(ckpt.network, frames.shape[1:])
  layered = np.asarray(training.psi_prob(ckpt.estimators, ckpt.psi_params, x, y))
  folded = np.asarray(jax.nn.sigmoid(inference.logits(inference.fold(ckpt.psi_params), x, y)))
  np.testing.assert_allclose(folded, layered, atol=1e-5)
  np.testing.assert_array_equal(folded > 0.9, layered > 0.9)
  assert np.sum(layered > 0.9) > 0      # some transitions penalised (28 of these 1,001)

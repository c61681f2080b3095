import math

import jax.numpy as jnp
import numpy as np
import pytest

from agents import losses, self_imitation


def test_returns_to_go_by_hand():
  np.testing.assert_allclose(self_imitation.returns_to_go(np.array([1.0, 0.0, 2.0]), 0.5),
                             [1.0 + 0.5 * 0.0 + 0.25 * 2.0, 0.0 + 0.5 * 2.0, 2.0])


def test_self_imitation_loss_only_counts_steps_whose_return_beat_the_value():
  # Two actions, uniform policy: log pi(a) = log 0.5 for both steps.
  logits = jnp.zeros((2, 2))
  values = jnp.array([1.0, 3.0])
  returns = jnp.array([3.0, 1.0])        # gaps +2 and -2: only the first step counts
  actions = jnp.array([0, 1])
  loss, metrics = losses.self_imitation_loss(logits, values, actions, returns, value_cost=0.1)
  policy = -(math.log(0.5) * 2.0 + 0.0) / 2
  value = 0.5 * (4.0 + 0.0) / 2
  assert float(metrics['sil_policy_loss']) == pytest.approx(policy, rel=1e-6)
  assert float(metrics['sil_value_loss']) == pytest.approx(value, rel=1e-6)
  assert float(loss) == pytest.approx(policy + 0.1 * value, rel=1e-6)
  assert float(metrics['sil_positive_fraction']) == 0.5


def test_best_episodes_keeps_the_highest_returns_and_samples_their_steps():
  buffer = self_imitation.BestEpisodes(capacity=2, discount=1.0, seed=0)
  for total, tag in ((1.0, 10), (5.0, 20), (3.0, 30), (0.0, 40)):
    buffer.add(np.full((2, 1), tag), np.array([tag, tag]), np.array([total, 0.0]), terminated=True)
  # A truncated episode's future is unknown, so it is refused however good it looks.
  assert not buffer.add(np.zeros((1, 1)), np.array([0]), np.array([100.0]), terminated=False)
  assert sorted(buffer.totals) == [3.0, 5.0]
  obs, actions, returns = buffer.sample(200)
  assert set(actions.tolist()) == {20, 30}
  assert np.all(obs[:, 0] == actions)
  # Returns-to-go travel with their steps: the first step holds the whole return, the second 0.
  assert set(zip(actions.tolist(), returns.tolist())) <= {(20, 5.0), (20, 0.0), (30, 3.0),
                                                          (30, 0.0)}


def test_best_episodes_refuses_bad_capacity_and_empty_sampling():
  with pytest.raises(ValueError, match='capacity'):
    self_imitation.BestEpisodes(0, 0.99)
  with pytest.raises(ValueError, match='empty'):
    self_imitation.BestEpisodes(1, 0.99).sample(1)


def test_learner_imitation_raises_the_good_action_and_leaves_bad_steps_alone():
  """The real Sokoban network and optimiser: steps whose return beats V make their action more
  likely; the same steps with a return far below V change nothing."""
  import jax
  import optax
  from acme import specs, wrappers
  from acme.utils import loggers

  import envs
  from agents import learning
  from agents import networks as agent_networks

  env = wrappers.SinglePrecisionWrapper(envs.make('sokoban', seed=1, level_index=7))
  spec = specs.make_environment_spec(env)
  networks = agent_networks.make_networks(spec, agent_networks.default_policy_config('sokoban', True))
  observations = np.stack([env.reset().observation] * 8)
  actions = np.full(8, 2, np.int32)

  def probability_after(returns, updates=30):
    learner = learning.IMPALALearner(networks, iter(()), optax.adam(1e-3), jax.random.PRNGKey(0),
                                     logger=loggers.NoOpLogger())
    first = None
    for _ in range(updates):
      metrics = learner.imitate(observations, actions, np.full(8, returns, np.float32))
      first = first or metrics
    params = learner.get_variables(['policy'])[0]
    (logits, _), _ = networks.unroll_fn(params, observations[:1], np.float32(0.0))
    return float(jax.nn.softmax(logits)[0, 2]), first

  good, good_metrics = probability_after(20.0)
  bad, bad_metrics = probability_after(-1000.0)
  assert float(good_metrics['sil_positive_fraction']) == 1.0
  assert float(bad_metrics['sil_positive_fraction']) == 0.0
  assert good > 0.5 > bad
  assert bad == pytest.approx(0.25, abs=0.1)   # untouched: the initial, near-uniform policy

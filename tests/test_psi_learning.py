"""psi learns the arrow of time of a synthetic process, through the same jitted update that the
precedence-learner node and the offline trainer use."""
import jax
import jax.numpy as jnp
import numpy as np

from estimators import networks as nets
from estimators import pairs, training


def _drift_process(rng, num_episodes, length):
  """x_{t+1} = x_t + drift + noise in 4-D: a known arrow of time (the first coordinate grows)."""
  episodes = []
  for _ in range(num_episodes):
    x = rng.normal(size=4) * 0.5
    steps = [x]
    for _ in range(length - 1):
      x = x + np.array([0.3, 0.0, 0.0, 0.0]) + rng.normal(size=4) * 0.2
      steps.append(x)
    episodes.append(np.stack(steps))
  return episodes


def _flat_batch(episodes):
  lengths = [len(e) for e in episodes]
  last, start_ok = pairs.episode_layout(lengths)
  starts = np.nonzero(start_ok & (last > np.arange(len(last))))[0].astype(np.int32)
  obs = np.concatenate(episodes).astype(np.float32)
  return training.Batch(jnp.asarray(obs), jnp.zeros(len(obs), jnp.int32), jnp.asarray(last),
                        jnp.asarray(starts), jnp.asarray(len(starts)))


def test_psi_learns_arrow_of_time_to_heldout_accuracy_above_0_9():
  rng = np.random.default_rng(0)
  train = _flat_batch(_drift_process(rng, 200, 30))
  test_eps = _drift_process(rng, 50, 30)
  config = training.TrainConfig(window=10, batch_size=128, learning_rate=3e-3)
  est = nets.make_estimators(nets.EstimatorNetConfig(torso='mlp', mlp_sizes=(64, 64)), num_actions=2)
  state = training.init_state(est, config, np.zeros(4, np.float32))
  update = training.make_update(est, config, steps_per_call=50)
  for _ in range(10):   # 500 steps
    state, metrics = update(state, train)
  # Held-out pairs from new episodes.
  test = _flat_batch(test_eps)
  p = pairs.sample_pairs(jax.random.PRNGKey(7), test.last, test.starts, test.num_starts, 4000, 10)
  prob = training.psi_prob(est, state.psi_params, test.observations[p.first], test.observations[p.second])
  accuracy = float(jnp.mean((prob > 0.5) == (p.label > 0.5)))
  assert accuracy > 0.9, accuracy


def test_phi_regresses_onto_psi_of_reversed_pair():
  """phi(x, a) learns E[psi(x', x)]: in a process where action 1 always moves forward in time
  and action 0 stays put, phi(x, 1) must be low and phi(x, 0) near 0.5 or above."""
  rng = np.random.default_rng(1)
  episodes, actions = [], []
  for _ in range(200):
    x = rng.normal(size=4) * 0.5
    xs, acts = [x], []
    for _ in range(29):
      a = rng.integers(2)
      x = x + (np.array([0.5, 0, 0, 0]) if a else 0) + rng.normal(size=4) * 0.05
      xs.append(x)
      acts.append(a)
    acts.append(0)
    episodes.append(np.stack(xs))
    actions.append(np.array(acts))
  batch = _flat_batch(episodes)._replace(actions=jnp.asarray(np.concatenate(actions), jnp.int32))
  config = training.TrainConfig(window=10, batch_size=128, learning_rate=3e-3, train_phi=True,
                                phi_learning_rate=3e-3)
  est = nets.make_estimators(nets.EstimatorNetConfig(torso='mlp', mlp_sizes=(64, 64), phi_hidden_sizes=(64,)), 2)
  state = training.init_state(est, config, np.zeros(4, np.float32))
  update = training.make_update(est, config, steps_per_call=50)
  for _ in range(12):
    state, metrics = update(state, batch)
  phi = np.asarray(training.phi_prob(est, state.phi_params, batch.observations[:500]))
  assert phi[:, 1].mean() < 0.25, phi[:, 1].mean()
  assert phi[:, 0].mean() > 0.4, phi[:, 0].mean()

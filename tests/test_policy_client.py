"""The actor's policy client on a real IMPALA learner, served over Courier as in a run: the
learner sends its parameters only when they are not the ones the actor holds, and the client
fetches, every `update_period` calls, the learner's newest version."""
import time

import jax
import numpy as np
import optax
from acme import specs
from acme.adders.reverb.base import Step

from agents import acting, learning
from agents import networks as agent_networks

B, T = 2, 5


class Sample:
  def __init__(self, data):
    self.data = data


def _batches():
  rng = np.random.default_rng(0)
  while True:
    yield Sample(Step(
        observation=rng.normal(size=(B, T, 4)).astype(np.float32),
        action=rng.integers(0, 2, size=(B, T)).astype(np.int32),
        reward=rng.normal(size=(B, T)).astype(np.float32), discount=np.ones((B, T), np.float32),
        start_of_episode=np.zeros((B, T), bool),
        extras={'logits': np.zeros((B, T, 2), np.float32),
                'core_state': np.zeros((B, T), np.float32)}))


def _learner():
  spec = specs.EnvironmentSpec(
      observations=specs.Array((4,), np.float32), actions=specs.DiscreteArray(2),
      rewards=specs.Array((), np.float32), discounts=specs.BoundedArray((), np.float32, 0, 1))
  networks = agent_networks.make_networks(spec, agent_networks.default_policy_config('cartpole', False))
  return learning.IMPALALearner(networks, _batches(), optax.adam(1e-2), jax.random.PRNGKey(0))


def _flat(params):
  return np.concatenate([np.ravel(x) for x in jax.tree_util.tree_leaves(params)])


def test_the_learner_sends_its_policy_only_to_an_actor_without_it():
  learner = _learner()
  params, version = learner.get_policy_since(-1.0)
  assert version == 0.0
  assert learner.get_policy_since(0.0) is None           # unchanged: nothing sent
  again, _ = learner.get_policy_since(-1.0)
  assert again is params                                  # one host copy per update
  learner.step()
  newer, version = learner.get_policy_since(0.0)
  assert version == 1.0 and not np.array_equal(_flat(newer), _flat(params))
  # A restarted learner counts from 0 again: an actor ahead of it still gets its policy.
  assert learner.get_policy_since(7.0) is not None


def test_the_client_follows_the_learner_over_courier_every_period():
  import courier
  from launchpad.nodes.courier import courier_utils
  learner = _learner()
  server = courier_utils.make_courier_server(learner)
  server.Start()
  try:
    client = acting.PolicyClient(courier.Client(server.address), update_period=3)
    first = _flat(client.params)
    assert client.version == 0.0
    learner.step()
    client.update()
    client.update()
    assert client.version == 0.0                         # not yet a period of calls
    client.update()                                       # the third: a fetch in the background
    deadline = time.time() + 30
    while client.version == 0.0 and time.time() < deadline:
      time.sleep(0.01)
    assert client.version == 1.0
    np.testing.assert_array_equal(_flat(client.params),
                                  _flat(learner.get_variables(['policy'])[0]))
    assert not np.array_equal(_flat(client.params), first)
  finally:
    server.Stop()

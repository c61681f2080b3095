"""DQN and Munchausen-DQN from Acme 0.4.0's JAX building blocks, with App. C.4's settings.

The paper's Cartpole+ baselines (Sec. 5.4, App. C.4): an MLP with two hidden layers of 512 units
(ReLU), the online network updated every 4 environment steps and the target network every 400,
a replay buffer of 50k transitions, batches of 128, Adam with learning rate 1e-3, discount 0.99;
M-DQN with alpha 0.9 and tau 0.03.

What is Acme's here: the losses (`acme.agents.jax.dqn.losses.QLearning`, the original DQN loss
with Huber and reward clipping, and `MunchausenQLearning`), the learner (`SGDLearner`: loss,
Adam, periodic target update), the replay (a uniform Reverb table fed by an
`NStepTransitionAdder` with n = 1), the actor (`GenericActor`) and the act/learn schedule
(`acme.agents.agent.Agent`). What is ours: the network, the exploration schedule (the paper
gives none) and the conversions between the paper's env-step periods and Acme's units.
"""
from typing import Callable, NamedTuple, Optional, Sequence

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import optax
import rlax
from acme import specs
from acme.agents import agent as acme_agent
from acme.agents import replay as acme_replay
from acme.agents.jax import actor_core as actor_core_lib
from acme.agents.jax import actors
from acme.agents.jax.dqn import learning_lib, losses
from acme.jax import networks as networks_lib
from acme.jax import variable_utils
from acme.utils import counting, loggers

from agents.dqn_config import DQNConfig  # noqa: F401  (part of this module's API)

ADDER_MAX_IN_FLIGHT = 5   # acme.adders.reverb.NStepTransitionAdder's default max_in_flight_items


def make_network(spec: specs.EnvironmentSpec,
                 hidden_sizes: Sequence[int]) -> networks_lib.FeedForwardNetwork:
  """Q-values of every action from a flat observation: an MLP with ReLU hidden layers."""
  if len(spec.observations.shape) != 1:
    raise ValueError(f'DQN here takes vector observations; this environment gives shape '
                     f'{tuple(spec.observations.shape)}')
  num_actions = spec.actions.num_values

  def q_values(obs):
    return hk.nets.MLP([*map(int, hidden_sizes), num_actions])(obs.astype(jnp.float32))

  transformed = hk.without_apply_rng(hk.transform(q_values))
  dummy = jnp.zeros((1, *spec.observations.shape), spec.observations.dtype)
  return networks_lib.FeedForwardNetwork(init=lambda key: transformed.init(key, dummy),
                                         apply=transformed.apply)


def make_loss(config: DQNConfig) -> learning_lib.LossFn:
  if config.algorithm == 'mdqn':
    return losses.MunchausenQLearning(entropy_temperature=config.munchausen_tau,
                                      munchausen_coefficient=config.munchausen_alpha,
                                      clip_value_min=config.munchausen_clip,
                                      discount=config.discount)
  return losses.QLearning(discount=config.discount)


def epsilon_greedy_core(network: networks_lib.FeedForwardNetwork) -> actor_core_lib.ActorCore:
  """An actor core whose 'params' are (network params, epsilon): the actor's variable source
  supplies the current epsilon with the weights, so a changing epsilon does not recompile."""

  def policy(params_and_epsilon, key, observation):
    params, epsilon = params_and_epsilon
    return rlax.epsilon_greedy(epsilon).sample(key, network.apply(params, observation))

  return actor_core_lib.batched_feed_forward_to_actor_core(policy)


class EpsilonVariables:
  """Stands where GenericActor expects a VariableClient: the learner's latest weights (through
  Acme's VariableClient) paired with the epsilon of the current env step."""

  def __init__(self, client: variable_utils.VariableClient, epsilon_fn: Callable[[], float]):
    self._client = client
    self._epsilon_fn = epsilon_fn

  @property
  def params(self):
    return (self._client.params, np.float32(self._epsilon_fn()))

  def update(self, wait: bool = False):
    self._client.update(wait)

  def update_and_wait(self):
    self._client.update_and_wait()


class DQNAgent(NamedTuple):
  agent: acme_agent.Agent          # acts with epsilon-greedy, writes replay, steps the learner
  learner: learning_lib.SGDLearner
  evaluator: actors.GenericActor    # greedy (epsilon 0), writes nothing
  evaluator_variables: 'EpsilonVariables'   # update_and_wait() before each evaluation
  replay: acme_replay.ReverbReplay  # its server must outlive the run


def make_agent(spec: specs.EnvironmentSpec, config: DQNConfig, seed: int,
               env_steps: Callable[[], int], counter: Optional[counting.Counter] = None,
               learner_logger: Optional[loggers.Logger] = None) -> DQNAgent:
  """Builds the agent. `env_steps()` is the training step count the exploration schedule reads."""
  network = make_network(spec, config.hidden_sizes)
  # Uniform replay (priority_exponent None), 1-step transitions: the paper's DQN and M-DQN.
  replay = acme_replay.make_reverb_prioritized_nstep_replay(
      environment_spec=spec, n_step=1, batch_size=config.batch_size,
      max_replay_size=config.replay_size, min_replay_size=config.min_replay_size,
      discount=config.discount, priority_exponent=None)
  key_learner, key_actor, key_eval = jax.random.split(jax.random.PRNGKey(seed), 3)
  learner = learning_lib.SGDLearner(
      network=network, loss_fn=make_loss(config), optimizer=optax.adam(config.learning_rate),
      data_iterator=replay.data_iterator, target_update_period=config.learner_target_period,
      random_key=key_learner, counter=counter, logger=learner_logger)
  core = epsilon_greedy_core(network)
  actor = actors.GenericActor(
      core, key_actor,
      EpsilonVariables(variable_utils.VariableClient(learner, ''),
                       lambda: config.epsilon(env_steps())),
      replay.adder)
  # The evaluator's weights change only when the loop asks (update_and_wait before each
  # evaluation episode), so one episode is played by one fixed policy.
  evaluator_variables = EpsilonVariables(
      variable_utils.VariableClient(learner, '', update_period=10**9), lambda: 0.0)
  evaluator = actors.GenericActor(core, key_eval, evaluator_variables)
  # Acme's Agent: no gradient step before min_replay_size transitions, then one every
  # `update_every` observed transitions (observations_per_step > 1: one step each time the
  # count since the start passes a multiple of it). The adder leaves up to
  # ADDER_MAX_IN_FLIGHT items unconfirmed, and the table's MinSize limiter blocks sampling
  # below min_replay_size: starting at exactly min_replay_size observations, the first
  # sample waited for items that only later steps would flush, and the single-threaded loop
  # hung. Starting that many observations later, the table surely holds min_replay_size.
  agent = acme_agent.Agent(
      actor=actor, learner=learner,
      min_observations=max(config.batch_size, config.min_replay_size) + ADDER_MAX_IN_FLIGHT,
      observations_per_step=float(config.update_every))
  return DQNAgent(agent, learner, evaluator, evaluator_variables, replay)

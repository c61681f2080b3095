"""Feed-forward policy/value networks for IMPALA, shaped as Acme's `IMPALANetworks`.

Acme's IMPALA expects a recurrent core; ours are feed-forward (they learned Cartpole where an
LSTM did not: BUILD_NOTES.md, "Feed-forward IMPALA networks"), so the "core state" is a dummy
scalar carried unchanged.

The architecture is a typed `PolicyNetConfig` (agents.policy_net); `default_policy_config(env_name,
image)` gives the environment's preset one (envs.presets; Appendix C).
"""
from typing import Optional

from acme import specs
from acme.agents.jax.impala import networks as impala_networks

from agents.policy_net import (  # noqa: F401  (re-exported: the policy network's parts)
  DUMMY_CORE_STATE,
  INITS,
  PolicyNetConfig,
  PolicyValueNet,
  centre_on_agent,
  default_policy_config,
)


def is_image_spec(env_spec: specs.EnvironmentSpec) -> bool:
  return len(env_spec.observations.shape) == 3


def make_networks(env_spec: specs.EnvironmentSpec,
                  config: Optional[PolicyNetConfig] = None) -> impala_networks.IMPALANetworks:
  """IMPALA networks for `env_spec`. Pass `default_policy_config(env_name, ...)`; without a
  config the network is chosen by observation kind only (Sokoban's for images, else Cartpole's)."""
  num_actions = env_spec.actions.num_values
  if config is None:
    config = default_policy_config(None, is_image_spec(env_spec))

  def forward_fn(obs, state):
    # Actors pass one unbatched observation; the torso expects a leading batch axis.
    logits, value = PolicyValueNet(num_actions, config)(obs[None])
    return (logits[0], value[0]), state

  def initial_state_fn(batch_size=None):
    del batch_size
    return DUMMY_CORE_STATE

  def unroll_fn(obs_sequence, state):
    # Feed-forward: the leading (time) axis is just a batch axis.
    logits, values = PolicyValueNet(num_actions, config)(obs_sequence)
    return (logits, values), state

  return impala_networks.make_haiku_networks(
      env_spec=env_spec, forward_fn=forward_fn, initial_state_fn=initial_state_fn,
      unroll_fn=unroll_fn)

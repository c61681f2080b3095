"""Feed-forward policy/value networks for IMPALA, shaped as Acme's `IMPALANetworks`.

Acme's IMPALA expects a recurrent core; ours are feed-forward (they learned Cartpole where an
LSTM did not, see ARCHITECTURE.md), so the "core state" is a dummy scalar carried unchanged.
"""
from typing import Tuple

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
from acme import specs
from acme.agents.jax.impala import networks as impala_networks

DUMMY_CORE_STATE = jnp.zeros((), jnp.float32)


class PolicyValueNet(hk.Module):
  """Torso (MLP for vectors, CNN for images) + policy logits and value heads."""

  def __init__(self, num_actions: int, image: bool, hidden: Tuple[int, ...] = (64, 64)):
    super().__init__(name='policy_value')
    self._num_actions = num_actions
    self._image = image
    self._hidden = hidden

  def __call__(self, obs):
    x = obs
    if self._image:
      x = x.astype(jnp.float32) / 255.0
      # Sokoban agent of App. C.3: convs 8/16/16 (3x3, strides 2,1,1), ReLU except the last.
      x = jax.nn.relu(hk.Conv2D(8, 3, stride=2, padding='VALID')(x))
      x = jax.nn.relu(hk.Conv2D(16, 3, stride=1, padding='VALID')(x))
      x = hk.Conv2D(16, 3, stride=1, padding='SAME')(x)
    x = hk.Flatten()(x.astype(jnp.float32))
    for size in self._hidden:
      x = jax.nn.relu(hk.Linear(size)(x))
    logits = hk.Linear(self._num_actions, name='policy')(x)
    value = hk.Linear(1, name='value')(x)[..., 0]
    return logits, value


def make_networks(env_spec: specs.EnvironmentSpec) -> impala_networks.IMPALANetworks:
  num_actions = env_spec.actions.num_values
  image = len(env_spec.observations.shape) == 3

  def forward_fn(obs, state):
    # Actors pass one unbatched observation; the torso expects a leading batch axis.
    logits, value = PolicyValueNet(num_actions, image)(obs[None])
    return (logits[0], value[0]), state

  def initial_state_fn(batch_size=None):
    del batch_size
    return DUMMY_CORE_STATE

  def unroll_fn(obs_sequence, state):
    # Feed-forward: the leading (time) axis is just a batch axis.
    logits, values = PolicyValueNet(num_actions, image)(obs_sequence)
    return (logits, values), state

  return impala_networks.make_haiku_networks(
      env_spec=env_spec, forward_fn=forward_fn, initial_state_fn=initial_state_fn,
      unroll_fn=unroll_fn)


def core_state_spec():
  return np.zeros((), np.float32)

"""Feed-forward policy/value networks for IMPALA, shaped as Acme's `IMPALANetworks`.

Acme's IMPALA expects a recurrent core; ours are feed-forward (they learned Cartpole where an
LSTM did not, see ARCHITECTURE.md), so the "core state" is a dummy scalar carried unchanged.

The architecture is a typed `PolicyNetConfig`; `default_policy_config(env_name, image)` gives the
paper's agent network for each environment (Appendix C).
"""
import dataclasses
from typing import Optional, Tuple

import haiku as hk
import jax
import jax.numpy as jnp
from acme import specs
from acme.agents.jax.impala import networks as impala_networks

from envs import sokoban as sokoban_env

DUMMY_CORE_STATE = jnp.zeros((), jnp.float32)
INITS = ('lecun', 'orthogonal')


@dataclasses.dataclass(frozen=True)
class PolicyNetConfig:
  """Torso -> shared hidden layers -> separate policy and value heads.

  torso='conv': 3x3 convs (conv_channels/conv_strides/conv_paddings), ReLU after each except
  possibly the last, flattened; torso='mlp': the observation flattened. Then `shared_hidden`
  (ReLU) for both heads, then for each head its own `head_hidden` (ReLU) and a final linear layer
  (num_actions logits / one value).
  """
  torso: str = 'mlp'
  conv_channels: Tuple[int, ...] = ()
  conv_strides: Tuple[int, ...] = ()
  conv_paddings: Tuple[str, ...] = ()
  relu_after_last_conv: bool = True
  shared_hidden: Tuple[int, ...] = (64, 64)
  head_hidden: Tuple[int, ...] = ()
  # 'lecun': Haiku's default (truncated normal, variance 1/fan_in). 'orthogonal': orthogonal
  # weights with gain sqrt(2) for ReLU layers, 0.01 for the policy logits (a near-uniform first
  # policy) and 1 for the value, zero biases (the PPO/A2C convention).
  init: str = 'lecun'
  # Image torsos only: RGB colours that mark the agent's cell. When given, each HxW image is
  # first placed on a (2H-1)x(2W-1) canvas of zeros with the agent's cell at its centre: the
  # whole room stays in view, and what lies next to the agent always reaches the same inputs
  # of the dense layers (they are not translation-invariant, the convs are).
  centre_on: Tuple[Tuple[int, int, int], ...] = ()
  # With centre_on: the canvas's side (odd). 0: 2H-1, every cell of an HxW image in view
  # wherever the agent stands. A room whose outer ring is always wall (zeros, as the canvas's
  # fill) loses nothing at 2H-3: Sokoban's 10x10 rooms on 15x15 show what 19x19 shows.
  canvas_size: int = 0

  def __post_init__(self):
    if self.torso not in ('mlp', 'conv'):
      raise ValueError(f"policy torso must be 'mlp' or 'conv', got {self.torso!r}")
    n = len(self.conv_channels)
    if self.torso == 'conv' and (not n or len(self.conv_strides) != n or
                                 len(self.conv_paddings) != n):
      raise ValueError('conv policy torso needs conv_channels, conv_strides and conv_paddings '
                       'of equal, non-zero length')
    if self.init not in INITS:
      raise ValueError(f'policy init must be one of {INITS}, got {self.init!r}')
    if self.canvas_size and (self.canvas_size < 1 or self.canvas_size % 2 == 0):
      raise ValueError(f'canvas_size must be odd (the agent at its centre), got {self.canvas_size}')
    if self.canvas_size and not self.centre_on:
      raise ValueError('canvas_size applies only with centre_on (a canvas centred on the agent)')
    if any(p not in ('VALID', 'SAME') for p in self.conv_paddings):
      raise ValueError(f"conv_paddings must be 'VALID' or 'SAME', got {self.conv_paddings}")


# Appendix C agent networks, by environment.
POLICY_DEFAULTS = {
    # C.3 (Sokoban): convs 8/16/16, 3x3, strides 2/1/1, ReLU except after the last; 2 shared FC
    # layers of 64 + ReLU; policy and value each get their own FC layer of 64 + ReLU. C.3 names
    # no padding: SAME (Haiku's and so Acme's default) keeps 5x5x16 = 400 features of a 10x10
    # room; VALID would leave nothing after the third conv (10 -> 4 -> 2 -> 0). C.3 names no
    # initialisation: with Haiku's default (variance 1/fan_in) the signal's variance halves at
    # each of the 6 ReLU layers, every state got nearly the same value and policy, and no level
    # was learned; orthogonal weights with ReLU gain (and a near-uniform first policy) learn
    # them (BUILD_NOTES.md, "Sokoban learning"). Not in C.3: the room is first centred on the
    # agent, on a 15x15 canvas (-> 8x8x16 = 1024 features). With the room as drawn, the dense
    # layers must learn "box ahead, target beyond" once per agent position, and on the 1k set
    # the agent stayed at random play for 9M steps; centred, it left it within 1M. The canvas
    # was 19x19 (2H-1) until a room's outer ring, always wall, was seen to be what the canvas's
    # zeros already show: 15x15 holds the same cells at 0.65x the learner's CPU per frame
    # (BUILD_NOTES.md, "Sokoban learning" and "Sokoban throughput").
    'sokoban': PolicyNetConfig(torso='conv', conv_channels=(8, 16, 16), conv_strides=(2, 1, 1),
                               conv_paddings=('SAME',) * 3,
                               relu_after_last_conv=False, shared_hidden=(64, 64),
                               head_hidden=(64,), init='orthogonal',
                               centre_on=sokoban_env.PLAYER_COLOURS, canvas_size=15),
    # C.2 (Turf PPO agent): convs 32/64/64, flatten, FC 512, ReLU after every layer, linear
    # policy and value. The observation is a 10x10x3 image: 3x3 stride-1 VALID convs give
    # 8x8 -> 6x6 -> 4x4 (1024 features), the same convs as the Turf psi/phi encoder; SAME would
    # keep 10x10 and make the 512 layer ~6x larger for no gain in receptive field.
    'turf': PolicyNetConfig(torso='conv', conv_channels=(32, 64, 64), conv_strides=(1, 1, 1),
                            conv_paddings=('VALID',) * 3, relu_after_last_conv=True,
                            shared_hidden=(512,), head_hidden=()),
    # C.4 (Cartpole PPO): "both the policy network and the value network are composed of two
    # hidden layers of size 64": two separate 2x64 MLPs, nothing shared. Cliff (vector
    # observation, not specified in the paper) uses the same.
    'cartpole': PolicyNetConfig(torso='mlp', shared_hidden=(), head_hidden=(64, 64)),
    'cliff': PolicyNetConfig(torso='mlp', shared_hidden=(), head_hidden=(64, 64)),
}


# What runs used before their config.json named the policy network (RunConfig.policy_network):
# their checkpoints and --resume need it back. Sokoban's canvas was then 2H-1 (19x19).
LEGACY_POLICY_DEFAULTS = {
    'sokoban': dataclasses.replace(POLICY_DEFAULTS['sokoban'], canvas_size=0),
}


def default_policy_config(env_name: Optional[str], image: bool) -> PolicyNetConfig:
  """The paper's agent network for `env_name`; unknown envs: Sokoban's for images, else
  Cartpole's."""
  config = POLICY_DEFAULTS.get(env_name)
  if config is None or (config.torso == 'conv') != image:
    config = POLICY_DEFAULTS['sokoban' if image else 'cartpole']
  return config


def is_image_spec(env_spec: specs.EnvironmentSpec) -> bool:
  return len(env_spec.observations.shape) == 3


def centre_on_agent(images: jnp.ndarray, colours, size: int = 0) -> jnp.ndarray:
  """[B, H, W, C] -> [B, S, S, C] (S = `size`, 0: 2H-1 by 2W-1): each image on a zero canvas,
  shifted so that its first pixel of one of `colours` is at the canvas's centre. An image without
  such a pixel keeps (0, 0) there."""
  _, h, w, ch = images.shape
  marks = jnp.asarray(colours, images.dtype)                       # [K, C]
  is_agent = jnp.any(jnp.all(images[..., None, :] == marks, axis=-1), axis=-1)   # [B, H, W]
  flat = jnp.argmax(is_agent.reshape(is_agent.shape[0], -1), axis=-1)
  rows, cols = flat // w, flat % w

  rows_out, cols_out = (size, size) if size else (2 * h - 1, 2 * w - 1)
  # Padded so that every window of the output's size centred on a pixel of the image fits.
  ph, pw = max(h - 1, rows_out // 2), max(w - 1, cols_out // 2)

  def shift(image, r, c):
    canvas = jnp.pad(image, ((ph, ph), (pw, pw), (0, 0)))
    return jax.lax.dynamic_slice(canvas, (r + ph - rows_out // 2, c + pw - cols_out // 2, 0),
                                 (rows_out, cols_out, ch))

  return jax.vmap(shift)(images, rows, cols)


class PolicyValueNet(hk.Module):
  """Torso + shared hidden layers + separate policy-logits and value heads."""

  def __init__(self, num_actions: int, config: PolicyNetConfig):
    super().__init__(name='policy_value')
    self._num_actions = num_actions
    self._config = config

  def _weights(self, gain: float):
    """Layer initialisers: Haiku's defaults, or orthogonal with `gain` and zero biases."""
    if self._config.init == 'lecun':
      return {}
    return {'w_init': hk.initializers.Orthogonal(gain), 'b_init': jnp.zeros}

  def __call__(self, obs):
    c = self._config
    relu_gain = 2 ** 0.5
    x = obs.astype(jnp.float32)
    if c.torso == 'conv':
      if c.centre_on:
        x = centre_on_agent(x, c.centre_on, c.canvas_size)
      x = x / 255.0  # image observations are RGB bytes
      n = len(c.conv_channels)
      for i, (ch, st, pad) in enumerate(zip(c.conv_channels, c.conv_strides, c.conv_paddings)):
        x = hk.Conv2D(ch, 3, stride=st, padding=pad, name=f'conv_{i}',
                      **self._weights(relu_gain))(x)
        if i < n - 1 or c.relu_after_last_conv:
          x = jax.nn.relu(x)
    x = hk.Flatten()(x)
    for i, size in enumerate(c.shared_hidden):
      x = jax.nn.relu(hk.Linear(size, name=f'shared_{i}', **self._weights(relu_gain))(x))
    p, v = x, x
    for i, size in enumerate(c.head_hidden):
      p = jax.nn.relu(hk.Linear(size, name=f'policy_hidden_{i}', **self._weights(relu_gain))(p))
      v = jax.nn.relu(hk.Linear(size, name=f'value_hidden_{i}', **self._weights(relu_gain))(v))
    logits = hk.Linear(self._num_actions, name='policy', **self._weights(0.01))(p)
    value = hk.Linear(1, name='value', **self._weights(1.0))(v)[..., 0]
    return logits, value


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

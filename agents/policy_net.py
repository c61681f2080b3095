"""The policy/value network itself: its typed configuration, each environment's preset one, and
the Haiku module, with nothing of Acme, Reverb or TensorFlow (jax, haiku and the presets' data),
so that the learner's step (agents.impala_step) runs where only jax, haiku, optax and rlax are
installed, and a launcher checks its configuration without importing Acme.
agents.networks wraps it in Acme's `IMPALANetworks`.
"""
import dataclasses
from typing import Optional, Tuple

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np

from envs import presets

# numpy, not jnp: a jnp array made at import would start jax's backends before a process could
# ask XLA for host devices (agents.host_devices.request_host_devices).
DUMMY_CORE_STATE = np.zeros((), np.float32)
INITS = ('lecun', 'orthogonal')
TORSOS = ('mlp', 'conv', 'resnet')
IMAGE_TORSOS = ('conv', 'resnet')


@dataclasses.dataclass(frozen=True)
class PolicyNetConfig:
  """Torso -> shared hidden layers -> separate policy and value heads.

  torso='conv': 3x3 convs (conv_channels/conv_strides/conv_paddings), ReLU after each except
  possibly the last, flattened; torso='resnet': per stage, a 3x3 conv (its channels, stride
  and padding) then `residual_blocks` residual blocks x + conv(relu(conv(relu(x)))) of 3x3 SAME
  convs, and a ReLU before flattening (IMPALA's ResNet without its pooling: rooms are small);
  torso='mlp': the observation flattened. Then `shared_hidden`
  (ReLU) for both heads, then for each head its own `head_hidden` (ReLU) and a final linear layer
  (num_actions logits / one value).
  """
  torso: str = 'mlp'
  conv_channels: Tuple[int, ...] = ()
  conv_strides: Tuple[int, ...] = ()
  conv_paddings: Tuple[str, ...] = ()
  relu_after_last_conv: bool = True
  residual_blocks: int = 0   # torso='resnet': residual blocks after each stage's conv
  shared_hidden: Tuple[int, ...] = (64, 64)
  head_hidden: Tuple[int, ...] = ()
  # 'lecun': Haiku's default (truncated normal, variance 1/fan_in). 'orthogonal': orthogonal
  # weights with gain sqrt(2) for ReLU layers, 0.01 for the policy logits (a near-uniform first
  # policy) and 1 for the value, zero biases (the PPO/A2C convention).
  init: str = dataclasses.field(default='lecun', metadata={
      'help': "The policy network's initialisation: 'lecun' (Haiku's default, as in Acme) or "
              "'orthogonal' (ReLU gain, near-uniform first policy).",
      'choices': INITS})
  # What multiplies an image's RGB bytes before the first convolution. 1/255 puts them in [0, 1];
  # 1 feeds the bytes as they are, as a network given gym-sokoban's tiny_rgb_array unscaled sees
  # them (App. C.3 names no scaling): with Haiku's initialisation its first policy is then far
  # from uniform (BUILD_NOTES.md, "The authors' recipe at equal learner updates").
  pixel_scale: float = dataclasses.field(default=1 / 255, metadata={
      'help': "Image policies: the factor on the RGB bytes before the first convolution "
              "(1/255: [0, 1]; 1: the bytes as they are)."})
  # Image torsos only: RGB colours that mark the agent's cell. When given, each HxW image is
  # first placed on a (2H-1)x(2W-1) canvas of zeros with the agent's cell at its centre: the
  # whole room stays in view, and what lies next to the agent always reaches the same inputs
  # of the dense layers (they are not translation-invariant, the convs are).
  centre_on: Tuple[Tuple[int, int, int], ...] = ()
  # With centre_on: the canvas's side (odd). 0: 2H-1, every cell of an HxW image in view
  # wherever the agent stands. A room whose outer ring is always wall (zeros, as the canvas's
  # fill) loses nothing at 2H-3: Sokoban's 10x10 rooms on 15x15 show what 19x19 shows.
  canvas_size: int = dataclasses.field(default=0, metadata={
      'help': "Image policies centred on the agent (sokoban): the canvas's side, odd; 0: 2H-1."})

  def __post_init__(self):
    if self.torso not in TORSOS:
      raise ValueError(f'policy torso must be one of {TORSOS}, got {self.torso!r}')
    n = len(self.conv_channels)
    if self.torso == 'resnet' and self.residual_blocks < 1:
      raise ValueError(f'a resnet torso needs residual_blocks >= 1, got {self.residual_blocks}')
    if self.torso != 'resnet' and self.residual_blocks:
      raise ValueError(f'residual_blocks apply to the resnet torso, not to {self.torso!r}')
    if self.torso in IMAGE_TORSOS and (not n or len(self.conv_strides) != n or
                                 len(self.conv_paddings) != n):
      raise ValueError(f'{self.torso} policy torso needs conv_channels, conv_strides and conv_paddings '
                       'of equal, non-zero length')
    if self.init not in INITS:
      raise ValueError(f'policy init must be one of {INITS}, got {self.init!r}')
    if self.canvas_size and (self.canvas_size < 1 or self.canvas_size % 2 == 0):
      raise ValueError(f'canvas_size must be odd (the agent at its centre), got {self.canvas_size}')
    if self.canvas_size and not self.centre_on:
      raise ValueError('canvas_size applies only with centre_on (a canvas centred on the agent)')
    if not self.pixel_scale > 0:
      raise ValueError(f'pixel_scale must be > 0, got {self.pixel_scale}')
    if any(p not in ('VALID', 'SAME') for p in self.conv_paddings):
      raise ValueError(f"conv_paddings must be 'VALID' or 'SAME', got {self.conv_paddings}")


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


def prepare_image(images: jnp.ndarray, config: 'PolicyNetConfig') -> jnp.ndarray:
  """[B, H, W, C] RGB bytes as floats -> what the first convolution takes: centred on the agent
  where the config says so, times its pixel_scale. The learner's network and the actors' folded
  form (agents.policy_inference) both start here."""
  if config.centre_on:
    images = centre_on_agent(images, config.centre_on, config.canvas_size)
  return images * config.pixel_scale


def default_policy_config(env_name: Optional[str], image: bool) -> PolicyNetConfig:
  """The policy network of `env_name`'s preset (envs.presets; Appendix C); without an
  environment (None), by observation kind: Sokoban's for images, else Cartpole's. An environment
  without a preset, or whose preset's torso does not fit its observations, is a ValueError (one
  line)."""
  if env_name is None:
    env_name = 'sokoban' if image else 'cartpole'
  config = PolicyNetConfig(**presets.get(env_name).policy_network)
  check_fits(config, env_name, image)
  return config


def named_policy_config(name: str, env_name: str, image: bool) -> PolicyNetConfig:
  """Policy-network preset `name` (envs.presets.policy_network_names) for `env_name`; a
  ValueError (one line) for an unknown name, another environment's, or one that does not fit."""
  config = PolicyNetConfig(**presets.policy_network(name, env_name))
  check_fits(config, name, image)
  return config


def check_fits(config: PolicyNetConfig, name: str, image: bool) -> None:
  if (config.torso in IMAGE_TORSOS) != image:
    raise ValueError(f'the {name} preset\'s policy network has a {config.torso} torso, '
                     f'which does not fit {"image" if image else "vector"} observations')


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
    if c.torso == 'resnet':
      x = prepare_image(x, c)
      for i, (ch, st, pad) in enumerate(zip(c.conv_channels, c.conv_strides, c.conv_paddings)):
        x = hk.Conv2D(ch, 3, stride=st, padding=pad, name=f'conv_{i}',
                      **self._weights(relu_gain))(x)
        for j in range(c.residual_blocks):
          y = x
          for k in range(2):
            y = hk.Conv2D(ch, 3, padding='SAME', name=f'block_{i}_{j}_conv_{k}',
                          **self._weights(relu_gain))(jax.nn.relu(y))
          x = x + y
      x = jax.nn.relu(x)
    if c.torso == 'conv':
      x = prepare_image(x, c)
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


def make_unroll(num_actions: int, config: PolicyNetConfig) -> hk.Transformed:
  """The network over a batch of observations, as Acme's `unroll_fn` is called:
  init(key, observations, core_state) -> params; apply(params, observations, core_state) ->
  ((logits, values), core_state). The core state (a dummy, the nets are feed-forward) passes
  through."""

  def unroll(observations, state):
    return PolicyValueNet(num_actions, config)(observations), state

  return hk.without_apply_rng(hk.transform(unroll))

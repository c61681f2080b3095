"""Haiku networks for the precedence estimator psi(x, x') and the reversibility estimator phi(x, a).

psi is Siamese: one encoder embeds each observation, the two embeddings are concatenated and a
head maps them to one logit (sigmoid(logit) = probability that x comes before x').
phi encodes one observation and outputs one logit per action (sigmoid = reversibility of a in x);
by default (`phi_encoder='torso'`, the paper's form) its own encoder is psi's conv layers only
(separate weights; nothing for vectors), without psi's MLP/embedding layers.

The architecture is described by a typed `EstimatorNetConfig` (the estimator network; the agent's
is agents.networks.PolicyNetConfig, the policy network), stored in checkpoints so that a saved
estimator can be rebuilt with one call. Each environment's estimator network is in its preset
(envs.presets, `estimator_network`; Appendix C).
"""
import dataclasses
from typing import Optional, Sequence, Tuple

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np

from envs import presets

PHI_ENCODERS = ('torso', 'full')
PSI_FUSIONS = ('siamese', 'early')
# The last commit that reads a network config written before phi_encoder was recorded (its phi
# used psi's whole encoder, what 'full' names now).
EARLIER_FORMAT_READER = '8d33eeb7de'


class EarlierFormatError(ValueError):
  """A network config written by a version this one does not read (one line)."""


@dataclasses.dataclass(frozen=True)
class EstimatorNetConfig:
  """The estimator network (psi and phi): what the encoder and heads look like. `torso='mlp'`
  for vectors, `'conv'` for images."""
  torso: str = 'mlp'
  mlp_sizes: Tuple[int, ...] = dataclasses.field(default=(64, 64), metadata={
      'help': "Encoder MLP layer sizes (torso 'mlp'), e.g. 64,64."})
  conv_channels: Tuple[int, ...] = dataclasses.field(default=(), metadata={
      'help': "Encoder 3x3 conv channels (torso 'conv'), e.g. 32,64,64."})
  conv_strides: Tuple[int, ...] = dataclasses.field(default=(), metadata={
      'help': 'Encoder conv strides, one per conv, e.g. 1,1,1.'})
  # VALID shrinks a 10x10 Sokoban frame to 2x2 after the paper's two convs (stride 2 then 1);
  # SAME keeps 5x5 (Haiku's default, and what a Haiku implementation gets unless it asks).
  conv_padding: str = dataclasses.field(default='VALID', metadata={
      'help': 'Padding of the encoder convs.', 'choices': ('VALID', 'SAME')})
  relu_after_last_conv: bool = True            # the Sokoban net has no ReLU after its last conv
  embedding_size: Optional[int] = None         # linear projection of each flattened embedding
  embedding_relu: bool = dataclasses.field(default=False, metadata={
      'help': "A ReLU after psi's embedding projection, before the concatenation (the authors' "
              'released Turf net, GrasslandRev; App. C.2 draws a linear one).'})
  psi_head_sizes: Tuple[int, ...] = ()         # hidden layers after the concatenation
  phi_hidden_sizes: Tuple[int, ...] = (64,)    # phi: hidden layers after the encoder
  dropout: float = dataclasses.field(default=0.0, metadata={
      'help': 'Dropout in the psi head (Sokoban: 0.1).'})
  # How psi sees its two observations. 'siamese': one encoder embeds each, the head compares the
  # embeddings (App. C.1's Cartpole net). 'early': x and x' stacked along channels go through one
  # encoder, so the convs see where the two frames differ (a pushed box) directly.
  psi_fusion: str = dataclasses.field(default='siamese', metadata={
      'help': "How psi sees its two observations: 'siamese' embeds each, 'early' stacks both "
              'along channels first.', 'choices': PSI_FUSIONS})
  # What phi's encoder is. 'torso' (the paper, App. C.4/C.6): the conv layers only, flattened
  # (torso='conv'), or nothing but a flatten (torso='mlp'); no mlp_sizes, no embedding
  # projection. 'full': psi's whole encoder (convs/MLP + embedding).
  phi_encoder: str = 'torso'

  def __post_init__(self):
    if self.torso not in ('mlp', 'conv'):
      raise ValueError(f"network torso must be 'mlp' or 'conv', got {self.torso!r}")
    if self.torso == 'conv' and (not self.conv_channels or
                                 len(self.conv_channels) != len(self.conv_strides)):
      raise ValueError('conv torso needs conv_channels and conv_strides of equal, non-zero length')
    if self.psi_fusion not in PSI_FUSIONS:
      raise ValueError(f"psi_fusion must be one of {PSI_FUSIONS}, got {self.psi_fusion!r}")
    if self.conv_padding not in ('VALID', 'SAME'):
      raise ValueError(f"conv_padding must be 'VALID' or 'SAME', got {self.conv_padding!r}")
    if not 0.0 <= self.dropout < 1.0:
      raise ValueError(f'dropout must be in [0, 1), got {self.dropout}')
    if self.phi_encoder not in PHI_ENCODERS:
      raise ValueError(f"phi_encoder must be one of {PHI_ENCODERS}, got {self.phi_encoder!r}")

  def to_dict(self):
    return dataclasses.asdict(self)

  @classmethod
  def from_dict(cls, d):
    fields = {f.name for f in dataclasses.fields(cls)}
    unknown = set(d) - fields
    if unknown:
      raise ValueError(f'unknown network config field(s): {sorted(unknown)}')
    if 'phi_encoder' not in d:  # its default is not what such a config's phi was built with
      raise EarlierFormatError('the network config lacks phi_encoder: it was written by an '
                               f'earlier version; commit {EARLIER_FORMAT_READER} is the last that '
                               'reads it')
    return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})


def default_estimator_config(name: str) -> EstimatorNetConfig:
  """The psi/phi network of environment `name`'s preset (envs.presets), or of a named variant
  ('sokoban_paper': the paper's, App. C.3); envs.presets.PresetError (one line) for a name
  without one."""
  return EstimatorNetConfig(**presets.estimator_network(name))


class Encoder(hk.Module):
  """Embeds a batch of observations [B, ...] into vectors [B, D]."""

  def __init__(self, config: EstimatorNetConfig, name: str = 'encoder', torso_only: bool = False):
    """torso_only: convs only (conv torso) / just a flatten (mlp torso), no embedding."""
    super().__init__(name=name)
    self._config = config
    self._torso_only = torso_only

  def __call__(self, x: jnp.ndarray) -> jnp.ndarray:
    c = self._config
    is_image_bytes = x.dtype == jnp.uint8
    x = x.astype(jnp.float32)
    if is_image_bytes:
      x = x / 255.0  # image observations arrive as uint8 RGB
    if c.torso == 'conv':
      n = len(c.conv_channels)
      for i, (ch, st) in enumerate(zip(c.conv_channels, c.conv_strides)):
        x = hk.Conv2D(ch, kernel_shape=3, stride=st, padding=c.conv_padding)(x)
        if i < n - 1 or c.relu_after_last_conv:
          x = jax.nn.relu(x)
      x = hk.Flatten()(x)
    else:
      x = hk.Flatten()(x)
      if self._torso_only:
        return x
      for size in c.mlp_sizes:
        x = jax.nn.relu(hk.Linear(size)(x))
    if c.embedding_size and not self._torso_only:
      x = hk.Linear(c.embedding_size)(x)
      if c.embedding_relu:
        x = jax.nn.relu(x)
    return x


def _psi_logits(config: EstimatorNetConfig, x: jnp.ndarray, x_next: jnp.ndarray,
                is_training: bool) -> jnp.ndarray:
  encoder = Encoder(config)
  if config.psi_fusion == 'early':
    h = encoder(jnp.concatenate([x, x_next], axis=-1))
  else:  # shared weights: the same module applied to both inputs
    h = jnp.concatenate([encoder(x), encoder(x_next)], axis=-1)
  for size in config.psi_head_sizes:
    h = jax.nn.relu(hk.Linear(size)(h))
    if is_training and config.dropout > 0:
      h = hk.dropout(hk.next_rng_key(), config.dropout, h)
  return hk.Linear(1, name='psi_out')(h)[..., 0]


def _phi_logits(config: EstimatorNetConfig, num_actions: int, x: jnp.ndarray) -> jnp.ndarray:
  h = Encoder(config, name='phi_encoder', torso_only=config.phi_encoder == 'torso')(x)
  for size in config.phi_hidden_sizes:
    h = jax.nn.relu(hk.Linear(size)(h))
  return hk.Linear(num_actions, name='phi_out')(h)


@dataclasses.dataclass(frozen=True)
class Estimators:
  """Pure functions: psi_apply(params, rng, x, x', is_training) -> logits [B];
  phi_apply(params, x) -> logits [B, A]. rng may be None when is_training is False."""
  config: EstimatorNetConfig
  num_actions: int
  psi_init: callable
  psi_apply: callable
  phi_init: callable
  phi_apply: callable


def make_estimators(config: EstimatorNetConfig, num_actions: int) -> Estimators:
  psi = hk.transform(lambda x, y, is_training: _psi_logits(config, x, y, is_training))
  phi = hk.without_apply_rng(hk.transform(lambda x: _phi_logits(config, num_actions, x)))
  return Estimators(config, num_actions,
                    psi_init=lambda key, x: psi.init(key, x, x, False),
                    psi_apply=psi.apply,
                    phi_init=phi.init, phi_apply=phi.apply)


def dummy_batch(obs_shape: Sequence[int], dtype=np.float32) -> np.ndarray:
  return np.zeros((1,) + tuple(obs_shape), dtype=dtype)

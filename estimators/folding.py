"""Networks in their inference form: a convolution with no ReLU after it, flattened into the dense
layer that follows, is one linear map, applied as one matrix.

The Sokoban networks end their convolutions without a ReLU (App. C.3), so that convolution and
the first dense layer after it compose. Applied per frame, the convolution is most of the
network's multiply-adds (psi's second conv: 230k of 333k); the composed matrix costs what the
dense layer alone did. Composing takes one vector-Jacobian product per output unit, so it is done
once per parameter set (a frozen psi: once; an actor's policy: when a new one is fetched), never
per step. The function is the same up to float rounding (`tests/test_folding.py`); training
keeps the layered form, whose parameterisation is what gradient descent sees.

`fold_conv_dense` is the composition; `psi_inference` gives psi's folded form where its network
has one (conv torso, no ReLU after the last conv, no embedding projection, a hidden head layer).
"""
from typing import Callable, NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp

from estimators import networks as nets

DIMENSIONS = ('NHWC', 'HWIO', 'NHWC')   # Haiku's Conv2D layout


def conv(x: jnp.ndarray, w: jnp.ndarray, b, stride: int, padding: str) -> jnp.ndarray:
  """Haiku's Conv2D on a batch [B, H, W, C] with its parameters w [3, 3, C, O] and b [O]."""
  y = jax.lax.conv_general_dilated(x, w, (stride, stride), padding,
                                   dimension_numbers=DIMENSIONS)
  return y + b


def fold_conv_dense(w_conv, b_conv, stride: int, padding: str, in_shape: Tuple[int, ...],
                    w_dense, b_dense) -> Tuple[jnp.ndarray, jnp.ndarray]:
  """(W, b) with flatten(h) @ W + b == flatten(conv(h)) @ w_dense + b_dense for every h of
  `in_shape` [H, W, C]: the conv (no activation after it) and the dense layer as one matrix."""

  def linear(h):
    return conv(h[None], w_conv, 0.0, stride, padding).reshape(-1) @ w_dense

  h0 = jnp.zeros(in_shape, w_conv.dtype)
  _, pullback = jax.vjp(linear, h0)
  rows = jax.vmap(lambda e: pullback(e)[0])(jnp.eye(w_dense.shape[1], dtype=w_dense.dtype))
  matrix = rows.reshape(rows.shape[0], -1).T                      # [H * W * C, out]
  conv_bias = conv(h0[None], jnp.zeros_like(w_conv), b_conv, stride, padding).reshape(-1)
  bias = conv_bias @ w_dense + b_dense
  return matrix, bias


class PsiInference(NamedTuple):
  """psi in its folded form: fold(params) once per parameter set, then
  logits(folded, x, x_next) -> [B] as psi_apply gives them (dropout off)."""
  fold: Callable
  logits: Callable


def _conv_names(config: nets.EstimatorNetConfig):
  n = len(config.conv_channels)
  return [f'encoder/conv2_d{"" if i == 0 else f"_{i}"}' for i in range(n)]


def psi_inference(config: nets.EstimatorNetConfig,
                  obs_shape: Tuple[int, ...]) -> Optional[PsiInference]:
  """psi's folded form for observations of `obs_shape` [H, W, C], or None where the network has
  nothing to fold (an MLP torso, a ReLU after the last conv, an embedding projection, no hidden
  head layer)."""
  c = config
  if (c.torso != 'conv' or c.relu_after_last_conv or c.embedding_size or
      not c.psi_head_sizes):
    return None
  names = _conv_names(c)
  strides, padding = c.conv_strides, c.conv_padding
  channels_in = obs_shape[-1] * (2 if c.psi_fusion == 'early' else 1)

  def torso(params, x):
    """The convs before the last (each with its ReLU), on [B, H, W, C] floats."""
    for name, stride in zip(names[:-1], strides[:-1]):
      x = jax.nn.relu(conv(x, params[name]['w'], params[name]['b'], stride, padding))
    return x

  def torso_shape(x):
    for stride, ch in zip(strides[:-1], c.conv_channels[:-1]):
      x = conv(x, jnp.zeros((3, 3, x.shape[-1], ch), x.dtype), 0.0, stride, padding)
    return x

  in_shape = jax.eval_shape(torso_shape, jax.ShapeDtypeStruct(
      (1,) + tuple(obs_shape[:-1]) + (channels_in,), jnp.float32)).shape[1:]
  last = names[-1]

  def fold(params):
    head = params['linear']
    folded = dict(params)
    if c.psi_fusion == 'early':
      w, b = fold_conv_dense(params[last]['w'], params[last]['b'], strides[-1], padding,
                             in_shape, head['w'], head['b'])
      folded['folded'] = {'w': w, 'b': b}
    else:   # siamese: the head's first layer reads [enc(x), enc(x')], one half each
      half = head['w'].shape[0] // 2
      w_from, b_from = fold_conv_dense(params[last]['w'], params[last]['b'], strides[-1],
                                       padding, in_shape, head['w'][:half], head['b'])
      w_to, b_to = fold_conv_dense(params[last]['w'], params[last]['b'], strides[-1],
                                   padding, in_shape, head['w'][half:], 0.0 * head['b'])
      folded['folded'] = {'w_from': w_from, 'w_to': w_to, 'b': b_from + b_to}
    return folded

  def as_input(x):
    is_image_bytes = x.dtype == jnp.uint8
    x = x.astype(jnp.float32)
    return x / 255.0 if is_image_bytes else x

  def logits(folded, x, x_next):
    f = folded['folded']
    if c.psi_fusion == 'early':
      h = torso(folded, jnp.concatenate([as_input(x), as_input(x_next)], axis=-1))
      z = h.reshape(h.shape[0], -1) @ f['w'] + f['b']
    else:
      h_from, h_to = torso(folded, as_input(x)), torso(folded, as_input(x_next))
      z = (h_from.reshape(h_from.shape[0], -1) @ f['w_from'] +
           h_to.reshape(h_to.shape[0], -1) @ f['w_to'] + f['b'])
    h = jax.nn.relu(z)
    for i in range(1, len(c.psi_head_sizes)):
      layer = folded[f'linear_{i}']
      h = jax.nn.relu(h @ layer['w'] + layer['b'])
    out = folded['psi_out']
    return (h @ out['w'] + out['b'])[..., 0]

  return PsiInference(fold=jax.jit(fold), logits=logits)

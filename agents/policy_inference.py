"""The policy network in its inference form, for the actors: the last convolution (no ReLU after
it) and the first shared dense layer composed into one matrix (estimators.folding).

In the Sokoban policy that convolution is 147k of the frame's 313k multiply-adds; composed, the
actors' forward pass costs about half. The composition is redone only when the actor fetches new
parameters. The learner trains the layered network: the same function, up to float rounding
(`tests/test_folding.py`), but not the same parameterisation for gradient descent.
"""
from typing import Callable, NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp

from agents.policy_net import PolicyNetConfig, prepare_image
from estimators import folding

SCOPE = 'policy_value'


class PolicyInference(NamedTuple):
  """fold(params) once per parameter set; forward(folded, obs [B, ...]) -> (logits [B, A],
  values [B]) as the layered network gives them."""
  fold: Callable
  forward: Callable


def policy_inference(config: PolicyNetConfig,
                     obs_shape: Tuple[int, ...]) -> Optional[PolicyInference]:
  """The folded form for observations of `obs_shape` [H, W, C], or None where there is nothing
  to fold (an MLP torso, a ReLU after the last conv, no shared dense layer)."""
  c = config
  if c.torso != 'conv' or c.relu_after_last_conv or not c.shared_hidden:
    return None
  n = len(c.conv_channels)
  last = f'{SCOPE}/conv_{n - 1}'

  def prepare(obs):
    return prepare_image(obs.astype(jnp.float32), c)

  def torso(params, x):
    for i in range(n - 1):
      p = params[f'{SCOPE}/conv_{i}']
      x = jax.nn.relu(folding.conv(x, p['w'], p['b'], c.conv_strides[i], c.conv_paddings[i]))
    return x

  def torso_shape(x):
    for i in range(n - 1):
      w = jnp.zeros((3, 3, x.shape[-1], c.conv_channels[i]), x.dtype)
      x = folding.conv(x, w, 0.0, c.conv_strides[i], c.conv_paddings[i])
    return x

  probe = jax.ShapeDtypeStruct((1,) + tuple(obs_shape), jnp.uint8)
  in_shape = jax.eval_shape(lambda o: torso_shape(prepare(o)), probe).shape[1:]

  def fold(params):
    dense = params[f'{SCOPE}/shared_0']
    w, b = folding.fold_conv_dense(params[last]['w'], params[last]['b'], c.conv_strides[-1],
                                   c.conv_paddings[-1], in_shape, dense['w'], dense['b'])
    return {**params, 'folded': {'w': w, 'b': b}}

  def linear(params, name, x):
    return x @ params[f'{SCOPE}/{name}']['w'] + params[f'{SCOPE}/{name}']['b']

  def forward(folded, obs):
    h = torso(folded, prepare(obs))
    x = jax.nn.relu(h.reshape(h.shape[0], -1) @ folded['folded']['w'] + folded['folded']['b'])
    for i in range(1, len(c.shared_hidden)):
      x = jax.nn.relu(linear(folded, f'shared_{i}', x))
    p, v = x, x
    for i in range(len(c.head_hidden)):
      p = jax.nn.relu(linear(folded, f'policy_hidden_{i}', p))
      v = jax.nn.relu(linear(folded, f'value_hidden_{i}', v))
    return linear(folded, 'policy', p), linear(folded, 'value', v)[..., 0]

  return PolicyInference(fold=jax.jit(fold), forward=forward)

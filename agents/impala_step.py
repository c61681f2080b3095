"""The IMPALA learner's update -- network, filler-masked V-trace loss, self-imitation, optimiser --
with nothing but jax, haiku, optax, rlax and numpy, so that a script runs it where Launchpad,
Reverb and TensorFlow are not installed (bench/gpu_learner_check.py on a GPU host with a current
jax), and one batch is split over several devices.

    update = impala_step.Update(unroll_fn, optimizer, impala_step.LossConfig(discount=0.99),
                                initial_core=policy_net.DUMMY_CORE_STATE,
                                devices=jax.devices()[:2])
    state = update.init(params)
    state, metrics = update.sgd(state, batch)         # batch: an Acme Trajectory or `Sequences`

Devices: with one (the default) the update is a plain `jax.jit`. With N, each batch is split
over them along its batch axis (jit with the batch sharded, the state replicated): the same
computation, which XLA partitions, every device computing its B/N sequences' gradients and the
mean taken over all B. A CPU offers N devices when the process starts with
`--xla_force_host_platform_device_count=N` in XLA_FLAGS (`agents.host_devices`), which is how
the learner uses every core of a host without a GPU: XLA's CPU backend keeps one device's update
to about one core.
"""
import dataclasses
from typing import Any, Callable, Dict, NamedTuple, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax

from agents import losses, shield
from estimators import updates as update_guard

SKIPPED = update_guard.SKIPPED


class TrainingState(NamedTuple):
  params: Any
  opt_state: Any


class Sequences(NamedTuple):
  """A batch of B sequences of T steps, with the fields of Acme's `Trajectory` that the loss
  reads (scripts without Acme build this; the learner is handed Acme's). extras: 'logits'
  [B, T, A] (the behaviour policy's) and 'core_state' [B, T] (the feed-forward nets' dummy)."""
  observation: Any
  action: Any
  reward: Any
  discount: Any
  start_of_episode: Any
  extras: Dict[str, Any]


@dataclasses.dataclass(frozen=True)
class LossConfig:
  discount: float = 0.99
  entropy_cost: float = 0.01
  baseline_cost: float = 0.5
  max_abs_reward: float = float('inf')
  normalize_advantages: bool = False
  self_imitation_value_cost: float = 0.01
  # V-trace's lambda (agents.losses.masked_vtrace): 1 is IMPALA's, < 1 leans on the value more.
  vtrace_lambda: float = 1.0
  # Small L2 terms: on the logits, the sum of their squares over a sequence's steps and actions,
  # averaged over the batch's sequences (so chunking the batch leaves the loss unchanged); on
  # the weights, the sum of the squares of every parameter.
  logit_l2_cost: float = 0.0
  weight_l2_cost: float = 0.0
  # RAC: the learner's policy restricted to the actions the shield allowed when the step was
  # taken (read from the behaviour logits, agents.shield.allowed_by_behaviour), in V-trace's
  # ratios, the policy gradient, the entropy bonus and the diagnostics alike.
  shield_mask: bool = False


def batch_loss_fn(unroll_fn: Callable, cfg: LossConfig) -> Callable:
  """(params, data) -> (mean loss over the batch's sequences, metrics)."""

  def sequence_vtrace(logits, values, data):
    return losses.masked_vtrace(values, logits, data.extras['logits'], data.action,
                                data.reward, data.discount, data.start_of_episode,
                                discount=cfg.discount, max_abs_reward=cfg.max_abs_reward,
                                lambda_=cfg.vtrace_lambda)

  def sequence_loss(logits, values, data, vtrace, rhos, real, shift, scale):
    return losses.vtrace_loss_terms(logits, values, data.action, vtrace, rhos, real,
                                    baseline_cost=cfg.baseline_cost, entropy_cost=cfg.entropy_cost,
                                    advantage_shift=shift, advantage_scale=scale)

  def batch_loss(params, data):
    # The networks are feed-forward: one pass over all B x T observations (one large conv
    # batch), then the V-trace loss per sequence. Faster on CPU than vmapping the unroll.
    b, t = data.action.shape
    obs = data.observation.reshape((b * t,) + data.observation.shape[2:])
    initial_state = jax.tree_util.tree_map(lambda s: s[0, 0], data.extras['core_state'])
    (logits, values), _ = unroll_fn(params, obs, initial_state)
    logits = logits.reshape((b, t) + logits.shape[1:])
    values = values.reshape((b, t))
    if cfg.shield_mask:
      logits = shield.masked_logits(logits, shield.allowed_by_behaviour(data.extras['logits']))
    vtrace, rhos, real = jax.vmap(sequence_vtrace)(logits, values, data)
    # Advantage normalisation (optional) over the whole batch's real steps.
    shift, scale = (losses.normalising_moments(vtrace.pg_advantage, real)
                    if cfg.normalize_advantages else (0.0, 1.0))
    loss, metrics = jax.vmap(sequence_loss, in_axes=(0, 0, 0, 0, 0, 0, None, None))(
        logits, values, data, vtrace, rhos, real, shift, scale)
    # Per-sequence statistics -> batch: maxima stay maxima, the rest are means.
    metrics = {k: jnp.max(v) if k.endswith('_max') else jnp.mean(v) for k, v in metrics.items()}
    loss = jnp.mean(loss)
    if cfg.logit_l2_cost:
      loss += cfg.logit_l2_cost * jnp.sum(jnp.square(logits)) / b
    if cfg.weight_l2_cost:
      loss += cfg.weight_l2_cost * sum(jnp.sum(jnp.square(p))
                                       for p in jax.tree_util.tree_leaves(params))
    return loss, metrics

  return batch_loss


def split_minibatches(data, minibatches: int) -> list:
  """A batch of B sequences as `minibatches` consecutive slices of B / minibatches, each
  sequence in exactly one: the field's IMPALA takes one Adam step on each, in order."""
  size = data.action.shape[0]
  if minibatches < 1 or size % minibatches:
    raise ValueError(f'a batch of {size} sequences does not split into {minibatches} '
                     'minibatches of equal size')
  step = size // minibatches
  return [jax.tree_util.tree_map(lambda x, i=i: x[i:i + step], data)
          for i in range(0, size, step)]


def apply_gradients(optimizer: optax.GradientTransformation, state: TrainingState, loss, metrics,
                    grads):
  """(state, metrics): the optimiser's step on `grads`, dropped when not finite."""
  updates, opt_state = optimizer.update(grads, state.opt_state)
  params = optax.apply_updates(state.params, updates)
  grad_norm = optax.global_norm(grads)
  metrics = dict(metrics, loss=loss, grad_norm=grad_norm, param_norm=optax.global_norm(params),
                 param_updates_norm=optax.global_norm(updates))
  # The gradient's norm too: finite gradients whose squares overflow float32 clip to zero
  # updates, a learner that has stopped learning without a NaN anywhere.
  new_state, finite = update_guard.keep_if_finite(TrainingState(params, opt_state), state,
                                                  loss, grads, grad_norm)
  return new_state, {**metrics, SKIPPED: 1.0 - finite.astype(jnp.float32)}


def sgd_step_fn(unroll_fn: Callable, optimizer: optax.GradientTransformation,
                cfg: LossConfig) -> Callable:
  """(state, data) -> (state, metrics): one V-trace update, dropped when not finite."""
  batch_loss = batch_loss_fn(unroll_fn, cfg)

  def sgd_step(state: TrainingState, data):
    (loss, metrics), grads = jax.value_and_grad(batch_loss, has_aux=True)(state.params, data)
    return apply_gradients(optimizer, state, loss, metrics, grads)

  return sgd_step


def chunk_gradients_fn(unroll_fn: Callable, cfg: LossConfig) -> Callable:
  """(params, chunk, weight) -> (loss, metrics, grads) of a chunk of a batch's sequences, each
  times `weight` (the chunk's share of the batch) but the maxima: summed over the chunks (maxima
  maxed, `combine`), the batch's mean loss, its metrics and their gradients."""
  batch_loss = batch_loss_fn(unroll_fn, cfg)

  def chunk_gradients(params, chunk, weight):
    (loss, metrics), grads = jax.value_and_grad(batch_loss, has_aux=True)(params, chunk)
    metrics = {k: v if k.endswith('_max') else v * weight for k, v in metrics.items()}
    return loss * weight, metrics, jax.tree_util.tree_map(lambda g: g * weight, grads)

  return chunk_gradients


def combine(a, b):
  """Two chunks' (loss, metrics, grads) summed, the metrics' maxima maxed."""
  loss = a[0] + b[0]
  metrics = {k: jnp.maximum(v, b[1][k]) if k.endswith('_max') else v + b[1][k]
             for k, v in a[1].items()}
  return loss, metrics, jax.tree_util.tree_map(jnp.add, a[2], b[2])


def imitation_step_fn(unroll_fn: Callable, optimizer: optax.GradientTransformation,
                      initial_core, value_cost: float) -> Callable:
  """(state, observations, actions, returns) -> (state, metrics): one self-imitation update
  with the same optimiser (and its state) as the V-trace updates, as in Oh et al. (2018)."""

  def imitation_loss(params, observations, actions, returns):
    (logits, values), _ = unroll_fn(params, observations, initial_core)
    return losses.self_imitation_loss(logits, values, actions, returns, value_cost=value_cost)

  def imitation_step(state: TrainingState, observations, actions, returns):
    (loss, metrics), grads = jax.value_and_grad(imitation_loss, has_aux=True)(
        state.params, observations, actions, returns)
    updates, opt_state = optimizer.update(grads, state.opt_state)
    metrics.update(sil_loss=loss, sil_grad_norm=optax.global_norm(grads))
    new_state, _ = update_guard.keep_if_finite(
        TrainingState(optax.apply_updates(state.params, updates), opt_state), state, loss, grads)
    return new_state, metrics

  return imitation_step


class Update:
  """The jitted V-trace and self-imitation updates, over one device or split over several."""

  def __init__(self, unroll_fn: Callable, optimizer: optax.GradientTransformation,
               cfg: LossConfig = LossConfig(), initial_core=None,
               devices: Optional[Sequence[Any]] = None, chunk_sequences: int = 0):
    """chunk_sequences: on one device, the batch's gradient taken over chunks of this many
    sequences, one call each, and summed (0: the whole batch in one call). The same update up
    to float rounding; on a CPU a chunk's activations stay in the core's cache."""
    self.optimizer = optimizer
    self.devices = list(devices) if devices else jax.devices()[:1]
    if chunk_sequences < 0:
      raise ValueError(f'chunk_sequences must be >= 0 (0: the whole batch), got {chunk_sequences}')
    if chunk_sequences and cfg.normalize_advantages:
      raise ValueError('advantage normalisation takes moments over the whole batch: it cannot '
                       'be taken in chunks (chunk_sequences 0)')
    if chunk_sequences and len(self.devices) > 1:
      raise ValueError(f'a batch split over {len(self.devices)} devices is not also chunked')
    self.chunk_sequences = chunk_sequences
    self._chunk_gradients = jax.jit(chunk_gradients_fn(unroll_fn, cfg))
    self._combine = jax.jit(combine)
    self._apply = jax.jit(lambda state, loss, metrics, grads: apply_gradients(
        optimizer, state, loss, metrics, grads))
    sgd = sgd_step_fn(unroll_fn, optimizer, cfg)
    imitate = imitation_step_fn(unroll_fn, optimizer, initial_core, cfg.self_imitation_value_cost)
    # k updates in one call, on k batches stacked along a new leading axis: the same updates in
    # the same order, one dispatch (on a GPU a 16 x 20 update is mostly dispatch and launch).
    self._sgd_many = jax.jit(lambda state, stacked: jax.lax.scan(sgd, state, stacked))
    if len(self.devices) == 1:
      self._sgd, self._imitate = jax.jit(sgd), jax.jit(imitate)
      self._replicated = None
    else:
      mesh = jax.sharding.Mesh(np.array(self.devices), ('batch',))
      spec = jax.sharding.PartitionSpec
      self._replicated = jax.sharding.NamedSharding(mesh, spec())
      split = jax.sharding.NamedSharding(mesh, spec('batch'))
      rep = self._replicated
      self._sgd = jax.jit(sgd, in_shardings=(rep, split), out_shardings=(rep, rep))
      self._imitate = jax.jit(imitate, in_shardings=(rep, split, split, split),
                              out_shardings=(rep, rep))

  @property
  def num_devices(self) -> int:
    return len(self.devices)

  def init(self, params) -> TrainingState:
    return self.place(TrainingState(params, self.optimizer.init(params)))

  def place(self, state: TrainingState) -> TrainingState:
    """The state where the update keeps it (a copy on every device when split)."""
    if self._replicated is None:
      return state
    return jax.device_put(state, self._replicated)

  def check_batch(self, size: int, what: str = 'batch_size') -> None:
    if size % self.num_devices:
      raise ValueError(f'the learner splits each batch over {self.num_devices} devices: '
                       f'{what} {size} is not a multiple of {self.num_devices}')

  def sgd(self, state: TrainingState, data):
    size = data.action.shape[0]
    self.check_batch(size)
    if not self.chunk_sequences or self.chunk_sequences >= size:
      return self._sgd(state, data)
    total = None
    for start in range(0, size, self.chunk_sequences):
      chunk = jax.tree_util.tree_map(lambda x: x[start:start + self.chunk_sequences], data)
      part = self._chunk_gradients(state.params, chunk,
                                   np.float32(chunk.action.shape[0] / size))
      total = part if total is None else self._combine(total, part)
    return self._apply(state, *total)

  def sgd_many(self, state: TrainingState, stacked):
    """len(stacked) updates, one per batch of `stacked` (batches stacked on a leading axis),
    in one call; metrics stacked the same way. One device only."""
    if self.num_devices > 1:
      raise ValueError(f'several updates per call run on one device, not {self.num_devices}')
    return self._sgd_many(state, stacked)

  def imitate(self, state: TrainingState, observations, actions, returns):
    self.check_batch(len(actions), 'self-imitation batch')
    return self._imitate(state, observations, actions, returns)

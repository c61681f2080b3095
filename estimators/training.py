"""Training of psi (precedence, BCE on windowed pairs) and phi (reversibility, regression onto psi).

One implementation, two drivers: `estimators.train` (offline, from a stored dataset) and the
precedence-learner node (online, from the Reverb 'precedence' table) both call `make_update`.
Data arrives in the flat layout of `estimators.pairs`: observations [N, ...], actions [N],
`last` [N] (end of each position's segment, -1 = padding) and the allowed pair starts.
"""
import dataclasses
from typing import Any, NamedTuple, Optional

import haiku as hk
import jax
import jax.numpy as jnp
import optax

from estimators import losses, updates
from estimators import networks as nets
from estimators import pairs as pairs_lib

PHI_TARGETS = ('reverse', 'one_minus_forward')


@dataclasses.dataclass(frozen=True)
class TrainConfig:
  """How psi/phi are optimised. Defaults: Appendix C (Cartpole/Turf): Adam, lr 0.01, batch 128."""
  window: int = dataclasses.field(default=200, metadata={
      'help': 'Precedence window w: psi pairs at most w steps apart.'})
  batch_size: int = dataclasses.field(default=128, metadata={'help': 'Pairs per psi update.'})
  learning_rate: float = dataclasses.field(default=1e-2, metadata={
      'help': 'Adam learning rate of psi (and of phi unless phi_learning_rate is given).'})
  adam_b1: float = dataclasses.field(default=0.9, metadata={
      'help': 'psi/phi Adam first-moment decay.'})
  adam_b2: float = dataclasses.field(default=0.999, metadata={
      'help': 'psi/phi Adam second-moment decay.'})
  weight_decay: float = dataclasses.field(default=0.0, metadata={
      'help': 'AdamW weight decay of psi and phi (Sokoban: 1e-4).'})
  train_psi: bool = True         # False: phi-only steps (offline phase 2: phi after a trained psi)
  train_phi: bool = False
  phi_loss: str = dataclasses.field(default='l2', metadata={
      'help': "phi regression loss: 'l2' (paper) or 'bce' (authors' code).",
      'choices': tuple(losses.PHI_LOSSES)})
  phi_batch_size: int = dataclasses.field(default=128, metadata={
      'help': 'Transitions per phi update.'})
  phi_learning_rate: float = dataclasses.field(default=1e-2, metadata={
      'help': 'Adam learning rate of phi.'})
  pair_sampling: str = dataclasses.field(default='uniform', metadata={
      'help': "psi pairs: 'uniform' over the valid pairs (paper) or 'start_uniform' (start "
              'uniform, then gap uniform).', 'choices': pairs_lib.SAMPLINGS})
  exclude_terminal: bool = dataclasses.field(default=False, metadata={
      'help': "Keep the transitions that end an episode (the goal, a time-out) out of phi's "
              "batches and each episode's final observation out of psi's pairs (the authors' "
              'code).'})
  phi_draw: int = dataclasses.field(default=0, metadata={
      'help': "phi's batch: draw this many transitions and keep the first phi_batch_size of "
              'them that are not terminal with exclude_terminal (the authors\' code: 1,024 '
              'drawn, up to 128 kept); 0: draw phi_batch_size.'})
  phi_target: str = dataclasses.field(default='reverse', metadata={
      'help': "phi's regression target: 'reverse', psi(x', x), the chance of going back (Sec. "
              "4); 'one_minus_forward', 1 - psi(x, x') (the authors' code regresses psi(x, x') "
              'and rejects above 1 - beta); the two differ where psi is not antisymmetric.',
      'choices': PHI_TARGETS})
  seed: int = dataclasses.field(default=0, metadata={
      'help': 'Random seed (initialisation and pair sampling).'})

  def __post_init__(self):
    if self.window < 1:
      raise ValueError(f'window must be >= 1, got {self.window}')
    if self.batch_size < 1 or self.phi_batch_size < 1:
      raise ValueError('batch sizes must be >= 1')
    if self.learning_rate <= 0 or self.phi_learning_rate <= 0:
      raise ValueError('learning rates must be > 0')
    if self.weight_decay < 0:
      raise ValueError(f'weight decay must be >= 0, got {self.weight_decay}')
    if self.phi_loss not in losses.PHI_LOSSES:
      raise ValueError(f"phi_loss must be one of {sorted(losses.PHI_LOSSES)}, got {self.phi_loss!r}")
    if self.pair_sampling not in pairs_lib.SAMPLINGS:
      raise ValueError(f'pair_sampling must be one of {pairs_lib.SAMPLINGS}, got {self.pair_sampling!r}')
    if not (self.train_psi or self.train_phi):
      raise ValueError('nothing to train: train_psi and train_phi are both False')
    if self.phi_target not in PHI_TARGETS:
      raise ValueError(f'phi_target must be one of {PHI_TARGETS}, got {self.phi_target!r}')
    if self.phi_draw and self.phi_draw < self.phi_batch_size:
      raise ValueError(f'phi_draw must be 0 or >= phi_batch_size ({self.phi_batch_size}), got '
                       f'{self.phi_draw}')


class TrainState(NamedTuple):
  psi_params: hk.Params
  psi_opt: Any
  phi_params: hk.Params
  phi_opt: Any
  key: jnp.ndarray
  steps: jnp.ndarray


class Batch(NamedTuple):
  """Flat layout (see estimators.pairs)."""
  observations: jnp.ndarray  # [N, ...]
  actions: jnp.ndarray       # [N] action taken at k (leading to k + 1)
  last: jnp.ndarray          # [N]
  starts: jnp.ndarray        # [M] allowed pair starts (padded)
  num_starts: jnp.ndarray    # [] how many of `starts` are real
  # [N] bool: k's segment ends with its episode's final observation (at last[k]), so the
  # transition last[k] - 1 -> last[k] ended the episode. None: every segment is a whole
  # episode (the offline layout).
  ends_episode: Optional[jnp.ndarray] = None


def terminal_transitions(batch: Batch, k: jnp.ndarray) -> jnp.ndarray:
  """[...] bool: the transition k -> k + 1 ends an episode (goal, time-out)."""
  ends = True if batch.ends_episode is None else batch.ends_episode[k]
  return ends & (k + 1 == batch.last[k])


def without_final_observations(batch: Batch) -> jnp.ndarray:
  """`last` with every episode's final observation cut off its segment: pairs drawn with it
  never include that observation, and the transition into it starts no pair."""
  ends = jnp.ones_like(batch.last, bool) if batch.ends_episode is None else batch.ends_episode
  return jnp.where(ends & (batch.last >= 0), batch.last - 1, batch.last)


def phi_indices(key: jnp.ndarray, batch: Batch, batch_size: int, draw: int = 0,
                exclude_terminal: bool = False):
  """phi's transitions: `draw` (0: batch_size) starts drawn uniformly; with exclude_terminal
  the terminal ones are dropped; the first `batch_size` left are kept. Returns (k [batch_size],
  weight [batch_size]: 1 for a kept transition, 0 for a padding slot)."""
  draw = draw or batch_size
  k = batch.starts[jax.random.randint(key, (draw,), 0, jnp.maximum(batch.num_starts, 1))]
  keep = ~terminal_transitions(batch, k) if exclude_terminal else jnp.ones((draw,), bool)
  slot = jnp.nonzero(keep, size=batch_size, fill_value=0)[0]
  weight = (jnp.arange(batch_size) < jnp.sum(keep)).astype(jnp.float32)
  return k[slot], weight


def _optimizer(lr, b1, b2, weight_decay):
  if weight_decay > 0:
    return optax.adamw(lr, b1=b1, b2=b2, weight_decay=weight_decay)
  return optax.adam(lr, b1=b1, b2=b2)


def psi_prob(est: nets.Estimators, psi_params, x, x_next):
  """sigmoid(psi): probability that x precedes x_next (deterministic: dropout off)."""
  return jax.nn.sigmoid(est.psi_apply(psi_params, None, x, x_next, False))


def phi_target_prob(est: nets.Estimators, psi_params, x, x_next, phi_target: str):
  """What phi(x, a) is regressed onto for x -> x_next: psi(x', x), the chance of going back
  (Sec. 4, 'reverse'), or 1 - psi(x, x') ('one_minus_forward', the authors' code)."""
  if phi_target == 'reverse':
    return psi_prob(est, psi_params, x_next, x)
  return 1.0 - psi_prob(est, psi_params, x, x_next)


def phi_prob(est: nets.Estimators, phi_params, x):
  """sigmoid(phi): estimated reversibility of each action in x, [B, A]."""
  return jax.nn.sigmoid(est.phi_apply(phi_params, x))


def init_state(est: nets.Estimators, config: TrainConfig, obs_example) -> TrainState:
  key = jax.random.PRNGKey(config.seed)
  k_psi, k_phi, key = jax.random.split(key, 3)
  x = jnp.asarray(obs_example)[None]
  psi_params = est.psi_init(k_psi, x)
  phi_params = est.phi_init(k_phi, x)
  psi_opt = _optimizer(config.learning_rate, config.adam_b1, config.adam_b2, config.weight_decay)
  phi_opt = _optimizer(config.phi_learning_rate, config.adam_b1, config.adam_b2, config.weight_decay)
  return TrainState(psi_params, psi_opt.init(psi_params), phi_params, phi_opt.init(phi_params),
                    key, jnp.zeros((), jnp.int32))


def make_update(est: nets.Estimators, config: TrainConfig, steps_per_call: int = 1):
  """Returns `update(state, batch) -> (state, metrics)` doing `steps_per_call` jitted steps
  (one lax.scan, except for conv nets on CPU: see below); metrics are means over the steps."""
  psi_opt = _optimizer(config.learning_rate, config.adam_b1, config.adam_b2, config.weight_decay)
  phi_opt = _optimizer(config.phi_learning_rate, config.adam_b1, config.adam_b2, config.weight_decay)
  phi_loss_fn = losses.PHI_LOSSES[config.phi_loss]

  def psi_loss(params, key, x, y, labels):
    logits = est.psi_apply(params, key, x, y, True)
    loss = losses.precedence_bce(logits, labels)
    acc = jnp.mean((logits > 0) == (labels > 0.5))
    return loss, acc

  def phi_loss(params, psi_params, x, a, x_next, weight=None):
    # Empirical reversibility (Sec. 4): phi(x, a) ~ E[psi(x', x)], the chance of going back.
    target = jax.lax.stop_gradient(
        phi_target_prob(est, psi_params, x, x_next, config.phi_target))
    logits = est.phi_apply(params, x)
    taken = jnp.take_along_axis(logits, a[:, None].astype(jnp.int32), axis=1)[:, 0]
    return phi_loss_fn(taken, target, weight)

  def one_step(state: TrainState, batch: Batch):
    key, k_pairs, k_drop, k_trans = jax.random.split(state.key, 4)
    psi_params, psi_opt_state, metrics = state.psi_params, state.psi_opt, {}
    checked = []   # the gradients' global norms (see updates.keep_if_finite)
    if config.train_psi:
      last, num_starts = batch.last, batch.num_starts
      if config.exclude_terminal:
        last = without_final_observations(batch)
        # A start whose only successor was the final observation now owns no pair; with no
        # start owning one at all, sample_pairs returns padding instead of looping.
        owns = (last[batch.starts] > batch.starts) & (jnp.arange(batch.starts.shape[0]) < num_starts)
        num_starts = jnp.where(jnp.any(owns), num_starts, 0)
      p = pairs_lib.sample_pairs(k_pairs, last, batch.starts, num_starts,
                                 config.batch_size, config.window, config.pair_sampling)
      x, y = batch.observations[p.first], batch.observations[p.second]
      (l_psi, acc), g = jax.value_and_grad(psi_loss, has_aux=True)(psi_params, k_drop, x, y, p.label)
      checked.append(optax.global_norm(g))
      upd, psi_opt_state = psi_opt.update(g, psi_opt_state, psi_params)
      psi_params = optax.apply_updates(psi_params, upd)
      metrics = {'psi_loss': l_psi, 'psi_accuracy': acc}
    phi_params, phi_opt_state = state.phi_params, state.phi_opt
    if config.train_phi:
      # Transitions (k, k+1) inside a segment: every allowed start has a successor.
      if config.exclude_terminal or config.phi_draw:
        k, weight = phi_indices(k_trans, batch, config.phi_batch_size, config.phi_draw,
                                config.exclude_terminal)
      else:
        k = batch.starts[jax.random.randint(k_trans, (config.phi_batch_size,), 0,
                                            jnp.maximum(batch.num_starts, 1))]
        weight = None
      l_phi, g = jax.value_and_grad(phi_loss)(phi_params, psi_params, batch.observations[k],
                                              batch.actions[k], batch.observations[k + 1],
                                              weight)
      checked.append(optax.global_norm(g))
      upd, phi_opt_state = phi_opt.update(g, phi_opt_state, phi_params)
      phi_params = optax.apply_updates(phi_params, upd)
      metrics['phi_loss'] = l_phi
    # A non-finite loss or gradient drops the whole update (psi and phi); the key moves on, so
    # the next step draws other pairs.
    (psi_params, psi_opt_state, phi_params, phi_opt_state), finite = updates.keep_if_finite(
        (psi_params, psi_opt_state, phi_params, phi_opt_state),
        (state.psi_params, state.psi_opt, state.phi_params, state.phi_opt), metrics, checked)
    metrics[updates.SKIPPED] = 1.0 - finite.astype(jnp.float32)
    new_state = TrainState(psi_params, psi_opt_state, phi_params, phi_opt_state, key, state.steps + 1)
    return new_state, metrics

  return _repeated(one_step, steps_per_call, est.config.torso == 'conv')


def _repeated(one_step, steps_per_call: int, conv: bool):
  """`update(state, batch)`: `steps_per_call` of `one_step` (jitted) per call, their metrics'
  means; one lax.scan, except for conv nets on CPU (a Python loop over the jitted step)."""
  if steps_per_call == 1:
    return jax.jit(one_step)

  if conv and jax.default_backend() == 'cpu':
    # XLA:CPU (jaxlib 0.4.13) runs convolutions inside a while loop (lax.scan) far slower than
    # at top level (Turf CNN: gradient 3.3K pairs/s at top level, 44 pairs/s inside a scan), so
    # conv nets loop in Python over the jitted step (dispatch ~0.1 ms against ~30 ms a step).
    step = jax.jit(one_step)

    def update_loop(state: TrainState, batch: Batch):
      history = []
      for _ in range(steps_per_call):
        state, m = step(state, batch)
        history.append(m)
      return state, jax.tree_util.tree_map(lambda *v: jnp.mean(jnp.stack(v)), *history)

    return update_loop

  @jax.jit
  def update(state: TrainState, batch: Batch):
    state, metrics = jax.lax.scan(lambda s, _: one_step(s, batch), state, None, length=steps_per_call)
    return state, jax.tree_util.tree_map(jnp.mean, metrics)

  return update


def windows_to_batch(observations, actions, step_valid, start_of_episode, period: int) -> Batch:
  """Flat Batch from stream-aligned Reverb windows [B, L, ...] and their 'valid' and
  'start_of_episode' extras (jittable; `period` static). A window may hold several episode
  segments (`pairs.window_layout`), so ends_episode is set per segment, for the terminal-transition
  and final-observation masks of exclude_terminal."""
  b, l = step_valid.shape
  last, start_ok, ends_episode = pairs_lib.window_layout(step_valid, start_of_episode, period)
  starts, count = pairs_lib.start_indices(last, start_ok)
  obs = observations.reshape((b * l,) + observations.shape[2:])
  return Batch(obs, actions.reshape(b * l), last, starts, count, ends_episode)

"""IMPALA learner: Acme's `IMPALALearner` structure with the filler-masked V-trace loss.

Acme 0.4.0 builds its loss inside `IMPALALearner.__init__` with no hook to replace it, so this
learner keeps Acme's interface (`acme.Learner`: step / get_variables / save / restore, the same
`IMPALANetworks`, counter and logger) and swaps the loss for `agents.losses.masked_vtrace_loss`.
Single device (jit, no pmap): the project targets CPU machines and one-GPU hosts.
"""
import time
from typing import Callable, Iterator, List, NamedTuple, Optional, Sequence

import acme
import jax
import jax.numpy as jnp
import numpy as np
import optax
import reverb
from acme.agents.jax.impala import networks as impala_networks
from acme.jax import networks as networks_lib
from acme.utils import counting, loggers

from agents import losses
from estimators import updates as update_guard

POLICY_VERSION = 'policy_version'
SKIPPED = update_guard.SKIPPED
SKIPPED_TOTAL = 'updates_skipped'   # dropped updates so far, in this learner process

IMITATION_METRICS = ('sil_loss', 'sil_grad_norm', 'sil_policy_loss', 'sil_value_loss',
                     'sil_positive_fraction', 'sil_gap_mean')


def policy_lag(updates: int, data) -> dict:
  """How many updates old the policy that acted was, over a batch's trained steps (all but the
  last of each sequence, which only bootstraps, and the episode-closing filler rows): the mean
  and the largest. Batches without a 'policy_version' extra give nothing."""
  version = data.extras.get(POLICY_VERSION) if isinstance(data.extras, dict) else None
  if version is None:
    return {}
  trained = ~np.asarray(data.start_of_episode[:, 1:], bool)   # step t is a filler iff t+1 starts
  lags = updates - np.asarray(version)[:, :-1][trained]
  if not lags.size:
    return {}
  return {'policy_lag_mean': float(lags.mean()), 'policy_lag_max': float(lags.max())}


class TrainingState(NamedTuple):
  params: networks_lib.Params
  opt_state: optax.OptState


class IMPALALearner(acme.Learner):

  def __init__(self, networks: impala_networks.IMPALANetworks, iterator: Iterator[reverb.ReplaySample],
               optimizer: optax.GradientTransformation, random_key: networks_lib.PRNGKey,
               discount: float = 0.99, entropy_cost: float = 0.01, baseline_cost: float = 0.5,
               max_abs_reward: float = jnp.inf, normalize_advantages: bool = False,
               self_imitation_value_cost: float = 0.01,
               imitation_iterator: Optional[Iterator] = None, imitation_updates: int = 0,
               imitation_ready: Optional[Callable[[], bool]] = None,
               counter: Optional[counting.Counter] = None,
               logger: Optional[loggers.Logger] = None,
               max_consecutive_skips: int = 100):
    self._iterator = iterator
    # A skipped update leaves the parameters as they were; this many in a row means the
    # learning itself diverged (the next batches will not be different), so the learner stops.
    self._skips = update_guard.SkipCounter('learner', max_consecutive_skips)

    def sequence_vtrace(logits, values, data):
      return losses.masked_vtrace(values, logits, data.extras['logits'], data.action,
                                  data.reward, data.discount, data.start_of_episode,
                                  discount=discount, max_abs_reward=max_abs_reward)

    def sequence_loss(logits, values, data, vtrace, rhos, real, shift, scale):
      return losses.vtrace_loss_terms(logits, values, data.action, vtrace, rhos, real,
                                      baseline_cost=baseline_cost, entropy_cost=entropy_cost,
                                      advantage_shift=shift, advantage_scale=scale)

    def batch_loss(params, data):
      # The networks are feed-forward: one pass over all B x T observations (one large conv
      # batch), then the V-trace loss per sequence. Faster on CPU than vmapping the unroll.
      b, t = data.action.shape
      obs = data.observation.reshape((b * t,) + data.observation.shape[2:])
      initial_state = jax.tree_util.tree_map(lambda s: s[0, 0], data.extras['core_state'])
      (logits, values), _ = networks.unroll_fn(params, obs, initial_state)
      logits = logits.reshape((b, t) + logits.shape[1:])
      values = values.reshape((b, t))
      vtrace, rhos, real = jax.vmap(sequence_vtrace)(logits, values, data)
      # Advantage normalisation (optional) over the whole batch's real steps.
      shift, scale = (losses.normalising_moments(vtrace.pg_advantage, real)
                      if normalize_advantages else (0.0, 1.0))
      loss, metrics = jax.vmap(sequence_loss, in_axes=(0, 0, 0, 0, 0, 0, None, None))(
          logits, values, data, vtrace, rhos, real, shift, scale)
      # Per-sequence statistics -> batch: maxima stay maxima, the rest are means.
      metrics = {k: jnp.max(v) if k.endswith('_max') else jnp.mean(v) for k, v in metrics.items()}
      return jnp.mean(loss), metrics

    @jax.jit
    def sgd_step(state: TrainingState, data):
      (loss, metrics), grads = jax.value_and_grad(batch_loss, has_aux=True)(state.params, data)
      updates, opt_state = optimizer.update(grads, state.opt_state)
      params = optax.apply_updates(state.params, updates)
      grad_norm = optax.global_norm(grads)
      metrics.update(loss=loss, grad_norm=grad_norm, param_norm=optax.global_norm(params),
                     param_updates_norm=optax.global_norm(updates))
      # The gradient's norm too: finite gradients whose squares overflow float32 clip to zero
      # updates, a learner that has stopped learning without a NaN anywhere.
      new_state, finite = update_guard.keep_if_finite(TrainingState(params, opt_state), state,
                                                      loss, grads, grad_norm)
      return new_state, {**metrics, SKIPPED: 1.0 - finite.astype(jnp.float32)}

    key_state, key_params = jax.random.split(random_key)
    initial_core = networks.initial_state_fn(networks.initial_state_init_fn(key_state))

    def imitation_loss(params, observations, actions, returns):
      (logits, values), _ = networks.unroll_fn(params, observations, initial_core)
      return losses.self_imitation_loss(logits, values, actions, returns,
                                        value_cost=self_imitation_value_cost)

    @jax.jit
    def imitation_step(state: TrainingState, observations, actions, returns):
      # The same optimiser (and its state) as the V-trace updates, as in Oh et al. (2018).
      (loss, metrics), grads = jax.value_and_grad(imitation_loss, has_aux=True)(
          state.params, observations, actions, returns)
      updates, opt_state = optimizer.update(grads, state.opt_state)
      metrics.update(sil_loss=loss, sil_grad_norm=optax.global_norm(grads))
      new_state, _ = update_guard.keep_if_finite(
          TrainingState(optax.apply_updates(state.params, updates), opt_state), state, loss, grads)
      return new_state, metrics

    params = networks.unroll_init_fn(key_params, initial_core)
    self._state = TrainingState(params, optimizer.init(params))
    self._sgd_step = sgd_step
    self._imitation_step = imitation_step
    # Batches of single steps (observation, action, return) from the self-imitation table.
    self._imitation_iterator = imitation_iterator
    self._imitation_updates = imitation_updates if imitation_iterator is not None else 0
    # Sampling an empty table would block the learner, and with a rate-limited replay the actors
    # wait for the learner: no episode would ever end to fill it. So the learner first asks.
    self._imitation_ready = imitation_ready or (lambda: True)
    self._imitating = False
    self._counter = counter or counting.Counter()
    # Updates made by this process (a restarted learner counts from 0 again: the lag of the
    # sequences written before the restart then reads negative for a few batches).
    self._updates = 0
    self._logger = logger or loggers.make_default_logger('learner')

  def step(self):
    sample = next(self._iterator)
    start = time.time()
    lag = policy_lag(self._updates, sample.data)
    self._state, metrics = self._sgd_step(self._state, sample.data)
    self._updates += 1
    metrics = jax.device_get(metrics)
    self._skips.add(bool(metrics[SKIPPED]), self._updates)
    metrics[SKIPPED_TOTAL] = self._skips.total
    if self._imitation_updates:
      # Logged from the first row on (a CSV's columns are its first row's), NaN until then.
      metrics.update(dict.fromkeys(IMITATION_METRICS, np.nan))
      self._imitating = self._imitating or self._imitation_ready()
      for _ in range(self._imitation_updates if self._imitating else 0):
        steps = next(self._imitation_iterator).data
        metrics.update(self.imitate(steps.observation, steps.action, steps.returns))
    counts = self._counter.increment(steps=1, time_elapsed=time.time() - start)
    # The CSV's columns are those of its first row, and rows are placed on env steps by
    # actor_steps: a first update made before the actors' first counts reach the counter
    # would leave that column out of the whole log.
    counts.setdefault('actor_steps', 0)
    self._logger.write({**metrics, **lag, **counts})

  def flush_counts(self) -> None:
    """Sends the counts not yet passed to the parent counter (it syncs at most every
    `time_delta`; at a run's end the last ones must reach the counter node)."""
    if hasattr(self._counter, '_last_sync_time'):   # Acme's Counter: sync on the next read
      self._counter._last_sync_time = float('-inf')
    self._counter.get_counts()

  def imitate(self, observations, actions, returns) -> dict:
    """One self-imitation update on past steps (`agents.self_imitation`); its diagnostics."""
    self._state, metrics = self._imitation_step(self._state, observations, actions, returns)
    return jax.device_get(metrics)

  def get_variables(self, names: Sequence[str]) -> List[networks_lib.Params]:
    """'policy': the parameters; 'policy_version': how many updates this learner process had
    made when it served them (the actors write it beside each step, see `policy_lag`)."""
    return [np.float32(self._updates) if name == POLICY_VERSION else self._state.params
            for name in (names or ['policy'])]

  def save(self) -> TrainingState:
    return self._state

  def restore(self, state: TrainingState):
    self._state = state

"""IMPALA learner: Acme's `IMPALALearner` structure with the filler-masked V-trace loss.

Acme 0.4.0 builds its loss inside `IMPALALearner.__init__` with no hook to replace it, so this
learner keeps Acme's interface (`acme.Learner`: step / get_variables / save / restore, the same
`IMPALANetworks`, counter and logger) and makes its update with agents.impala_step: the network,
the loss (per sequence, `agents.losses.masked_vtrace` then `agents.losses.vtrace_loss_terms`),
self-imitation and the optimiser, with no Acme or Reverb; `devices` splits each batch over
several (a GPU, or a CPU's cores as XLA host devices: agents.impala_step).
"""
import threading
import time
from typing import Callable, Iterator, List, Optional, Sequence, Tuple

import acme
import jax
import jax.numpy as jnp
import numpy as np
import optax
import reverb
from acme.agents.jax.impala import networks as impala_networks
from acme.jax import networks as networks_lib
from acme.utils import counting, loggers

from agents import acme_internals, impala_step
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


def merged_lag(lags: Sequence[dict]) -> dict:
  """policy_lag over several batches: the mean of their means and the largest."""
  lags = [lag for lag in lags if lag]
  if not lags:
    return {}
  return {'policy_lag_mean': float(np.mean([lag['policy_lag_mean'] for lag in lags])),
          'policy_lag_max': max(lag['policy_lag_max'] for lag in lags)}


class IMPALALearner(acme.Learner):

  def __init__(self, networks: impala_networks.IMPALANetworks, iterator: Iterator[reverb.ReplaySample],
               optimizer: optax.GradientTransformation, random_key: networks_lib.PRNGKey,
               discount: float = 0.99, entropy_cost: float = 0.01, baseline_cost: float = 0.5,
               max_abs_reward: float = jnp.inf, normalize_advantages: bool = False,
               self_imitation_value_cost: float = 0.01, shield_mask: bool = False,
               vtrace_lambda: float = 1.0, logit_l2_cost: float = 0.0,
               weight_l2_cost: float = 0.0, minibatches: int = 1,
               imitation_iterator: Optional[Iterator] = None, imitation_updates: int = 0,
               imitation_ready: Optional[Callable[[], bool]] = None,
               counter: Optional[counting.Counter] = None,
               logger: Optional[loggers.Logger] = None,
               max_consecutive_skips: int = 100, devices: Optional[Sequence] = None,
               updates_per_call: int = 1, chunk_sequences: int = 0):
    self._iterator = iterator
    self._updates_per_call = updates_per_call
    # Each sampled batch is split into this many slices, one Adam step on each in order.
    self._minibatches = minibatches
    # A skipped update leaves the parameters as they were; this many in a row means the
    # learning itself diverged (the next batches will not be different), so the learner stops.
    self._skips = update_guard.SkipCounter('learner', max_consecutive_skips)

    key_state, key_params = jax.random.split(random_key)
    initial_core = networks.initial_state_fn(networks.initial_state_init_fn(key_state))
    self._update = impala_step.Update(
        networks.unroll_fn, optimizer,
        impala_step.LossConfig(discount=discount, entropy_cost=entropy_cost,
                               baseline_cost=baseline_cost, max_abs_reward=max_abs_reward,
                               normalize_advantages=normalize_advantages,
                               self_imitation_value_cost=self_imitation_value_cost,
                               shield_mask=shield_mask, vtrace_lambda=vtrace_lambda,
                               logit_l2_cost=logit_l2_cost, weight_l2_cost=weight_l2_cost),
        initial_core=initial_core, devices=devices, chunk_sequences=chunk_sequences)

    if updates_per_call > 1 and self._update.num_devices > 1:
      raise ValueError(f'updates_per_call {updates_per_call} needs one learner device, not '
                       f'{self._update.num_devices}')
    params = networks.unroll_init_fn(key_params, initial_core)
    self._state = self._update.init(params)
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
    # The policy as served to the actors: (version, host copy), made once per update.
    self._published = None
    self._publish_lock = threading.Lock()

  def step(self):
    k = self._updates_per_call
    batches = [minibatch for _ in range(k) for minibatch in
               impala_step.split_minibatches(next(self._iterator).data, self._minibatches)]
    start = time.time()
    # Batch i is trained on by the call's i-th update.
    lag = merged_lag([policy_lag(self._updates + i, data) for i, data in enumerate(batches)])
    if k == 1:   # one sampled batch: an update per minibatch, one call each
      rows = []
      for data in batches:   # dispatched one after another, read back together
        self._state, metrics = self._update.sgd(self._state, data)
        rows.append(metrics)
      rows = jax.device_get(rows)
      metrics = {name: np.stack([np.asarray(row[name]) for row in rows]) for name in rows[0]}
    else:   # one call: the same updates in the same order
      stacked = jax.tree_util.tree_map(lambda *x: np.stack(x), *batches)
      self._state, metrics = self._update.sgd_many(self._state, stacked)
      metrics = jax.device_get(metrics)
    for skipped in metrics[SKIPPED]:
      self._updates += 1
      self._skips.add(bool(skipped), self._updates)
    metrics = {name: v[-1] for name, v in metrics.items()}   # the row: the call's last update
    metrics[SKIPPED_TOTAL] = self._skips.total
    if self._imitation_updates:
      # Logged from the first row on (a CSV's columns are its first row's), NaN until then.
      metrics.update(dict.fromkeys(IMITATION_METRICS, np.nan))
      self._imitating = self._imitating or self._imitation_ready()
      # After the call's k V-trace updates, their k x imitation_updates self-imitation ones.
      for _ in range(k * self._imitation_updates if self._imitating else 0):
        steps = next(self._imitation_iterator).data
        metrics.update(self.imitate(steps.observation, steps.action, steps.returns))
    counts = self._counter.increment(steps=len(batches), time_elapsed=time.time() - start)
    # The CSV's columns are those of its first row, and rows are placed on env steps by
    # actor_steps: a first update made before the actors' first counts reach the counter
    # would leave that column out of the whole log.
    counts.setdefault('actor_steps', 0)
    self._logger.write({**metrics, **lag, **counts})

  def flush_counts(self) -> None:
    """Sends the counts not yet passed to the parent counter (it syncs at most every
    `time_delta`; at a run's end the last ones must reach the counter node)."""
    acme_internals.sync_on_next_read(self._counter)
    self._counter.get_counts()

  def imitate(self, observations, actions, returns) -> dict:
    """One self-imitation update on past steps (`agents.self_imitation`); its diagnostics."""
    self._state, metrics = self._update.imitate(self._state, observations, actions, returns)
    return jax.device_get(metrics)

  def get_variables(self, names: Sequence[str]) -> List[networks_lib.Params]:
    """'policy': the parameters; 'policy_version': how many updates this learner process had
    made when it served them (the actors write it beside each step, see `policy_lag`)."""
    params = self._state.params
    if self._update.num_devices > 1:   # a copy per device: actors get one, on the host
      params = jax.device_get(params)
    return [np.float32(self._updates) if name == POLICY_VERSION else params
            for name in (names or ['policy'])]

  def get_policy_since(self, version: float) -> Optional[Tuple[networks_lib.Params, np.float32]]:
    """(parameters, version) when this learner's policy is not the one of `version` (an actor's,
    -1 for none), else None: an actor that asks often pays a small RPC while the policy is
    unchanged, not a copy of every parameter. The host copy is made once per update."""
    updates, params = self._updates, self._state.params
    if float(np.float32(updates)) == version:
      return None
    with self._publish_lock:
      if self._published is None or self._published[0] != updates:
        self._published = (updates, jax.device_get(params))
      updates, host = self._published
    return host, np.float32(updates)

  def save(self) -> impala_step.TrainingState:
    return self._state

  def restore(self, state: impala_step.TrainingState):
    self._state = self._update.place(state)

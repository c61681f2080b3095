"""The precedence-learner node: samples trajectory windows from Reverb, trains psi (and phi for
RAC) with `estimators.training`, and serves their parameters to the actors via get_variables."""
import threading
import time
from typing import Iterator, List, Optional, Sequence

import acme
import jax
import numpy as np
import reverb
from acme.utils import counting, loggers

from estimators import networks as est_nets
from estimators import training, updates


class PrecedenceLearner(acme.Learner):

  def __init__(self, estimators: est_nets.Estimators, train_config: training.TrainConfig,
               period: int, iterator: Iterator[reverb.ReplaySample], obs_example: np.ndarray,
               env_steps_per_update: int, updates_per_sample: int = 1,
               counter: Optional[counting.Counter] = None,
               logger: Optional[loggers.Logger] = None, max_consecutive_skips: int = 100):
    """updates_per_sample: psi (and phi) updates made on each Reverb sample of windows, each
    drawing its own pairs from them. Above 1, fewer and larger samples (the iterator's batch)
    cost less reading per update (bench.precedence_bench). An update whose loss or gradients
    are not finite is dropped (estimators.updates); `max_consecutive_skips` in a row stop the
    learner."""
    if updates_per_sample < 1:
      raise ValueError(f'updates_per_sample must be >= 1, got {updates_per_sample}')
    self._iterator = iterator
    self._skips = updates.SkipCounter('precedence learner', max_consecutive_skips)
    self._updates_per_sample = updates_per_sample
    self._batch = None
    self._batch_uses = 0
    self._period = period
    self._update = training.make_update(estimators, train_config)
    self._to_batch = jax.jit(training.windows_to_batch, static_argnums=4)
    self._state = training.init_state(estimators, train_config, obs_example)
    self._counter = counter or counting.Counter()
    self._logger = logger or loggers.make_default_logger('precedence_learner')
    self._env_steps_per_update = env_steps_per_update
    self._steps = 0
    self._allowed = 0
    # The parameters are copied out of JAX when an actor asks for them, at most once per update
    # (a copy after every update cost as much as a Cartpole psi update).
    self._lock = threading.Lock()
    self._published = None

  def _to_numpy(self):
    return jax.device_get((self._state.psi_params, self._state.phi_params))

  def _wait_for_budget(self):
    # Throttle to one update per `env_steps_per_update` actor steps: on a 2-core machine an
    # unthrottled learner would take CPU from the actors for little gain.
    while self._steps >= self._allowed:
      actor_steps = self._counter.get_counts().get('actor_steps', 0)
      self._allowed = actor_steps // self._env_steps_per_update
      if self._steps >= self._allowed:
        time.sleep(0.05)

  def step(self):
    self._wait_for_budget()
    if self._batch is None or self._batch_uses >= self._updates_per_sample:
      data = next(self._iterator).data
      self._batch = self._to_batch(data.observation, data.action, data.extras['valid'],
                                   data.start_of_episode, self._period)
      self._batch_uses = 0
    start = time.time()
    state, metrics = self._update(self._state, self._batch)
    with self._lock:
      self._state, self._published = state, None
    self._batch_uses += 1
    self._steps += 1
    metrics = jax.device_get(metrics)
    self._skips.add(bool(metrics[updates.SKIPPED] > 0), self._steps)
    counts = self._counter.increment(steps=1, time_elapsed=time.time() - start)
    self._logger.write({**metrics, 'updates_skipped': self._skips.total, **counts})

  def get_variables(self, names: Sequence[str]) -> List:
    with self._lock:
      if self._published is None:
        self._published = self._to_numpy()
      psi, phi = self._published
    table = {'psi': psi, 'phi': phi}
    return [table[n] for n in names]

  def save(self):
    return self._state

  def restore(self, state):
    with self._lock:
      self._state, self._published = state, None
    self._steps = int(state.steps)  # the throttle continues from the checkpoint's update count

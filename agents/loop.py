"""The actor node's loop: K environments stepped in lock-step by one `BatchedActor`.

Per iteration: every environment takes its action (one that ends an episode is reset at once and
its final timestep kept), in one call of an `envs.batch.BatchedEnvironment` (a list of dm_env
environments is stepped one by one through `envs.batch.EnvironmentList`; Sokoban has a
vectorised batch, `envs.sokoban_batch`); one fused call selects the next K actions and scores
the K transitions just taken; then each environment's transition goes to its own adder, so
IMPALA unrolls and precedence windows stay per environment with their episode boundaries. Each
environment's writes are those of Acme's EnvironmentLoop driving a single-environment actor:
add_first(x_0), then add(a_t, timestep_t+1 [reward + RAE penalty], extras={behaviour logits of
a_t}).

Episode logs (one row per finished episode of any environment) keep Acme's fields
(episode_length, episode_return, steps_per_second, actor_episodes, actor_steps) plus the
environment's `episode_info()`, the RAE/RAC statistics, the environment's index, and where this
actor's time went since it started (`loop_s_env`, `loop_s_inference`, `loop_s_write`,
`loop_s_log`, `loop_steps`: cumulative seconds and steps, read by bench.throughput).
"""
import time
from typing import Callable, Dict, List, Optional, Sequence, Union

import dm_env
import numpy as np
from acme import adders as acme_adders
from acme.utils import counting, loggers, signals

from agents.acting import BatchedActor, ParamChangeTracker
from envs import batch as batch_lib

# Acme's (dummy) core state as the adders store it: numpy, so packing a row does not convert a
# JAX array on every step.
_CORE_STATE = np.zeros((), np.float32)
# How often the loop asks `should_stop` (one call to another process in a distributed run).
STOP_CHECK_S = 0.25


class _Episode:
  """Running statistics of one environment's current episode."""

  def __init__(self):
    self.start = time.time()
    self.length = 0
    self.extrinsic = 0.0
    self.intrinsic = 0.0
    self.penalised = 0
    self.max_psi = 0.0
    self.rejections = 0
    self.fallbacks = 0


class _NoAdder(acme_adders.Adder):
  """Where an actor's steps go when nothing is written (benchmarks, evaluators)."""

  def add_first(self, timestep):
    pass

  def add(self, action, next_timestep, extras=()):
    pass

  def reset(self):
    pass


class BatchedEnvironmentLoop:

  def __init__(self, environments: Union[Sequence[dm_env.Environment],
                                         batch_lib.BatchedEnvironment],
               actor: BatchedActor, mode: str,
               adders: Optional[Sequence[acme_adders.Adder]] = None,
               counter: Optional[counting.Counter] = None,
               logger: Optional[loggers.Logger] = None, track_estimators: bool = False,
               total_steps_limit: Optional[int] = None,
               should_stop: Optional[Callable[[], bool]] = None):
    """environments: K dm_env environments, or a BatchedEnvironment of K.
    total_steps_limit: stop stepping once the counter's (run-wide) actor_steps reach it, as
    seen at an episode end, so the run ends within about an episode of its budget.
    should_stop: asked every STOP_CHECK_S; True stops stepping at once, as at the limit: the
    episodes under way are neither counted nor logged, so the counter and the episode logs stay
    equal when a run is stopped and resumed."""
    if not isinstance(environments, batch_lib.BatchedEnvironment):
      environments = batch_lib.EnvironmentList(environments)
    num_envs = environments.num_envs
    if num_envs != actor.num_envs:
      raise ValueError(f'{num_envs} environments for an actor of {actor.num_envs}')
    if adders is not None and len(adders) != num_envs:
      raise ValueError('one adder per environment is needed')
    self._envs = environments
    self._actor = actor
    self._mode = mode
    self._adders = list(adders) if adders is not None else [_NoAdder()] * num_envs
    self._counter = counter or counting.Counter()
    self._logger = logger or loggers.make_default_logger('actor')
    self._psi_tracker = ParamChangeTracker() if track_estimators else None
    self._seconds = dict.fromkeys(('env', 'inference', 'write', 'log'), 0.0)
    self._steps = 0
    self._total_steps_limit = total_steps_limit
    self._limit_reached = False
    self._should_stop = should_stop
    self._last_stop_check = time.monotonic()

  def _count_episodes(self, ended: List[_Episode]) -> Dict:
    """Counts the episodes that ended in one step of the loop in one call to the counter (in a
    distributed run, a call to another process that saves the counts before it answers; many
    rooms end their episodes at the same step) and returns the counts after it: the rows of
    those episodes all carry them."""
    counts = self._counter.increment(episodes=len(ended), steps=sum(ep.length for ep in ended))
    if self._total_steps_limit is not None:
      self._limit_reached |= counts.get('actor_steps', 0) >= self._total_steps_limit
    return counts

  def _episode_row(self, k: int, ep: _Episode, info: Dict, counts: Dict) -> Dict:
    row = {'episode_length': ep.length, 'episode_return': ep.extrinsic,
           'steps_per_second': ep.length / max(time.time() - ep.start, 1e-9), **counts,
           'unix_time': time.time(), 'env_index': k, **info}
    if self._mode == 'rae':
      row.update(intrinsic_return=ep.intrinsic, penalised_steps=ep.penalised, max_psi=ep.max_psi)
    elif self._mode == 'rac':
      row.update(rejections=ep.rejections, shield_fallbacks=ep.fallbacks)
    if self._psi_tracker is not None:
      row.update(psi_fetches=self._psi_tracker.fetches, psi_change=self._psi_tracker.change())
    row.update({f'loop_s_{name}': s for name, s in self._seconds.items()}, loop_steps=self._steps)
    return row

  def run(self, num_steps: Optional[int] = None, num_episodes: Optional[int] = None) -> int:
    """Runs until `num_steps` environment steps or `num_episodes` episodes (summed over the
    environments) have been taken, or forever; returns the number of steps taken."""
    envs, actor = self._envs, self._actor
    num_envs = envs.num_envs
    steps_taken = episodes_done = 0
    episodes: List[_Episode] = [_Episode() for _ in range(num_envs)]
    first = envs.reset()
    for k, ts in enumerate(first):
      self._adders[k].add_first(ts)
    obs = np.stack([ts.observation for ts in first])
    out = actor.step(obs, obs, obs)  # no transition yet: the psi values are not used
    version = np.float32(actor.policy_version)
    self._count_shield(episodes, out)

    with signals.runtime_terminator():
      while not ((num_steps is not None and steps_taken >= num_steps) or
                 (num_episodes is not None and episodes_done >= num_episodes) or
                 self._limit_reached):
        actions, logits, prev_obs, acting_version = out.action, out.logits, obs, version
        t0 = time.perf_counter()
        # Environments whose episode ended are reset within the step, before the fused call,
        # which then acts on their new first observation; psi scores the transitions taken.
        timesteps, obs, psi_to, finished = envs.step(actions)
        t1 = time.perf_counter()
        out = actor.step(obs, prev_obs, psi_to)
        version = np.float32(actor.policy_version)   # of the parameters that chose `out`
        actor.update()
        t2 = time.perf_counter()
        ended = self._write(timesteps, actions, logits, acting_version, out, episodes, finished)
        log_s = self._log(ended) if ended else 0.0
        episodes_done += len(ended)
        steps_taken += num_envs
        self._count_shield(episodes, out)
        self._check_stop()
        t3 = time.perf_counter()
        self._steps += num_envs
        for name, dt in (('env', t1 - t0), ('inference', t2 - t1), ('write', t3 - t2 - log_s),
                         ('log', log_s)):
          self._seconds[name] += dt
    for adder in self._adders:
      if hasattr(adder, 'flush'):  # a run that ends leaves nothing unsent
        adder.flush()
    if self._limit_reached and num_steps is None and num_episodes is None:
      self._wait_for_the_program_stop()
    return steps_taken

  def close(self):
    """Sends what the adders hold and ends their streams to the replay (whose server's shutdown
    an open stream holds for its 5 s grace period)."""
    for adder in self._adders:
      if hasattr(adder, 'close'):
        adder.close()

  def _write(self, timesteps, actions, logits, acting_version, out, episodes: List[_Episode],
             finished: Dict) -> List:
    """Each environment's transition to its own adder (with RAE's penalty in its reward), its
    episode's statistics updated; an environment whose episode ended starts its next one.
    Returns (environment, its episode, its info) of the episodes this step ended."""
    # RAE's figures as Python floats in one call each, not one numpy scalar per environment.
    intrinsic, psi = ((out.intrinsic.tolist(), out.psi.tolist()) if self._mode == 'rae'
                      else (None, None))
    ended = []
    for k, ts in enumerate(timesteps):
      ep = episodes[k]
      ep.length += 1
      ep.extrinsic += float(ts.reward)
      if intrinsic is not None:
        r_int = intrinsic[k]
        ep.intrinsic += r_int
        ep.penalised += r_int < 0
        ep.max_psi = max(ep.max_psi, psi[k])
        ts = ts._replace(reward=np.float32(ts.reward + r_int))
      self._adders[k].add(actions[k], ts,
                          extras={'logits': logits[k], 'core_state': _CORE_STATE,
                                  'policy_version': acting_version})
      if k in finished:
        info, first_ts = finished[k]
        ended.append((k, ep, info))
        episodes[k] = _Episode()
        self._adders[k].add_first(first_ts)
    return ended

  def _log(self, ended: List) -> float:
    """Counts the ended episodes, then logs them (a logged episode is always a counted one);
    returns the seconds it took."""
    t_log = time.perf_counter()
    counts = self._count_episodes([ep for _, ep, _ in ended])
    for k, ep, info in ended:
      self._logger.write(self._episode_row(k, ep, info, counts))
    return time.perf_counter() - t_log

  def _wait_for_the_program_stop(self):
    """The run's budget is spent: waits for the coordinator to stop the program (a node that
    returned would look like one that died)."""
    with signals.runtime_terminator():
      while True:
        time.sleep(1.0)
        # Acme's counter sends local counts to the counter node only from a call made after
        # its sync period: without this the last episodes' steps would never arrive, and the
        # coordinator would wait for them forever.
        self._counter.get_counts()

  def _check_stop(self):
    """Asks `should_stop` (another process's answer) at most every STOP_CHECK_S."""
    now = time.monotonic()
    if self._should_stop is not None and now - self._last_stop_check >= STOP_CHECK_S:
      self._last_stop_check = now
      self._limit_reached |= bool(self._should_stop())

  def _count_shield(self, episodes: List[_Episode], out):
    """RAC statistics of the actions just selected, and the psi parameters in use."""
    if self._mode == 'rac':
      for k, ep in enumerate(episodes):
        ep.rejections += int(out.rejected[k])
        ep.fallbacks += int(out.fallback[k])
    if self._psi_tracker is not None:
      self._psi_tracker.observe(self._actor.estimator_params()[0])

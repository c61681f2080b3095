"""The actor node's loop: K environments stepped in lock-step by one `BatchedActor`.

Per iteration: every environment takes its action, in one call of an `envs.batch.BatchedEnvironment`
(a list of dm_env environments is stepped one by one through `envs.batch.EnvironmentList`;
Sokoban has a vectorised batch, `envs.sokoban_batch`); one fused call selects the next K actions
and scores the K transitions just taken; then the K rooms' rows of this step go to the actor's
writer in one append (`agents.adders.ActorWriter`). An environment whose episode ended is reset
on the next iteration, which does not step it (its action is ignored): that iteration writes the
episode's filler row for it, so every iteration writes exactly one row per room, and each room's
rows are the stream of Acme's EnvironmentLoop driving a single-environment actor (x_t, a_t,
reward_t+1 [+ RAE penalty], discount_t+1, behaviour logits of a_t; the filler after the final
observation). A room's reset iteration is not an env step: episode lengths, the step counter and
RAE/RAC statistics count the steps taken.

Episode logs (one row per finished episode of any environment) keep Acme's fields
(episode_length, episode_return, steps_per_second, actor_episodes, actor_steps) plus the
environment's `episode_info()`, the RAE/RAC statistics, the environment's index, and where this
actor's time went since it started (`loop_s_env`, `loop_s_inference`, `loop_s_write`,
`loop_s_log`, `loop_steps`: cumulative seconds and env steps, read by bench.throughput).
"""
import time
from typing import Callable, Dict, Optional, Sequence, Union

import dm_env
import numpy as np
from acme.utils import counting, loggers, signals

from agents import adders as adders_lib
from agents.acting import BatchedActor, ParamChangeTracker
from envs import batch as batch_lib

_FIRST, _LAST = int(dm_env.StepType.FIRST), int(dm_env.StepType.LAST)
# How often the loop asks `should_stop` (one call to another process in a distributed run).
STOP_CHECK_S = 0.25


class _Episodes:
  """Running statistics of each room's current episode, one array entry per room."""

  _FIELDS = ('length', 'extrinsic', 'intrinsic', 'penalised', 'max_psi', 'rejections',
             'fallbacks')

  def __init__(self, num_envs: int):
    self.start = np.full(num_envs, time.time())
    for name in self._FIELDS:
      setattr(self, name, np.zeros(num_envs, np.int64 if name in (
          'length', 'penalised', 'rejections', 'fallbacks') else np.float64))

  def of(self, k: int) -> Dict:
    """Room k's figures as Python numbers."""
    return {name: getattr(self, name)[k].item() for name in ('start',) + self._FIELDS}

  def restart(self, rooms: np.ndarray):
    self.start[rooms] = time.time()
    for name in self._FIELDS:
      getattr(self, name)[rooms] = 0


class BatchedEnvironmentLoop:

  def __init__(self, environments: Union[Sequence[dm_env.Environment],
                                         batch_lib.BatchedEnvironment],
               actor: BatchedActor, mode: str, writer=None,
               counter: Optional[counting.Counter] = None,
               logger: Optional[loggers.Logger] = None, track_estimators: bool = False,
               total_steps_limit: Optional[int] = None,
               should_stop: Optional[Callable[[], bool]] = None):
    """environments: K dm_env environments, or a BatchedEnvironment of K.
    writer: takes each iteration's rows, `append(observation [K, ...], steps [K, F], logits [K, A])`
    (agents.adders.ActorWriter, or one that wraps it); None: nothing is written.
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
    if writer is not None and writer.num_envs != num_envs:
      raise ValueError(f'a writer of {writer.num_envs} rooms for {num_envs} environments')
    self._envs = environments
    self._actor = actor
    self._mode = mode
    self._writer = writer
    self._counter = counter or counting.Counter()
    self._logger = logger or loggers.make_default_logger('actor')
    self._psi_tracker = ParamChangeTracker() if track_estimators else None
    self._seconds = dict.fromkeys(('env', 'inference', 'write', 'log'), 0.0)
    self._steps = 0
    self._total_steps_limit = total_steps_limit
    self._limit_reached = False
    self._should_stop = should_stop
    self._last_stop_check = time.monotonic()

  def _count_episodes(self, ended: np.ndarray, episodes: _Episodes) -> Dict:
    """Counts the episodes of rooms `ended` in one call to the counter (in a distributed run, a
    call to another process that saves the counts before it answers; many rooms end their
    episodes at the same step) and returns the counts after it: the rows of those episodes all
    carry them."""
    counts = self._counter.increment(episodes=len(ended),
                                     steps=int(episodes.length[ended].sum()))
    if self._total_steps_limit is not None:
      self._limit_reached |= counts.get('actor_steps', 0) >= self._total_steps_limit
    return counts

  def _episode_row(self, k: int, ep: Dict, info: Dict, counts: Dict) -> Dict:
    row = {'episode_length': ep['length'], 'episode_return': ep['extrinsic'],
           'steps_per_second': ep['length'] / max(time.time() - ep['start'], 1e-9), **counts,
           'unix_time': time.time(), 'env_index': k, **info}
    if self._mode == 'rae':
      row.update(intrinsic_return=ep['intrinsic'], penalised_steps=ep['penalised'],
                 max_psi=ep['max_psi'])
    elif self._mode == 'rac':
      row.update(rejections=ep['rejections'], shield_fallbacks=ep['fallbacks'])
    if self._psi_tracker is not None:
      row.update(psi_fetches=self._psi_tracker.fetches, psi_change=self._psi_tracker.change())
    row.update({f'loop_s_{name}': s for name, s in self._seconds.items()}, loop_steps=self._steps)
    return row

  def run(self, num_steps: Optional[int] = None, num_episodes: Optional[int] = None) -> int:
    """Runs until `num_steps` environment steps or `num_episodes` episodes (summed over the
    environments) have been taken, or forever; returns the number of steps taken."""
    envs, actor = self._envs, self._actor
    steps_taken = episodes_done = 0
    episodes = _Episodes(envs.num_envs)
    obs = envs.reset()
    starts = np.ones(envs.num_envs, bool)     # obs[k] is the first of an episode
    out = actor.step(obs, obs)  # no transition yet: the psi values are not used
    version = np.float32(actor.policy_version)
    self._count_shield(episodes, out, acts=starts)

    with signals.runtime_terminator():
      while not ((num_steps is not None and steps_taken >= num_steps) or
                 (num_episodes is not None and episodes_done >= num_episodes) or
                 self._limit_reached):
        actions, logits, prev_obs, acting_version = out.action, out.logits, obs, version
        t0 = time.perf_counter()
        step = envs.step(actions)
        obs = step.observation
        t1 = time.perf_counter()
        out = actor.step(obs, prev_obs)
        version = np.float32(actor.policy_version)   # of the parameters that chose `out`
        actor.update()
        t2 = time.perf_counter()
        taken = step.step_type != _FIRST          # the rooms reset by this call took no step
        self._write(step, taken, starts, actions, logits, acting_version, prev_obs, out, episodes)
        starts = ~taken
        log_s, ended = 0.0, np.flatnonzero(step.step_type == _LAST)
        if len(ended):
          log_s = self._log(ended, step.ended, episodes)
          episodes.restart(ended)
        episodes_done += len(ended)
        steps_taken += int(taken.sum())
        # An action chosen for a final observation is not taken (the room is reset instead).
        self._count_shield(episodes, out, acts=step.step_type != _LAST)
        self._check_stop()
        t3 = time.perf_counter()
        self._steps += int(taken.sum())
        for name, dt in (('env', t1 - t0), ('inference', t2 - t1), ('write', t3 - t2 - log_s),
                         ('log', log_s)):
          self._seconds[name] += dt
    if self._writer is not None:   # a run that ends leaves nothing unsent
      self._writer.flush()
    if self._limit_reached and num_steps is None and num_episodes is None:
      self._wait_for_the_program_stop()
    return steps_taken

  def close(self):
    """Sends what the writer holds and ends its streams to the replay (whose server's shutdown
    an open stream holds for its 5 s grace period)."""
    if self._writer is not None:
      self._writer.close()

  def _write(self, step, taken: np.ndarray, starts: np.ndarray, actions, logits, acting_version,
             prev_obs, out, episodes: _Episodes):
    """The iteration's rows to the writer (RAE's penalty in the rewards of the steps taken; the
    filler row for the rooms just reset) and the episodes' statistics."""
    reward = step.reward
    episodes.length += taken
    episodes.extrinsic += reward   # 0 on a reset step (envs.batch.BatchStep)
    if self._mode == 'rae':
      intrinsic = np.where(taken, out.intrinsic, 0.0)
      reward = (reward + intrinsic).astype(np.float32)
      episodes.intrinsic += intrinsic
      episodes.penalised += intrinsic < 0
      episodes.max_psi = np.maximum(episodes.max_psi, np.where(taken, out.psi, 0.0))
    if self._writer is None:
      return
    filler = ~taken
    if filler.any():
      logits = np.where(filler[:, None], np.float32(0.0), logits)
    self._writer.append(prev_obs, adders_lib.step_rows(starts, actions, reward, step.discount,
                                                       filler, acting_version), logits)

  def _log(self, ended: np.ndarray, infos: Dict, episodes: _Episodes) -> float:
    """Counts the episodes of rooms `ended`, then logs them (a logged episode is always a counted
    one); returns the seconds it took."""
    t_log = time.perf_counter()
    counts = self._count_episodes(ended, episodes)
    for k in ended.tolist():
      self._logger.write(self._episode_row(k, episodes.of(k), infos.get(k, {}), counts))
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

  def _count_shield(self, episodes: _Episodes, out, acts: np.ndarray):
    """RAC statistics of the actions just selected that will be taken (`acts`), and the psi
    parameters in use."""
    if self._mode == 'rac':
      episodes.rejections += out.rejected & acts
      episodes.fallbacks += out.fallback & acts
    if self._psi_tracker is not None:
      self._psi_tracker.observe(self._actor.estimator_params()[0])

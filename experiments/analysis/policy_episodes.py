"""Episodes of a policy on Sokoban levels, all played together: one jitted forward pass per
step covers every episode still running (padded to a power of two, so few batch shapes are
compiled); with an IrreversibilityJudge, the exact oracle counts the irreversible actions taken
and a solvability search marks the episodes that entered a dead end (a state from which the level
can no longer be solved)."""
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

MIN_BATCH = 8  # smallest padded batch: few levels then compile the forward pass once


def make_act(networks):
  """Jitted (params, obs [B,...], keys [B,2], greedy [B]) -> (actions [B], keys [B,2]).
  Sampling splits each key as the actors do (`agents.acting`): key, sub = split(key)."""
  import jax
  import jax.numpy as jnp

  from agents.networks import DUMMY_CORE_STATE

  def act(params, obs, keys, greedy):
    (logits, _), _ = networks.unroll_fn(params, obs, DUMMY_CORE_STATE)
    split = jax.vmap(jax.random.split)(keys)
    sampled = jax.vmap(jax.random.categorical)(split[:, 1], logits)
    actions = jnp.where(greedy, jnp.argmax(logits, axis=-1), sampled)
    return actions.astype(jnp.int32), split[:, 0]

  return jax.jit(act)


def padded_size(n: int) -> int:
  """Batch sizes are rounded up to powers of two so that a shrinking set of running episodes
  compiles the forward pass at most log2(N) times."""
  return max(MIN_BATCH, 1 << (n - 1).bit_length())


class IrreversibilityJudge:
  """Oracle verdicts on (level, state, action), each searched once (the search dominates)."""

  def __init__(self, env_options: Dict[str, Any], levels: Sequence[Any], max_expansions: int):
    import envs
    # A dedicated env over all levels: the oracle moves its env around; states name the level.
    self._env = envs.make('sokoban', seed=0, **{**env_options, 'levels': levels})
    self._max_expansions = max_expansions
    self._cache = {}
    self._solvable = {}

  def check(self, level: int, state, action: int):
    from envs import oracle
    key = ((level,) + tuple(state[1:]), int(action))
    if key not in self._cache:
      self._cache[key] = oracle.check(self._env, key[0], key[1],
                                      max_expansions=self._max_expansions)
    return self._cache[key]

  def solvable(self, level: int, state) -> Optional[bool]:
    """Whether the level can still be solved from `state` (None: the search's budget ran out)."""
    import dataclasses

    from envs import sokoban_solver
    key = (level,) + tuple(state[1:])
    if key not in self._solvable:
      room = dataclasses.replace(self._env.levels[level], player=tuple(state[1]),
                                 boxes=tuple(sorted(state[2])))
      self._solvable[key] = sokoban_solver.solvable(room, max_nodes=self._max_expansions)
    return self._solvable[key]

  @property
  def unique_checks(self) -> int:
    return len(self._cache)


def play(act, params, level_envs: List[Any], levels: List[int], greedy: List[bool],
         keys: np.ndarray, judge: Optional[IrreversibilityJudge] = None) -> List[Dict[str, Any]]:
  """Plays episode e in level_envs[e] (level index levels[e]) to its end; one record each."""
  obs = [env.reset().observation for env in level_envs]
  keys, greedy = np.array(keys), np.asarray(greedy, bool)
  # Actions as digits: an episode can be replayed (and rendered) from its record.
  records = [{'level': int(level), 'length': 0, 'return': 0.0, 'actions': ''} for level in levels]
  if judge is not None:
    for r in records:
      r.update(irreversible=0, oracle_unknown=0, pushes=0, dead_end=0, dead_end_unknown=0)
  running = list(range(len(level_envs)))
  while running:
    batch = padded_batch(running, obs, keys, greedy)
    actions, new_keys = (np.asarray(x) for x in act(params, *batch))
    keys[running] = new_keys[:len(running)]
    for e, action in zip(running, actions[:len(running)]):
      obs[e] = take_step(level_envs[e], records[e], int(action), judge)
    running = [e for e in running if 'solved' not in records[e]]  # ended: outcome recorded
  return records


def padded_batch(running: List[int], obs: List[np.ndarray], keys: np.ndarray, greedy: np.ndarray):
  """(obs, keys, greedy) of the running episodes, padded to `padded_size` rows (padding rows
  are zeros and greedy; their actions are ignored)."""
  n, size = len(running), padded_size(len(running))
  batch_obs = np.zeros((size,) + obs[0].shape, obs[0].dtype)
  batch_obs[:n] = [obs[e] for e in running]
  batch_keys = np.zeros((size,) + keys.shape[1:], keys.dtype)
  batch_keys[:n] = keys[running]
  batch_greedy = np.ones(size, bool)
  batch_greedy[:n] = greedy[running]
  return batch_obs, batch_keys, batch_greedy


def take_step(env, record: Dict[str, Any], action: int,
              judge: Optional[IrreversibilityJudge]) -> np.ndarray:
  """Steps one episode, judging the action first (the oracle needs the state before it); at
  the episode's end records its outcome. Returns the new observation. A judged episode also
  counts its pushes (steps that moved a box): only a push can be irreversible, so
  irreversible / pushes says how careful the pushing was, apart from how much of it there was.
  After an irreversible (or undecided) step, until the first dead end, it asks whether the level can still be solved: a reversible step keeps the answer,
  so no other step can enter a dead end."""
  from envs import oracle
  if judge is not None:
    before = env.get_state()
    verdict = judge.check(record['level'], before, action)
    record['irreversible'] += int(verdict.irreversible)
    record['oracle_unknown'] += int(verdict.status == oracle.UNKNOWN)
  ts = env.step(action)
  if judge is not None:
    after = env.get_state()
    record['pushes'] += int(after[2] != before[2])
    if not (verdict.reversible or record['dead_end'] or record['dead_end_unknown']):
      answer = judge.solvable(record['level'], after)
      record['dead_end'] = int(answer is False)
      record['dead_end_unknown'] = int(answer is None)
  record['length'] += 1
  record['actions'] += str(action)
  record['return'] += float(ts.reward)
  if ts.last():
    info = env.episode_info()
    record.update(solved=bool(info['solved']), boxes_on_target=int(info['boxes_on_target']))
  return ts.observation


def summarize(records: List[Dict[str, Any]], count_irreversible: bool) -> Dict[str, Any]:
  def mean(key):
    return float(np.mean([r[key] for r in records]))
  out = {'episodes': len(records), 'solved_fraction': mean('solved'),
         'mean_boxes_on_target': mean('boxes_on_target'), 'mean_episode_length': mean('length'),
         'mean_return': mean('return')}
  if count_irreversible:
    # The oracle counts the solving push (terminal) as irreversible: one per solved episode,
    # left out of both counts of the per-push fraction too.
    outside_solution = sum(r['pushes'] - r['solved'] for r in records)
    irreversible = sum(r['irreversible'] - r['solved'] for r in records)
    out.update(mean_irreversible=mean('irreversible'),
               mean_irreversible_excl_solving=mean('irreversible') - mean('solved'),
               mean_pushes=mean('pushes'),
               irreversible_per_push=(irreversible / outside_solution if outside_solution
                                      else None),
               oracle_checks=int(sum(r['length'] for r in records)),
               oracle_unknown=int(sum(r['oracle_unknown'] for r in records)),
               # Episodes that entered a state with no solution; undecided ones counted apart.
               dead_end_fraction=mean('dead_end'),
               dead_end_unknown=int(sum(r['dead_end_unknown'] for r in records)))
  return out


# Entry point for the experiment runner ---------------------------------------------------------

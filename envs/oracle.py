"""Exact reversibility oracle for deterministic discrete environments (Turf, Cliff with wind=0,
Sokoban), used to label transitions and score the learned reversibility estimators.

    result = oracle.check(env, state, action)
    result.status      # 'reversible' | 'irreversible' | 'unknown'
    result.steps_back  # shortest number of actions back to `state` (0: the action changed nothing)

Procedure: restore `state`, take `action` and get the next true state. A terminating step
(discount 0: falling off the cliff, reaching the goal, solving the level) is irreversible, since
terminal states cannot be left. Otherwise breadth-first search over true states, expanding a
state by restoring it and trying every action, until `state` is met (reversible, with the BFS
distance), the reachable set is exhausted (irreversible) or `max_expansions` states have been
expanded (unknown). Successors reached by a terminating step are never expanded.

Environment protocol used (public methods only): `get_state()` -> hashable true state without
any step counter; `set_state(state)`, which must also reset the step counter (our envs do), so
time limits never interfere; `step(action)`; `num_actions`. A truncating step (discount 1) is not
treated as an end: the search goes on from that state. Two optional hooks:
  - `deterministic` (bool attribute, default True): the oracle refuses environments where it is
    False (e.g. the windy cliff with wind > 0), since BFS over sampled outcomes would be wrong.
  - `can_reach(from_state, to_state) -> bool`: a cheap *necessary* condition (False only when
    `to_state` is provably unreachable). Turf uses it (ruined grass never recovers); without it,
    the reachable set of Turf after trampling grass is astronomically large and the answer would
    be 'unknown'. Disable with `use_hints=False`.

The oracle leaves `env` in an arbitrary state (and with its step counter reset): use a dedicated
environment instance, not one an actor is stepping through.
"""
import collections
import dataclasses
from typing import Dict, Hashable, List, Optional, Sequence, Tuple

REVERSIBLE = 'reversible'
IRREVERSIBLE = 'irreversible'
UNKNOWN = 'unknown'


@dataclasses.dataclass(frozen=True)
class OracleResult:
  status: str
  steps_back: Optional[int] = None
  expansions: int = 0  # states expanded by the search (diagnostics)

  @property
  def reversible(self) -> bool:
    return self.status == REVERSIBLE

  @property
  def irreversible(self) -> bool:
    return self.status == IRREVERSIBLE


def _is_termination(timestep) -> bool:
  return timestep.last() and timestep.discount is not None and float(timestep.discount) == 0.0


def _num_actions(env) -> int:
  n = getattr(env, 'num_actions', None)
  if n is None:
    n = env.action_spec().num_values
  return int(n)


def _check_deterministic(env) -> None:
  if not getattr(env, 'deterministic', True):
    raise ValueError(f'{type(env).__name__} is stochastic (deterministic=False): '
                     'the exact oracle needs a deterministic environment')


def check(env, state: Hashable, action: int, max_expansions: int = 100_000,
          use_hints: bool = True) -> OracleResult:
  """Reversibility of taking `action` in true state `state` (see module docstring)."""
  _check_deterministic(env)
  env.set_state(state)
  target = env.get_state()  # canonical form of `state`
  ts = env.step(action)
  if _is_termination(ts):
    return OracleResult(IRREVERSIBLE)
  start = env.get_state()
  if start == target:
    return OracleResult(REVERSIBLE, 0)

  can_reach = getattr(env, 'can_reach', None) if use_hints else None
  if can_reach is not None and not can_reach(start, target):
    return OracleResult(IRREVERSIBLE)

  actions = range(_num_actions(env))
  dist: Dict[Hashable, int] = {start: 0}
  queue = collections.deque([start])
  expansions = 0
  while queue:
    if expansions >= max_expansions:
      return OracleResult(UNKNOWN, None, expansions)
    s = queue.popleft()
    expansions += 1
    d = dist[s] + 1
    for a in actions:
      env.set_state(s)
      ts = env.step(a)
      if _is_termination(ts):
        continue  # terminal: cannot be left, and is not `target` (target is non-terminal here)
      nxt = env.get_state()
      if nxt == target:
        return OracleResult(REVERSIBLE, d, expansions)
      if nxt in dist:
        continue
      if can_reach is not None and not can_reach(nxt, target):
        continue
      dist[nxt] = d
      queue.append(nxt)
  return OracleResult(IRREVERSIBLE, None, expansions)


def label_transitions(env, states: Sequence[Hashable], actions: Sequence[int],
                      max_expansions: int = 100_000, use_hints: bool = True
                      ) -> List[OracleResult]:
  """`check` for each (state, action) pair; repeated pairs are computed once."""
  if len(states) != len(actions):
    raise ValueError(f'{len(states)} states but {len(actions)} actions')
  cache: Dict[Tuple[Hashable, int], OracleResult] = {}
  out = []
  for s, a in zip(states, actions):
    key = (s, int(a))
    if key not in cache:
      cache[key] = check(env, s, int(a), max_expansions=max_expansions, use_hints=use_hints)
    out.append(cache[key])
  return out

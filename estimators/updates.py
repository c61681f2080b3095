"""A guard every learner's update goes through (psi/phi here, IMPALA in agents.learning): an
update whose loss, gradients or resulting parameters are not all finite is dropped, the state
kept as it was, so one bad batch or a diverging learning rate never writes NaN into parameters
that actors fetch and checkpoints keep. The caller counts the drops (`finite` is returned)."""
from typing import Any, Tuple

import jax
import jax.numpy as jnp

SKIPPED = 'update_skipped'   # a learner's log: 1 (or, over several steps, the fraction) dropped


class DivergenceError(RuntimeError):
  """A learner's updates stopped being finite for too long: going on would only repeat it, so
  the run stops (the supervisor does not restart a node that raised this)."""


class SkipCounter:
  """Counts dropped updates, in all and in a row; raises DivergenceError at `max_consecutive`."""

  def __init__(self, what: str, max_consecutive: int):
    if max_consecutive < 1:
      raise ValueError(f'max consecutive skipped updates must be >= 1, got {max_consecutive}')
    self._what = what
    self._max_consecutive = max_consecutive
    self.total = 0
    self.consecutive = 0

  def add(self, skipped: bool, update: int) -> None:
    self.total += bool(skipped)
    self.consecutive = self.consecutive + 1 if skipped else 0
    if self.consecutive >= self._max_consecutive:
      raise DivergenceError(f'{self._what} diverged: {self.consecutive} updates in a row with '
                            f'a non-finite loss or gradient (update {update} of this process)')


def all_finite(*trees: Any) -> jnp.ndarray:
  """True iff every inexact leaf of every tree is finite (integer leaves always are)."""
  checks = [jnp.all(jnp.isfinite(x)) for tree in trees for x in jax.tree_util.tree_leaves(tree)
            if jnp.issubdtype(jnp.asarray(x).dtype, jnp.inexact)]
  return jnp.all(jnp.stack(checks)) if checks else jnp.array(True)


def keep_if_finite(new_state: Any, old_state: Any, *checked: Any) -> Tuple[Any, jnp.ndarray]:
  """(new_state if `checked` and new_state are all finite else old_state, that verdict).
  Jittable: a select per leaf, no branch. Pass the gradients' global norm among `checked`: it
  overflows (inf) where every gradient is still finite but the update has become meaningless."""
  finite = all_finite(new_state, *checked)
  state = jax.tree_util.tree_map(lambda new, old: jnp.where(finite, new, old), new_state, old_state)
  return state, finite

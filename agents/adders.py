"""Adders: each actor step goes to the IMPALA queue and to the 'precedence' window table."""
from typing import Sequence

import numpy as np
from acme import adders, specs
from acme.adders import reverb as reverb_adders

PRECEDENCE_TABLE = 'precedence'
VALID = {'valid': np.ones((), np.float32)}


class ForkingAdder(adders.Adder):
  """Sends every call to several adders (Acme 0.4.0 has no such class)."""

  def __init__(self, children: Sequence[adders.Adder]):
    self._children = list(children)

  def add_first(self, timestep):
    for a in self._children:
      a.add_first(timestep)

  def add(self, action, next_timestep, extras=()):
    for a in self._children:
      a.add(action, next_timestep, extras)

  def reset(self):
    for a in self._children:
      a.reset()


class PrecedenceWindowAdder(adders.Adder):
  """Writes time-ordered windows of `length` steps every `period` steps, never across episodes.

  At an episode end the last window is written *truncated* (Acme's TRUNCATE): zero-padding it
  in the adder (ZERO_PAD) appended up to `length` padding steps one by one in Python, which
  cost ~0.35 ms per env step on short Cartpole episodes. The reader pads to `length` instead
  (`launch.precedence_learner.make_window_iterator`), so an item is a valid prefix followed by
  zeros; the 'valid' extra marks real steps. The step that closes an episode (Acme's filler,
  which holds the episode's final observation) has valid = 0, so an observation at t is real iff
  valid[t] or valid[t-1] (`estimators.pairs.observed_steps`). Windows start at multiples of
  `period`; `estimators.pairs.window_layout` says which window owns which pairs.
  """

  def __init__(self, client, length: int, period: int):
    self._inner = reverb_adders.SequenceAdder(
        client=client, sequence_length=length, period=period,
        priority_fns={PRECEDENCE_TABLE: None},
        end_of_episode_behavior=reverb_adders.EndBehavior.TRUNCATE)

  @staticmethod
  def signature(environment_spec: specs.EnvironmentSpec):
    """Variable-length windows (at most the adder's `length` steps)."""
    return reverb_adders.SequenceAdder.signature(environment_spec, VALID, sequence_length=None)

  def add_first(self, timestep):
    self._inner.add_first(timestep)

  def add(self, action, next_timestep, extras=()):
    self._inner.add(action, next_timestep, VALID)

  def reset(self):
    self._inner.reset()


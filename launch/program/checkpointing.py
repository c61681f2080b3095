"""Learner checkpoints: periodic, on request (the final one), restored when a node (re)starts.

A learner's state (params, optimiser state, ...) is a pytree of arrays. It is stored as an .npz of
its leaves plus a JSON header (step count, the tree's structure and leaf shapes), never as a
pickle, so opening a checkpoint runs no code. Restoring needs a template state of the same
structure (the freshly built learner's own), which is also how a changed network is detected.

Files: DIR/state.npz, written to a temporary file and renamed, so a crash mid-save keeps the last
good checkpoint.
"""
import io
import json
import os
import threading
import time
from typing import Any, Optional, Tuple

import jax
from absl import logging
import numpy as np
from acme import core

from envs import paths

FORMAT = 'noturningback-learner-state/1'
STATE_FILE = 'state.npz'
_HEADER = '__header__'


class CheckpointError(ValueError):
  """A learner checkpoint that is corrupt or does not fit the learner."""


def save_state(directory: str, state: Any, steps: int) -> str:
  leaves, treedef = jax.tree_util.tree_flatten(jax.device_get(state))
  leaves = [np.asarray(x) for x in leaves]
  header = {'format': FORMAT, 'steps': int(steps), 'saved_at': time.time(),
            'treedef': str(treedef), 'shapes': [list(x.shape) for x in leaves],
            'dtypes': [str(x.dtype) for x in leaves]}
  arrays = {f'leaf_{i}': x for i, x in enumerate(leaves)}
  arrays[_HEADER] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
  os.makedirs(directory, exist_ok=True)
  buf = io.BytesIO()
  np.savez(buf, **arrays)
  path = os.path.join(directory, STATE_FILE)
  with paths.atomic_write(path, 'wb', fsync=True) as f:
    f.write(buf.getvalue())
  return path


def read_header(directory: str) -> Optional[dict]:
  """The header of DIR's checkpoint, or None when there is none."""
  path = os.path.join(directory, STATE_FILE)
  if not os.path.exists(path):
    return None
  try:
    with np.load(path, allow_pickle=False) as z:
      return json.loads(bytes(z[_HEADER]).decode())
  except Exception as e:  # zip, JSON and key errors all mean the same thing here
    raise CheckpointError(f'learner checkpoint {path} is corrupt ({type(e).__name__})') from e


def load_state(directory: str, template: Any) -> Optional[Tuple[Any, int]]:
  """(state, steps) from DIR shaped like `template`, or None when DIR holds no checkpoint."""
  header = read_header(directory)
  if header is None:
    return None
  path = os.path.join(directory, STATE_FILE)
  if header.get('format') != FORMAT:
    raise CheckpointError(f'{path} is not a learner checkpoint of format {FORMAT}')
  t_leaves, treedef = jax.tree_util.tree_flatten(template)
  if str(treedef) != header['treedef'] or [list(np.shape(x)) for x in t_leaves] != header['shapes']:
    raise CheckpointError(f'learner checkpoint {path} does not fit this learner (its network or '
                          'optimiser differs from the run that saved it)')
  with np.load(path, allow_pickle=False) as z:
    leaves = [z[f'leaf_{i}'] for i in range(len(t_leaves))]
  return jax.tree_util.tree_unflatten(treedef, leaves), int(header['steps'])


class CheckpointedLearner(core.Worker):
  """Runs `learner.step()` in a loop; saves every `period_s` and when `finish()` is called.

  `finish()` (called by the coordinator over Courier before the program stops) stops the loop
  after the step in flight, saves, and returns the saved step count, so the final checkpoint
  is the learner's last step. Other attributes (get_variables, ...) are the learner's.
  """

  def __init__(self, learner, directory: str, period_s: float = 300.0,
               finish_timeout_s: float = 5.0):
    self._learner = learner
    self._directory = directory
    self._period_s = period_s
    self._finish_timeout_s = finish_timeout_s
    self._step_lock = threading.Lock()   # held while a step runs
    self._save_lock = threading.Lock()
    self._finished = threading.Event()
    self._steps = 0
    restored = load_state(directory, learner.save())
    if restored is not None:
      state, self._steps = restored
      learner.restore(state)
      logging.info('restored learner checkpoint %s at step %d', directory, self._steps)
    self.restored_steps = self._steps

  def run(self):
    last_save = time.time()
    while not self._finished.is_set():
      with self._step_lock:
        if self._finished.is_set():
          break
        self._learner.step()
        self._steps += 1
      if time.time() - last_save >= self._period_s:
        self.save()
        last_save = time.time()
    while True:  # finished: idle (parameters stay served) until the program stops
      time.sleep(1.0)

  def save(self) -> int:
    with self._save_lock:
      steps = self._steps
      save_state(self._directory, self._learner.save(), steps)
      return steps

  def finish(self) -> int:
    self._finished.set()
    # A step blocked on an empty queue (the actors have stopped) would hold the lock forever:
    # save anyway after a while. The state is replaced whole by each step, so what is saved is
    # one consistent state; at worst a step that was waiting for data completes after it.
    got = self._step_lock.acquire(timeout=self._finish_timeout_s)
    try:
      flush = getattr(self._learner, 'flush_counts', None)
      if flush is not None:   # counts synced periodically: the last steps reach the counter
        flush()
      return self.save()
    finally:
      if got:
        self._step_lock.release()

  def get_variables(self, names):
    return self._learner.get_variables(names)

  def __dir__(self):
    return sorted(set(dir(type(self))) | set(dir(self._learner)))

  def __getattr__(self, name):
    learner = self.__dict__.get('_learner')  # absent while unpickling
    if learner is None:
      raise AttributeError(name)
    return getattr(learner, name)

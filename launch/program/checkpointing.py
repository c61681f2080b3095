"""Learner checkpoints: periodic, on request (the final one), restored when a node (re)starts.

A learner's state (params, optimiser state, ...) is a pytree of arrays. It is stored as an .npz of
its leaves plus a JSON header (step count, the tree's structure and leaf shapes, a SHA-256 of the
leaves), never as a pickle, so opening a checkpoint runs no code. Restoring needs a template state
of the same structure (the freshly built learner's own), which is also how a changed network is
detected.

Files: DIR/state-<steps>.npz, the last `keep` of them (default 3), each written to a temporary
file and renamed, so a crash mid-save keeps the last good checkpoint. A restore takes the newest
one that reads whole and matches its checksum, saying in one line which it skipped and why: a
truncated or bit-flipped newest file costs one checkpoint period, not the run. A directory with
only the single checkpoint file of an earlier version (DIR/state.npz, no checksum) is a
CheckpointError naming the last commit that reads it.
"""
import contextlib
import hashlib
import io
import json
import os
import re
import threading
import time
from typing import Any, List, Optional, Tuple

import jax
import numpy as np
from absl import logging
from acme import core

from envs import paths
from estimators.updates import DivergenceError

FORMAT = 'noturningback-learner-state/2'      # /2: the header holds the leaves' SHA-256
KEEP = 3
# A learner's one checkpoint file before several were kept (format /1), and the last commit
# that reads it.
EARLIER_FILE = 'state.npz'
EARLIER_FORMAT_READER = '14cbcead63'
_HEADER = '__header__'
_NAME = re.compile(r'^state-(\d{12})\.npz$')


class CheckpointError(ValueError):
  """A learner checkpoint that is corrupt or does not fit the learner."""


class CorruptCheckpoint(CheckpointError):
  """A checkpoint file that cannot be read whole or fails its checksum."""


def _digest(leaves) -> str:
  h = hashlib.sha256()
  for x in leaves:
    h.update(np.ascontiguousarray(x).tobytes())
  return h.hexdigest()


def all_finite(state: Any) -> bool:
  return all(np.all(np.isfinite(x)) for x in jax.tree_util.tree_leaves(jax.device_get(state))
             if np.issubdtype(np.asarray(x).dtype, np.inexact))


def checkpoint_files(directory: str) -> List[str]:
  """DIR's checkpoints, newest first."""
  try:
    names = os.listdir(directory)
  except FileNotFoundError:
    return []
  return [os.path.join(directory, n) for n in sorted(filter(_NAME.match, names), reverse=True)]


def save_state(directory: str, state: Any, steps: int, keep: int = KEEP) -> str:
  """Writes DIR/state-<steps>.npz and removes all but the newest `keep` checkpoints."""
  leaves, treedef = jax.tree_util.tree_flatten(jax.device_get(state))
  leaves = [np.asarray(x) for x in leaves]
  header = {'format': FORMAT, 'steps': int(steps), 'saved_at': time.time(),
            'treedef': str(treedef), 'shapes': [list(x.shape) for x in leaves],
            'dtypes': [str(x.dtype) for x in leaves], 'sha256': _digest(leaves)}
  arrays = {f'leaf_{i}': x for i, x in enumerate(leaves)}
  arrays[_HEADER] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
  os.makedirs(directory, exist_ok=True)
  buf = io.BytesIO()
  np.savez(buf, **arrays)
  path = os.path.join(directory, f'state-{int(steps):012d}.npz')
  with paths.atomic_write(path, 'wb', fsync=True) as f:
    f.write(buf.getvalue())
  for old in checkpoint_files(directory)[max(keep, 1):]:
    with contextlib.suppress(OSError):
      os.remove(old)
  return path


def _read(path: str) -> Tuple[dict, Optional[List[np.ndarray]]]:
  """(header, leaves) of one checkpoint file, verified; raises CorruptCheckpoint."""
  try:
    with np.load(path, allow_pickle=False) as z:
      header = json.loads(bytes(z[_HEADER]).decode())
      if header.get('format') != FORMAT:
        raise CheckpointError(f'{path} is not a learner checkpoint of format {FORMAT}')
      leaves = [z[f'leaf_{i}'] for i in range(len(header['shapes']))]
  except CheckpointError:
    raise
  except Exception as e:  # zip (CRC included), JSON and key errors all mean the same thing here
    raise CorruptCheckpoint(f'learner checkpoint {path} is corrupt ({type(e).__name__})') from e
  if _digest(leaves) != header.get('sha256'):
    raise CorruptCheckpoint(f'learner checkpoint {path} is corrupt (checksum mismatch)')
  return header, leaves


def verify(path: str) -> dict:
  """The header of one checkpoint file that reads whole and matches its checksum; raises
  CheckpointError (CorruptCheckpoint when it is cut or altered)."""
  return _read(path)[0]


def _newest_valid(directory: str, set_aside: bool = False
                  ) -> Optional[Tuple[str, dict, List[np.ndarray]]]:
  """(path, header, leaves) of DIR's newest checkpoint that reads whole; None when DIR has none.
  Each one skipped is said in one line; none valid among several is a CorruptCheckpoint.
  `set_aside`: a skipped file is renamed to *.corrupt (kept to look at, no longer counted), so
  that a learner restored from an older one does not meet it again, nor keep it as a newest."""
  files = checkpoint_files(directory)
  if not files and os.path.exists(os.path.join(directory, EARLIER_FILE)):
    raise CheckpointError(f'{directory} holds only {EARLIER_FILE}, the learner checkpoint of an '
                          f'earlier version; commit {EARLIER_FORMAT_READER} is the last that '
                          'reads it')
  skipped = []
  for path in files:
    try:
      header, leaves = _read(path)
    except CorruptCheckpoint as e:
      skipped.append(str(e))
      if set_aside:
        with contextlib.suppress(OSError):
          os.replace(path, path + '.corrupt')
      logging.warning('skipped %s%s', e, '; set aside as *.corrupt' if set_aside else '')
      continue
    return path, header, leaves
  if skipped:
    raise CorruptCheckpoint(f'no valid learner checkpoint in {directory}: '
                            + '; '.join(skipped))
  return None


def newest_valid_file(directory: str) -> Optional[str]:
  """The path of DIR's newest checkpoint that reads whole, or None when DIR holds none."""
  found = _newest_valid(directory)
  return None if found is None else found[0]


def read_header(directory: str) -> Optional[dict]:
  """The header of DIR's newest valid checkpoint, or None when there is none."""
  found = _newest_valid(directory)
  return None if found is None else found[1]


def load_state(directory: str, template: Any, set_aside_corrupt: bool = False
               ) -> Optional[Tuple[Any, int]]:
  """(state, steps) from DIR's newest valid checkpoint shaped like `template`, or None when DIR
  holds no checkpoint. `set_aside_corrupt`: as `_newest_valid`'s set_aside (the learner's own
  restore; readers leave the directory as it is)."""
  found = _newest_valid(directory, set_aside_corrupt)
  if found is None:
    return None
  path, header, leaves = found
  t_leaves, treedef = jax.tree_util.tree_flatten(template)
  if str(treedef) != header['treedef'] or [list(np.shape(x)) for x in t_leaves] != header['shapes']:
    raise CheckpointError(f'learner checkpoint {path} does not fit this learner (its network or '
                          'optimiser differs from the run that saved it)')
  return jax.tree_util.tree_unflatten(treedef, leaves), int(header['steps'])


class CheckpointedLearner(core.Worker):
  """Runs `learner.step()` in a loop; saves every `period_s` and when `finish()` is called.

  `finish()` (called by the coordinator over Courier before the program stops) stops the loop
  after the step in flight, saves, and returns the saved step count, so the final checkpoint
  is the learner's last step. Other attributes (get_variables, ...) are the learner's.
  """

  def __init__(self, learner, directory: str, period_s: float = 300.0,
               finish_timeout_s: float = 5.0, keep: int = KEEP):
    self._learner = learner
    self._directory = directory
    self._period_s = period_s
    self._keep = keep
    self._finish_timeout_s = finish_timeout_s
    self._step_lock = threading.Lock()   # held while a step runs
    self._save_lock = threading.Lock()
    self._finished = threading.Event()
    self._steps = 0
    restored = load_state(directory, learner.save(), set_aside_corrupt=True)
    if restored is not None:
      state, self._steps = restored
      learner.restore(state)
      logging.info('restored learner checkpoint %s at step %d', directory, self._steps)
    self.restored_steps = self._steps
    self._saved_steps = self._steps if restored is not None else None

  def run(self):
    last_save = time.time()
    while not self._finished.is_set():
      with self._step_lock:
        if self._finished.is_set():
          break
        try:
          self._learner.step()
        except DivergenceError as e:
          last = ('none' if self._saved_steps is None else
                  f'step {self._saved_steps} in {self._directory}')
          raise DivergenceError(f'{e} at step {self._steps}; last finite checkpoint: {last}') from None
        self._steps += 1
      if time.time() - last_save >= self._period_s:
        self.save()
        last_save = time.time()
    while True:  # finished: idle (parameters stay served) until the program stops
      time.sleep(1.0)

  def save(self) -> Optional[int]:
    """Checkpoints the learner's state; returns the steps of the newest checkpoint. A state that
    is not all finite is never written (the one before it stays the newest)."""
    with self._save_lock:
      steps, state = self._steps, self._learner.save()
      if not all_finite(state):
        logging.warning('not checkpointing learner step %d: its state is not finite', steps)
        return self._saved_steps
      save_state(self._directory, state, steps, self._keep)
      self._saved_steps = steps
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

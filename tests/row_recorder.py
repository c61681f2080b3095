"""A writer for the actor loop that keeps the rows it is given, for tests that check what an
actor writes without reading it back from a Reverb table."""
import numpy as np


class RowRecorder:
  """Keeps every row the loop appends (one per loop iteration, all rooms), in order, as numpy
  copies; passes each on to `writer` when one is given, so a real table fills beside it."""

  def __init__(self, num_envs: int, writer=None):
    self.num_envs, self.rows, self._writer = num_envs, [], writer

  def append(self, observation, steps, logits=None):
    if self._writer is not None:
      self._writer.append(observation, steps, logits)
    self.rows.append((np.array(observation), np.array(steps),
                      None if logits is None else np.array(logits)))

  def room(self, k: int):
    """Room k's stream: (observation, steps, logits) per row, logits None where none was given."""
    return [(obs[k], steps[k], None if logits is None else logits[k])
            for obs, steps, logits in self.rows]

  def flush(self):
    if self._writer is not None:
      self._writer.flush()

  def close(self):
    if self._writer is not None:
      self._writer.close()

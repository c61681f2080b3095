"""Output paths: whether something can be written there, found by trying (the lowest layer, so
every CLI, envs' included, can refuse an output before doing any work)."""
import os
import tempfile
from typing import Optional


def unwritable_reason(path: str) -> Optional[str]:
  """Why nothing can be created at `path` (None when it can), found by trying: an empty
  directory is made and removed in the nearest existing ancestor of `path`. Permission bits
  would not tell (root ignores them; read-only mounts do not show in them)."""
  parent = os.path.dirname(os.path.abspath(path))
  while not os.path.lexists(parent):
    parent = os.path.dirname(parent)
  if not os.path.isdir(parent):
    return f'{parent} is a file, not a directory'
  try:
    os.rmdir(tempfile.mkdtemp(prefix='.write-probe-', dir=parent))
  except OSError as e:
    return f'cannot create anything in {parent} ({e.strerror})'
  return None

"""Output paths: whether something can be written there, found by trying, and the one way files
are replaced atomically (atomic_write, atomic_path). The lowest layer, so every CLI, envs'
included, can refuse an output before doing any work, and every writer (run state, checkpoints,
figures, predictions, caches) shares one rename-into-place."""
import contextlib
import json
import os
import secrets
import tempfile
from typing import IO, Any, Iterator, Optional


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


@contextlib.contextmanager
def atomic_path(path: str) -> Iterator[str]:
  """A temporary name beside `path` for a writer that takes a file name; when the block ends
  without an error the file is renamed over `path`, else it is removed. Readers of `path` so see
  the old file or the new one, never a part of it, even if this process dies mid-write (what it
  leaves is a hidden .tmp-* file). The directory must exist."""
  directory, name = os.path.split(os.path.abspath(path))
  tmp = os.path.join(directory, f'.tmp-{name}.{os.getpid()}.{secrets.token_hex(4)}')
  try:
    yield tmp
    os.replace(tmp, path)
  except BaseException:
    with contextlib.suppress(OSError):
      os.remove(tmp)
    raise


@contextlib.contextmanager
def atomic_write(path: str, mode: str = 'w', fsync: bool = False, **open_kwargs) -> Iterator[IO]:
  """An open file whose content replaces `path` when the block ends without an error (see
  atomic_path); `fsync`: on disk before the rename (checkpoints). `open_kwargs` go to open()."""
  with atomic_path(path) as tmp:
    with open(tmp, mode, **open_kwargs) as f:
      yield f
      if fsync:
        f.flush()
        os.fsync(f.fileno())


def json_default(value: Any) -> Any:
  """`json.dumps`'s `default` for numpy and jax values: a numpy scalar as the Python number it
  holds, an array as nested lists; anything else is a TypeError naming its type."""
  import numpy as np  # here: the writers that need no numpy do not load it
  if isinstance(value, np.generic):
    return value.item()
  if hasattr(value, '__array__'):
    return np.asarray(value).tolist()
  raise TypeError(f'a value of type {type(value).__name__} is not JSON')


def write_json(path: str, obj: Any, indent: int = 2, make_dirs: bool = False,
               sort_keys: bool = False) -> str:
  """The one JSON writer: `obj` written whole or not at all (atomic_write); `make_dirs`: create
  the missing directories first. Returns `path`."""
  if make_dirs:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  with atomic_write(path) as f:
    json.dump(obj, f, indent=indent, sort_keys=sort_keys)
  return path

"""The run directory's disk: what a run is expected to write there, a warning at launch when
there is less free, and a full disk recognised in a node's last error line, so that the run
stops at once with one line instead of restarting the node into the same full disk (that line
written into space set aside for it at launch)."""
import errno
import os
import shutil
from typing import Callable, Optional

# Logs grow with env steps: ~7 bytes per env step on Sokoban (34 MB of CSV and event files at
# 4.9M steps: actor rows per 120-step episode, learner rows per update), less on Cartpole.
LOG_BYTES_PER_ENV_STEP = 8
# Checkpoints (the learners' last few, the replay's tables) and the run's own files.
FIXED_BYTES = 64 * 2**20

# What an OSError of a write says when no space is left (ENOSPC) or the user's quota is spent
# (EDQUOT): Python's message and its errno.
_DISK_FULL = tuple(marker for code in (errno.ENOSPC, errno.EDQUOT)
                   for marker in (os.strerror(code), f'[Errno {code}]'))


def free_bytes(path: str) -> int:
  """Free bytes on the file system that holds `path` (or its nearest existing ancestor)."""
  path = os.path.abspath(path)
  while not os.path.exists(path):
    path = os.path.dirname(path)
  return shutil.disk_usage(path).free


def expected_bytes(max_steps: int) -> int:
  return FIXED_BYTES + LOG_BYTES_PER_ENV_STEP * int(max_steps)


def _mb(n: int) -> str:
  return f'{n / 2**20:,.0f} MB'


def low_space_warning(run_dir: str, max_steps: int) -> Optional[str]:
  """One line when RUN_DIR's file system has less free space than the run should write."""
  free, need = free_bytes(run_dir), expected_bytes(max_steps)
  if free >= need:
    return None
  return (f'warning: {run_dir} has {_mb(free)} free, and a run of {max_steps:,} env steps '
          f'writes about {_mb(need)} (logs, checkpoints); it will stop when the disk is full')


# Below this much free space a node's failure is put down to the disk: no node writes less
# than this between two checkpoints, so a restart would fail again.
FULL_BELOW_BYTES = 1 * 2**20


def is_full(run_dir: str) -> bool:
  return free_bytes(run_dir) < FULL_BELOW_BYTES


def is_disk_full(error_line: str) -> bool:
  return any(marker in error_line for marker in _DISK_FULL)


def disk_full_reason(run_dir: str, node: str) -> str:
  return (f'disk full: node {node} could not write under {run_dir} ({_mb(free_bytes(run_dir))} '
          'free); free some space, then --resume')


# Space each launch sets aside in RUN_DIR for the record of why its run stopped: on a full disk
# nothing else would fit it (failure.json is a new file), and the CLI could only guess.
RESERVE = 'disk_reserve'
RESERVE_BYTES = 256 * 2**10


def set_aside(run_dir: str) -> None:
  """Sets RESERVE_BYTES aside in RUN_DIR (a file that holds them), when the disk has them."""
  try:
    with open(os.path.join(run_dir, RESERVE), 'ab') as f:
      os.posix_fallocate(f.fileno(), 0, RESERVE_BYTES)
  except OSError:
    pass   # a disk full already: the record is written if it fits


def write_despite_full(run_dir: str, write: Callable[[], None]) -> bool:
  """Calls `write()`; when the disk is full, gives it the space set aside (set_aside) and calls
  it once more. Returns whether it wrote; never raises OSError (what the record was for, such as
  stopping the run, goes on without it)."""
  for attempt in range(2):
    try:
      write()
      return True
    except OSError as e:
      if attempt or not is_disk_full(str(e)):
        return False
      try:
        os.remove(os.path.join(run_dir, RESERVE))
      except OSError:
        return False   # nothing set aside (or given up already)
  return False

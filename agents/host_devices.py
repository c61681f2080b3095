"""How many XLA devices the learner splits its batches over, on a host without a GPU: the cores
this process may use, the most of them that divide every batch, and the XLA_FLAGS that ask for
them. Kept apart from the update (agents.impala_step) so that a launcher plans its nodes without
importing rlax and its dependencies."""
import math
import os
from typing import Optional, Sequence

import jax

from envs import jax_internals

HOST_DEVICE_FLAG = '--xla_force_host_platform_device_count'


def cores_available() -> int:
  """The cores this process may run on (its CPU affinity, e.g. a Slurm or taskset allocation)."""
  try:
    return len(os.sched_getaffinity(0))
  except AttributeError:
    return os.cpu_count() or 1


def default_host_devices(batch_sizes: Sequence[int], cores: Optional[int] = None) -> int:
  """How many CPU devices to split the learner's batches over: the most, up to `cores`, that
  divides every batch size (each device gets a whole number of sequences)."""
  cores = cores_available() if cores is None else cores
  common = 0
  for b in batch_sizes:
    common = math.gcd(common, int(b))
  common = common or 1
  return max(d for d in range(1, max(1, min(cores, common)) + 1) if common % d == 0)


def learner_devices(batch_sizes: Sequence[int]) -> list:
  """In the learner's process: the devices of jax's default backend to split over (the GPU; or
  the XLA host devices its environment asked for, as many as divide its batches)."""
  devices = jax.devices()
  return devices[:default_host_devices(batch_sizes, len(devices))]


def with_host_devices(xla_flags: str, n: int) -> str:
  """XLA_FLAGS with the CPU platform's device count set to n (any earlier count replaced)."""
  kept = [f for f in xla_flags.split() if not f.startswith(HOST_DEVICE_FLAG)]
  return ' '.join(kept + [f'{HOST_DEVICE_FLAG}={n}'])


def request_host_devices(n: int) -> None:
  """Asks XLA for n CPU devices in this process; must come before jax's first computation.
  A backend already started with another count is a RuntimeError (one line)."""
  if jax_internals.backends_started():
    have = len(jax.devices('cpu'))
    if have != n:
      raise RuntimeError(f'jax already started with {have} CPU devices; {n} must be asked for '
                         f'before its first computation (XLA_FLAGS={HOST_DEVICE_FLAG}={n})')
    return
  os.environ['XLA_FLAGS'] = with_host_devices(os.environ.get('XLA_FLAGS', ''), n)

"""A Sokoban run sized to its host: how many actors, environments per actor and learner cores
(XLA host devices), from the host's cores and GPU, by a rule made of measured speeds
(BUILD_NOTES.md, "Host-sized preset"; `host_preset.this_host()` gives it for this host, and
`python -m experiments sokoban --scale host` runs the comparison at it).

The rule. A learner consumes what the actors make: with S samples per sequence it needs
F / S env steps/s for F frames/s of updates, and an actor core makes A env steps/s. So:

  - GPU host with C cores: the learner on the GPU (one core for its Python thread and its
    batches), one core for replay, counter and coordinator, actors = C - 2. Its batch stays the
    batch-16 recipe's (16 sequences x 20, x4 reuse; the `long` scale's agent), with
    GPU_UPDATES_PER_CALL updates per call (one dispatch for several batches: the same updates).
  - CPU host with C cores: one core for replay, counter and coordinator, and the rest split so
    that the learner's cores L consume what the actors' make:
        L x F1 x E / S = (C - 1 - L) x A,
    L rounded down to a divisor of the batch (each device takes whole sequences), >= 1, and
    at least one actor. F1 is one core's learner frames/s, E the efficiency per added core.
  - Environments per actor: 16, the vectorised batch the Sokoban scales run (one fused
    inference call per 16 rooms).
"""
import dataclasses
import glob
import importlib.util
from typing import Callable, Optional

from agents import host_devices

# jax's CUDA builds: the PyPI plugin (jax >= 0.4.22: jax-cuda12-plugin), or a jaxlib built with CUDA.
CUDA_MODULES = ('jax_cuda12_plugin', 'jax_plugins.xla_cuda12', 'jaxlib.cuda')


@dataclasses.dataclass(frozen=True)
class Host:
  """What a host offers the learner: GPUs, whether jax has a CUDA plugin there, its cores
  (0: not known here, counted by the node's script where it starts: a cluster host)."""
  gpus: int
  cuda_plugin: bool
  cores: int


# A cluster host's cores, counted by the replica's script as it starts (launch.cluster.files).
CORES_WHERE_IT_STARTS = '$(nproc)'


def _installed(module: str) -> bool:
  try:
    return importlib.util.find_spec(module) is not None
  except (ImportError, ValueError):
    return False


def probe_host(gpus: Optional[Callable[[], int]] = None,
               cuda_plugin: Optional[Callable[[], bool]] = None) -> Host:
  """This host, without starting jax (the launcher's process must not take the GPU): NVIDIA
  device files for GPUs, an importable CUDA plugin module, the cores this process may use."""
  n = gpus() if gpus else len(glob.glob('/dev/nvidia[0-9]*'))
  plugin = cuda_plugin() if cuda_plugin else any(_installed(m) for m in CUDA_MODULES)
  return Host(gpus=n, cuda_plugin=plugin, cores=host_devices.cores_available())


# Where these figures come from: BUILD_NOTES.md, "Host-sized preset".
ONE_CORE_LEARNER_FRAMES_PER_S = 11_300.0   # F1: the Sokoban learner (15x15, batch 16 x 20)
ACTOR_ENV_STEPS_PER_CORE = 6_900.0         # A: actors of 16 vectorised rooms
LEARNER_CORE_EFFICIENCY = 0.7              # E: frames/s per added core, the target
SAMPLES_PER_SEQUENCE = 4.0      # the batch-16 recipe's samples_per_insert
BATCH_SIZE = 16                 # the batch-16 recipe's
ENVS_PER_ACTOR = 16
SERVICE_CORES = 1               # replay, counter, coordinator


@dataclasses.dataclass(frozen=True)
class HostSizes:
  cores: int
  gpu: bool
  num_actors: int
  envs_per_actor: int
  batch_size: int
  learner_host_devices: int     # 0 on a GPU host (the learner is on the GPU)
  learner_device: str
  updates_per_call: int = 1     # learner updates per jitted call (GPU: GPU_UPDATES_PER_CALL)


# The fewest updates per call that took the batch-16 recipe's batch past 200K frames/s on an H200
# (BUILD_NOTES.md, "On a GPU").
GPU_UPDATES_PER_CALL = 4


def learner_cores(cores: int, batch_sizes=(BATCH_SIZE,),
                  efficiency: float = LEARNER_CORE_EFFICIENCY) -> int:
  """The CPU learner's share of a host of `cores` cores that also runs the actors (the rule of
  this module's docstring), as a count of XLA host devices that divides every batch size."""
  free = max(1, int(cores) - SERVICE_CORES)
  per_learner_core = ONE_CORE_LEARNER_FRAMES_PER_S * efficiency / SAMPLES_PER_SEQUENCE
  balanced = free * ACTOR_ENV_STEPS_PER_CORE / (ACTOR_ENV_STEPS_PER_CORE + per_learner_core)
  return host_devices.default_host_devices(list(batch_sizes), max(1, min(int(balanced), free - 1)))


def size(cores: int, gpu: bool, batch_size: int = BATCH_SIZE,
         efficiency: float = LEARNER_CORE_EFFICIENCY) -> HostSizes:
  """The rule of this module's docstring for a host of `cores` cores, with or without a GPU."""
  cores = max(1, int(cores))
  if gpu:
    actors = max(1, cores - 1 - SERVICE_CORES)
    return HostSizes(cores, True, actors, ENVS_PER_ACTOR, batch_size, 0, 'gpu',
                     GPU_UPDATES_PER_CALL)
  free = max(1, cores - SERVICE_CORES)
  learner = learner_cores(cores, [batch_size], efficiency)
  return HostSizes(cores, False, max(1, free - learner), ENVS_PER_ACTOR, batch_size, learner, 'cpu')


def this_host(host: Optional[Host] = None) -> HostSizes:
  """`size` for this host (`probe_host`: cores, GPU and CUDA plugin)."""
  host = host or probe_host()
  return size(host.cores, bool(host.gpus and host.cuda_plugin))

"""Where each node runs: the IMPALA learner on the host's GPU when there is one (or on all its
cores, as XLA host devices, when there is none), every other node on the CPU.

Placement is by environment, per Launchpad group, set before a node's process starts: jax reads
JAX_PLATFORMS and XLA_FLAGS once, when it starts its backends, and a node's process may start
them while unpickling its node (a jax key among its arguments). CPU nodes get
JAX_PLATFORMS=cpu and CUDA_VISIBLE_DEVICES='' so that none of them opens the GPU or takes GPU
memory (jax on a GPU takes 75% of it at start by default); GPU nodes get
XLA_PYTHON_CLIENT_PREALLOCATE=false, as both learners may share one GPU. Local launches pass
this to Launchpad (launch.runtime.launcher), cluster launches write it into each replica's
script (launch.cluster.files).

An unusable request is a ValueError of one line naming what is missing: `gpu` where no GPU is
seen, or where jax has no CUDA plugin.

Threads: XLA's CPU backend gives each process an Eigen pool of one thread per core. An actor's
jitted call needs no pool, and where every node shares a few cores `--actor_threads 1` keeps the
actors to one XLA thread each (not the default: on a 2-core host it changed nothing measurable;
BUILD_NOTES.md, "Sokoban throughput"). The learner keeps the pool: a second core speeds it up.
"""
import os
import sys
from typing import Dict, Optional

from agents import host_devices
from launch.runtime import host_preset

DEVICE_CHOICES = ('auto', 'cpu', 'gpu')
CPU_ONLY = {'JAX_PLATFORMS': 'cpu', 'CUDA_VISIBLE_DEVICES': ''}
ON_GPU = {'JAX_PLATFORMS': 'cuda', 'XLA_PYTHON_CLIENT_PREALLOCATE': 'false'}
CPU_GROUPS = ('replay', 'counter', 'coordinator', 'actor')
INSTALL_HINT = 'make setup ACCEL=cuda12 (docs/gpu.md)'
SINGLE_THREADED_XLA = '--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1'


# What a host offers (GPUs, the CUDA plugin, cores) and how it is probed: launch.runtime.host_preset,
# whose sizes it feeds.
Host = host_preset.Host
CORES_WHERE_IT_STARTS = host_preset.CORES_WHERE_IT_STARTS
probe_host = host_preset.probe_host


def keep_launcher_on_cpu() -> None:
  """The launching process (and the child that builds the program and starts the nodes) uses
  jax only for keys and specs: on the CPU, so that on a GPU host it takes none of the GPU's
  memory for the whole run, and on a host where jax's CUDA plugin finds no GPU it does not fail
  to start its backend. Nodes get their own placement (`node_environment`), over this."""
  os.environ['JAX_PLATFORMS'] = 'cpu'   # inherited by the launcher's child process
  if 'jax' in sys.modules:   # jax read the variable at import; its backends start later
    sys.modules['jax'].config.update('jax_platforms', 'cpu')


def resolve(requested: str, host: Host, flag: str = '--learner_device') -> str:
  """'cpu' or 'gpu' for a request of auto / cpu / gpu on `host`."""
  if requested not in DEVICE_CHOICES:
    raise ValueError(f'{flag} must be one of {", ".join(DEVICE_CHOICES)}, got {requested!r}')
  if requested == 'cpu':
    return 'cpu'
  if requested == 'auto':
    return 'gpu' if host.gpus and host.cuda_plugin else 'cpu'
  if not host.gpus:
    raise ValueError(f'{flag} gpu: no GPU on this host (no /dev/nvidia* device); use '
                     f'{flag} cpu or auto')
  if not host.cuda_plugin:
    raise ValueError(f"{flag} gpu: jax's CUDA plugin is not installed (jax-cuda12-plugin); "
                     f'install it with {INSTALL_HINT}')
  return 'gpu'


def learner_host_devices(cfg, host: Host):
  """CPU devices the learner splits its batches over: --learner_host_devices, else (0) its
  share of the host's cores beside the actors (launch.runtime.host_preset.learner_cores: 1 on
  this 2-core machine, 8 of 16), as a count that divides its batches. On a host whose cores
  are not known here (a cluster's), its core count as its node's script counts it (the learner
  then splits over as many of those as divide its batches: agents.host_devices.learner_devices)."""
  if cfg.learner_host_devices:
    return cfg.learner_host_devices
  if not host.cores:
    return CORES_WHERE_IT_STARTS
  return host_preset.learner_cores(host.cores, cfg.learner_batch_sizes)


def plan(cfg, host: Host, precedence_host: Optional[Host] = None) -> Dict[str, str]:
  """{node group: where it runs}, for --show_config and the node environments: 'gpu', or
  'cpu' (the learner's with its host devices). `precedence_host`: the precedence learner's
  host where it is not the learner's (a cluster)."""
  out = {g: 'cpu' for g in ('replay', 'counter', 'coordinator')}
  if cfg.agent == 'impala':
    if resolve(cfg.learner_device, host) == 'gpu':
      out['learner'] = 'gpu'
    else:
      n = learner_host_devices(cfg, host)
      if n == CORES_WHERE_IT_STARTS:
        out['learner'] = "cpu (XLA host devices: its host's cores)"
      else:
        out['learner'] = f'cpu ({n} XLA host device{"s" if n > 1 else ""})'

  if cfg.online_estimators:
    out['precedence_learner'] = resolve(cfg.precedence_device, precedence_host or host,
                                        '--precedence_device')
  out['actor'] = f'cpu ({cfg.num_actors} actors x {cfg.envs_per_actor} envs)'
  return out


def node_environment(cfg, host: Host,
                     precedence_host: Optional[Host] = None) -> Dict[str, Dict[str, str]]:
  """{Launchpad group: extra environment of its processes}."""
  where = plan(cfg, host, precedence_host)
  env = {g: dict(CPU_ONLY) for g in CPU_GROUPS}
  if cfg.actor_threads == 1:
    env['actor']['XLA_FLAGS'] = SINGLE_THREADED_XLA
  if 'learner' in where:
    if where['learner'] == 'gpu':
      env['learner'] = dict(ON_GPU)
    else:
      env['learner'] = dict(CPU_ONLY, XLA_FLAGS=host_devices.with_host_devices(
          '', learner_host_devices(cfg, host)))
  if 'precedence_learner' in where:
    env['precedence_learner'] = dict(ON_GPU if where['precedence_learner'] == 'gpu' else CPU_ONLY)
  return env

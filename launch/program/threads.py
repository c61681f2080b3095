"""How many threads each node's XLA may use, as environment variables per Launchpad group.

XLA's CPU backend gives each process an Eigen pool of one thread per core. An actor's jitted
call needs no pool, and on a host where every node shares a few cores, `--actor_threads 1` keeps
the actors to one XLA thread each (XLA's default stays the default: on a 2-core host it changed
nothing measurable; BUILD_NOTES.md, "Sokoban throughput"). The learner always keeps the pool:
it is the one node whose work a second core speeds up.
"""
from typing import Dict

# XLA reads its flags once, when the backend starts: they must be in the process's environment.
SINGLE_THREADED_XLA = '--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1'


def node_environment(actor_threads: int) -> Dict[str, Dict[str, str]]:
  """{Launchpad group: extra environment}: `actor_threads` 1 runs the actors' XLA on one
  thread; 0 leaves XLA's default (one thread per core)."""
  if actor_threads == 1:
    return {'actor': {'XLA_FLAGS': SINGLE_THREADED_XLA}}
  return {}

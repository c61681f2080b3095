"""How many threads each node's XLA may use, as environment variables per Launchpad group.

On a small host every node shares the same few cores. XLA's CPU backend gives each process an
Eigen pool of one thread per core; an actor's jitted call (16 rooms, well under a millisecond of
work) gains nothing from a second thread and spends CPU waking it, which the learner, the
program's bottleneck, then lacks (BUILD_NOTES.md, "Sokoban throughput"). The learner keeps XLA's
default: it is the one node whose work a second core speeds up.
"""
from typing import Dict

# XLA reads its flags once, when the backend starts: they must be in the process's environment.
SINGLE_THREADED_XLA = '--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1'


def node_environment(actor_threads: int) -> Dict[str, Dict[str, str]]:
  """{Launchpad group: extra environment}: `actor_threads` 1 runs the actors' (and the
  evaluator's) XLA on one thread; 0 leaves XLA's default (one thread per core)."""
  if actor_threads == 1:
    return {'actor': {'XLA_FLAGS': SINGLE_THREADED_XLA}}
  return {}

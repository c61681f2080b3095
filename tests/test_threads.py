"""launch.program.threads: which Launchpad groups get single-threaded XLA. (That a local launch
hands it to those processes is read back from a real run by bench.program_profile, whose JSON
records each node's XLA_FLAGS.)"""
import pytest

from launch.program import threads
from launch.program.config import RunConfig


def test_single_threaded_actors_only_when_asked():
  assert threads.node_environment(0) == {}
  env = threads.node_environment(1)
  assert set(env) == {'actor'}   # the learner keeps XLA's pool: a second core speeds it up
  flags = env['actor']['XLA_FLAGS']
  assert '--xla_cpu_multi_thread_eigen=false' in flags and 'intra_op_parallelism_threads=1' in flags


def test_actor_threads_is_checked():
  with pytest.raises(ValueError, match='actor_threads must be 0'):
    RunConfig(actor_threads=2)

"""The private parts of Launchpad this project uses, in one place, written against dm-launchpad
0.5.2 (constraints.txt, requirements.lock). tests/test_private_apis.py checks that the installed
Launchpad is that version and that each part below is still there as used; a Launchpad upgrade
starts there.

  - `PyNode._initialize_context(launch_type, launch_config)`: the hook Launchpad calls on every
    node of a program as it launches it. A node that runs another (the supervisor's
    SupervisedNode) overrides it to pass the call on; a cluster launch calls it itself
    (launch.cluster.package). `CONTEXT_HOOK` names it.
  - `launchpad.launch.worker_manager`: the per-thread worker manager whose stop event a node
    waits on (`wait_for_stop`); the supervisor takes its thread's manager (`worker_manager`) to
    wait on it from a helper thread.
  - `launchpad/nodes/python/process_entry.py`: the script a python node's process runs (the
    supervisor starts a node's child with it).
  - `ReverbNode._priority_tables_fn`: the tables a Reverb node serves, which the replay node
    (launch.program.replay) builds its own server from.
"""
import os

from launchpad.launch import worker_manager as lp_worker_manager
from launchpad.nodes.python import node as python

LAUNCHPAD_VERSION = '0.5.2'
CONTEXT_HOOK = '_initialize_context'
PROCESS_ENTRY = os.path.join(os.path.dirname(python.__file__), 'process_entry.py')


def initialize_context(node, launch_type, launch_config=None, cls=None) -> None:
  """Launchpad's launch hook (CONTEXT_HOOK) on `node`, as `cls` defines it (a subclass's
  override passing the call to its base: cls=the base), else as the node's own class does."""
  getattr(cls or type(node), CONTEXT_HOOK)(node, launch_type, launch_config)


def worker_manager():
  """This thread's Launchpad worker manager (its `wait_for_stop()` returns when the program
  stops)."""
  return lp_worker_manager.get_worker_manager()


def wait_for_stop() -> None:
  """Blocks until the program stops (in a node's own thread)."""
  lp_worker_manager.wait_for_stop()


def reverb_node_tables(node):
  """The tables a Launchpad ReverbNode was built to serve (its tables factory, called)."""
  return node._priority_tables_fn()  # pylint: disable=protected-access


"""The private APIs of Acme, Launchpad, Reverb and jax the project uses, each wrapped in one
module that names the version it was written against (agents.acme_internals,
launch.runtime.launchpad_internals, agents.reverb_internals, envs.jax_internals): the installed
versions are those pins, and each private part is still there, shaped as the wrapper uses it.
A failure here names the library, the wrapper and what changed: an upgrade starts by rewriting
that wrapper."""
import importlib.metadata
import inspect
import logging
import os
import re

import pytest

from agents import acme_internals, reverb_internals
from envs import jax_internals
from launch.runtime import launchpad_internals

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))
# distribution -> (the wrapper, the version it was written against)
WRAPPERS = {
    'dm-acme': ('agents/acme_internals.py', acme_internals.ACME_VERSION),
    'dm-launchpad': ('launch/runtime/launchpad_internals.py', launchpad_internals.LAUNCHPAD_VERSION),
    'dm-reverb': ('agents/reverb_internals.py', reverb_internals.REVERB_VERSION),
    'jax': ('envs/jax_internals.py', jax_internals.JAX_VERSION),
    'jaxlib': ('envs/jax_internals.py', jax_internals.JAX_VERSION),
}


def _pinned(distribution: str) -> str:
  """The version requirements.lock pins (dm-acme, installed with --no-deps: setup.py's)."""
  for name in ('requirements.lock', 'setup.py'):
    with open(os.path.join(ROOT, name)) as f:
      found = re.search(rf"^\s*'?{re.escape(distribution)}==([\w.]+)", f.read(), re.M)
    if found:
      return found.group(1)
  raise AssertionError(f'{distribution}: no pin found in requirements.lock or setup.py')


@pytest.mark.parametrize('distribution', sorted(WRAPPERS))
def test_each_wrapper_is_written_against_the_installed_and_pinned_version(distribution):
  wrapper, written_for = WRAPPERS[distribution]
  installed = importlib.metadata.version(distribution)
  assert installed == written_for == _pinned(distribution), (
      f'{distribution} {installed} is installed and {_pinned(distribution)} pinned, but {wrapper} '
      f'was written against {written_for}: check every private part it lists against the new '
      f'version, then update its version')
  with open(os.path.join(ROOT, wrapper)) as f:
    assert written_for in f.read().split('"""')[1], f'{wrapper} names its version in its docstring'


def _fail(wrapper: str, what: str):
  pytest.fail(f'{wrapper} (written against the pinned version) no longer matches: {what}',
              pytrace=False)


def test_acme_counter_syncs_with_its_parent_on_the_read_after_sync_on_next_read():
  from acme.utils import counting
  parent = counting.Counter()
  child = counting.Counter(parent, 'learner', time_delta=3600.0)
  if not isinstance(getattr(child, acme_internals.LAST_SYNC_TIME, None), float):
    _fail('agents/acme_internals.py', 'counting.Counter has no float _last_sync_time')
  child.get_counts()       # the first read syncs (the last sync was at 0)
  child.increment(steps=3)
  assert parent.get_counts() == {}   # not before an hour has gone by
  acme_internals.sync_on_next_read(child)
  child.get_counts()
  if parent.get_counts() != {'learner_steps': 3}:
    _fail('agents/acme_internals.py', f'after sync_on_next_read the parent holds '
          f'{parent.get_counts()}, not the child\'s counts')
  acme_internals.sync_on_next_read(object())   # no Acme counter: nothing


def test_acme_counter_restores_counts_without_a_cache():
  # launch.program.layout's counter node starts from counts.json with Saveable.restore (public).
  from acme.utils import counting
  counter = counting.Counter()
  counter.restore({'counts': {'actor_steps': 5.0}, 'cache': {}})
  assert counter.increment(actor_steps=2) == {'actor_steps': 7.0}


def test_launchpad_context_hook_worker_manager_entry_script_and_reverb_node():
  import launchpad as lp
  from launchpad.nodes.python import node as python
  wrapper = 'launch/runtime/launchpad_internals.py'
  hook = getattr(python.PyNode, launchpad_internals.CONTEXT_HOOK, None)
  if hook is None:
    _fail(wrapper, f'PyNode has no {launchpad_internals.CONTEXT_HOOK}')
  params = list(inspect.signature(hook).parameters)
  if params != ['self', 'launch_type', 'launch_config']:
    _fail(wrapper, f'PyNode.{launchpad_internals.CONTEXT_HOOK} takes {params}')
  if not os.path.isfile(launchpad_internals.PROCESS_ENTRY):
    _fail(wrapper, f'no python node entry script at {launchpad_internals.PROCESS_ENTRY}')
  # The worker manager: one per node thread (outside a node there is none), whose wait_for_stop
  # returns once the program stops; the module's wait_for_stop waits on this thread's.
  from launchpad.launch import worker_manager
  get = getattr(worker_manager, 'get_worker_manager', None)
  if not callable(get) or [p for p in inspect.signature(get).parameters.values()
                           if p.default is inspect.Parameter.empty]:
    _fail(wrapper, 'launchpad.launch.worker_manager has no get_worker_manager() without arguments')
  if not callable(getattr(getattr(worker_manager, 'WorkerManager', None), 'wait_for_stop', None)):
    _fail(wrapper, 'launchpad.launch.worker_manager.WorkerManager has no wait_for_stop()')
  if not callable(getattr(worker_manager, 'wait_for_stop', None)):
    _fail(wrapper, 'launchpad.launch.worker_manager has no wait_for_stop()')
  with pytest.raises(RuntimeError, match='only available'):   # and outside a node, it says so
    launchpad_internals.worker_manager()
  tables = [object()]
  node = lp.ReverbNode(lambda: tables)
  if launchpad_internals.reverb_node_tables(node) is not tables:
    _fail(wrapper, 'ReverbNode no longer keeps its tables factory as _priority_tables_fn')
  if not isinstance(node.reverb_address, lp.Address):
    _fail(wrapper, 'ReverbNode.reverb_address is no lp.Address')


def test_launchpad_context_hook_reaches_a_node_and_its_base():
  from launchpad import context as lp_context
  from launchpad.nodes.python import node as python
  seen = []

  class Wrapping(python.PyNode):
    def _initialize_context(self, launch_type, launch_config):
      seen.append(type(self).__name__)
      launchpad_internals.initialize_context(self, launch_type, launch_config, cls=python.PyNode)

  node = Wrapping(lambda: None)
  launchpad_internals.initialize_context(node, lp_context.LaunchType.LOCAL_MULTI_THREADING)
  assert seen == ['Wrapping']
  assert node.launch_context.launch_type == lp_context.LaunchType.LOCAL_MULTI_THREADING


def test_reverb_trajectory_writer_keeps_its_cc_half():
  import reverb
  wrapper = 'agents/reverb_internals.py'
  server = reverb.Server([reverb.Table.queue('q', 10)])
  try:
    writer = server.localhost_client().trajectory_writer(num_keep_alive_refs=1)
    try:
      cc = reverb_internals.cc_writer(writer)
    except RuntimeError as e:
      _fail(wrapper, str(e))
    for method in ('Append', 'CreateItem'):
      if not callable(getattr(cc, method, None)):
        _fail(wrapper, f'pybind.TrajectoryWriter has no {method}')
    writer.close()
  finally:
    server.stop()
  with pytest.raises(RuntimeError, match='reverb_internals'):
    reverb_internals.cc_writer(object())


def test_jax_backends_and_its_logger():
  import jax
  wrapper = 'envs/jax_internals.py'
  try:
    xla_bridge = __import__(jax_internals.XLA_BRIDGE_MODULE, fromlist=['_'])
  except ImportError:
    _fail(wrapper, f'no module {jax_internals.XLA_BRIDGE_MODULE}')
  if not isinstance(getattr(xla_bridge, '_backends', None), dict):
    _fail(wrapper, f'{jax_internals.XLA_BRIDGE_MODULE}._backends is no dict')
  if getattr(xla_bridge, 'logger', None) is not logging.getLogger(jax_internals.XLA_BRIDGE_LOGGER):
    _fail(wrapper, f'{jax_internals.XLA_BRIDGE_MODULE} logs through another logger')
  jax.devices('cpu')
  if not jax_internals.backends_started():
    _fail(wrapper, 'backends_started() is False once jax has its devices')

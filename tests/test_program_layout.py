"""Programs pickled before the builder / layout split still load: a cluster package's
program/<group>.pkl and every supervised node's bytes name their node functions by module path
(launch.program.build.<name>), and a replica or a restarted node of such a run unpickles them
with this checkout's code."""
import inspect
import pickle

import pytest

from launch.program import coordinator, layout

# name under launch.program.build -> (what it is now, the arguments old pickles pass it)
PICKLED_NAMES = {
    'make_tables': (layout.replay_tables, ['cfg']),
    'Counter': (layout.Counter, ['run_dir']),
    'Coordinator': (coordinator.Coordinator, ['counter', 'replay', 'learners', 'max_steps',
                                              'run_dir', 'replay_checkpoint_s']),
    'make_learner': (layout.learner_node, ['cfg', 'random_key', 'replay', 'counter']),
    'make_precedence_learner': (layout.precedence_learner_node, ['cfg', 'replay', 'counter']),
    'make_actor': (layout.actor_node, ['cfg', 'actor_id', 'replay', 'learner', 'precedence',
                                       'counter']),
}


@pytest.mark.parametrize('name', sorted(PICKLED_NAMES))
def test_an_old_pickle_finds_its_node_function(name):
  now, old_args = PICKLED_NAMES[name]
  # What pickle (and cloudpickle, for importable functions and classes) writes for a reference.
  assert pickle.loads(f'claunch.program.build\n{name}\n.'.encode()) is now
  params = list(inspect.signature(now).parameters)
  assert params[:len(old_args)] == old_args
  assert all(inspect.signature(now).parameters[p].default is not inspect.Parameter.empty
             for p in params[len(old_args):])

"""The packaged program of a cluster launch, read back as a replica reads it: every group's
pickle holds one entry per replica, every address resolves through CLUSTER_SPEC to the endpoint
the description gives it, and lp.stop() in a node writes the launch's stop file."""
import json
import os

import cloudpickle
import pytest

from agents.acting import ReversibilityConfig
from launch.cluster import description as cluster_spec
from launch.cluster import package, placement
from launch.program.config import RunConfig

# Builds the real program (imports jax, Acme, Reverb: ~5 s of CPU on its own), so not in the
# default suite; the description and launch-file checks are (tests/test_cluster_spec.py).
pytestmark = pytest.mark.slow


@pytest.fixture(scope='module')
def packaged(tmp_path_factory):
  run_dir = tmp_path_factory.mktemp('run')
  desc = cluster_spec.parse_description({
      'name': 'pkg', 'hosts': {'a': '10.9.0.1', 'b': '10.9.0.2', 'c': '10.9.0.3'},
      'groups': {'replay': 'a', 'counter': 'a', 'coordinator': 'a', 'learner': 'b',
                 'precedence_learner': 'b', 'actor': {'hosts': ['c', 'b']}}})
  cfg = RunConfig(env='cartpole', env_options={'reward_free': True}, num_actors=3,
                  run_dir=str(run_dir), launch_type='cluster',
                  reversibility=ReversibilityConfig(mode='rae'))
  return cfg, desc, package.package(cfg, desc)


def test_package_files(packaged):
  cfg, desc, pkg = packaged
  launch = package.read_launch(cfg.run_dir)
  assert launch['groups'] == {'replay': 1, 'counter': 1, 'learner': 1, 'precedence_learner': 1,
                              'coordinator': 1, 'actor': 3}
  assert [r['task'] for r in launch['replicas']] == [r.task for r in pkg.replicas]
  assert {r.task: r.host for r in pkg.replicas if r.group == 'actor'} == {
      'actor-0': 'c', 'actor-1': 'b', 'actor-2': 'c'}
  for group in launch['groups']:
    assert os.path.exists(os.path.join(pkg.directory, 'program', f'{group}.pkl'))
  for r in pkg.replicas:
    text = open(os.path.join(pkg.directory, 'tasks', f'{r.task}.sh')).read()
    assert json.dumps(placement.task_spec(pkg.replicas, r.group, r.index), sort_keys=True) in text
  assert set(pkg.commands) == {'a', 'b', 'c'}
  assert pkg.commands['a'][:2] == ['ssh', 'a']  # no "start" prefix: ssh to the host name


def test_replicas_resolve_their_peers_through_cluster_spec(packaged, monkeypatch):
  cfg, _, pkg = packaged
  endpoints = placement.cluster_of(pkg.replicas)
  for r in pkg.replicas:
    monkeypatch.setenv('CLUSTER_SPEC', json.dumps(placement.task_spec(pkg.replicas, r.group, r.index)))
    with open(os.path.join(pkg.directory, 'program', f'{r.group}.pkl'), 'rb') as f:
      functions = cloudpickle.load(f)
    assert len(functions) == len(endpoints[r.group])
    node = functions[r.index].__self__
    assert [a.resolve() for a in node.addresses] == [r.endpoint]
    # Handles a node holds resolve to their owners' endpoints (the actors hold all of them).
    if r.group == 'actor':
      held = sorted(h._address.resolve() for h in node.input_handles)
      assert held == sorted(endpoints[g][0] for g in ('replay', 'learner', 'precedence_learner',
                                                       'counter'))


def test_lp_stop_in_a_node_writes_the_stop_file(packaged):
  cfg, _, pkg = packaged
  with open(os.path.join(pkg.directory, 'program', 'coordinator.pkl'), 'rb') as f:
    node = cloudpickle.load(f)[0].__self__
  assert not os.path.exists(pkg.stop_file)
  node.launch_context.program_stopper()
  assert os.path.exists(pkg.stop_file)
  os.remove(pkg.stop_file)

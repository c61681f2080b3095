"""The precedence-learner node class on a real Reverb table: one Reverb sample serves
`updates_per_sample` updates, and the actors get the parameters of the latest update."""
import jax
import numpy as np
import pytest
from acme.utils import counting, loggers

from agents import adders
from bench.precedence_bench import fill_table
from estimators import networks as est_nets
from estimators import training
from launch.program import precedence_learner

WINDOW = 10


@pytest.fixture(scope='module')
def filled_table():
  # The windows the actors write, from 20 random Cartpole episodes.
  server, client, spec, _ = fill_table('cartpole', 20, WINDOW, rooms=2)
  yield client, spec
  server.stop()


class CountingIterator:
  """The real window iterator, counting the samples taken from it."""

  def __init__(self, iterator):
    self._iterator, self.samples = iterator, 0

  def __iter__(self):
    return self

  def __next__(self):
    self.samples += 1
    return next(self._iterator)


def make_learner(client, spec, updates_per_sample):
  est = est_nets.make_estimators(est_nets.default_estimator_config('cartpole'), spec.actions.num_values)
  config = training.TrainConfig(window=WINDOW, batch_size=32)
  iterator = CountingIterator(adders.precedence_windows(client, 4, 2))
  counter = counting.Counter()
  counter.increment(actor_steps=10**9)   # no throttle
  learner = precedence_learner.PrecedenceLearner(
      est, config, period=WINDOW, iterator=iterator,
      obs_example=np.zeros(spec.observations.shape, np.float32), env_steps_per_update=1,
      updates_per_sample=updates_per_sample, counter=counting.Counter(counter, 'precedence'),
      logger=loggers.NoOpLogger())
  return learner, iterator


def _flat(params):
  return np.concatenate([np.ravel(x) for x in jax.tree_util.tree_leaves(params)])


def test_one_sample_serves_several_updates(filled_table):
  client, spec = filled_table
  learner, iterator = make_learner(client, spec, updates_per_sample=3)
  for _ in range(7):
    learner.step()
  assert iterator.samples == 3    # updates 1-3, 4-6, 7
  assert int(learner.save().steps) == 7


def test_actors_get_the_latest_parameters(filled_table):
  client, spec = filled_table
  learner, _ = make_learner(client, spec, updates_per_sample=2)
  (before,) = learner.get_variables(['psi'])
  learner.step()
  (after,) = learner.get_variables(['psi'])
  assert not np.allclose(_flat(before), _flat(after))
  np.testing.assert_array_equal(_flat(after), _flat(learner.save().psi_params))
  learner.step()
  (latest,) = learner.get_variables(['psi'])
  np.testing.assert_array_equal(_flat(latest), _flat(learner.save().psi_params))
  assert not np.allclose(_flat(after), _flat(latest))


def test_updates_per_sample_must_be_positive(filled_table):
  client, spec = filled_table
  with pytest.raises(ValueError, match='updates_per_sample'):
    make_learner(client, spec, updates_per_sample=0)

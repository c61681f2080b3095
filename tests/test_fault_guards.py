"""Fault guards without a run: a diverging learner (non-finite updates dropped, counted, and a
run of them stops it), failures the supervisor does not retry, a full disk said in one line."""
import jax
import numpy as np
import optax
import pytest
from acme import specs
from acme.adders.reverb.base import Step
from acme.utils import loggers

from agents import learning
from agents import networks as agent_networks
from estimators import networks as est_nets
from estimators import training
from estimators.updates import DivergenceError
from launch.runtime import supervisor

B, T = 2, 5


class Sample:
  def __init__(self, data):
    self.data = data


def _batch(reward):
  rng = np.random.default_rng(0)
  return Sample(Step(
      observation=rng.normal(size=(B, T, 4)).astype(np.float32),
      action=rng.integers(0, 2, size=(B, T)).astype(np.int32),
      reward=np.full((B, T), reward, np.float32), discount=np.ones((B, T), np.float32),
      start_of_episode=np.zeros((B, T), bool),
      extras={'logits': np.zeros((B, T, 2), np.float32), 'core_state': np.zeros((B, T), np.float32)}))


def _learner(batches, max_consecutive_skips, updates_per_call=1):
  spec = specs.EnvironmentSpec(
      observations=specs.Array((4,), np.float32), actions=specs.DiscreteArray(2),
      rewards=specs.Array((), np.float32), discounts=specs.BoundedArray((), np.float32, 0, 1))
  networks = agent_networks.make_networks(spec, agent_networks.default_policy_config('cartpole', False))
  logger = loggers.InMemoryLogger()
  learner = learning.IMPALALearner(networks, iter(batches), optax.adam(1e-2), jax.random.PRNGKey(0),
                                   logger=logger, max_consecutive_skips=max_consecutive_skips,
                                   updates_per_call=updates_per_call)
  return learner, logger


def _flat(params):
  return np.concatenate([np.ravel(x) for x in jax.tree_util.tree_leaves(params)])


def test_a_non_finite_update_is_skipped_counted_and_a_run_of_them_stops_the_learner():
  batches = [_batch(1.0), _batch(np.nan), _batch(1.0), _batch(np.nan), _batch(np.inf),
             _batch(np.nan)]
  learner, logger = _learner(batches, max_consecutive_skips=3)
  before = _flat(learner.save().params)
  learner.step()
  after_good = _flat(learner.save().params)
  assert not np.allclose(before, after_good)
  learner.step()   # NaN rewards: the update is dropped, the parameters stay as they were
  np.testing.assert_array_equal(_flat(learner.save().params), after_good)
  learner.step()   # a finite one resets the run of skips
  learner.step()
  learner.step()
  with pytest.raises(DivergenceError, match='3 updates in a row'):
    learner.step()
  assert [row[learning.SKIPPED] for row in logger.data] == [0.0, 1.0, 0.0, 1.0, 1.0]
  assert [row[learning.SKIPPED_TOTAL] for row in logger.data] == [0, 1, 1, 2, 3]
  assert np.all(np.isfinite(_flat(learner.save().params)))


def test_updates_fused_in_one_call_are_the_single_updates_and_each_skip_counts():
  rewards = [1.0, np.nan, 0.5, -1.0, 2.0, np.nan]
  single, single_log = _learner([_batch(r) for r in rewards], max_consecutive_skips=3)
  for _ in rewards:
    single.step()
  fused, fused_log = _learner([_batch(r) for r in rewards], max_consecutive_skips=3,
                              updates_per_call=3)
  fused.step()
  fused.step()
  np.testing.assert_allclose(_flat(fused.save().params), _flat(single.save().params), rtol=1e-5,
                             atol=1e-6)
  # One row per call, the call's last update's metrics; every update's skip is counted.
  assert [row[learning.SKIPPED] for row in fused_log.data] == [0.0, 1.0]
  assert [row[learning.SKIPPED_TOTAL] for row in fused_log.data] == [1, 2]
  assert [row['steps'] for row in fused_log.data] == [3, 6]
  assert [row['steps'] for row in single_log.data][2::3] == [3, 6]


def test_a_non_finite_estimator_update_is_dropped():
  est = est_nets.make_estimators(est_nets.default_estimator_config('cartpole'), 2)
  config = training.TrainConfig(window=4, batch_size=8)
  obs = np.zeros((16, 4), np.float32)
  state = training.init_state(est, config, obs[0])
  update = training.make_update(est, config)
  start_of_episode = np.zeros((2, 8), bool)
  start_of_episode[:, 0] = True
  batch = training.windows_to_batch(obs.reshape(2, 8, 4), np.zeros((2, 8), np.int32),
                                    np.ones((2, 8), bool), start_of_episode, 4)
  good, metrics = update(state, batch)
  assert float(metrics['update_skipped']) == 0.0
  bad_batch = batch._replace(observations=batch.observations * np.nan)
  kept, metrics = update(good, bad_batch)
  assert float(metrics['update_skipped']) == 1.0
  np.testing.assert_array_equal(_flat(kept.psi_params), _flat(good.psi_params))
  assert int(kept.steps) == int(good.steps) + 1 and not np.array_equal(kept.key, good.key)


def test_the_supervisor_does_not_retry_what_a_restart_would_repeat():
  assert supervisor.is_fatal('estimators.updates.DivergenceError: learner diverged: 100 updates')
  assert supervisor.is_fatal('launch.program.checkpointing.CorruptCheckpoint: no valid learner '
                             'checkpoint in /r/checkpoints/learner: ...')
  assert not supervisor.is_fatal('ValueError: something else')


def test_a_full_disk_is_fatal_and_said_in_one_line_with_the_free_space(tmp_path):
  from launch.runtime import disk
  line = "OSError: [Errno 28] No space left on device: '/r/logs/learner/logs.csv'"
  assert supervisor.is_fatal(line) and disk.is_disk_full(line)
  reason = disk.disk_full_reason(str(tmp_path), 'learner')
  assert '\n' not in reason and str(tmp_path) in reason and 'MB free' in reason
  assert disk.low_space_warning(str(tmp_path / 'new'), 10) is None
  warning = disk.low_space_warning(str(tmp_path), 10**15)
  assert warning.startswith('warning: ') and 'MB free' in warning
  assert not disk.is_full(str(tmp_path))


def test_no_node_is_restarted_once_another_gave_up_or_the_run_ended(tmp_path):
  from launch.runtime import run_state
  records = run_state.RunRecords(str(tmp_path))
  assert not supervisor._run_ending(records)
  for name in (run_state.FAILURE, run_state.FINAL_STATE):
    records.write(name, {'node': 'coordinator'})
    assert supervisor._run_ending(records)
    records.remove(name)


def test_gradients_whose_norm_overflows_skip_the_update():
  # Every gradient finite, their squares past float32's range: the global norm is inf, and a
  # clipped or Adam-normalised update of them is zero or NaN. The guard drops it.
  import jax.numpy as jnp
  import optax

  from estimators import updates
  grads = {'w': jnp.full((4,), 3e19, jnp.float32)}
  norm = optax.global_norm(grads)
  assert bool(jnp.all(jnp.isfinite(grads['w']))) and not bool(jnp.isfinite(norm))
  old = {'w': jnp.zeros(4)}
  state, finite = updates.keep_if_finite({'w': jnp.ones(4)}, old, grads, norm)
  assert not bool(finite) and float(state['w'][0]) == 0.0

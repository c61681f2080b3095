"""The batched-environment interface of the actor loop (envs.batch): the generic adapter is the
old one-by-one stepping, and the actor loop writes the same with the vectorised Sokoban batch as
with K single Sokoban environments."""
import numpy as np
import pytest
from acme import adders as acme_adders
from acme import specs, wrappers
from acme.utils import loggers

import envs
from agents import acting
from agents import loop as loop_lib
from envs import batch as batch_lib
from envs.sokoban_batch import SokobanBatch
from estimators import networks as est_nets
from estimators import training as est_training
from launch.program import builder
from launch.program.config import RunConfig


def _cartpole(seed, max_steps):
  return wrappers.SinglePrecisionWrapper(
      envs.make('cartpole', seed=seed, reward_free=False, max_steps=max_steps))


def test_environment_list_steps_each_environment_and_resets_those_that_end():
  seeds, max_steps = [3, 4, 5], 9
  batch = batch_lib.EnvironmentList([_cartpole(s, max_steps) for s in seeds])
  reference = [_cartpole(s, max_steps) for s in seeds]
  assert batch.num_envs == 3
  assert specs.make_environment_spec(batch) == specs.make_environment_spec(reference[0])
  for got, want in zip(batch.reset(), (e.reset() for e in reference)):
    np.testing.assert_array_equal(got.observation, want.observation)
  rng = np.random.default_rng(0)
  ended = 0
  for t in range(60):
    actions = rng.integers(2, size=3).astype(np.int32)
    out = batch.step(actions)
    assert out.observations.shape == out.reached.shape == (3, 4)
    for k, env in enumerate(reference):
      want = env.step(actions[k])
      got = out.timesteps[k]
      assert got.step_type == want.step_type and got.reward == want.reward, (t, k)
      assert got.discount == want.discount and got.reward.dtype == np.float32, (t, k)
      np.testing.assert_array_equal(got.observation, want.observation)
      np.testing.assert_array_equal(out.reached[k], want.observation)
      if want.last():
        ended += 1
        assert out.finished[k].info == env.episode_info(), (t, k)
        first = env.reset()
        np.testing.assert_array_equal(out.finished[k].first.observation, first.observation)
        np.testing.assert_array_equal(out.observations[k], first.observation)
      else:
        assert k not in out.finished
        np.testing.assert_array_equal(out.observations[k], want.observation)
    if not out.finished:
      assert out.reached is out.observations   # nothing copied on most steps
  assert ended >= 3 * (60 // max_steps)
  with pytest.raises(ValueError, match='2 actions for 3 environments'):
    batch.step(np.zeros(2, np.int32))


class _Recorder(acme_adders.Adder):
  """Every call the loop makes to one environment's adder, in order."""

  def __init__(self):
    self.calls = []

  def add_first(self, timestep):
    self.calls.append(('first', None, timestep, None))

  def add(self, action, next_timestep, extras=()):
    self.calls.append(('add', action, next_timestep, extras))

  def reset(self):
    self.calls.append(('reset', None, None, None))


def _assert_same_calls(got, want, k):
  assert len(got) == len(want) > 0, k
  for i, ((kind_g, a_g, ts_g, ex_g), (kind_w, a_w, ts_w, ex_w)) in enumerate(zip(got, want)):
    where = f'env {k} call {i}'
    assert kind_g == kind_w, where
    if kind_g == 'reset':
      continue
    assert ts_g.step_type == ts_w.step_type, where
    for name in ('reward', 'discount'):
      g, w = getattr(ts_g, name), getattr(ts_w, name)
      assert (g is None) == (w is None), where
      if w is not None:
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.tobytes() == w.tobytes(), (where, name, g, w)
    np.testing.assert_array_equal(ts_g.observation, ts_w.observation, err_msg=where)
    if kind_g == 'add':
      assert int(a_g) == int(a_w) and np.asarray(a_g).dtype == np.asarray(a_w).dtype, where
      assert sorted(ex_g) == sorted(ex_w), where
      for key in ex_w:
        assert np.asarray(ex_g[key]).tobytes() == np.asarray(ex_w[key]).tobytes(), (where, key)


def _run_loop(environments, seeds, mode, estimators, estimator_source, steps):
  actor = acting.BatchedActor(4, acting.ReversibilityConfig(mode=mode, beta=0.0, lam=0.5), seeds,
                              estimators=estimators, estimator_source=estimator_source)
  recorders = [_Recorder() for _ in seeds]
  logger = loggers.InMemoryLogger()
  loop = loop_lib.BatchedEnvironmentLoop(environments, actor, mode, recorders, logger=logger)
  assert loop.run(num_steps=steps) == steps
  return recorders, logger.data


@pytest.mark.parametrize('mode', ['rae', 'rac'])
def test_loop_writes_the_same_with_the_vectorised_sokoban(mode):
  """RAE's penalty scores each transition with psi(before, after), RAC's shield acts on phi of the
  new observation, so both see whether the batch hands the loop the right observations."""
  seeds, options = [21, 22, 23, 24, 25], {'max_steps': 6}
  est = est_nets.make_estimators(est_nets.default_estimator_config('sokoban'), 4)
  state = est_training.init_state(est, est_training.TrainConfig(train_phi=True),
                                  np.zeros((10, 10, 3), np.uint8))
  source = acting.FixedParams((state.psi_params, state.phi_params))
  single = [wrappers.SinglePrecisionWrapper(envs.make('sokoban', seed=s, **options)) for s in seeds]
  want, want_rows = _run_loop(single, seeds, mode, est, source, 300)
  got, got_rows = _run_loop(SokobanBatch(seeds, **options), seeds, mode, est, source, 300)
  for k in range(len(seeds)):
    _assert_same_calls(got[k].calls, want[k].calls, k)
  timing = ('steps_per_second', 'unix_time', 'loop_s_env', 'loop_s_inference', 'loop_s_write',
            'loop_s_log')
  assert len(got_rows) == len(want_rows) == 300 // 6
  for g, w in zip(got_rows, want_rows):
    assert {k: v for k, v in g.items() if k not in timing} == {
        k: v for k, v in w.items() if k not in timing}
    assert 'solved' in g and 'boxes_on_target' in g
  if mode == 'rae':   # penalised at every step (beta 0), so the rewards compared above carry psi
    assert all(row['intrinsic_return'] < 0 for row in got_rows)


def test_actor_environments_follow_the_run_config():
  cfg = RunConfig(env='sokoban', env_options={'max_steps': 10})
  assert isinstance(builder.make_environments(cfg, [1, 2]), SokobanBatch)
  off = RunConfig(env='sokoban', env_options={'max_steps': 10}, vectorised_env=False)
  assert isinstance(builder.make_environments(off, [1, 2]), batch_lib.EnvironmentList)
  cartpole = builder.make_environments(RunConfig(env='cartpole'), [1, 2, 3])
  assert isinstance(cartpole, batch_lib.EnvironmentList) and cartpole.num_envs == 3
  assert (specs.make_environment_spec(builder.make_environments(cfg, [1]))
          == builder.environment_spec(cfg))

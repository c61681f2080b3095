"""The batched-environment interface of the actor loop (envs.batch): the generic adapter steps the
environments one by one and resets an ended one on its next call, and the actor loop writes the
same with the vectorised Sokoban batch as with K single Sokoban environments."""
import dm_env
import numpy as np
import pytest
from acme import specs, wrappers
from acme.utils import loggers
from row_recorder import RowRecorder

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


def test_environment_list_steps_each_environment_and_resets_those_that_ended_on_the_next_call():
  seeds, max_steps = [3, 4, 5], 9
  batch = batch_lib.EnvironmentList([_cartpole(s, max_steps) for s in seeds])
  reference = [_cartpole(s, max_steps) for s in seeds]
  assert batch.num_envs == 3
  assert specs.make_environment_spec(batch) == specs.make_environment_spec(reference[0])
  firsts = batch.reset()
  assert firsts.shape == (3, 4)
  for k, env in enumerate(reference):
    np.testing.assert_array_equal(firsts[k], env.reset().observation)
  rng = np.random.default_rng(0)
  ended = restarted = 0
  reset_next = [False] * 3   # the reference's next-step reset
  for t in range(60):
    actions = rng.integers(2, size=3).astype(np.int32)
    out = batch.step(actions)
    assert out.step_type.dtype == np.int8 and out.step_type.shape == (3,)
    assert out.reward.dtype == out.discount.dtype == np.float32 and out.observation.shape == (3, 4)
    for k, env in enumerate(reference):
      if reset_next[k]:
        want = env.reset()
        restarted += 1
        assert out.step_type[k] == dm_env.StepType.FIRST, (t, k)
        assert out.reward[k] == 0.0 and out.discount[k] == 1.0, (t, k)
      else:
        want = env.step(actions[k])
        assert out.step_type[k] == want.step_type and out.reward[k] == want.reward, (t, k)
        assert out.discount[k] == want.discount, (t, k)
      np.testing.assert_array_equal(out.observation[k], want.observation)
      reset_next[k] = want.last()
      if want.last():
        ended += 1
        assert out.ended[k] == env.episode_info(), (t, k)
      else:
        assert k not in out.ended
  assert ended >= 3 * (60 // (max_steps + 1)) and restarted >= ended - 3
  with pytest.raises(ValueError, match='2 actions for 3 environments'):
    batch.step(np.zeros(2, np.int32))


def _run_loop(environments, seeds, mode, estimators, estimator_source, steps):
  actor = acting.BatchedActor(4, acting.ReversibilityConfig(mode=mode, beta=0.0, lam=0.5), seeds,
                              estimators=estimators, estimator_source=estimator_source)
  recorder = RowRecorder(len(seeds))
  logger = loggers.InMemoryLogger()
  loop = loop_lib.BatchedEnvironmentLoop(environments, actor, mode, recorder, logger=logger)
  assert loop.run(num_steps=steps) >= steps
  return recorder.rows, logger.data


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
  assert len(got) == len(want) > 0
  for i, (g, w) in enumerate(zip(got, want)):
    for name, x, y in zip(('observation', 'steps', 'logits'), g, w):
      assert x.dtype == y.dtype and x.tobytes() == y.tobytes(), (i, name)
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

"""A K-environment actor writes to Reverb exactly what K single-environment actors with the same
seeds write (real Reverb servers, IMPALA unrolls and precedence windows), and its fused call gives
the RAE and RAC values of the unfused functions."""
import jax
import numpy as np
import pytest
import reverb
from acme import specs, wrappers
from acme.utils import counting, loggers

import envs
from agents import acting, adders, rewards, shield
from agents import loop as loop_lib
from agents import networks as agent_networks
from estimators import networks as est_nets
from estimators import training as est_training

SEQUENCE, WINDOW = 8, 5


def _env(seed):
  return wrappers.SinglePrecisionWrapper(envs.make('cartpole', seed=seed, reward_free=False))


def _setup(mode):
  spec = specs.make_environment_spec(_env(0))
  nets = agent_networks.make_networks(spec, agent_networks.default_policy_config('cartpole', False))
  policy = acting.FixedParams(nets.unroll_init_fn(jax.random.PRNGKey(1), agent_networks.DUMMY_CORE_STATE))
  est = est_nets.make_estimators(est_nets.default_estimator_config('cartpole'), 2)
  state = est_training.init_state(est, est_training.TrainConfig(train_phi=True), np.zeros(4, np.float32))
  estimator = acting.FixedParams((state.psi_params, state.phi_params))
  return spec, nets, policy, est, estimator


def _server(spec):

  def fifo(name, signature):  # every item read back once, in insertion order
    return reverb.Table(name, reverb.selectors.Fifo(), reverb.selectors.Fifo(), 100_000,
                        reverb.rate_limiters.MinSize(1), max_times_sampled=1, signature=signature)

  return reverb.Server([   # items of one room each
      fifo(adders.IMPALA_TABLE, adders.impala_signature(spec, SEQUENCE, 1)),
      fifo(adders.PRECEDENCE_TABLE, adders.precedence_signature(spec, WINDOW, 1))])


def _items(server, rooms: int):
  """Each room's items of both tables, in order, from a server that holds those of `rooms`
  rooms (the writer makes one item per room at a time, room by room); reading takes them."""
  client = reverb.Client(f'localhost:{server.port}')
  out = [{} for _ in range(rooms)]
  for table in ('impala', adders.PRECEDENCE_TABLE):
    n = client.server_info()[table].current_size
    items = [s.data for s in client.sample(table, num_samples=n, emit_timesteps=False)] if n else []
    for k in range(rooms):
      out[k][table] = items[k::rooms]
  return out


def _run(mode, seeds, server, steps_per_env):
  spec, nets, policy, est, estimator = _setup(mode)
  actor = acting.BatchedActor(2, acting.ReversibilityConfig(mode=mode, beta=0.5), seeds,
                              policy_forward=nets.forward_fn, policy_source=policy,
                              estimators=est, estimator_source=estimator)
  writer = adders.ActorWriter(reverb.Client(f'localhost:{server.port}'), len(seeds),
                              impala_sequence=SEQUENCE, window=WINDOW, rooms_per_item=1)
  loop = loop_lib.BatchedEnvironmentLoop([_env(s) for s in seeds], actor, mode, writer,
                                         logger=loggers.NoOpLogger())
  loop.run(num_steps=steps_per_env * len(seeds))
  loop.close()


@pytest.mark.parametrize('mode', ['rae', 'rac'])
def test_k_env_actor_writes_what_k_single_env_actors_write(mode):
  seeds, steps = [11, 12, 13], 120
  spec = _setup(mode)[0]
  batched = _server(spec)
  single = [_server(spec) for _ in seeds]
  try:
    _run(mode, seeds, batched, steps)
    for seed, server in zip(seeds, single):
      _run(mode, [seed], server, steps)
    batched_items = _items(batched, len(seeds))
    for k in range(len(seeds)):
      got, want = batched_items[k], _items(single[k], 1)[0]
      for table in want:
        # The runs stop at a count of env steps, summed over the rooms: room k's rows (one per
        # iteration, its resets included) end at different points, so compare their prefixes.
        assert min(len(got[table]), len(want[table])) >= 5, (table, k)
        for a, b in zip(got[table], want[table]):
          for x, y in zip(a, b):   # the columns of the rows (agents.adders layout)
            np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)
  finally:
    for s in [batched] + single:
      s.stop()


def test_fused_call_equals_unfused_functions():
  spec, nets, policy, est, estimator = _setup('rae')
  psi, phi = estimator.params
  rng = np.random.default_rng(0)
  obs = rng.normal(size=(4, 4)).astype(np.float32)
  before = rng.normal(size=(4, 4)).astype(np.float32)
  for mode in ('rae', 'rac'):
    rev = acting.ReversibilityConfig(mode=mode, beta=0.5, lam=0.7, reward_form='hinge')
    seeds = [3, 4, 5, 6]
    actor = acting.BatchedActor(2, rev, seeds, policy_forward=nets.forward_fn,
                                policy_source=policy, estimators=est, estimator_source=estimator)
    out = actor.step(obs, before)
    for k, seed in enumerate(seeds):
      _, sub = jax.random.split(jax.random.PRNGKey(seed))
      (logits, _), _ = nets.forward_fn(policy.params, obs[k], agent_networks.DUMMY_CORE_STATE)
      if mode == 'rac':
        phi_k = est_training.phi_prob(est, phi, obs[k][None])[0]
        ref = shield.shield(sub, logits, phi_k, 0.5)
        assert int(out.action[k]) == int(ref.action)
        assert bool(out.rejected[k]) == bool(ref.rejected)
        np.testing.assert_allclose(out.logits[k], ref.logits, rtol=1e-5)
      else:
        p = est_training.psi_prob(est, psi, before[k][None], obs[k][None])[0]
        np.testing.assert_allclose(out.psi[k], p, rtol=1e-5)
        np.testing.assert_allclose(out.intrinsic[k], rewards.rae_reward(p, 0.5, 0.7, 'hinge'), rtol=1e-5, atol=1e-7)
        assert int(out.action[k]) == int(jax.random.categorical(sub, logits))
        np.testing.assert_allclose(out.logits[k], logits, rtol=1e-5)


def test_folded_parameters_are_composed_again_only_under_a_new_version():
  folds = []

  def fold(params):
    folds.append(params)
    return {'folded': params['b'] * 2}

  folded = acting._Folded(fold)
  first = {'w': np.ones((3, 3), np.float32), 'b': np.zeros(3, np.float32)}
  assert folded(first, version=0.0)['folded'].tolist() == [0, 0, 0]
  # A fetch hands out a new object of the same version: the fold is reused.
  folded({'w': first['w'].copy(), 'b': first['b'].copy()}, version=0.0)
  assert len(folds) == 1
  changed = {'w': first['w'], 'b': np.full(3, 0.5, np.float32)}
  assert folded(changed, version=1.0)['folded'].tolist() == [1, 1, 1]
  assert len(folds) == 2
  # A source without versions: every new object is folded, the same one is not.
  plain = acting._Folded(fold)
  plain(first)
  plain(first)
  plain({'w': first['w'].copy(), 'b': first['b'].copy()})
  assert len(folds) == 4


def test_episodes_that_end_at_one_step_are_counted_in_one_call_before_they_are_logged():
  calls, rows = [], []

  class Parent(counting.Counter):
    def increment(self, **counts):
      calls.append(counts)
      return super().increment(**counts)

  class Rows(loggers.Logger):
    def write(self, data):
      rows.append(data)

    def close(self):
      pass

  # Turf from its start, capped at 6 steps: no walk of 6 reaches the goal, so all four rooms end
  # their episodes together at every sixth step.
  rooms = [wrappers.SinglePrecisionWrapper(envs.make('turf', seed=s, max_steps=6))
           for s in range(4)]
  actor = acting.BatchedActor(4, acting.ReversibilityConfig(), [0, 1, 2, 3])
  loop = loop_lib.BatchedEnvironmentLoop(rooms, actor, 'none',
                                         counter=counting.Counter(Parent(), 'actor', time_delta=0.0),
                                         logger=Rows())
  loop.run(num_steps=4 * 18)
  assert calls == [{'actor_episodes': 4, 'actor_steps': 24}] * 3
  assert [r['actor_steps'] for r in rows] == [24] * 4 + [48] * 4 + [72] * 4
  assert sorted(r['env_index'] for r in rows[:4]) == [0, 1, 2, 3]

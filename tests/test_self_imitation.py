import math

import jax.numpy as jnp
import numpy as np
import pytest

from agents import losses, self_imitation


def test_returns_to_go_by_hand():
  np.testing.assert_allclose(self_imitation.returns_to_go(np.array([1.0, 0.0, 2.0]), 0.5),
                             [1.0 + 0.5 * 0.0 + 0.25 * 2.0, 0.0 + 0.5 * 2.0, 2.0])


def test_self_imitation_loss_only_counts_steps_whose_return_beat_the_value():
  # Two actions, uniform policy: log pi(a) = log 0.5 for both steps.
  logits = jnp.zeros((2, 2))
  values = jnp.array([1.0, 3.0])
  returns = jnp.array([3.0, 1.0])        # gaps +2 and -2: only the first step counts
  actions = jnp.array([0, 1])
  loss, metrics = losses.self_imitation_loss(logits, values, actions, returns, value_cost=0.1)
  policy = -(math.log(0.5) * 2.0 + 0.0) / 2
  value = 0.5 * (4.0 + 0.0) / 2
  assert float(metrics['sil_policy_loss']) == pytest.approx(policy, rel=1e-6)
  assert float(metrics['sil_value_loss']) == pytest.approx(value, rel=1e-6)
  assert float(loss) == pytest.approx(policy + 0.1 * value, rel=1e-6)
  assert float(metrics['sil_positive_fraction']) == 0.5


def test_learner_imitation_raises_the_good_action_and_leaves_bad_steps_alone():
  """The real Sokoban network and optimiser: steps whose return beats V make their action more
  likely; the same steps with a return far below V change nothing."""
  import jax
  import optax
  from acme import specs, wrappers
  from acme.utils import loggers

  import envs
  from agents import learning
  from agents import networks as agent_networks

  env = wrappers.SinglePrecisionWrapper(envs.make('sokoban', seed=1, level_index=7))
  spec = specs.make_environment_spec(env)
  networks = agent_networks.make_networks(spec, agent_networks.default_policy_config('sokoban', True))
  observations = np.stack([env.reset().observation] * 8)
  actions = np.full(8, 2, np.int32)

  def probability_after(returns, updates=30):
    learner = learning.IMPALALearner(networks, iter(()), optax.adam(1e-3), jax.random.PRNGKey(0),
                                     logger=loggers.NoOpLogger())
    first = None
    for _ in range(updates):
      metrics = learner.imitate(observations, actions, np.full(8, returns, np.float32))
      first = first or metrics
    params = learner.get_variables(['policy'])[0]
    (logits, _), _ = networks.unroll_fn(params, observations[:1], np.float32(0.0))
    return float(jax.nn.softmax(logits)[0, 2]), first

  good, good_metrics = probability_after(20.0)
  bad, bad_metrics = probability_after(-1000.0)
  assert float(good_metrics['sil_positive_fraction']) == 1.0
  assert float(bad_metrics['sil_positive_fraction']) == 0.0
  assert good > 0.5 > bad
  assert bad == pytest.approx(0.25, abs=0.1)   # untouched: the initial, near-uniform policy


def test_top_returns_admits_only_what_could_enter_the_k_best():
  admit = self_imitation.TopReturns(2).admit
  assert admit(1.0) and admit(0.0)        # fewer than k seen: everything
  assert not admit(-1.0)                  # below the 2 best
  assert admit(5.0)                       # now the best are 1.0 and 5.0
  assert not admit(0.5) and admit(1.0)


def test_adder_writes_terminated_episodes_steps_with_returns_to_reverb():
  """A real Reverb server with the table make_tables builds: a terminated episode arrives as one
  item per step with (action, return-to-go) and the episode's return as priority; a truncated
  one, and one the filter refuses, do not."""
  import reverb
  from acme import specs

  from agents import adders

  spec = specs.EnvironmentSpec(
      observations=specs.Array((2,), np.float32), actions=specs.DiscreteArray(4),
      rewards=specs.Array((), np.float32), discounts=specs.BoundedArray((), np.float32, 0, 1))
  from launch.program import builder
  server = reverb.Server([builder.make_self_imitation_table(100, adders.self_imitation_signature(spec))])
  client = reverb.Client(f'localhost:{server.port}')

  class Inner:   # the actor's trajectory writer: counts the rows passed on
    num_envs, rows = 2, 0
    def append(self, observation, steps, logits=None): Inner.rows += 1
    def flush(self): pass
    def close(self): pass

  writer = adders.SelfImitationRows(Inner(), client.trajectory_writer(num_keep_alive_refs=1),
                                    self_imitation.TopReturns(1).admit, 0.5)
  obs = lambda v: np.full(2, v, np.float32)
  other = [0]   # room 1 plays one long episode all along (never ended, so never written)

  def append(observation, action, reward, discount, filler, start):
    rows = adders.step_rows(np.array([start, other[0] == 0]), np.array([action, 3]),
                            np.array([reward, 50.0]), np.array([discount, 1.0]),
                            np.array([filler, False]), 0.0)
    writer.append(np.stack([obs(observation), obs(-1 - other[0])]), rows)
    other[0] += 1

  def play(rewards, terminated):
    for t, r in enumerate(rewards):
      ends = t == len(rewards) - 1 and terminated
      append(t, t + 1, r, 0.0 if ends else 1.0, filler=False, start=t == 0)
    append(len(rewards), 0, 0.0, 0.0, filler=True, start=False)   # the episode's filler row

  play([1.0, 2.0], terminated=True)      # returns-to-go 1 + 0.5 * 2 = 2, then 2
  play([9.0, 9.0], terminated=False)     # truncated: not written
  play([0.0, 0.0], terminated=True)      # below the actor's best (3.0): not written
  assert Inner.rows == 9                 # every row reached the wrapped writer
  items = client.server_info()[adders.SELF_IMITATION_TABLE].current_size
  assert items == 2
  got = {}
  dataset = reverb.TrajectoryDataset.from_table_signature(
      server_address=client.server_address, table=adders.SELF_IMITATION_TABLE,
      max_in_flight_samples_per_worker=10)
  for sample in adders.unpacked(dataset.batch(10).take(5).as_numpy_iterator(),
                                adders.unpack_self_imitation):
    for i, action in enumerate(sample.data.action):
      got[int(action)] = (float(sample.data.returns[i]), float(sample.data.observation[i, 0]),
                          float(sample.info.priority[i]))
  assert got == {1: (2.0, 0.0, 3.0), 2: (2.0, 1.0, 3.0)}
  writer.close()   # an open stream holds the server's shutdown for its 5 s grace period
  server.stop()


def test_resume_of_a_run_saved_before_self_imitation_existed(tmp_path):
  """A config.json without the self-imitation fields resumes (they take their defaults, off);
  turning the option on is a change of what is learned, and is refused."""
  import dataclasses
  import json

  from launch.program import config as cfg_lib
  from launch.runtime import lifecycle, run_config, run_state

  cfg = cfg_lib.RunConfig(env='sokoban', run_dir=str(tmp_path))
  lifecycle.write_config(run_state.RunRecords(cfg.run_dir), cfg)
  saved = json.loads((tmp_path / 'config.json').read_text())
  for key in [k for k in saved['impala'] if k.startswith('self_imitation')]:
    del saved['impala'][key]
  (tmp_path / 'config.json').write_text(json.dumps(saved))
  saved = run_config.load(str(tmp_path))
  lifecycle.check_resume(cfg, saved)
  on = dataclasses.replace(cfg, impala=dataclasses.replace(cfg.impala, self_imitation_updates=1))
  with pytest.raises(ValueError, match='impala.self_imitation_updates'):
    lifecycle.check_resume(on, saved)

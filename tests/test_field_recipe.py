"""The field's IMPALA recipe for Sokoban, piece by piece on hand-computed cases: V-trace with
lambda against a direct numpy recursion, the L2 terms, the minibatch split and the learner's
Adam step per minibatch, the learning rate's linear decay, the per-episode time limit drawn
from a range (and evaluation's full limit), the ResNet policy and the named network presets, and
the recipe comparison's steps."""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from agents import impala_step, losses, policy_net
from envs import presets
from launch.program import builder
from launch.program.config import ImpalaConfig

# V-trace with lambda ------------------------------------------------------------------------


def _vtrace_by_hand(v, r, discount, rho, lam):
  """Espeholt et al.'s V-trace targets and policy-gradient advantages, computed backwards one
  step at a time: v_s = V(x_s) + d_s + gamma c_s (v_{s+1} - V(x_{s+1})), c_s = lam min(1, rho_s),
  and A_s = min(1, rho_s) (r_s + gamma (lam v_{s+1} + (1 - lam) V(x_{s+1})) - V(x_s)), the last
  step bootstrapping from V(x_T)."""
  n = len(r)
  clipped = np.minimum(1.0, rho)
  targets = np.zeros(n)
  following = v[n]   # v_{s+1} - V(x_{s+1}) is 0 past the sequence's end
  for s in reversed(range(n)):
    delta = clipped[s] * (r[s] + discount[s] * v[s + 1] - v[s])
    correction = discount[s] * lam * clipped[s] * (following - v[s + 1])
    targets[s] = v[s] + delta + correction
    following = targets[s]
  bootstrap = np.append(lam * targets[1:] + (1 - lam) * v[1:n], v[n])
  advantages = clipped * (r + discount * bootstrap - v[:n])
  return targets, advantages


@pytest.mark.parametrize('lam', [1.0, 0.5, 0.0])
def test_vtrace_with_lambda_is_the_hand_recursion(lam):
  rng = np.random.default_rng(0)
  t = 7   # T steps: T - 1 trained, the last one bootstraps
  values = rng.normal(size=t).astype(np.float32)
  logits = rng.normal(size=(t, 3)).astype(np.float32)
  behaviour = rng.normal(size=(t, 3)).astype(np.float32)
  actions = rng.integers(0, 3, size=t).astype(np.int32)
  rewards = rng.normal(size=t).astype(np.float32)
  discounts = np.ones(t, np.float32)
  discounts[3] = 0.0   # an episode ends at step 3 (and the next starts without a filler)
  vtrace, rhos, real = losses.masked_vtrace(
      jnp.asarray(values), jnp.asarray(logits), jnp.asarray(behaviour), jnp.asarray(actions),
      jnp.asarray(rewards), jnp.asarray(discounts), jnp.zeros(t, bool), discount=0.97,
      lambda_=lam)
  log_pi = jax.nn.log_softmax(logits)[np.arange(t), actions]
  log_mu = jax.nn.log_softmax(behaviour)[np.arange(t), actions]
  rho = np.exp(np.asarray(log_pi - log_mu))[:-1]
  np.testing.assert_allclose(np.asarray(rhos), rho, rtol=1e-5)
  targets, advantages = _vtrace_by_hand(values.astype(float), rewards[:-1].astype(float),
                                        0.97 * discounts[:-1], rho, lam)
  np.testing.assert_allclose(np.asarray(vtrace.errors) + values[:-1], targets, rtol=1e-4,
                             atol=1e-5)
  np.testing.assert_allclose(np.asarray(vtrace.pg_advantage), advantages, rtol=1e-4, atol=1e-5)
  assert np.all(np.asarray(real) == 1)


def test_lambda_zero_makes_every_target_one_step():
  """lambda 0: each target is r + gamma V(next), the TD(0) target, whatever follows."""
  values = jnp.array([0.5, 1.0, -0.5, 2.0])
  logits = jnp.zeros((4, 2))
  vtrace, _, _ = losses.masked_vtrace(values, logits, logits, jnp.zeros(4, jnp.int32),
                                      jnp.array([1.0, 0.0, 3.0, 0.0]), jnp.ones(4),
                                      jnp.zeros(4, bool), discount=0.5, lambda_=0.0)
  np.testing.assert_allclose(np.asarray(vtrace.errors + values[:-1]),
                             [1.0 + 0.5 * 1.0, 0.0 + 0.5 * -0.5, 3.0 + 0.5 * 2.0], rtol=1e-6)


# The loss's L2 terms, the minibatches ----------------------------------------------------------


def _tiny_net():
  config = policy_net.PolicyNetConfig(
      torso='conv', conv_channels=(4,), conv_strides=(1,), conv_paddings=('SAME',),
      shared_hidden=(8,), head_hidden=(), init='orthogonal')
  return policy_net.make_unroll(3, config)


def _sequences(rng, b, t=4):
  return impala_step.Sequences(
      observation=rng.integers(0, 255, size=(b, t, 3, 3, 3)).astype(np.uint8),
      action=rng.integers(0, 3, size=(b, t)).astype(np.int32),
      reward=rng.normal(size=(b, t)).astype(np.float32),
      discount=np.ones((b, t), np.float32), start_of_episode=np.zeros((b, t), bool),
      extras={'logits': rng.normal(size=(b, t, 3)).astype(np.float32),
              'core_state': np.zeros((b, t), np.float32)})


def test_l2_terms_add_the_logits_per_sequence_and_every_weight():
  net = _tiny_net()
  data = _sequences(np.random.default_rng(0), b=4)
  params = net.init(jax.random.PRNGKey(0), data.observation[0], policy_net.DUMMY_CORE_STATE)
  base = impala_step.LossConfig()
  plain, _ = impala_step.batch_loss_fn(net.apply, base)(params, data)
  with_l2, _ = impala_step.batch_loss_fn(
      net.apply, dataclasses.replace(base, logit_l2_cost=0.1, weight_l2_cost=0.01))(params, data)
  (logits, _), _ = net.apply(params, data.observation.reshape((16, 3, 3, 3)),
                             policy_net.DUMMY_CORE_STATE)
  squares = sum(float(jnp.sum(jnp.square(p))) for p in jax.tree_util.tree_leaves(params))
  expected = float(plain) + 0.1 * float(jnp.sum(jnp.square(logits))) / 4 + 0.01 * squares
  assert float(with_l2) == pytest.approx(expected, rel=1e-5)


def test_minibatches_cover_every_sequence_once_in_order():
  data = _sequences(np.random.default_rng(1), b=8)
  parts = impala_step.split_minibatches(data, 4)
  assert [p.action.shape[0] for p in parts] == [2] * 4
  np.testing.assert_array_equal(np.concatenate([p.observation for p in parts]), data.observation)
  np.testing.assert_array_equal(np.concatenate([p.extras['logits'] for p in parts]),
                                data.extras['logits'])
  with pytest.raises(ValueError, match='does not split into 3 minibatches'):
    impala_step.split_minibatches(data, 3)


def test_the_learner_takes_one_adam_step_per_minibatch():
  from acme import specs
  from acme.utils import loggers

  from agents import learning
  from agents import networks as agent_networks

  class Sample:
    def __init__(self, data):
      self.data = data

  rng = np.random.default_rng(2)
  batches = [_sequences(rng, b=4) for _ in range(2)]
  spec = specs.EnvironmentSpec(
      observations=specs.Array((3, 3, 3), np.uint8), actions=specs.DiscreteArray(3),
      rewards=specs.Array((), np.float32), discounts=specs.BoundedArray((), np.float32, 0, 1))
  config = policy_net.PolicyNetConfig(
      torso='conv', conv_channels=(4,), conv_strides=(1,), conv_paddings=('SAME',),
      shared_hidden=(8,), head_hidden=(), init='orthogonal')
  networks = agent_networks.make_networks(spec, config)
  logger = loggers.InMemoryLogger()
  learner = learning.IMPALALearner(networks, iter([Sample(b) for b in batches]),
                                   optax.adam(1e-2), jax.random.PRNGKey(0), logger=logger,
                                   minibatches=2, vtrace_lambda=0.5)
  start = learner.save()
  # The same updates by hand: each batch's two halves in turn, lambda 0.5.
  update = impala_step.Update(networks.unroll_fn, optax.adam(1e-2),
                              impala_step.LossConfig(vtrace_lambda=0.5),
                              initial_core=policy_net.DUMMY_CORE_STATE)
  state = start
  for data in batches:
    for half in impala_step.split_minibatches(data, 2):
      state, _ = update.sgd(state, half)
  learner.step()
  learner.step()
  for x, y in zip(jax.tree_util.tree_leaves(learner.save().params),
                  jax.tree_util.tree_leaves(state.params)):
    np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-5, atol=1e-6)
  assert int(learner.save().opt_state[0].count) == 4
  assert logger.data[-1]['steps'] == 4   # the counter counts Adam steps


# The optimiser --------------------------------------------------------------------------------


def test_decay_horizon_counts_the_env_steps_each_adam_step_trains_on():
  # 256 sequences in 8 minibatches of 32, 19 new env steps a sequence: 608 per Adam step.
  field = ImpalaConfig(batch_size=256, minibatches=8, learning_rate_decay_steps=5_000_000)
  assert field.learning_rate_decay_updates == 8224   # ceil(5e6 / 608)
  # Batch 16 with each sequence sampled 4 times: 76 env steps per update.
  reuse = ImpalaConfig(batch_size=16, samples_per_insert=4, replay_size=64,
                       learning_rate_decay_steps=76_000)
  assert reuse.learning_rate_decay_updates == 1000
  assert ImpalaConfig().learning_rate_decay_updates == 0


def test_the_learning_rate_falls_linearly_to_zero():
  impala = ImpalaConfig(batch_size=1, sequence_length=2, learning_rate=4e-4, adam_b1=0.9,
                        adam_b2=0.99, adam_eps=1e-12, max_gradient_norm=1e9,
                        learning_rate_decay_steps=10)   # 10 Adam steps of 1 env step each
  optimizer = builder.make_optimizer(impala)
  params = {'w': jnp.zeros(3)}
  state = optimizer.init(params)
  grads = {'w': jnp.array([0.3, -2.0, 5.0])}
  for step in range(12):
    updates, state = optimizer.update(grads, state)
    # A constant gradient: Adam's normalised step is its sign, times the step's learning rate.
    expected = 4e-4 * max(0.0, 1 - step / 10)
    np.testing.assert_allclose(np.asarray(updates['w']), -expected * np.sign(grads['w']),
                               rtol=1e-4, atol=1e-12)


def test_adam_eps_reaches_the_optimiser():
  params = {'w': jnp.zeros(1)}
  grads = {'w': jnp.array([1e-6])}
  for eps, expected in ((1e-8, 1e-3 * 1e-6 / (1e-6 + 1e-8)), (1e-6, 1e-3 * 0.5)):
    optimizer = builder.make_optimizer(ImpalaConfig(learning_rate=1e-3, adam_eps=eps))
    updates, _ = optimizer.update(grads, optimizer.init(params))
    assert float(-updates['w'][0]) == pytest.approx(expected, rel=1e-4)


@pytest.mark.parametrize('fields, message', [
    (dict(batch_size=16, minibatches=3), 'does not split into 3 minibatches'),
    (dict(minibatches=0), 'minibatches must be >= 1'),
    (dict(vtrace_lambda=1.5), 'vtrace_lambda must lie in'),
    (dict(adam_eps=0.0), 'adam_eps must be > 0'),
    (dict(learning_rate_decay_steps=-1), 'learning_rate_decay_steps must be >= 0'),
    (dict(logit_l2_cost=-1e-3), 'logit_l2_cost must be >= 0'),
])
def test_impossible_recipe_values_are_one_line(fields, message):
  with pytest.raises(ValueError, match=message):
    ImpalaConfig(**fields)


# The time limit drawn per episode -------------------------------------------------------------


def _episode_lengths(env, steps, rng):
  lengths, n = [], 0
  env.reset()
  for _ in range(steps):
    ts = env.step(int(rng.integers(4)))
    n += 1
    if ts.last():
      lengths.append((n, float(ts.discount)))
      n = 0
      env.reset()
  return lengths


def test_each_episode_draws_its_limit_from_the_range_and_truncates_there():
  import envs
  # A room no random walk solves quickly: the limit, not solving, ends every episode.
  env = envs.make('sokoban', seed=3, max_steps=12, max_steps_min=5)
  ends = _episode_lengths(env, 2000, np.random.default_rng(0))
  lengths = [n for n, _ in ends if n]
  assert set(lengths) <= set(range(1, 13))
  truncated = [n for n, d in ends if d == 1.0]
  assert min(truncated) == 5 and max(truncated) == 12 and len(set(truncated)) == 8
  with pytest.raises(ValueError, match='max_steps_min must lie in'):
    envs.make('sokoban', seed=0, max_steps=10, max_steps_min=11)


def test_the_batch_draws_the_limits_the_single_environments_draw():
  import envs
  seeds = [4, 5, 6]
  batch = envs.make_batch('sokoban', seeds, max_steps=9, max_steps_min=3)
  singles = [envs.make('sokoban', seed=s, max_steps=9, max_steps_min=3) for s in seeds]
  firsts = batch.reset()
  for k, env in enumerate(singles):
    np.testing.assert_array_equal(env.reset().observation, firsts[k])
  rng = np.random.default_rng(1)
  reset_next = [False] * len(seeds)   # as the batch does: the call after a LAST step resets
  for _ in range(200):
    actions = rng.integers(0, 4, size=len(seeds)).astype(np.int32)
    step = batch.step(actions)
    for k, env in enumerate(singles):
      ts = env.reset() if reset_next[k] else env.step(int(actions[k]))
      assert ts.step_type == step.step_type[k]
      assert float(ts.discount if not ts.first() else 1.0) == float(step.discount[k])
      np.testing.assert_array_equal(ts.observation, step.observation[k])
      reset_next[k] = ts.last()


# The policy networks ------------------------------------------------------------------------


def test_the_resnet_preset_keeps_the_room_then_halves_it():
  config = policy_net.named_policy_config('sokoban_resnet', 'sokoban', image=True)
  net = policy_net.make_unroll(4, config)
  obs = np.zeros((2, 10, 10, 3), np.float32)
  params = net.init(jax.random.PRNGKey(0), obs, policy_net.DUMMY_CORE_STATE)
  shapes = {name: p['w'].shape for name, p in params.items()}
  assert shapes['policy_value/conv_0'] == (3, 3, 3, 16)
  assert shapes['policy_value/block_0_0_conv_1'] == (3, 3, 16, 16)
  assert shapes['policy_value/conv_1'] == (3, 3, 16, 32)
  assert shapes['policy_value/shared_0'] == (5 * 5 * 32, 256)   # 10x10 -> 5x5 after stride 2
  (logits, values), _ = net.apply(params, obs + 100, policy_net.DUMMY_CORE_STATE)
  assert logits.shape == (2, 4) and values.shape == (2,)


def test_a_residual_block_adds_its_convolutions_to_its_input():
  config = policy_net.PolicyNetConfig(
      torso='resnet', conv_channels=(2,), conv_strides=(1,), conv_paddings=('SAME',),
      residual_blocks=1, shared_hidden=(), head_hidden=(), pixel_scale=1.0)
  net = policy_net.make_unroll(2, config)
  obs = np.random.default_rng(0).normal(size=(1, 3, 3, 3)).astype(np.float32)
  params = net.init(jax.random.PRNGKey(1), obs, policy_net.DUMMY_CORE_STATE)
  # With the block's convolutions zeroed, the torso is relu(stem(x)): the skip alone.
  zeroed = {name: ({k: jnp.zeros_like(v) for k, v in p.items()} if 'block' in name else p)
            for name, p in params.items()}
  stem = params['policy_value/conv_0']
  x = jax.lax.conv_general_dilated(obs, stem['w'], (1, 1), 'SAME',
                                   dimension_numbers=('NHWC', 'HWIO', 'NHWC')) + stem['b']
  features = jax.nn.relu(x).reshape(1, -1)
  head = params['policy_value/policy']
  (logits, _), _ = net.apply(zeroed, obs, policy_net.DUMMY_CORE_STATE)
  np.testing.assert_allclose(np.asarray(logits), np.asarray(features @ head['w'] + head['b']),
                             rtol=1e-5, atol=1e-6)


def test_named_policy_networks_build_and_bad_names_are_one_line():
  for name in presets.policy_network_names():
    policy_net.named_policy_config(name, name.split('_')[0], image=True)
  with pytest.raises(ValueError, match="unknown policy network preset 'sokoban_drc9'"):
    policy_net.named_policy_config('sokoban_drc9', 'sokoban', image=True)
  with pytest.raises(ValueError, match="not one of turf's"):
    policy_net.named_policy_config('sokoban_resnet', 'turf', image=True)
  with pytest.raises(ValueError, match='residual_blocks >= 1'):
    policy_net.PolicyNetConfig(torso='resnet', conv_channels=(4,), conv_strides=(1,),
                               conv_paddings=('SAME',))


# The recipe in the experiments ----------------------------------------------------------------


def test_the_field_scale_writes_the_whole_recipe_on_each_run():
  from experiments import sokoban
  runs = [s for s in sokoban.sokoban_steps('field', 1) if s.is_training]
  assert [r.name for r in runs] == ['impala-s0', 'impala_rae-s0']
  flags = list(runs[0].flags)
  value = lambda name: flags[flags.index(f'--{name}') + 1]
  assert (value('batch_size'), value('minibatches'), value('vtrace_lambda')) == ('256', '8', '0.5')
  assert (value('discount'), value('baseline_cost'), value('max_gradient_norm')) == (
      '0.97', '0.25', '0.00025')
  assert value('learning_rate_decay_steps') == '30000000'
  assert 'max_steps_min=30' in flags
  # The batch-16 scales write their whole agent too, so the Sokoban preset does not move them.
  flags = list([s for s in sokoban.sokoban_steps('long', 1) if s.is_training][0].flags)
  assert (value('batch_size'), value('minibatches'), value('samples_per_insert'),
          value('max_gradient_norm'), value('learning_rate_decay_steps'), value('adam_b1'),
          value('vtrace_lambda')) == ('16', '1', '4', '1', '0', '0', '1')
  assert 'max_steps_min=0' in flags
  assert {f'--{k}' for k in sokoban.BATCH16_AGENT} >= {
      f'--{k}' for k in presets.get('sokoban').impala}


def test_the_field_reuse_scale_runs_the_recipe_comparison_s_winner_to_30m():
  from experiments import registry, sokoban
  runs = [s for s in sokoban.sokoban_steps('field_reuse', 3) if s.is_training]
  assert [r.name for r in runs] == ['impala-s0', 'impala_rae-s0', 'impala-s1', 'impala_rae-s1',
                                    'impala-s2', 'impala_rae-s2']
  value = lambda flags, name: flags[flags.index(f'--{name}') + 1]
  flags = list(runs[0].flags)
  assert (value(flags, 'minibatches'), value(flags, 'samples_per_insert'),
          value(flags, 'replay_size'), value(flags, 'learning_rate_decay_steps')) == (
              '32', '4', '1024', '30000000')
  assert runs[0].max_steps == 30_000_000 and 'max_steps_min=30' in flags
  # The same agent as the comparison's arm on the 1k set, but for the decay's horizon.
  arm = [s for s in registry.get('sokoban_recipe').steps('boxoban_1k', 1)
         if s.name == 'field_mb32_reuse4-s0'][0]
  def agent(f):
    pairs = {f[i]: f[i + 1] for i in range(len(f) - 1) if f[i].startswith('--')}
    return {k: v for k, v in pairs.items() if k not in (
        '--run_dir', '--seed', '--max_steps', '--mode', '--env_option', '--env',
        '--learning_rate_decay_steps')}
  ours, theirs = agent(flags), agent(list(arm.flags))
  assert len(theirs) > 15 and {k: ours.get(k) for k in theirs} == theirs


def test_the_recipe_comparison_runs_each_arm_then_its_evaluations():
  from experiments import registry
  steps = registry.get('sokoban_recipe').steps('small_rooms', 1)
  runs = [s for s in steps if s.is_training]
  assert [r.name for r in runs] == ['preset-s0', 'field-s0', 'field_resnet-s0',
                                    'field_lambda1-s0', 'field_mb32-s0', 'field_reuse4-s0',
                                    'field_mb32_reuse4-s0']
  ablation = list(runs[3].flags)
  assert ablation.count('--vtrace_lambda') == 1
  assert ablation[ablation.index('--vtrace_lambda') + 1] == '1'
  assert '--policy_preset' in runs[2].flags and 'sokoban_resnet' in runs[2].flags
  evals = [s.name for s in steps if not s.is_training]
  assert evals[:2] == ['preset-s0-eval_train', 'preset-s0-eval_held_out']
  assert all('7x7' in a for r in runs for a in r.flags if a.startswith('levels='))


def test_the_speed_bench_runs_each_arm_as_the_comparison_runs_it():
  from bench import recipe_speed
  from experiments import registry
  arms = recipe_speed.arm_flags('small_rooms')
  runs = {s.name.rsplit('-s', 1)[0]: list(s.flags)
          for s in registry.get('sokoban_recipe').steps('small_rooms', 1) if s.is_training}
  assert set(arms) == set(runs)
  for name, flags in arms.items():
    assert flags == runs[name]   # the run's own flags: --run_dir, --seed, --max_steps aside
    assert '--run_dir' not in flags and '--max_steps' not in flags

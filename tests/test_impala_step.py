"""agents.impala_step: the learner's update split over XLA host devices gives the single-device
update's loss and parameters; it imports and runs with Launchpad, Reverb, TensorFlow (and Acme)
unimportable; the host-device count rules."""
import os
import subprocess
import sys
import textwrap

import pytest

from agents import host_devices, impala_step

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))

# A hand-sized batch (4 sequences of 5 steps of Sokoban-sized images, an episode ending in two of
# them), one V-trace update and one self-imitation update; prints loss and parameters as JSON.
ONE_UPDATE = textwrap.dedent('''
    import json, sys
    import jax, numpy as np, optax
    from agents import impala_step, policy_net
    n = int(sys.argv[1])
    if n > 1:
      assert len(jax.devices()) == n, jax.devices()
    config = policy_net.PolicyNetConfig(
        torso='conv', conv_channels=(4, 4), conv_strides=(2, 1), conv_paddings=('SAME', 'SAME'),
        shared_hidden=(16,), head_hidden=(8,), init='orthogonal',
        centre_on=((255, 0, 0),), canvas_size=7)
    net = policy_net.make_unroll(4, config)
    rng = np.random.default_rng(0)
    b, t = 4, 5
    obs = rng.integers(0, 3, size=(b, t, 4, 4, 3)).astype(np.uint8) * 120
    obs[:, :, 1, 2] = (255, 0, 0)
    start = np.zeros((b, t), bool); start[0, 3] = start[2, 2] = True
    data = impala_step.Sequences(
        observation=obs, action=rng.integers(0, 4, size=(b, t)).astype(np.int32),
        reward=rng.normal(size=(b, t)).astype(np.float32),
        discount=np.ones((b, t), np.float32), start_of_episode=start,
        extras={'logits': rng.normal(size=(b, t, 4)).astype(np.float32),
                'core_state': np.zeros((b, t), np.float32)})
    params = net.init(jax.random.PRNGKey(0), obs[0], policy_net.DUMMY_CORE_STATE)
    update = impala_step.Update(
        net.apply, optax.adam(1e-2), impala_step.LossConfig(normalize_advantages=True),
        initial_core=policy_net.DUMMY_CORE_STATE, devices=jax.devices()[:n])
    state = update.init(params)
    state, metrics = update.sgd(state, data)
    state, sil = update.imitate(state, obs[:, 0], data.action[:, 0],
                                np.linspace(-1, 3, b).astype(np.float32))
    leaves = [np.asarray(x).ravel().tolist() for x in jax.tree_util.tree_leaves(state.params)]
    print(json.dumps({'loss': float(metrics['loss']), 'grad_norm': float(metrics['grad_norm']),
                      'advantage_abs_max': float(metrics['advantage_abs_max']),
                      'sil_loss': float(sil['sil_loss']), 'params': leaves,
                      'devices': update.num_devices}))
''')


def _run(code, *args, env_extra=None):
  env = dict(os.environ, JAX_PLATFORMS='cpu', PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL='3')
  env.update(env_extra or {})
  out = subprocess.run([sys.executable, '-c', code, *args], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=300)
  assert out.returncode == 0, out.stderr[-3000:]
  return out.stdout


def test_two_host_devices_give_the_single_device_update():
  import json

  import numpy as np
  one = json.loads(_run(ONE_UPDATE, '1').splitlines()[-1])
  two = json.loads(_run(ONE_UPDATE, '2', env_extra={
      'XLA_FLAGS': host_devices.with_host_devices('', 2)}).splitlines()[-1])
  assert (one['devices'], two['devices']) == (1, 2)
  for key in ('loss', 'grad_norm', 'advantage_abs_max', 'sil_loss'):
    assert two[key] == pytest.approx(one[key], rel=1e-5, abs=1e-6), key
  for a, b in zip(one['params'], two['params']):
    np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


BLOCKER = textwrap.dedent('''
    import sys
    BLOCKED = ('launchpad', 'reverb', 'tensorflow', 'acme', 'sonnet', 'gym', 'gym_sokoban')
    class Blocker:
      def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in BLOCKED:
          raise ImportError(f'{name} is blocked')
    sys.meta_path.insert(0, Blocker())
''')
NONE_LOADED = textwrap.dedent('''
    loaded = sorted(m for m in sys.modules if m.split('.')[0] in BLOCKED)
    assert not loaded, loaded
    print('isolated')
''')
BLOCKED = BLOCKER + ONE_UPDATE + NONE_LOADED


def test_the_step_runs_without_launchpad_reverb_tensorflow_or_acme():
  out = _run(BLOCKED, '1')
  assert out.strip().endswith('isolated')


def test_several_updates_in_one_call_are_the_updates_one_by_one():
  import jax
  import numpy as np
  import optax

  from agents import policy_net
  config = policy_net.PolicyNetConfig(
      torso='conv', conv_channels=(4,), conv_strides=(1,), conv_paddings=('SAME',),
      shared_hidden=(8,), head_hidden=(8,), init='orthogonal')
  net = policy_net.make_unroll(3, config)
  rng = np.random.default_rng(1)
  k, b, t = 3, 2, 4

  def batch():
    return impala_step.Sequences(
        observation=rng.integers(0, 255, size=(b, t, 3, 3, 3)).astype(np.uint8),
        action=rng.integers(0, 3, size=(b, t)).astype(np.int32),
        reward=rng.normal(size=(b, t)).astype(np.float32),
        discount=np.ones((b, t), np.float32), start_of_episode=np.zeros((b, t), bool),
        extras={'logits': rng.normal(size=(b, t, 3)).astype(np.float32),
                'core_state': np.zeros((b, t), np.float32)})

  batches = [batch() for _ in range(k)]
  params = net.init(jax.random.PRNGKey(0), batches[0].observation[0], policy_net.DUMMY_CORE_STATE)
  update = impala_step.Update(net.apply, optax.adam(1e-2), impala_step.LossConfig(),
                              initial_core=policy_net.DUMMY_CORE_STATE)
  one_by_one = update.init(params)
  losses = []
  for data in batches:
    one_by_one, m = update.sgd(one_by_one, data)
    losses.append(float(m['loss']))
  stacked = jax.tree_util.tree_map(lambda *x: np.stack(x), *batches)
  fused, metrics = update.sgd_many(update.init(params), stacked)
  np.testing.assert_allclose(np.asarray(metrics['loss']), losses, rtol=1e-5)
  for x, y in zip(jax.tree_util.tree_leaves(one_by_one.params),
                  jax.tree_util.tree_leaves(fused.params)):
    np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-5, atol=1e-6)


def test_a_batch_taken_in_chunks_gives_the_whole_batch_update():
  import jax
  import numpy as np
  import optax

  from agents import policy_net
  config = policy_net.PolicyNetConfig(
      torso='conv', conv_channels=(4, 4), conv_strides=(2, 1), conv_paddings=('SAME', 'SAME'),
      relu_after_last_conv=False, shared_hidden=(8,), head_hidden=(8,), init='orthogonal')
  net = policy_net.make_unroll(3, config)
  rng = np.random.default_rng(2)
  b, t = 7, 4          # chunks of 3: two of 3 and one of 1, weighted by their sizes
  start = np.zeros((b, t), bool)
  start[1, 2] = start[5, 1] = True
  data = impala_step.Sequences(
      observation=rng.integers(0, 255, size=(b, t, 5, 5, 3)).astype(np.uint8),
      action=rng.integers(0, 3, size=(b, t)).astype(np.int32),
      reward=rng.normal(size=(b, t)).astype(np.float32),
      discount=np.ones((b, t), np.float32), start_of_episode=start,
      extras={'logits': rng.normal(size=(b, t, 3)).astype(np.float32),
              'core_state': np.zeros((b, t), np.float32)})
  params = net.init(jax.random.PRNGKey(0), data.observation[0], policy_net.DUMMY_CORE_STATE)
  results = {}
  for chunk in (0, 3):
    update = impala_step.Update(net.apply, optax.adam(1e-2), impala_step.LossConfig(),
                                initial_core=policy_net.DUMMY_CORE_STATE, chunk_sequences=chunk)
    state, metrics = update.sgd(update.init(params), data)
    results[chunk] = (state, jax.device_get(metrics))
  (whole, m_whole), (chunked, m_chunked) = results[0], results[3]
  assert set(m_chunked) == set(m_whole)
  for key, value in m_whole.items():
    assert float(m_chunked[key]) == pytest.approx(float(value), rel=1e-5, abs=1e-6), key
  for x, y in zip(jax.tree_util.tree_leaves(whole.params), jax.tree_util.tree_leaves(chunked.params)):
    np.testing.assert_allclose(np.asarray(y), np.asarray(x), rtol=1e-5, atol=1e-6)
  with pytest.raises(ValueError, match='whole batch'):
    impala_step.Update(net.apply, optax.adam(1e-2), impala_step.LossConfig(normalize_advantages=True),
                       chunk_sequences=3)


def test_default_host_devices_divides_every_batch():
  assert host_devices.default_host_devices([16], cores=2) == 2
  assert host_devices.default_host_devices([16], cores=1) == 1
  assert host_devices.default_host_devices([16], cores=12) == 8
  assert host_devices.default_host_devices([16, 24], cores=64) == 8
  assert host_devices.default_host_devices([6], cores=4) == 3


def test_host_device_flag_replaces_an_earlier_count():
  flags = host_devices.with_host_devices('--xla_cpu_multi_thread_eigen=false '
                                        '--xla_force_host_platform_device_count=3', 2)
  assert flags.split() == ['--xla_cpu_multi_thread_eigen=false',
                           '--xla_force_host_platform_device_count=2']


def test_a_batch_that_does_not_split_is_one_line():
  import jax
  import optax
  update = impala_step.Update(lambda p, o, s: ((o, o), s), optax.sgd(0.1), devices=[jax.devices()[0]])
  update.check_batch(5)   # one device takes any batch
  update.devices = update.devices * 2
  with pytest.raises(ValueError, match='batch_size 5 is not a multiple of 2'):
    update.check_batch(5)


def test_the_gpu_check_runs_the_sokoban_presets_network():
  import envs
  from bench import gpu_learner_check
  from envs import presets
  assert gpu_learner_check.SOKOBAN_POLICY == dict(presets.get('sokoban').policy_network)
  env = envs.make('sokoban', seed=0)
  assert env.observation_spec().shape == gpu_learner_check.OBSERVATION_SHAPE
  assert env.action_spec().num_values == gpu_learner_check.NUM_ACTIONS
  from experiments.sokoban import BATCH16_AGENT as impala
  assert (gpu_learner_check.LOSS.discount, gpu_learner_check.LOSS.entropy_cost,
          gpu_learner_check.LOSS.baseline_cost) == (
      impala['discount'], impala['entropy_cost'], impala['baseline_cost'])


def test_the_gpu_check_runs_on_this_host_within_its_budget(tmp_path):
  out = tmp_path / 'check.json'
  code = 'from bench import gpu_learner_check\ngpu_learner_check.main(sys.argv[1:])\n'
  text = _run(BLOCKER + code + NONE_LOADED,
              '--batch_sizes', '4', '--updates_per_call', '2', '--sequence_length', '5', '--seconds', '0.5',
              '--self_imitation_batch', '8', '--psi_batch_sizes', '8', '--cores', '16',
              '--out', str(out))
  import json
  result = json.loads(out.read_text())
  assert [(s['batch_size'], s['updates_per_call']) for s in result['shapes']] == [(4, 2)]
  assert all(s['loss_finite'] for s in result['shapes'])
  assert [p['psi_pairs_per_update'] for p in result['psi']] == [8]
  assert result['psi'][0]['loss_finite'] and result['psi'][0]['window'] == 15
  assert result['shapes'][0]['projection']['actor_env_steps_per_s'] == 14 * 6900.0
  assert 'frames/s' in text and 'env steps/s = min(' in text and text.strip().endswith('isolated')

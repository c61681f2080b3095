"""Network shapes as Appendix C gives them: phi (reversibility estimator) and the IMPALA agent."""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from acme import specs

from agents import networks as agent_nets
from envs import presets
from estimators import networks as nets

CARTPOLE = ((4,), np.float32, 2)
IMAGE = ((10, 10, 3), np.uint8, 4)  # turf and sokoban observations


def _shapes(params):
  """{module name: {param name: shape}}."""
  return {m: {k: tuple(v.shape) for k, v in ps.items()} for m, ps in params.items()}


def _phi(config, obs):
  shape, dtype, num_actions = obs
  est = nets.make_estimators(config, num_actions)
  x = np.zeros((3,) + shape, dtype)
  params = est.phi_init(jax.random.PRNGKey(0), x)
  assert est.phi_apply(params, x).shape == (3, num_actions)
  return _shapes(params)


def test_cartpole_phi_is_one_hidden_layer_of_64():
  shapes = _phi(nets.default_estimator_config('cartpole'), CARTPOLE)
  assert shapes == {'linear': {'w': (4, 64), 'b': (64,)},
                    'phi_out': {'w': (64, 2), 'b': (2,)}}


def test_turf_phi_is_convs_then_64_without_embedding():
  shapes = _phi(nets.default_estimator_config('turf'), IMAGE)
  convs = sorted(m for m in shapes if m.startswith('phi_encoder/'))
  assert [shapes[m]['w'] for m in convs] == [(3, 3, 3, 32), (3, 3, 32, 64), (3, 3, 64, 64)]
  assert all('conv2_d' in m for m in convs)  # no embedding projection in phi's encoder
  # 10x10 -> 8 -> 6 -> 4 (VALID): 4 * 4 * 64 flattened features straight into the hidden layer.
  assert shapes['linear'] == {'w': (4 * 4 * 64, 64), 'b': (64,)}
  assert shapes['phi_out'] == {'w': (64, 4), 'b': (4,)}
  assert len(shapes) == 5


def test_sokoban_phi_keeps_convs_and_three_hidden_layers():
  shapes = _phi(nets.default_estimator_config('sokoban_paper'), IMAGE)
  assert [shapes[m]['w'] for m in ('linear', 'linear_1', 'linear_2')] == [
      (2 * 2 * 8, 64), (64, 64), (64, 64)]  # 10 -> 4 -> 2 (VALID)


def test_sokoban_preset_is_the_papers_convs_early_fused_with_same_padding():
  paper, ours = nets.default_estimator_config('sokoban_paper'), nets.default_estimator_config('sokoban')
  assert (paper.psi_fusion, paper.conv_padding) == ('siamese', 'VALID')
  assert dataclasses.replace(ours, psi_fusion='siamese', conv_padding='VALID',
                             conv_channels=(8, 8)) == paper
  assert nets.EstimatorNetConfig(**presets.get('sokoban').paper_estimator_network) == paper


def test_same_padding_keeps_5x5_maps_and_checkpoints_round_trip(tmp_path):
  config = dataclasses.replace(nets.default_estimator_config('sokoban_paper'), conv_padding='SAME')
  shapes = _phi(config, IMAGE)
  assert shapes['linear']['w'] == (5 * 5 * 8, 64)  # 10 -> 5 -> 5 (SAME)
  # A dict without the field (checkpoints before it existed) rebuilds the VALID network.
  d = config.to_dict()
  assert nets.EstimatorNetConfig.from_dict(d).conv_padding == 'SAME'
  del d['conv_padding']
  assert nets.EstimatorNetConfig.from_dict(d).conv_padding == 'VALID'
  with pytest.raises(ValueError, match='conv_padding'):
    dataclasses.replace(config, conv_padding='same')


def test_early_fusion_stacks_both_frames_into_one_encoder():
  config = dataclasses.replace(nets.default_estimator_config('sokoban_paper'), psi_fusion='early')
  est = nets.make_estimators(config, 4)
  x = np.zeros((2, 10, 10, 3), np.uint8)
  y = np.full((2, 10, 10, 3), 255, np.uint8)
  params = est.psi_init(jax.random.PRNGKey(0), x)
  assert _shapes(params)['encoder/conv2_d']['w'] == (3, 3, 6, 8)   # 2 x 3 channels in
  assert _shapes(params)['linear']['w'] == (2 * 2 * 8, 64)         # one embedding, not two
  xy, yx = (est.psi_apply(params, None, a, b, False) for a, b in ((x, y), (y, x)))
  assert xy.shape == (2,) and not np.allclose(xy, yx)              # order matters
  with pytest.raises(ValueError, match='psi_fusion'):
    dataclasses.replace(config, psi_fusion='late')


def test_psi_is_unchanged_by_phi_encoder():
  for env, obs in (('cartpole', CARTPOLE), ('turf', IMAGE)):
    new = nets.default_estimator_config(env)
    old = dataclasses.replace(new, phi_encoder='full')
    shape, dtype, num_actions = obs
    x = np.zeros((1,) + shape, dtype)
    p_new = nets.make_estimators(new, num_actions).psi_init(jax.random.PRNGKey(0), x)
    p_old = nets.make_estimators(old, num_actions).psi_init(jax.random.PRNGKey(0), x)
    assert _shapes(p_new) == _shapes(p_old)


def test_phi_encoder_full_is_psis_whole_encoder():
  d = nets.default_estimator_config('cartpole').to_dict()
  assert d['phi_encoder'] == 'torso'
  assert nets.EstimatorNetConfig.from_dict(d) == nets.default_estimator_config('cartpole')
  config = nets.EstimatorNetConfig.from_dict(dict(d, phi_encoder='full'))
  assert config.phi_encoder == 'full'
  shapes = _phi(config, CARTPOLE)  # psi's encoder (2 x 64) then one hidden layer of 64
  assert shapes == {'phi_encoder/linear': {'w': (4, 64), 'b': (64,)},
                    'phi_encoder/linear_1': {'w': (64, 64), 'b': (64,)},
                    'linear': {'w': (64, 64), 'b': (64,)},
                    'phi_out': {'w': (64, 2), 'b': (2,)}}
  d = nets.default_estimator_config('turf').to_dict()
  shapes = _phi(nets.EstimatorNetConfig.from_dict(dict(d, phi_encoder='full')), IMAGE)
  assert shapes['phi_encoder/linear'] == {'w': (4 * 4 * 64, 64), 'b': (64,)}  # the embedding
  assert shapes['linear'] == {'w': (64, 64), 'b': (64,)}


@pytest.mark.parametrize('env', ['cartpole', 'turf'])
def test_a_network_dict_without_phi_encoder_is_refused_in_one_line(env):
  """Its default ('torso') is not the phi such a config was built with, so it is not guessed."""
  d = nets.default_estimator_config(env).to_dict()
  del d['phi_encoder']
  with pytest.raises(ValueError) as e:
    nets.EstimatorNetConfig.from_dict(d)
  line = str(e.value)
  assert '\n' not in line and 'lacks phi_encoder' in line and 'earlier version' in line
  assert f'commit {nets.EARLIER_FORMAT_READER} is the last that reads it' in line


def test_phi_encoder_is_validated():
  with pytest.raises(ValueError, match='phi_encoder'):
    nets.EstimatorNetConfig(phi_encoder='convs')


def _impala(env_name, obs):
  shape, dtype, num_actions = obs
  spec = specs.EnvironmentSpec(
      observations=specs.Array(shape, dtype), actions=specs.DiscreteArray(num_actions, np.int32),
      rewards=specs.Array((), np.float32), discounts=specs.BoundedArray((), np.float32, 0., 1.))
  config = agent_nets.default_policy_config(env_name, len(shape) == 3)
  net = agent_nets.make_networks(spec, config)
  params = net.unroll_init_fn(jax.random.PRNGKey(0), agent_nets.DUMMY_CORE_STATE)
  obs_seq = np.ones((5,) + shape, dtype)
  (logits, values), _ = net.unroll_fn(params, obs_seq, agent_nets.DUMMY_CORE_STATE)
  assert logits.shape == (5, num_actions) and values.shape == (5,)
  (logit, value), _ = net.forward_fn(params, obs_seq[0], agent_nets.DUMMY_CORE_STATE)
  assert logit.shape == (num_actions,) and value.shape == ()
  prefix = 'policy_value/'
  assert all(m.startswith(prefix) for m in params)
  return {m[len(prefix):]: s['w'] for m, s in _shapes(params).items()}


def test_sokoban_impala_shares_two_64_layers_then_separate_64_heads():
  w = _impala('sokoban', IMAGE)
  assert w == {
      'conv_0': (3, 3, 3, 8), 'conv_1': (3, 3, 8, 16), 'conv_2': (3, 3, 16, 16),
      # 10x10 centred on the agent -> 15x15 -stride 2 SAME-> 8x8 -SAME-> 8x8 -SAME-> 8x8.
      'shared_0': (8 * 8 * 16, 64), 'shared_1': (64, 64),
      'policy_hidden_0': (64, 64), 'value_hidden_0': (64, 64),
      'policy': (64, 4), 'value': (64, 1)}


def test_orthogonal_init_keeps_the_signal_and_starts_near_uniform():
  """Sokoban's init: orthogonal weights with ReLU gain, zero biases, and a first policy that is
  near-uniform (policy weights at gain 0.01), unlike Haiku's default."""
  import haiku as hk
  obs = np.random.default_rng(0).integers(0, 256, size=(64,) + IMAGE[0]).astype(np.uint8)

  def features_and_logits(init):
    # Random pixels mark no agent: the room as drawn, without the centring canvas.
    config = dataclasses.replace(agent_nets.default_policy_config('sokoban', True), init=init, centre_on=(),
                                 canvas_size=0)

    def forward(x):
      logits, _ = agent_nets.PolicyValueNet(4, config)(x)
      return logits

    net = hk.transform(forward)
    params = net.init(jax.random.PRNGKey(0), obs)
    return params, np.asarray(net.apply(params, None, obs))

  params_o, logits_o = features_and_logits('orthogonal')
  params_l, logits_l = features_and_logits('lecun')
  w_o = params_o['policy_value/conv_0']['w'].reshape(-1, 8)
  # Orthogonal columns (gain sqrt 2): W^T W = 2 I.
  np.testing.assert_allclose(w_o.T @ w_o, 2 * np.eye(8), atol=1e-4)
  assert np.all(params_o['policy_value/shared_0']['b'] == 0)
  assert np.abs(logits_o).max() < 0.1      # near-uniform first policy
  assert np.abs(logits_l).max() > 0.1      # Haiku's default does not start there
  with pytest.raises(ValueError, match='policy init'):
    agent_nets.PolicyNetConfig(init='xavier')


def test_turf_impala_is_convs_32_64_64_then_512():
  w = _impala('turf', IMAGE)
  assert w == {
      'conv_0': (3, 3, 3, 32), 'conv_1': (3, 3, 32, 64), 'conv_2': (3, 3, 64, 64),
      'shared_0': (4 * 4 * 64, 512), 'policy': (512, 4), 'value': (512, 1)}


def test_cartpole_impala_is_two_separate_2x64_mlps():
  w = _impala('cartpole', CARTPOLE)
  assert w == {
      'policy_hidden_0': (4, 64), 'policy_hidden_1': (64, 64), 'policy': (64, 2),
      'value_hidden_0': (4, 64), 'value_hidden_1': (64, 64), 'value': (64, 1)}


def test_default_policy_config_is_the_presets_or_by_observation_kind_without_an_env():
  assert agent_nets.default_policy_config('cliff', False).head_hidden == (64, 64)
  with pytest.raises(presets.PresetError, match="'unknown' has no preset"):
    agent_nets.default_policy_config('unknown', True)
  with pytest.raises(ValueError, match='does not fit image observations'):
    agent_nets.default_policy_config('cartpole', True)
  assert agent_nets.default_policy_config(None, True) == agent_nets.default_policy_config('sokoban', True)
  assert agent_nets.default_policy_config(None, False) == agent_nets.default_policy_config('cartpole', False)
  with pytest.raises(ValueError, match='conv'):
    agent_nets.PolicyNetConfig(torso='conv', conv_channels=(8,), conv_strides=(1,))


def test_centre_on_agent_puts_the_agent_cell_at_the_canvas_centre():
  from envs import sokoban
  player, on_target = sokoban.PLAYER_COLOURS
  images = np.zeros((3, 4, 5, 3), np.uint8)
  images[0, 0, 0], images[0, 3, 4] = player, (9, 9, 9)    # agent in a corner
  images[1, 2, 1], images[1, 2, 2] = on_target, (7, 7, 7)  # agent on a target
  out = np.asarray(agent_nets.centre_on_agent(jnp.asarray(images), sokoban.PLAYER_COLOURS))
  assert out.shape == (3, 7, 9, 3)
  np.testing.assert_array_equal(out[:, 3, 4], [player, on_target, (0, 0, 0)])
  np.testing.assert_array_equal(out[0, 6, 8], (9, 9, 9))       # 3 rows down, 4 columns right
  np.testing.assert_array_equal(out[1, 3, 5], (7, 7, 7))       # its right-hand neighbour
  assert out[0].sum() == images[0].astype(int).sum()          # nothing lost off the canvas
  np.testing.assert_array_equal(out[2], 0)


def test_a_15x15_canvas_shows_what_the_19x19_one_showed_on_sokoban_rooms():
  """A room's outer ring is wall (zeros, the canvas's fill): the 15x15 canvas is the centre of
  the 19x19 one, and nothing non-zero lies outside it, wherever the agent stands."""
  import envs
  from envs import sokoban
  env = envs.make('sokoban', seed=3)
  rng = np.random.default_rng(0)
  frames, ts = [], env.reset()
  for _ in range(300):
    frames.append(ts.observation)
    ts = env.reset() if ts.last() else env.step(int(rng.integers(env.action_spec().num_values)))
  frames = jnp.asarray(np.stack(frames))
  full = np.asarray(agent_nets.centre_on_agent(frames, sokoban.PLAYER_COLOURS))
  small = np.asarray(agent_nets.centre_on_agent(frames, sokoban.PLAYER_COLOURS, 15))
  assert full.shape[1:3] == (19, 19) and small.shape[1:3] == (15, 15)
  np.testing.assert_array_equal(full[:, 2:17, 2:17], small)
  assert full.astype(int).sum() == small.astype(int).sum()
  # The agent stood in many places, so every part of the canvas was tried.
  assert len({tuple(np.argwhere(np.all(f == sokoban.PLAYER_COLOURS[0], -1))[0]) for f in
              np.asarray(frames) if np.all(f == sokoban.PLAYER_COLOURS[0], -1).any()}) >= 10


@pytest.mark.parametrize('kwargs, words', [
    (dict(canvas_size=14), 'odd'),
    (dict(canvas_size=15, centre_on=()), 'only with centre_on'),
])
def test_canvas_size_is_checked(kwargs, words):
  with pytest.raises(ValueError, match=words):
    dataclasses.replace(agent_nets.default_policy_config('sokoban', True), **kwargs)

"""The options that train psi/phi as the authors' released code does (Turf, issue: RAC as the
authors ran it): terminal transitions out of phi's batches and psi's pairs, phi's sampler that
draws 1,024 transitions and keeps up to 128 non-terminal ones, the ReLU after psi's embedding;
and Turf's log of which cells were ruined."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from estimators import networks as nets
from estimators import pairs as pairs_lib
from estimators import training

UP, DOWN, LEFT, RIGHT = range(4)


def _flat(lengths, obs_dim=3):
  """Whole episodes back to back (the offline layout); observation k holds the value k."""
  last, start_ok = pairs_lib.episode_layout(np.asarray(lengths))
  starts, count = pairs_lib.start_indices(jnp.asarray(last), jnp.asarray(start_ok))
  n = int(np.sum(lengths))
  obs = np.repeat(np.arange(n, dtype=np.float32)[:, None], obs_dim, axis=1)
  return training.Batch(jnp.asarray(obs), jnp.zeros(n, jnp.int32), jnp.asarray(last), starts,
                        count)


def test_terminal_transitions_and_final_observations_of_a_hand_made_batch():
  # Episodes of 4 and 3 observations: 0 1 2 3 | 4 5 6; 2 -> 3 and 5 -> 6 end an episode.
  batch = _flat([4, 3])
  k = jnp.arange(6)
  np.testing.assert_array_equal(training.terminal_transitions(batch, k),
                                [False, False, True, False, False, True])
  np.testing.assert_array_equal(training.without_final_observations(batch),
                                [2, 2, 2, 2, 5, 5, 5])
  # Windows, each one episode from row 0: the first does not end its episode (its last
  # transition is not terminal), the second holds the episode's final observation (valid 0 on
  # its last step: the filler).
  valid = np.array([[1, 1, 1, 1], [1, 1, 1, 0]], np.float32)
  start_of_episode = np.array([[1, 0, 0, 0], [1, 0, 0, 0]], np.float32)
  windows = training.windows_to_batch(jnp.zeros((2, 4, 3)), jnp.zeros((2, 4), jnp.int32),
                                      jnp.asarray(valid), jnp.asarray(start_of_episode), 2)
  np.testing.assert_array_equal(windows.ends_episode, [False] * 4 + [True] * 4)
  np.testing.assert_array_equal(training.terminal_transitions(windows, jnp.arange(8)),
                                [False] * 6 + [True, False])


def test_excluded_terminals_leave_phi_and_psi():
  batch = _flat([4, 3])
  k, weight = training.phi_indices(jax.random.PRNGKey(0), batch, 256, 0, exclude_terminal=True)
  kept = np.asarray(k)[np.asarray(weight) > 0]
  assert len(kept) > 100 and not set(kept.tolist()) & {2, 5}
  assert set(kept.tolist()) == {0, 1, 4}
  # Without the option the terminal transitions are drawn.
  k, weight = training.phi_indices(jax.random.PRNGKey(0), batch, 256, 0, exclude_terminal=False)
  assert np.all(np.asarray(weight) == 1) and {2, 5} <= set(np.asarray(k).tolist())
  p = pairs_lib.sample_pairs(jax.random.PRNGKey(1), training.without_final_observations(batch),
                             batch.starts, batch.num_starts, 512, 120)
  seen = set(np.asarray(p.first).tolist()) | set(np.asarray(p.second).tolist())
  assert seen == {0, 1, 2, 4, 5}   # never 3 or 6, the final observations


def test_phi_sampler_keeps_at_most_128_non_terminal_of_1024():
  # 50 episodes of 2 observations (their one transition is terminal) and one of 41 (40
  # transitions, 39 non-terminal): 89 transitions, 39 of them non-terminal.
  batch = _flat([2] * 50 + [41])
  for seed in range(5):
    k, weight = training.phi_indices(jax.random.PRNGKey(seed), batch, 128, 1024, True)
    assert k.shape == weight.shape == (128,)
    kept = np.asarray(k)[np.asarray(weight) > 0]
    assert not np.any(np.asarray(training.terminal_transitions(batch, jnp.asarray(kept))))
    # About 1,024 * 39 / 89 ~ 449 non-terminal were drawn: 128 kept.
    assert len(kept) == 128
  # Mostly terminal: fewer than 128 non-terminal among the 1,024 drawn, all of them kept and
  # the rest of the batch weighted 0.
  batch = _flat([2] * 2_000 + [41])
  k, weight = training.phi_indices(jax.random.PRNGKey(0), batch, 128, 1024, True)
  n = int(np.sum(weight))
  assert 0 < n < 128 and np.all(np.asarray(weight)[:n] == 1) and np.all(np.asarray(weight)[n:] == 0)
  assert not np.any(np.asarray(training.terminal_transitions(batch, k[:n])))


def test_phi_target_one_minus_forward_fits_phi_to_one_minus_psi_forward():
  """With psi frozen, phi trained long on one transition approaches its target: psi(x', x)
  ('reverse') or 1 - psi(x, x') ('one_minus_forward'), which differ for this psi."""
  config = nets.EstimatorNetConfig(torso='mlp', mlp_sizes=(8,), embedding_size=4, phi_hidden_sizes=(8,))
  est = nets.make_estimators(config, 2)
  batch = _flat([2])
  x, y = batch.observations[:1], batch.observations[1:2]
  got = {}
  for target in training.PHI_TARGETS:
    train = training.TrainConfig(train_psi=False, train_phi=True, phi_batch_size=4,
                                 phi_learning_rate=0.05, phi_target=target)
    state = training.init_state(est, train, np.zeros(3, np.float32))
    state, _ = training.make_update(est, train, steps_per_call=300)(state, batch)
    got[target] = float(training.phi_prob(est, state.phi_params, x)[0, 0])
  back = float(training.psi_prob(est, state.psi_params, y, x)[0])
  forward = float(training.psi_prob(est, state.psi_params, x, y)[0])
  assert abs(back - (1 - forward)) > 0.02
  assert got['reverse'] == pytest.approx(back, abs=0.01)
  assert got['one_minus_forward'] == pytest.approx(1 - forward, abs=0.01)
  with pytest.raises(ValueError, match='phi_target'):
    training.TrainConfig(phi_target='forward')


def test_phi_draw_must_cover_the_batch():
  with pytest.raises(ValueError, match='phi_draw'):
    training.TrainConfig(phi_batch_size=128, phi_draw=64)
  training.TrainConfig(phi_batch_size=128, phi_draw=1024, exclude_terminal=True)


def test_training_steps_with_the_authors_options_stay_finite():
  config = nets.EstimatorNetConfig(torso='mlp', mlp_sizes=(8,), embedding_size=4, embedding_relu=True,
                              phi_hidden_sizes=(8,))
  est = nets.make_estimators(config, 2)
  batch = _flat([5, 4, 6])._replace(actions=jnp.asarray(np.arange(15) % 2, jnp.int32))
  train = training.TrainConfig(window=3, batch_size=16, phi_batch_size=8, phi_draw=32,
                               exclude_terminal=True, train_phi=True)
  state = training.init_state(est, train, np.zeros(3, np.float32))
  state, metrics = training.make_update(est, train, steps_per_call=3)(state, batch)
  for name in ('psi_loss', 'phi_loss'):
    assert np.isfinite(float(metrics[name])), name


def test_embedding_relu_changes_psi_not_its_parameters():
  x = jax.random.normal(jax.random.PRNGKey(0), (16, 6))
  y = jax.random.normal(jax.random.PRNGKey(1), (16, 6))
  linear = nets.EstimatorNetConfig(torso='mlp', mlp_sizes=(16,), embedding_size=8)
  relu = nets.EstimatorNetConfig(torso='mlp', mlp_sizes=(16,), embedding_size=8, embedding_relu=True)
  a, b = nets.make_estimators(linear, 4), nets.make_estimators(relu, 4)
  params = a.psi_init(jax.random.PRNGKey(2), x)
  assert jax.tree_util.tree_structure(params) == jax.tree_util.tree_structure(
      b.psi_init(jax.random.PRNGKey(2), x))
  out_a = np.asarray(a.psi_apply(params, None, x, y, False))
  out_b = np.asarray(b.psi_apply(params, None, x, y, False))
  assert not np.allclose(out_a, out_b)
  # phi's default encoder is the torso only: no embedding, so no change.
  phi_params = a.phi_init(jax.random.PRNGKey(3), x)
  np.testing.assert_array_equal(a.phi_apply(phi_params, x), b.phi_apply(phi_params, x))
  # Checkpoints written before the field rebuild the linear net.
  d = relu.to_dict()
  del d['embedding_relu']
  assert nets.EstimatorNetConfig.from_dict(d).embedding_relu is False


def test_turf_logs_which_cells_were_entered_and_ruined():
  env = envs.make('turf')
  env.reset()
  env.step(RIGHT)        # (9, 0) -> (9, 1), fresh grass
  env.step(UP)           # (9, 1) -> (8, 1): leaving (9, 1) ruins it
  env.step(DOWN)         # back onto (9, 1), ruined now: no new entry
  info = env.episode_info()
  assert info['ruined_grass'] == 1
  assert info['ruined_cells'] == '91'
  assert info['grass_entries'] == '90>91'
  env.reset()
  assert env.episode_info() == {'ruined_grass': 0, 'ruined_cells': '', 'grass_entries': ''}


def test_turf_leaks_counts_cells_and_moves_over_every_actor(tmp_path):
  from experiments import turf_leaks
  header = 'actor_steps,episode_return,ruined_grass,ruined_cells,grass_entries\n'
  for actor, rows in (('actor_0', ['100,1.0,1,19,18>19', '200,1.0,0,,']),
                      ('actor_1', ['150,0.0,2,19 29,18>19 19>29'])):
    (tmp_path / 'logs' / actor).mkdir(parents=True)
    (tmp_path / 'logs' / actor / 'logs.csv').write_text(header + '\n'.join(rows) + '\n')
  r = turf_leaks.leaks(str(tmp_path))
  assert (r['episodes'], r['ruined_total'], r['episodes_with_ruin']) == (3, 3, 2)
  assert r['goal_rate'] == 2 / 3 and r['actor_steps'] == 200
  assert r['cells'] == [('19', 2), ('29', 1)] and r['entries'][0] == ('18>19', 2)
  assert '(1,8)>(1,9) 2' in turf_leaks.markdown([r])


def test_turf_page_names_the_leaking_cells_per_run(tmp_path):
  from experiments import turf_page
  header = 'actor_steps,episode_return,ruined_grass,ruined_cells,grass_entries\n'
  run = tmp_path / 'runs' / 'impala_rac-b0.2-s0' / 'logs' / 'actor_0'
  run.mkdir(parents=True)
  (run / 'logs.csv').write_text(header + '120,0.0,1,19,18>19\n240,1.0,0,,\n')
  md = turf_page.leaks_markdown('tiny', 1, str(tmp_path))
  assert '| impala_rac-b0.2-s0 | 240 | 2 | 1 | 1 | 0.50 | (1,9) 1 | (1,8)>(1,9) 1 |' in md
  assert turf_page.leaks_markdown('tiny', 1, str(tmp_path / 'empty')) == ''


def test_evaluation_scores_phi_against_the_target_it_was_trained_on(tmp_path):
  from estimators import checkpoint, predict
  config = nets.EstimatorNetConfig(torso='mlp', mlp_sizes=(8,), embedding_size=4, phi_hidden_sizes=(8,))
  est = nets.make_estimators(config, 2)
  state = training.init_state(est, training.TrainConfig(train_phi=True), np.zeros(3, np.float32))
  path = str(tmp_path / 'e.ckpt')
  x, y = np.zeros((3, 3), np.float32), np.linspace(0, 1, 9, dtype=np.float32).reshape(3, 3)
  for name in ('one_minus_forward', 'reverse'):
    checkpoint.save(path, config, 2, (3,), 'float32', state.psi_params, state.phi_params,
                    {'train_config': {'phi_target': name}})
    p = predict.Predictor(checkpoint.load(path))
    assert p.phi_target_name == name
    want = 1 - p.psi(x, y) if name == 'one_minus_forward' else p.psi(y, x)
    np.testing.assert_allclose(p.phi_target(x, y), want, rtol=1e-6)
  assert not np.allclose(p.psi(y, x), 1 - p.psi(x, y), atol=1e-4)


def test_a_checkpoint_that_does_not_record_phis_target_refuses_only_the_target(tmp_path):
  """psi and phi still predict; phi's target, which it would have to guess, is one line."""
  from estimators import checkpoint, predict
  config = nets.EstimatorNetConfig(torso='mlp', mlp_sizes=(8,), embedding_size=4, phi_hidden_sizes=(8,))
  est = nets.make_estimators(config, 2)
  state = training.init_state(est, training.TrainConfig(train_phi=True), np.zeros(3, np.float32))
  x = np.zeros((3, 3), np.float32)
  for phi_params in (state.phi_params, None):
    path = str(tmp_path / 'e.ckpt')
    checkpoint.save(path, config, 2, (3,), 'float32', state.psi_params, phi_params, {})
    p = predict.Predictor(checkpoint.load(path))
    assert p.phi_target_name is None and p.psi(x, x).shape == (3,)
    if phi_params is not None:
      assert p.phi(x).shape == (3, 2)
    with pytest.raises(checkpoint.CheckpointError) as e:
      p.phi_target(x, x)
    line = str(e.value)
    assert '\n' not in line and 'lacks metadata train_config.phi_target' in line and path in line
    assert f'commit {predict.EARLIER_FORMAT_READER} is the last that reads it' in line

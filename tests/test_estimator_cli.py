"""The offline estimator CLIs: estimators.train / evaluate / predict, on tiny datasets collected
here with a random policy and stored with estimators.dataset.write_episodes."""
import dataclasses
import json
import os
import subprocess
import sys

import jax
import numpy as np
import pytest
from absl import flags

import envs
from estimators import checkpoint, cli, dataset, evaluate, predict, train, training
from estimators import networks as nets

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))


def _random_episodes(name, num, seed=0, **options):
  env = envs.make(name, seed=seed, **options)
  rng = np.random.default_rng(seed)
  n = env.action_spec().num_values
  for _ in range(num):
    ts = env.reset()
    obs, acts, rews, discs = [ts.observation], [], [], []
    while True:
      a = int(rng.integers(n))
      ts = env.step(a)
      obs.append(ts.observation)
      acts.append(a)
      rews.append(ts.reward)
      discs.append(ts.discount)
      if ts.last():
        break
    yield dataset.Episode(np.stack(obs), np.asarray(acts, np.int32),
                          np.asarray(rews, np.float32), np.asarray(discs, np.float32))


def _write(path, name, num, **options):
  env = envs.make(name, **options)
  dataset.write_episodes(str(path), _random_episodes(name, num, **options), name, options,
                         env.action_spec().num_values, env.observation_spec())
  return str(path)


@pytest.fixture(scope='module')
def data_dir(tmp_path_factory):
  root = tmp_path_factory.mktemp('estimator_cli')
  return {'root': root,
          'cartpole': _write(root / 'cartpole', 'cartpole', 200),
          'turf': _write(root / 'turf', 'turf', 200, max_steps=60)}


def _train_flags(*args):
  fv = flags.FlagValues()
  train.define_flags(fv)
  fv(['train', '--progress=false', '--eval_pairs=500'] + list(args))
  return train.options(fv)


@pytest.fixture(scope='module')
def turf_ckpt(data_dir):
  out = str(data_dir['root'] / 'turf.ckpt')
  meta = train.run(_train_flags(f'--dataset={data_dir["turf"]}', f'--out={out}', '--window=60',
                                '--num_pairs=1280', '--steps_per_call=5', '--phi',
                                '--phi_transitions=640'))
  assert meta['psi_steps'] == 10 and meta['phi_transitions'] == 640
  return out


def _cli(module, *args, timeout=120):
  env = dict(os.environ, JAX_PLATFORMS='cpu', TF_CPP_MIN_LOG_LEVEL='3')
  return subprocess.run([sys.executable, '-m', module] + list(args), cwd=REPO, env=env,
                        capture_output=True, text=True, timeout=timeout)


def _one_line_error(proc, contains):
  assert proc.returncode == 2, proc.stderr
  lines = [l for l in proc.stderr.strip().splitlines() if l.strip()]
  assert len(lines) == 1, proc.stderr
  assert lines[0].startswith('error: ') and contains in lines[0], lines[0]
  assert 'Traceback' not in proc.stderr


# --------------------------------------------------------------------------------------------- #
# train
# --------------------------------------------------------------------------------------------- #

def test_train_cli_cartpole_writes_a_checkpoint_that_rebuilds_the_net(data_dir):
  out = str(data_dir['root'] / 'cartpole.ckpt')
  proc = _cli('estimators.train', f'--dataset={data_dir["cartpole"]}', '--window=50',
              '--num_pairs=3000', '--batch_size=64', '--steps_per_call=16', '--phi',
              '--phi_transitions=1000', '--progress=false', f'--out={out}')
  assert proc.returncode == 0, proc.stderr
  assert 'saved' in proc.stdout
  ckpt = checkpoint.load(out)
  assert ckpt.network == nets.default_estimator_config('cartpole')
  assert ckpt.num_actions == 2 and ckpt.obs_shape == (4,) and ckpt.obs_dtype == 'float32'
  m = ckpt.metadata
  assert m['env_name'] == 'cartpole' and m['window'] == 50 and m['dataset_episodes'] == 200
  assert m['psi_steps'] == 47 and m['num_pairs'] == 47 * 64        # ceil(3000 / 64) steps
  assert m['phi_trained'] and m['phi_transitions'] == 16 * 64      # ceil(1000 / 64) steps
  for key in ('psi_loss', 'psi_accuracy', 'training_seconds', 'psi_pairs_per_s', 'env_options'):
    assert m[key] is not None, key
  # The stored config rebuilds the network; both heads run on dataset observations.
  episodes, _ = dataset.load_episodes(data_dir['cartpole'])
  x = episodes[0].observations
  psi = np.asarray(training.psi_prob(ckpt.estimators, ckpt.psi_params, x[:-1], x[1:]))
  phi = np.asarray(training.phi_prob(ckpt.estimators, ckpt.phi_params, x))
  assert psi.shape == (len(x) - 1,) and phi.shape == (len(x), 2)
  assert np.all((psi >= 0) & (psi <= 1)) and np.all((phi >= 0) & (phi <= 1))


def test_train_in_process_turf_checkpoint_and_overrides(data_dir, turf_ckpt):
  ckpt = checkpoint.load(turf_ckpt)
  assert ckpt.network == nets.default_estimator_config('turf')
  assert ckpt.obs_shape == (10, 10, 3) and ckpt.obs_dtype == 'uint8' and ckpt.num_actions == 4
  assert ckpt.metadata['network_preset'] == 'turf' and ckpt.phi_params is not None
  # Network overrides and psi-only training (no phi in the checkpoint).
  out = str(data_dir['root'] / 'turf_small.ckpt')
  train.run(_train_flags(f'--dataset={data_dir["turf"]}', f'--out={out}', '--num_pairs=256',
                         '--conv_channels=8,8', '--conv_strides=2,1', '--dropout=0.1',
                         '--steps_per_call=2'))
  small = checkpoint.load(out)
  assert small.network.conv_channels == (8, 8) and small.network.conv_strides == (2, 1)
  assert small.network.dropout == 0.1 and small.phi_params is None
  assert small.metadata['window'] == 120  # the turf recipe's default


def test_train_phi_only_from_a_psi_checkpoint(data_dir, turf_ckpt, tmp_path):
  out = str(tmp_path / 'phi_bce.ckpt')
  meta = train.run(_train_flags(f'--dataset={data_dir["turf"]}', f'--out={out}', '--window=60',
                                f'--psi_checkpoint={turf_ckpt}', '--phi', '--phi_loss=bce',
                                '--phi_transitions=256', '--steps_per_call=2'))
  old, new = checkpoint.load(turf_ckpt), checkpoint.load(out)
  for a, b in zip(jax.tree_util.tree_leaves(old.psi_params), jax.tree_util.tree_leaves(new.psi_params)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))   # psi taken as it was
  assert meta['psi_from'] == os.path.abspath(turf_ckpt) and meta['phi_loss_kind'] == 'bce'
  assert meta['num_pairs'] == old.metadata['num_pairs'] and meta['phi_transitions'] == 256
  with pytest.raises(train.TrainError, match='trains phi only'):
    train.run(_train_flags(f'--dataset={data_dir["turf"]}', f'--out={out}',
                           f'--psi_checkpoint={turf_ckpt}'))
  with pytest.raises(train.TrainError, match='holds another network'):
    train.run(_train_flags(f'--dataset={data_dir["turf"]}', f'--out={out}', '--phi',
                           f'--psi_checkpoint={turf_ckpt}', '--conv_channels=8,8'))


def test_mixture_starts_give_each_dataset_its_share_and_keep_every_transition():
  # Segment A: episodes of 3 and 5 observations (6 transitions); segment B: one of 3 (2).
  last = np.array([2, 2, 2, 7, 7, 7, 7, 7, 10, 10, 10], np.int32)
  transitions = {0, 1, 3, 4, 5, 6, 8, 9}
  starts = train.mixture_starts(last, [8, 11], [0.5, 0.5])
  assert set(starts.tolist()) == transitions
  counts = {k: int(np.sum(starts == k)) for k in transitions}
  assert [counts[k] for k in (0, 1, 3, 4, 5, 6)] == [1] * 6 and counts[8] == counts[9] == 3
  # Weights are normalised; the heavier segment is repeated.
  starts = train.mixture_starts(last, [8, 11], [1, 9])
  assert np.mean(starts >= 8) == pytest.approx(0.9, abs=0.01)
  assert set(starts.tolist()) == transitions


def test_train_phi_on_a_weighted_mixture_of_datasets(data_dir, turf_ckpt, tmp_path):
  stone = _write(tmp_path / 'stone', 'turf', 30, max_steps=20, start='stone')
  out = str(tmp_path / 'mix.ckpt')
  meta = train.run(_train_flags(f'--dataset={data_dir["turf"]}', f'--dataset={stone}',
                                '--dataset_weights=1,3', f'--out={out}', '--window=60',
                                f'--psi_checkpoint={turf_ckpt}', '--phi',
                                '--phi_transitions=256', '--steps_per_call=2'))
  first, second = meta['datasets']
  assert first['path'] == os.path.abspath(data_dir['turf']) and first['share'] == 0.25
  assert second['env_options'] == {'max_steps': 20, 'start': 'stone'}
  flat, _ = dataset.load_flat(stone)
  stone_transitions = len(flat.last) - len(flat.lengths)
  assert second['share'] == 0.75 and second['episodes'] == 30
  assert second['transitions'] == stone_transitions and meta['dataset_episodes'] == 230
  # The datasets' transitions, not the starts the mixture repeats.
  assert meta['dataset_transitions'] == first['transitions'] + stone_transitions
  assert checkpoint.load(out).phi_params is not None
  # Without weights the datasets are plainly concatenated.
  meta = train.run(_train_flags(f'--dataset={data_dir["turf"]}', f'--dataset={stone}',
                                f'--out={out}', '--window=60', '--num_pairs=256',
                                '--steps_per_call=2'))
  assert [d['share'] for d in meta['datasets']] == [None, None]
  with pytest.raises(train.TrainError, match='one weight per --dataset'):
    train.run(_train_flags(f'--dataset={data_dir["turf"]}', f'--dataset={stone}',
                           '--dataset_weights=1', f'--out={out}'))
  with pytest.raises(train.TrainError, match='finite and > 0'):
    train.run(_train_flags(f'--dataset={data_dir["turf"]}', f'--dataset={stone}',
                           '--dataset_weights=1,0', f'--out={out}'))
  with pytest.raises(train.TrainError, match='a mixture needs one environment'):
    train.run(_train_flags(f'--dataset={data_dir["turf"]}', f'--dataset={data_dir["cartpole"]}',
                           f'--out={out}'))


def test_train_errors_are_one_line_and_keep_an_existing_checkpoint(data_dir, tmp_path):
  out = tmp_path / 'keep.ckpt'
  out.write_bytes(b'previous checkpoint')
  proc = _cli('estimators.train', f'--dataset={tmp_path / "missing"}', f'--out={out}')
  _one_line_error(proc, 'no dataset at')
  assert out.read_bytes() == b'previous checkpoint'
  with pytest.raises(train.TrainError, match='--window must be >= 1'):
    train.run(_train_flags(f'--dataset={data_dir["cartpole"]}', f'--out={out}', '--window=0'))
  with pytest.raises(train.TrainError, match='--num_pairs'):
    train.run(_train_flags(f'--dataset={data_dir["cartpole"]}', f'--out={out}', '--num_pairs=0'))
  with pytest.raises(dataset.DatasetError):
    train.run(_train_flags(f'--dataset={tmp_path}', f'--out={out}'))
  assert out.read_bytes() == b'previous checkpoint'


# --------------------------------------------------------------------------------------------- #
# evaluate
# --------------------------------------------------------------------------------------------- #

def _eval_flags(*args):
  fv = flags.FlagValues()
  evaluate.define_flags(fv)
  fv(['evaluate'] + list(args))
  return cli.options_from_flags(evaluate.EvaluateOptions, fv)


def test_evaluate_turf_reports_metrics_and_writes_a_calibration_png(turf_ckpt, tmp_path):
  report = evaluate.run(_eval_flags(f'--checkpoint={turf_ckpt}', '--env=turf',
                                    '--transitions=300', f'--out={tmp_path}'))
  on_disk = json.load(open(tmp_path / 'report.json'))
  for key in ('labels', 'evaluated', 'psi', 'phi', 'psi_beta', 'phi_beta', 'calibration_png'):
    assert key in on_disk, key
  labels = on_disk['labels']
  assert labels['reversible'] + labels['irreversible'] + labels['unknown_dropped'] == 300
  assert on_disk['evaluated'] == 300 - labels['unknown_dropped']
  assert labels['irreversible'] > 0 and labels['reversible'] > 0
  for head in ('psi', 'phi'):
    for key in ('auroc', 'precision', 'recall', 'tp', 'fp', 'fn', 'tn', 'calibration'):
      assert key in on_disk[head], (head, key)
    assert 0.0 <= on_disk[head]['auroc'] <= 1.0
    assert sum(on_disk[head]['calibration']['counts']) == on_disk['evaluated']
  assert on_disk['psi_beta'] == 0.8 and on_disk['phi_beta'] == 0.2  # the paper's Turf values
  png = tmp_path / 'calibration.png'
  assert png.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
  assert report['report_json'] == str(tmp_path / 'report.json')


def test_evaluate_cartpole_draws_the_paper_pictures(data_dir, tmp_path):
  out = str(data_dir['root'] / 'cartpole.ckpt')
  if not os.path.exists(out):
    pytest.skip('needs the checkpoint of the cartpole train test')
  report = evaluate.run(_eval_flags(f'--checkpoint={out}', '--env=cartpole',
                                    '--transitions=400', f'--out={tmp_path}'))
  for name in ('cartpole_psi.png', 'cartpole_phi_action0.png', 'cartpole_phi_action1.png',
               'cartpole_phi_grid.png'):
    assert (tmp_path / name).read_bytes()[:4] == b'\x89PNG', name
  assert len(report['phi']['mean_per_action']) == 2
  assert 0.0 <= report['phi']['lean_agreement'] <= 1.0


def test_evaluate_errors(turf_ckpt, tmp_path):
  bad = tmp_path / 'corrupt.ckpt'
  bad.write_bytes(b'\x00not a pickle')
  proc = _cli('estimators.evaluate', f'--checkpoint={bad}', '--env=turf')
  _one_line_error(proc, 'corrupt')
  with pytest.raises(checkpoint.CheckpointError, match='not found'):
    evaluate.run(_eval_flags(f'--checkpoint={tmp_path / "none.ckpt"}', '--env=turf'))
  with pytest.raises(evaluate.EvaluateError, match='stochastic'):
    evaluate.run(_eval_flags(f'--checkpoint={turf_ckpt}', '--env=cliff', '--env_option=wind=0.3',
                             f'--out={tmp_path}'))
  with pytest.raises(predict.PredictError, match='checkpoint expects'):  # cliff obs != turf's
    evaluate.run(_eval_flags(f'--checkpoint={turf_ckpt}', '--env=cliff', '--transitions=5',
                             f'--out={tmp_path}'))


# --------------------------------------------------------------------------------------------- #
# predict
# --------------------------------------------------------------------------------------------- #

def test_predict_round_trip(turf_ckpt, tmp_path):
  ckpt = checkpoint.load(turf_ckpt)
  rng = np.random.default_rng(0)
  obs = rng.integers(0, 256, (37, 10, 10, 3)).astype(np.uint8)
  nxt = rng.integers(0, 256, (37, 10, 10, 3)).astype(np.uint8)
  np.savez(tmp_path / 'pairs.npz', obs=obs, next_obs=nxt)
  np.savez(tmp_path / 'states.npz', obs=obs)
  # batch=16: several padded chunks must give the same numbers as one direct call.
  predict.predict_file(turf_ckpt, str(tmp_path / 'pairs.npz'), str(tmp_path / 'psi.npz'), batch=16)
  predict.predict_file(turf_ckpt, str(tmp_path / 'states.npz'), str(tmp_path / 'phi.npz'), batch=16)
  psi = np.load(tmp_path / 'psi.npz')['psi']
  phi = np.load(tmp_path / 'phi.npz')['phi']
  np.testing.assert_allclose(psi, training.psi_prob(ckpt.estimators, ckpt.psi_params, obs, nxt),
                             rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(phi, training.phi_prob(ckpt.estimators, ckpt.phi_params, obs),
                             rtol=1e-5, atol=1e-6)
  assert psi.shape == (37,) and phi.shape == (37, 4)


def test_predict_errors(turf_ckpt, tmp_path):
  np.savez(tmp_path / 'nokey.npz', x=np.zeros((2, 10, 10, 3), np.uint8))
  np.savez(tmp_path / 'shape.npz', obs=np.zeros((2, 4), np.float32))
  np.savez(tmp_path / 'rows.npz', obs=np.zeros((2, 10, 10, 3), np.uint8),
           next_obs=np.zeros((3, 10, 10, 3), np.uint8))
  out = str(tmp_path / 'out.npz')
  with pytest.raises(predict.PredictError, match="no 'obs'"):
    predict.predict_file(turf_ckpt, str(tmp_path / 'nokey.npz'), out)
  with pytest.raises(predict.PredictError, match=r'expects \[N, 10, 10, 3\]'):
    predict.predict_file(turf_ckpt, str(tmp_path / 'shape.npz'), out)
  with pytest.raises(predict.PredictError, match='rows'):
    predict.predict_file(turf_ckpt, str(tmp_path / 'rows.npz'), out)
  with pytest.raises(predict.PredictError, match='not found'):
    predict.predict_file(turf_ckpt, str(tmp_path / 'absent.npz'), out)
  assert not os.path.exists(out)
  proc = _cli('estimators.predict', f'--checkpoint={tmp_path / "missing.ckpt"}',
              f'--input={tmp_path / "shape.npz"}', f'--output={out}')
  _one_line_error(proc, 'estimator checkpoint not found')


# --------------------------------------------------------------------------------------------- #
# The training path the CLI drives
# --------------------------------------------------------------------------------------------- #

@pytest.mark.parametrize('network', [
    nets.EstimatorNetConfig(torso='mlp', mlp_sizes=(8,), phi_hidden_sizes=(8,)),
    nets.EstimatorNetConfig(torso='conv', conv_channels=(4,), conv_strides=(1,), embedding_size=8,
                       phi_hidden_sizes=(8,)),
], ids=['mlp_scan', 'conv_loop'])
def test_steps_per_call_equals_single_steps_and_phases_train_their_own_net(network):
  """K steps in one call (lax.scan, or the Python loop used for conv nets on CPU) give the same
  parameters as K single-step calls; train_psi=False leaves psi untouched."""
  import dataclasses

  import jax
  rng = np.random.default_rng(0)
  shape = (6, 6, 3) if network.torso == 'conv' else (5,)
  obs = rng.integers(0, 256, (60,) + shape).astype(np.uint8)
  flat = dataset.FlatData(obs, rng.integers(0, 2, 60).astype(np.int32),
                          np.repeat([19, 39, 59], 20).astype(np.int32), np.array([20, 20, 20]))
  batch = train.flat_batch(flat)
  est = nets.make_estimators(network, 2)
  config = training.TrainConfig(window=5, batch_size=8, train_phi=True)
  state0 = training.init_state(est, config, obs[0])
  multi, m_multi = training.make_update(est, config, steps_per_call=3)(state0, batch)
  single = state0
  one = training.make_update(est, config, steps_per_call=1)
  losses_single = []
  for _ in range(3):
    single, m = one(single, batch)
    losses_single.append(float(m['psi_loss']))
  for a, b in zip(jax.tree_util.tree_leaves(multi), jax.tree_util.tree_leaves(single)):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-5, atol=1e-6)
  assert float(m_multi['psi_loss']) == pytest.approx(np.mean(losses_single), rel=1e-5)
  phi_only = dataclasses.replace(config, train_psi=False)
  after, m = training.make_update(est, phi_only, steps_per_call=2)(multi, batch)
  assert set(m) == {'phi_loss', 'update_skipped'}
  for a, b in zip(jax.tree_util.tree_leaves(after.psi_params), jax.tree_util.tree_leaves(multi.psi_params)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  assert any(not np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(
      jax.tree_util.tree_leaves(after.phi_params), jax.tree_util.tree_leaves(multi.phi_params)))


def test_a_stopped_phi_run_resumes_to_the_phi_of_an_uninterrupted_one(data_dir, tmp_path,
                                                                       monkeypatch):
  common = (f'--dataset={data_dir["cartpole"]}', '--window=50', '--num_pairs=640',
            '--batch_size=64', '--phi', '--phi_transitions=512', '--steps_per_call=1')
  whole = str(tmp_path / 'whole.ckpt')
  train.run(_train_flags(*common, f'--out={whole}'))
  out = str(tmp_path / 'resumed.ckpt')
  state_file = train.resume_path(out)
  saves = []
  original_save = train.PhiResume.save

  def save_then_stop(self, steps, *args):   # the session ends just after the save at step 2
    original_save(self, steps, *args)
    saves.append(steps)
    raise KeyboardInterrupt

  monkeypatch.setattr(train.PhiResume, 'save', save_then_stop)
  with pytest.raises(KeyboardInterrupt):
    train.run(_train_flags(*common, f'--out={out}', '--phi_resume_every=2'))
  assert saves == [2] and os.path.exists(state_file) and not os.path.exists(out)
  monkeypatch.setattr(train.PhiResume, 'save', original_save)
  # Another run's options: refused in one line, its state kept.
  with pytest.raises(train.TrainError, match=r'resume state of another run \(differs in '
                                             r'phi_learning_rate\)'):
    train.run(_train_flags(*common, f'--out={out}', '--phi_resume_every=2',
                           '--phi_learning_rate=0.5'))
  assert os.path.exists(state_file)
  meta = train.run(_train_flags(*common, f'--out={out}', '--phi_resume_every=2'))
  assert not os.path.exists(state_file) and meta['phi_transitions'] == 512
  a, b = checkpoint.load(whole), checkpoint.load(out)
  for x, y in zip(jax.tree_util.tree_leaves((a.psi_params, a.phi_params)),
                  jax.tree_util.tree_leaves((b.psi_params, b.phi_params))):
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
  # A truncated state file: one line, nothing trained over it.
  with open(state_file, 'wb') as f:
    f.write(b'\x80\x04trunc')
  with pytest.raises(train.TrainError, match='unreadable'):
    train.run(_train_flags(*common, f'--out={out}', '--phi_resume_every=2'))


def test_the_offline_turf_recipe_resolves_to_the_values_it_always_had():
  """The README's offline Turf recipe (`--window 120 --num_pairs 300000 --batch_size 128
  --phi`) laid over the Turf preset, pinned field by field: a default that moves under it fails
  here, not in an AUROC that a single training's seed already moves (BUILD_NOTES, "A psi's
  AUROC is one draw")."""
  args = _train_flags('--dataset=unused', '--out=unused.ckpt', '--window=120',
                      '--num_pairs=300000', '--batch_size=128', '--phi')
  preset, config, network, num_pairs, phi_transitions = train.apply_preset(args, 'turf')
  assert (preset, num_pairs, phi_transitions) == ('turf', 300_000, 100_000)
  assert dataclasses.asdict(config) == dict(
      dataclasses.asdict(config), window=120, batch_size=128, learning_rate=0.01,
      phi_learning_rate=0.01, weight_decay=0.0, pair_sampling='uniform', phi_loss='l2',
      phi_batch_size=128, exclude_terminal=False, phi_draw=0, phi_target='reverse', seed=0)
  assert (network.torso, network.conv_channels, network.conv_strides, network.conv_padding,
          network.embedding_size, network.embedding_relu, network.psi_fusion, network.dropout,
          network.phi_hidden_sizes) == ('conv', (32, 64, 64), (1, 1, 1), 'VALID', 64, False,
                                        'siamese', 0.0, (64,))
  assert (args.steps_per_call, args.eval_pairs) == (100, 500)

"""Every input of the estimator-side CLIs is checked before any work: impossible numbers, a
network preset that does not fit the dataset, NaN/inf observations, outputs that cannot be
written or would overwrite the input. Each refusal is one line on stderr, exit code 2, and
leaves what is on disk as it was."""
import os
import subprocess
import sys

import numpy as np
import pytest
from absl import flags

from envs import render
from estimators import cli, dataset, evaluate, predict, train
from estimators import networks as nets
from launch.runtime import collection as collect

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))


def _cli(module, *args, timeout=120):
  env = dict(os.environ, JAX_PLATFORMS='cpu', TF_CPP_MIN_LOG_LEVEL='3')
  return subprocess.run([sys.executable, '-m', module, *map(str, args)], cwd=REPO, env=env,
                        capture_output=True, text=True, timeout=timeout)


def _one_line_error(proc, *words):
  assert proc.returncode == 2, proc.stderr
  assert 'Traceback' not in proc.stderr, proc.stderr
  lines = [line for line in proc.stderr.splitlines() if line.strip()]
  assert len(lines) == 1, proc.stderr
  assert lines[0].startswith('error: '), lines[0]
  for word in words:
    assert word in lines[0], lines[0]
  return lines[0]


def _state(path):
  """Bytes and mtime of a file, to show a refused command left it alone."""
  return path.read_bytes(), os.stat(path).st_mtime_ns




@pytest.fixture(scope='module')
def cliff(tmp_path_factory):
  """A tiny cliff dataset (vector observations [48] float32) and a checkpoint trained on it
  with the cartpole preset: an MLP preset takes any vector observations."""
  root = tmp_path_factory.mktemp('cli_inputs')
  data = str(root / 'cliff')
  collect.run('cliff', 3, data, progress=False)
  ckpt = str(root / 'cliff.ckpt')
  meta = train.run(_train_flags(f'--dataset={data}', f'--out={ckpt}', '--network_preset=cartpole',
                                '--window=20', '--num_pairs=64', '--batch_size=32',
                                '--steps_per_call=2', '--phi', '--phi_transitions=32'))
  assert meta['network_preset'] == 'cartpole'
  return {'root': root, 'data': data, 'ckpt': ckpt}


# --------------------------------------------------------------------------------------------- #
# estimators.train
# --------------------------------------------------------------------------------------------- #

def _train_flags(*args):
  fv = flags.FlagValues()
  train.define_flags(fv)
  fv(['train', '--progress=false', '--eval_pairs=0'] + list(args))
  return train.options(fv)


def test_train_refuses_a_conv_preset_on_vector_observations(cliff, tmp_path):
  out = tmp_path / 'sokoban.ckpt'
  proc = _cli('estimators.train', f'--dataset={cliff["data"]}', '--network_preset=sokoban',
              f'--out={out}', '--progress=false')
  line = _one_line_error(proc, '--network_preset sokoban', 'image observations [H, W, C]',
                         "the dataset's observations are [48] float32")
  assert line == ('error: --network_preset sokoban has a conv torso and expects image '
                  "observations [H, W, C]; the dataset's observations are [48] float32")
  assert not out.exists()


def test_network_fit_rules():
  """Conv torsos need images big enough for their 3x3 VALID convs; MLPs take any numbers."""
  turf, sokoban = nets.default_estimator_config('turf'), nets.default_estimator_config('sokoban_paper')
  train.check_network_fits('turf', turf, (10, 10, 3), 'uint8', explicit=True)
  train.check_network_fits('sokoban', sokoban, (7, 7, 3), 'uint8', explicit=True)
  # SAME convs (the Sokoban preset) take any image.
  train.check_network_fits('sokoban', nets.default_estimator_config('sokoban'), (3, 3, 3), 'uint8',
                           explicit=True)
  train.check_network_fits('cliff', nets.default_estimator_config('cliff'), (10, 10, 3), 'uint8',
                           explicit=True)
  with pytest.raises(train.TrainError, match=r'images of at least 7x7 .*\[6, 6, 3\] uint8'):
    train.check_network_fits('turf', turf, (6, 6, 3), 'uint8', explicit=True)
  with pytest.raises(train.TrainError, match=r'images of at least 7x7 .*strides \[2, 1\]'):
    train.check_network_fits('sokoban', sokoban, (6, 9, 3), 'uint8', explicit=True)
  with pytest.raises(train.TrainError, match=r"preset 'turf' has a conv torso .*\[4\] float32"):
    train.check_network_fits('turf', turf, (4,), 'float32', explicit=False)


@pytest.mark.parametrize('flag,message', [
    ('--steps_per_call=0', '--steps_per_call must be >= 1, got 0'),
    ('--eval_pairs=-1', '--eval_pairs must be >= 0, got -1'),
    ('--phi_transitions=-5', '--phi_transitions must be >= 1, got -5'),
    ('--window=0', '--window must be >= 1, got 0'),
    ('--batch_size=-2', '--batch_size must be >= 1, got -2'),
    ('--learning_rate=0', '--learning_rate must be > 0, got 0.0'),
    ('--phi_learning_rate=nan', '--phi_learning_rate must be > 0, got nan'),
    ('--weight_decay=-0.1', '--weight_decay must be >= 0, got -0.1'),
    ('--dropout=1.5', r'--dropout must be in \[0, 1\), got 1.5'),
])
def test_train_refuses_impossible_numbers(cliff, tmp_path, flag, message):
  out = tmp_path / 'x.ckpt'
  with pytest.raises(train.TrainError, match=message):
    train.run(_train_flags(f'--dataset={cliff["data"]}', f'--out={out}', flag))
  assert os.listdir(tmp_path) == []


def test_train_refuses_an_unwritable_out(cliff, tmp_path, read_only_dir):
  (tmp_path / 'a_file').write_text('keep me')
  under_file = tmp_path / 'a_file' / 'x.ckpt'
  proc = _cli('estimators.train', f'--dataset={cliff["data"]}', f'--out={under_file}',
              '--progress=false')
  _one_line_error(proc, f'cannot write --out {under_file}', 'is a file, not a directory')
  with pytest.raises(train.TrainError, match=f'cannot create anything in {read_only_dir}'):
    train.run(_train_flags(f'--dataset={cliff["data"]}', f'--out={read_only_dir / "x.ckpt"}'))
  assert (tmp_path / 'a_file').read_text() == 'keep me'
  assert os.listdir(read_only_dir) == []


# --------------------------------------------------------------------------------------------- #
# estimators.predict
# --------------------------------------------------------------------------------------------- #

def _observations(n, seed=0):
  return np.random.default_rng(seed).normal(size=(n, 48)).astype(np.float32)


def test_predict_refuses_nan_and_inf_rows(cliff, tmp_path):
  obs = _observations(10)
  obs[[2, 5], 3] = np.nan
  obs[7, 0] = np.inf
  np.savez(tmp_path / 'in.npz', obs=obs, next_obs=_observations(10, seed=1))
  out = tmp_path / 'out.npz'
  proc = _cli('estimators.predict', f'--checkpoint={cliff["ckpt"]}',
              f'--input={tmp_path / "in.npz"}', f'--output={out}')
  _one_line_error(proc, 'obs has 3 of 10 rows with NaN or inf values (first: row 2)')
  assert not out.exists()
  finite = {'obs': _observations(10)}
  bad_next = np.full((10, 48), -np.inf, np.float32)   # the second array is checked as well
  np.savez(tmp_path / 'in2.npz', obs=finite['obs'], next_obs=bad_next)
  with pytest.raises(predict.PredictError, match='next_obs has 10 of 10 rows with NaN or inf'):
    predict.predict_file(cliff['ckpt'], str(tmp_path / 'in2.npz'), str(out))
  np.savez(tmp_path / 'ok.npz', **finite)             # finite rows still go through
  predict.predict_file(cliff['ckpt'], str(tmp_path / 'ok.npz'), str(out))
  with np.load(out) as result:
    assert result['phi'].shape == (10, 4) and np.all(np.isfinite(result['phi']))


def test_predict_refuses_to_overwrite_its_input(cliff, tmp_path):
  np.savez(tmp_path / 'in.npz', obs=_observations(4))
  before = _state(tmp_path / 'in.npz')
  (tmp_path / 'sub').mkdir()
  same = tmp_path / 'sub' / '..' / 'in.npz'            # another spelling of the input
  proc = _cli('estimators.predict', f'--checkpoint={cliff["ckpt"]}',
              f'--input={tmp_path / "in.npz"}', f'--output={same}')
  _one_line_error(proc, f'--output {same} is the --input file')
  os.symlink(tmp_path / 'in.npz', tmp_path / 'link.npz')   # or a link to it
  with pytest.raises(predict.PredictError, match='is the --input file'):
    predict.predict_file(cliff['ckpt'], str(tmp_path / 'in.npz'), str(tmp_path / 'link.npz'))
  assert _state(tmp_path / 'in.npz') == before


def test_predict_refuses_an_unwritable_output(cliff, tmp_path, read_only_dir):
  np.savez(tmp_path / 'in.npz', obs=_observations(4))
  (tmp_path / 'a_file').write_text('keep me')
  with pytest.raises(predict.PredictError, match='is a file, not a directory'):
    predict.predict_file(cliff['ckpt'], str(tmp_path / 'in.npz'),
                         str(tmp_path / 'a_file' / 'out.npz'))
  with pytest.raises(predict.PredictError, match=f'cannot create anything in {read_only_dir}'):
    predict.predict_file(cliff['ckpt'], str(tmp_path / 'in.npz'), str(read_only_dir / 'o.npz'))
  with pytest.raises(predict.PredictError, match='--batch must be >= 1, got 0'):
    predict.predict_file(cliff['ckpt'], str(tmp_path / 'in.npz'), str(tmp_path / 'o.npz'),
                         batch=0)
  assert sorted(os.listdir(tmp_path)) == ['a_file', 'in.npz', 'read_only']


# --------------------------------------------------------------------------------------------- #
# estimators.evaluate
# --------------------------------------------------------------------------------------------- #

def _eval_flags(*args):
  fv = flags.FlagValues()
  evaluate.define_flags(fv)
  fv(['evaluate'] + list(args))
  return cli.options_from_flags(evaluate.EvaluateOptions, fv)


def test_evaluate_refuses_a_beta_outside_0_1(cliff, tmp_path):
  proc = _cli('estimators.evaluate', f'--checkpoint={cliff["ckpt"]}', '--env=cliff', '--beta=7',
              f'--out={tmp_path / "eval"}')
  _one_line_error(proc, '--beta is a probability threshold and must lie in [0, 1], got 7.0')
  assert os.listdir(tmp_path) == []


@pytest.mark.parametrize('flag,message', [
    ('--phi_beta=-0.1', r'--phi_beta is a probability threshold .* got -0.1'),
    ('--beta=nan', r'--beta is a probability threshold .* got nan'),
    ('--transitions=-5', '--transitions must be >= 1, got -5'),
    ('--max_expansions=0', '--max_expansions must be >= 1, got 0'),
    ('--batch=0', '--batch must be >= 1, got 0'),
    ('--num_bins=0', '--num_bins must be >= 1, got 0'),
    ('--seed=-1', '--seed must be >= 0, got -1'),
])
def test_evaluate_refuses_impossible_numbers(cliff, tmp_path, flag, message):
  with pytest.raises(evaluate.EvaluateError, match=message):
    evaluate.run(_eval_flags(f'--checkpoint={cliff["ckpt"]}', '--env=cliff', flag,
                             f'--out={tmp_path / "eval"}'))
  assert os.listdir(tmp_path) == []


def test_evaluate_refuses_an_unwritable_out(cliff, tmp_path):
  (tmp_path / 'a_file').write_text('keep me')
  with pytest.raises(evaluate.EvaluateError, match='cannot write --out .* is a file'):
    evaluate.run(_eval_flags(f'--checkpoint={cliff["ckpt"]}', '--env=cliff',
                             f'--out={tmp_path / "a_file"}'))


# --------------------------------------------------------------------------------------------- #
# envs.render
# --------------------------------------------------------------------------------------------- #

def test_render_refuses_an_out_under_a_regular_file(tmp_path):
  (tmp_path / 'a_file').write_text('keep me')
  proc = _cli('envs.render', '--env=cliff', f'--out={tmp_path / "a_file" / "x.gif"}')
  _one_line_error(proc, f'cannot write --out {tmp_path / "a_file" / "x.gif"}',
                  'is a file, not a directory')
  assert sorted(os.listdir(tmp_path)) == ['a_file']


def test_render_refuses_an_out_in_a_read_only_directory(read_only_dir):
  proc = _cli('envs.render', '--env=cliff', f'--out={read_only_dir / "x.gif"}')
  _one_line_error(proc, f'cannot create anything in {read_only_dir}')
  assert os.listdir(read_only_dir) == []


@pytest.mark.parametrize('args,message', [
    (['--episodes=0'], '--episodes must be >= 1, got 0'),
    (['--max_frames=-1'], '--max_frames must be >= 1, got -1'),
    (['--seed=-3'], '--seed must be >= 0, got -3'),
    (['--fps=0'], '--fps must be > 0, got 0.0'),
    (['--fps=nan'], '--fps must be > 0, got nan'),
])
def test_render_refuses_impossible_numbers(tmp_path, capsys, args, message):
  out = tmp_path / 'x.gif'
  assert render.main(['--env=cliff', f'--out={out}'] + args) == 2
  err = capsys.readouterr().err
  assert err == f'error: {message}\n'
  assert os.listdir(tmp_path) == []


def test_render_writes_where_it_can(tmp_path):
  """The checks let a good --out through (a directory that does not exist yet)."""
  out = tmp_path / 'new' / 'x.gif'
  assert render.main(['--env=cliff', f'--out={out}', '--max_frames=3']) == 0
  assert out.exists() and (tmp_path / 'new' / 'x.png').exists()


def test_unwritable_reason_needs_no_existing_parent(tmp_path):
  assert dataset.unwritable_reason(str(tmp_path / 'a' / 'b' / 'c')) is None
  assert not (tmp_path / 'a').exists()   # probing creates nothing that stays


def test_typed_options_name_every_flag_with_its_default():
  import dataclasses
  fv = flags.FlagValues()
  evaluate.define_flags(fv)
  fv(['tool'])
  assert {f.name for f in dataclasses.fields(evaluate.EvaluateOptions)} == set(fv)
  assert cli.options_from_flags(evaluate.EvaluateOptions, fv) == evaluate.EvaluateOptions()


def test_train_flags_are_its_configs_fields():
  """estimators.train's flags: one per field of its sections, the field's help, the field's
  default unless the preset decides (None)."""
  from envs import cli as envs_cli
  fv = flags.FlagValues()
  train.define_flags(fv)
  fv(['tool'])
  field_flags = envs_cli.field_flags(train.sections())
  assert [ff.flag for ff in field_flags] == list(fv) == list(vars(train.options(fv)))
  for ff in field_flags:
    assert ff.help in fv[ff.flag].help   # after an enum's <choices>
    expected = None if ff.section == 'network' or ff.field in (
        'window', 'learning_rate', 'phi_learning_rate', 'weight_decay', 'pair_sampling',
        'num_pairs', 'phi_transitions') else ff.default
    assert getattr(train.options(fv), ff.flag) == expected, ff.flag

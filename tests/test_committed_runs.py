"""The runs and checkpoints committed under results/ load, evaluate and resume with this code.

One of each kind: a run exported with its learner checkpoint (RUN/csv of the Sokoban 30M
comparison) is restored into a run directory as `experiments` restores it, its policy is
evaluated, and `--resume` accepts it; every committed config.json is in today's format; the
committed estimator checkpoint loads and fits its environment. Nothing under results/ is
written: the export is copied first.
"""
import json
import os
import shutil
import subprocess
import sys

import pytest

from launch.runtime import lifecycle, run_config, run_export, run_state

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXPORT = os.path.join(ROOT, 'results', 'sokoban_30m', 'runs', 'impala-s0', 'csv')
PSI = os.path.join(ROOT, 'results', 'sokoban_30m', 'psi.ckpt')


def _committed_configs():
  out = subprocess.run(['git', 'ls-files', 'results'], cwd=ROOT, capture_output=True, text=True)
  return sorted(os.path.dirname(p) for p in out.stdout.split()
                if os.path.basename(p) == 'config.json')


@pytest.fixture(scope='module')
def restored(tmp_path_factory):
  run_dir = str(tmp_path_factory.mktemp('committed') / 'impala-s0')
  shutil.copytree(EXPORT, os.path.join(run_dir, run_export.EXPORT_SUBDIR))
  said = run_export.restore(run_dir)
  assert said and 'learner checkpoint at step' in said, said
  return run_dir


def test_every_committed_config_is_in_todays_format():
  dirs = _committed_configs()
  assert len(dirs) > 40, dirs
  for d in dirs:
    raw = run_config.read(os.path.join(ROOT, d))
    # An estimator checkpoint is named by its path on the machine the run was made on.
    cfg = run_config.from_dict(dict(raw, estimator_checkpoint=None), os.path.join(ROOT, d))
    assert cfg.estimator_network is not None, d
    assert cfg.env != 'sokoban' or cfg.policy_network is not None, d


def test_an_export_with_its_checkpoint_restores_and_its_policy_evaluates(restored):
  from experiments.analysis import policy_evaluation
  result = policy_evaluation.evaluate(restored, 'default', num_levels=2, policies=['greedy'])
  assert result['checkpoint_steps'] == run_export.checkpoint_steps(EXPORT)
  greedy = result['policies']['greedy']
  assert greedy['episodes'] == 2 and 0 <= greedy['solved_fraction'] <= 1


def test_a_restored_export_resumes_with_its_saved_configuration(restored):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3', JAX_PLATFORMS='cpu')
  shown = subprocess.run([sys.executable, '-m', 'launch.train', '--run_dir', restored, '--resume',
                          '--show_config'], cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                         capture_output=True, text=True, timeout=300)
  assert shown.returncode == 0, shown.stderr[-2000:]   # --resume's checks passed
  cfg = json.loads(shown.stdout[shown.stdout.index('{'):])
  cfg.pop('placement')
  saved = lifecycle.jsonable(run_config.load(restored))
  assert run_state.config_differences(saved, cfg) == [], shown.stdout


def test_the_committed_estimator_checkpoint_loads_and_fits_sokoban():
  import envs
  from estimators import checkpoint
  ckpt = checkpoint.load(PSI)
  env = envs.make('sokoban', seed=0)
  checkpoint.check_compatible(ckpt, env.observation_spec().shape, env.observation_spec().dtype,
                              env.action_spec().num_values, 'sokoban')
  assert ckpt.psi_params

"""The paper's settings are what a run gets when the user sets nothing (`--show_config`), and the
README's presets table is the one the code uses."""
import json
import os
import subprocess
import sys

from launch.program import presets

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _show_config(*args):
  out = subprocess.run([sys.executable, '-m', 'launch.train', '--show_config', *args], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
  assert out.returncode == 0, out.stderr[-2000:]
  return json.loads(out.stdout[out.stdout.index('{'):])


def test_sokoban_rae_gets_appendix_c3_values():
  cfg = _show_config('--env=sokoban', '--mode=rae')
  impala, est = cfg['impala'], cfg['estimator_train']
  assert (impala['learning_rate'], impala['adam_b1'], impala['adam_b2']) == (5e-4, 0.0, 0.99)
  assert impala['sequence_length'] == 20
  assert impala['max_gradient_norm'] == 1.0   # C.3's 40 lost learned levels (BUILD_NOTES.md)
  # Not C.3's batch 256 used once: batch 16, each sequence sampled 4 times (BUILD_NOTES.md).
  assert (impala['batch_size'], impala['samples_per_insert']) == (16, 4.0)
  assert impala['replay_size'] >= 2 * impala['batch_size']
  assert (est['window'], est['learning_rate'], est['weight_decay']) == (15, 5e-4, 1e-4)
  assert cfg['reversibility']['beta'] == 0.9
  assert cfg['network']['dropout'] == 0.1


def test_thresholds_follow_env_and_mode_and_flags_override():
  assert _show_config('--env=turf', '--mode=rac')['reversibility']['beta'] == 0.2
  rae = _show_config('--env=turf', '--mode=rae')['reversibility']
  assert (rae['beta'], rae['lam'], rae['reward_form']) == (0.8, 0.1, 'paper')
  cfg = _show_config('--env=sokoban', '--batch_size=32', '--beta=0.8')
  assert cfg['impala']['batch_size'] == 32 and cfg['reversibility']['beta'] == 0.8


def test_readme_presets_table_is_the_code_table():
  with open(os.path.join(ROOT, 'README.md')) as f:
    assert presets.markdown_table() in f.read()

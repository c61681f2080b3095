"""The paper's settings are what a run gets when the user sets nothing (`--show_config`), the
presets table of docs/configuration.md is the one the code uses, every preset builds every config
it feeds, and an environment is added with one module, one preset and one registry line
(docs/configuration.md, "Adding an environment")."""
import dataclasses
import json
import os
import subprocess
import sys

import dm_env
import numpy as np
import pytest
from dm_env import specs

from agents import networks as agent_networks
from envs import presets as env_presets
from estimators import networks as est_nets
from estimators import recipes
from launch.program import presets

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _show_config(*args):
  out = subprocess.run([sys.executable, '-m', 'launch.train', '--show_config', *args], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
  assert out.returncode == 0, out.stderr[-2000:]
  return json.loads(out.stdout[out.stdout.index('{'):])


def test_sokoban_rae_gets_the_fields_recipe_and_appendix_c3_estimators():
  cfg = _show_config('--env=sokoban', '--mode=rae', '--max_steps=5000000')
  impala, est = cfg['impala'], cfg['estimator_train']
  # The field's Boxoban recipe (BUILD_NOTES.md, "Sokoban recipe and networks"), its learning
  # rate falling to 0 over the run's own --max_steps.
  assert (impala['learning_rate'], impala['learning_rate_decay_steps']) == (4e-4, 5_000_000)
  assert (impala['adam_b1'], impala['adam_b2'], impala['adam_eps']) == (0.9, 0.99, 1.6e-7)
  assert (impala['vtrace_lambda'], impala['discount'], impala['baseline_cost']) == (0.5, 0.97, 0.25)
  assert (impala['max_gradient_norm'], impala['self_imitation_updates']) == (2.5e-4, 0)
  # Sized for 2 cores: 32 minibatches of 8 sequences, each sampled 4 times from a replay.
  assert (impala['batch_size'], impala['minibatches'], impala['sequence_length']) == (256, 32, 20)
  assert (impala['samples_per_insert'], impala['replay_size']) == (4.0, 1024)
  assert cfg['env_options']['max_steps_min'] == 30   # training limits drawn from [30, 120]
  assert (est['window'], est['learning_rate'], est['weight_decay']) == (15, 5e-4, 1e-4)
  assert cfg['reversibility']['beta'] == 0.9
  assert cfg['estimator_network']['dropout'] == 0.1
  given = _show_config('--env=sokoban', '--env_option=max_steps_min=0',
                       '--learning_rate_decay_steps=0')
  assert (given['env_options']['max_steps_min'], given['impala']['learning_rate_decay_steps']) == (0, 0)


def test_thresholds_follow_env_and_mode_and_flags_override():
  assert _show_config('--env=turf', '--mode=rac')['reversibility']['beta'] == 0.2
  rae = _show_config('--env=turf', '--mode=rae')['reversibility']
  assert (rae['beta'], rae['lam'], rae['reward_form']) == (0.8, 0.1, 'paper')
  cfg = _show_config('--env=sokoban', '--batch_size=32', '--beta=0.8')
  assert cfg['impala']['batch_size'] == 32 and cfg['reversibility']['beta'] == 0.8


def test_readme_presets_table_is_the_code_table():
  with open(os.path.join(ROOT, 'docs', 'configuration.md')) as f:
    assert env_presets.markdown_table() in f.read()


def test_every_preset_builds_every_config_it_feeds():
  for env, preset in env_presets.PRESETS.items():
    presets.impala(env)
    presets.precedence(env)
    for mode in env_presets.MODES:
      presets.reversibility(env, mode)
    presets.estimator_train(env, 'rac', 10**9)
    assert recipes.recipe(env).source == preset.sources['estimator_recipe']
    agent_networks.default_policy_config(env, preset.policy_network['torso'] == 'conv')
  for name in env_presets.network_names():
    est_nets.default_estimator_config(name)
  assert 'sokoban_paper' in env_presets.network_names()


def test_a_misspelt_field_is_named():
  with pytest.raises(ValueError, match='impala has no field.* batch_sise'):
    presets.impala('cartpole', {'batch_sise': 8})


def test_psi_evaluation_thresholds_are_the_runs_thresholds():
  from estimators import evaluate
  for env in env_presets.PRESETS:
    assert evaluate.default_betas(env, None, None) == (
        env_presets.thresholds(env, 'rae')['beta'], env_presets.thresholds(env, 'rac')['beta'])


class Toy(dm_env.Environment):
  """A two-state chain: action 1 moves right (irreversibly), the episode ends after max_steps."""

  def __init__(self, seed: int = 0, max_steps: int = 20):
    del seed
    self._max_steps, self._t, self._x = int(max_steps), 0, 0

  def reset(self):
    self._t, self._x = 0, 0
    return dm_env.restart(self._obs())

  def step(self, action):
    self._t += 1
    self._x = max(self._x, int(action))
    if self._t >= self._max_steps:
      return dm_env.termination(0.0, self._obs())
    return dm_env.transition(0.0, self._obs())

  def _obs(self):
    return np.array([self._x, self._t / self._max_steps], np.float32)

  def observation_spec(self):
    return specs.Array((2,), np.float32)

  def action_spec(self):
    return specs.DiscreteArray(2, dtype=np.int32)

  def render(self):
    return np.zeros((2, 2, 3), np.uint8)

  def episode_info(self):
    return {}


# The toy's preset: Cartpole's sections, a shorter window (its episodes are 20 steps).
TOY_PRESET = dataclasses.replace(
    env_presets.PRESETS['cartpole'],
    estimator_recipe={**env_presets.PRESETS['cartpole'].estimator_recipe, 'window': 10},
    sources={**env_presets.PRESETS['cartpole'].sources, 'estimator_recipe': 'toy'})


def _train_toy(with_preset: bool, *args):
  """launch.train in a fresh process with the toy registered (and given a preset)."""
  code = ('import sys\n'
          f'sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})\n'
          'import envs\nfrom envs import presets\nimport test_presets\n'
          "envs._REGISTRY['toy'] = ('test_presets', 'Toy')\n"
          + ("presets.PRESETS['toy'] = test_presets.TOY_PRESET\n" if with_preset else '')
          + 'from absl import app\nfrom launch import train\n'
          "sys.argv = ['train', *sys.argv[1:]]\napp.run(train.main)\n")
  return subprocess.run([sys.executable, '-c', code, '--env=toy', '--show_config', *args],
                        cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_an_environment_with_a_preset_resolves(tmp_path):
  out = _train_toy(True, '--mode=rae', f'--run_dir={tmp_path / "run"}')
  assert out.returncode == 0, out.stderr[-2000:]
  cfg = json.loads(out.stdout[out.stdout.index('{'):])
  assert cfg['env'] == 'toy' and cfg['estimator_train']['window'] == 10
  assert cfg['reversibility']['beta'] == TOY_PRESET.thresholds['rae']['beta']
  assert cfg['policy_network']['head_hidden'] == [64, 64]


def test_an_environment_without_a_preset_is_one_line(tmp_path):
  out = _train_toy(False, f'--run_dir={tmp_path / "run"}')
  assert out.returncode == 2
  errors = [l for l in out.stderr.splitlines() if l.startswith('error:')]
  assert errors == [errors[0]] and "environment 'toy' has no preset" in errors[0], out.stderr[-2000:]
  assert 'envs.presets.PRESETS' in errors[0]

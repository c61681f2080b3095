"""launch.runtime.run_config: the one loader of a run's config.json."""
import os

import pytest

from agents import networks as agent_networks
from agents.acting import ReversibilityConfig
from estimators import networks as est_nets
from estimators.training import TrainConfig
from launch.program.config import ImpalaConfig, PrecedenceConfig, RunConfig
from launch.runtime import lifecycle, run_config, run_state


def _write(run_dir, raw):
  os.makedirs(run_dir, exist_ok=True)
  run_state.write_json(os.path.join(run_dir, run_state.CONFIG), raw)
  return str(run_dir)


@pytest.mark.parametrize('cfg', [
    RunConfig(),
    RunConfig(env='sokoban', env_options={'max_steps': 20, 'levels': 'default'}, num_actors=3,
              reversibility=ReversibilityConfig(mode='rac', beta=0.4, lam=0.5, reward_form='hinge'),
              impala=ImpalaConfig(batch_size=16, samples_per_insert=4.0, replay_size=64,
                                  max_gradient_norm=1.0),
              precedence=PrecedenceConfig(env_steps_per_update=100),
              estimator_train=TrainConfig(window=15, weight_decay=1e-4, train_phi=True),
              estimator_network=est_nets.default_estimator_config('sokoban')),
    RunConfig(env='turf', estimator_network=est_nets.default_estimator_config('turf'), launch_type='local_mt'),
])
def test_what_a_launch_writes_loads_back_equal(tmp_path, cfg):
  run_dir = tmp_path / 'run'
  cfg = RunConfig(**{**{f: getattr(cfg, f) for f in cfg.__dataclass_fields__},
                     'run_dir': str(run_dir)})
  _write(run_dir, lifecycle.jsonable(cfg))
  loaded = run_config.load(str(run_dir))
  assert loaded == cfg
  assert isinstance(loaded.estimator_network, est_nets.EstimatorNetConfig) and isinstance(loaded.impala, ImpalaConfig)


def test_unknown_fields_are_ignored_and_missing_ones_take_defaults(tmp_path):
  raw = lifecycle.jsonable(RunConfig(run_dir=str(tmp_path / 'r')))
  raw['from_a_newer_version'] = 1
  raw['impala']['new_knob'] = 2
  del raw['precedence']
  del raw['impala']['entropy_cost']
  loaded = run_config.load(_write(tmp_path / 'r', raw))
  assert loaded.precedence == PrecedenceConfig()
  assert loaded.impala.entropy_cost == ImpalaConfig().entropy_cost


def test_a_moved_run_directory_names_itself(tmp_path):
  raw = lifecycle.jsonable(RunConfig(run_dir='/somewhere/else'))
  assert run_config.load(_write(tmp_path / 'moved', raw)).run_dir == str(tmp_path / 'moved')


def test_an_estimator_network_without_phi_encoder_is_one_line_naming_the_commit(tmp_path):
  raw = lifecycle.jsonable(RunConfig(run_dir=str(tmp_path / 'old')))
  del raw['estimator_network']['phi_encoder']
  with pytest.raises(run_config.ConfigError) as e:
    run_config.load(_write(tmp_path / 'old', raw))
  line = str(e.value)
  assert '\n' not in line and 'lacks phi_encoder' in line and 'earlier version' in line
  assert f'commit {est_nets.EARLIER_FORMAT_READER} is the last that reads it' in line


@pytest.mark.parametrize('change, lacks', [
    (lambda raw: raw.pop('policy_network'), 'policy_network'),
    (lambda raw: raw.update(network=raw.pop('estimator_network')), 'estimator_network'),
])
def test_a_config_of_an_earlier_version_is_one_line_naming_what_it_lacks(tmp_path, change, lacks):
  policy = agent_networks.default_policy_config('sokoban', True)
  raw = lifecycle.jsonable(RunConfig(env='sokoban', run_dir=str(tmp_path / 'old'),
                                     policy_network=policy))
  change(raw)
  with pytest.raises(run_config.ConfigError) as e:
    run_config.load(_write(tmp_path / 'old', raw))
  line = str(e.value)
  assert '\n' not in line and f'config.json lacks {lacks}: ' in line
  assert f'commit {run_config.EARLIER_FORMAT_READER} is the last that reads it' in line


@pytest.mark.parametrize('case, make, words', [
    ('missing', lambda d: str(d / 'nope'), 'run directory not found'),
    ('empty', lambda d: (os.makedirs(d / 'e'), str(d / 'e'))[1], 'holds no run'),
    ('not json', lambda d: (os.makedirs(d / 'j'), (d / 'j' / 'config.json').write_text('{'),
                            str(d / 'j'))[2], 'cannot read'),
    ('not a config', lambda d: _write(d / 'l', [1, 2]), 'not a run configuration'),
    ('bad value', lambda d: _write(d / 'b', {**lifecycle.jsonable(RunConfig()), 'num_actors': 0}),
     'not a usable run configuration'),
])
def test_errors_are_one_line_config_errors(tmp_path, case, make, words):
  with pytest.raises(run_config.ConfigError, match=words) as e:
    run_config.load(make(tmp_path))
  assert '\n' not in str(e.value), case
  assert isinstance(e.value, ValueError)

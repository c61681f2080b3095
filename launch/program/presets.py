"""An environment's preset (envs.presets) as the typed configs of a run, with what the user set
laid over it: every setting the user leaves out takes the preset's value (like rl-zoo's
hyperparameter files); `python -m launch.train --env E --mode M --show_config` prints the result.

`given` below is always {config field: value} for the fields the user set, so an error names
the field (a bad value: the config's own check; an unknown field: one line here).
"""
import dataclasses
from typing import Any, Mapping, Optional

from agents.acting import ReversibilityConfig
from envs import presets
from estimators import recipes
from estimators.training import TrainConfig
from launch.program.config import ImpalaConfig, PrecedenceConfig


def build(cls, section: str, preset: Mapping[str, Any], given: Optional[Mapping[str, Any]] = None):
  """`cls(**preset, **given)` (given wins); ValueError (one line) naming an unknown field."""
  values = {**preset, **(given or {})}
  known = {f.name for f in dataclasses.fields(cls) if f.init}
  unknown = sorted(set(values) - known)
  if unknown:
    raise ValueError(f'{section} has no field(s) {", ".join(unknown)} ({cls.__name__}: '
                     f'{", ".join(sorted(known))})')
  return cls(**values)


def impala(env: str, given: Optional[Mapping[str, Any]] = None,
           max_steps: int = 0) -> ImpalaConfig:
  """A decay over the run's budget (presets.RUN_MAX_STEPS) is over `max_steps` env steps."""
  preset = {k: max_steps if v == presets.RUN_MAX_STEPS else v
            for k, v in presets.get(env).impala.items()}
  return build(ImpalaConfig, 'impala', preset, given)


def kept(config, section: str, given: Optional[Mapping[str, Any]] = None):
  """A resumed run's `section`: its saved `config` with the fields given laid over it."""
  values = {f.name: getattr(config, f.name) for f in dataclasses.fields(config) if f.init}
  return build(type(config), section, values, given)


def precedence(env: str, given: Optional[Mapping[str, Any]] = None) -> PrecedenceConfig:
  return build(PrecedenceConfig, 'precedence', presets.get(env).precedence, given)


def reversibility(env: str, mode: str,
                  given: Optional[Mapping[str, Any]] = None) -> ReversibilityConfig:
  return build(ReversibilityConfig, 'reversibility',
               {'mode': mode, **presets.thresholds(env, mode)}, given)


def estimator_train(env: str, mode: str, episode_limit: int,
                    given: Optional[Mapping[str, Any]] = None) -> TrainConfig:
  """The psi/phi training of a run: the env's recipe, its window at most the episode limit (a
  pair is at most one episode apart), phi trained for RAC, phi's learning rate psi's."""
  recipe = recipes.recipe(env)
  given = dict(given or {})
  preset = dict(window=min(int(episode_limit), recipe.window), learning_rate=recipe.learning_rate,
                weight_decay=recipe.weight_decay, pair_sampling=recipe.pair_sampling,
                train_phi=(mode == 'rac'))
  given.setdefault('phi_learning_rate', given.get('learning_rate', recipe.learning_rate))
  return build(TrainConfig, 'estimator_train', preset, given)

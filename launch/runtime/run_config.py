"""The one loader of a run's RUN_DIR/config.json: the RunConfig it was launched with.

config.json is `lifecycle.jsonable(cfg)`: the RunConfig and its nested configs as plain JSON.
Loading rebuilds every nested dataclass from its type hints (lists back to tuples), ignores
fields this version does not know (a config.json from another version), takes a missing
field's default, and validates like a launch does. EstimatorNetConfig keeps its own from_dict
(configs written before `phi_encoder` existed). Errors are ConfigError, one line.
"""
import dataclasses
import os
import typing
from typing import Any, Dict

from launch.runtime import run_state


class ConfigError(ValueError):
  """A one-line reason a run's configuration cannot be read."""


def read(run_dir: str) -> Dict[str, Any]:
  """RUN_DIR/config.json as a dict (the RunConfig as launch.train wrote it)."""
  if not os.path.isdir(run_dir):
    raise ConfigError(f'run directory not found: {run_dir}')
  path = os.path.join(run_dir, run_state.CONFIG)
  try:
    raw = run_state.read_json(path)
  except (OSError, ValueError) as e:
    raise ConfigError(f'cannot read {path}: {e}') from None
  if raw is None:
    raise ConfigError(f'{run_dir} holds no run (no {run_state.CONFIG})')
  if not isinstance(raw, dict) or not isinstance(raw.get('env'), str):
    raise ConfigError(f'{path} is not a run configuration')
  return raw


def _build(kind, value):
  """`value` (decoded JSON) as type `kind`."""
  origin = typing.get_origin(kind)
  if origin is typing.Union:   # Optional[X]
    options = [a for a in typing.get_args(kind) if a is not type(None)]
    return None if value is None else _build(options[0], value)
  if dataclasses.is_dataclass(kind) and isinstance(value, dict):
    from_dict = getattr(kind, 'from_dict', None)
    if from_dict is not None:
      return from_dict(value)
    hints = typing.get_type_hints(kind)
    known = {f.name for f in dataclasses.fields(kind) if f.init}
    return kind(**{k: _build(hints[k], v) for k, v in value.items() if k in known})
  if origin is tuple and isinstance(value, list):
    args = typing.get_args(kind)
    inner = args[0] if args else Any
    return tuple(_build(inner, v) for v in value)
  return value


def with_legacy_fields(raw: Dict[str, Any]) -> Dict[str, Any]:
  """config.json's dict in today's names, with the fields its version did not write set to what
  that run used where today's default differs: the estimator network under its earlier name
  (`network`), the policy network (Sokoban's canvas was then 19x19)."""
  if 'network' in raw and 'estimator_network' not in raw:
    raw = {('estimator_network' if k == 'network' else k): v for k, v in raw.items()}
  if 'policy_network' in raw:
    return raw
  from agents import networks as agent_networks  # pylint: disable=g-import-not-at-top
  legacy = agent_networks.LEGACY_POLICY_DEFAULTS.get(raw.get('env'))
  return dict(raw, policy_network=dataclasses.asdict(legacy) if legacy else None)


def from_dict(raw: Dict[str, Any], run_dir: str = None):
  """A RunConfig from config.json's dict; `run_dir` (where it was read) replaces the recorded
  one, so a run directory that was moved still names itself."""
  from launch.program.config import RunConfig  # pylint: disable=g-import-not-at-top
  raw = with_legacy_fields(raw)
  if run_dir is not None:
    raw = dict(raw, run_dir=os.path.abspath(run_dir))
  try:
    return _build(RunConfig, raw)
  except (TypeError, ValueError, KeyError) as e:
    where = f'{run_dir}/{run_state.CONFIG}' if run_dir else run_state.CONFIG
    raise ConfigError(f'{where} is not a usable run configuration ({e})') from None


def load(run_dir: str):
  """The RunConfig of the run in `run_dir`; ConfigError (one line) when there is none."""
  return from_dict(read(run_dir), run_dir)

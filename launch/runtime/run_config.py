"""The one loader of a run's RUN_DIR/config.json: the RunConfig it was launched with.

config.json is `lifecycle.jsonable(cfg)`: the RunConfig and its nested configs as plain JSON.
Loading rebuilds every nested dataclass from its type hints (lists back to tuples), ignores
fields this version does not know, gives a field it lacks its default (a field comes with the
default that reproduces the runs made before it), and validates like a launch does.
EstimatorNetConfig keeps its own from_dict. A config.json without the two networks (`REQUIRED`)
was written by a version this one does not read: the error names what it lacks and the last
commit that reads it. Errors are ConfigError, one line.
"""
import dataclasses
import os
import typing
from typing import Any, Dict

from launch.runtime import run_state


class ConfigError(ValueError):
  """A one-line reason a run's configuration cannot be read."""


# Fields a config.json must hold: their defaults are not what the runs saved without them used.
REQUIRED = ('estimator_network', 'policy_network')
# The last commit that reads runs saved before launch.train recorded both networks (their
# estimator network under `network`, Sokoban's policy on the 19x19 canvas) or with the flags'
# earlier names in flags.json (scripts/convert_runs.py converts such a config.json).
EARLIER_FORMAT_READER = '89d045109f'


def earlier_format(what: str) -> str:
  """The one-line reason a run saved by an earlier version is not read: `what` it holds or lacks."""
  return (f'{what}: the run was saved by an earlier version; commit {EARLIER_FORMAT_READER} is '
          'the last that reads it')


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


def from_dict(raw: Dict[str, Any], run_dir: str = None):
  """A RunConfig from config.json's dict; `run_dir` (where it was read) replaces the recorded
  one, so a run directory that was moved still names itself."""
  from launch.program.config import RunConfig  # pylint: disable=g-import-not-at-top
  where = f'{run_dir}/{run_state.CONFIG}' if run_dir else run_state.CONFIG
  missing = [k for k in REQUIRED if k not in raw]
  if missing:
    raise ConfigError(earlier_format(f'{where} lacks {", ".join(missing)}'))
  if run_dir is not None:
    raw = dict(raw, run_dir=os.path.abspath(run_dir))
  try:
    return _build(RunConfig, raw)
  except (TypeError, ValueError, KeyError) as e:
    raise ConfigError(f'{where} is not a usable run configuration ({e})') from None


def load(run_dir: str):
  """The RunConfig of the run in `run_dir`; ConfigError (one line) when there is none."""
  return from_dict(read(run_dir), run_dir)

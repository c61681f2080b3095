"""Environments of the paper as `dm_env.Environment`s, built by name.

    env = envs.make('cartpole', seed=0, reward_free=True, max_steps=200)

Every environment class here takes `seed` plus its own keyword options, and provides:
  - `observation_spec()` / `action_spec()` (actions: int32 `DiscreteArray`),
  - `render() -> np.ndarray` (H x W x 3 uint8 RGB frame of the current state),
  - `episode_info() -> dict[str, float | str]`: per-episode metrics for loggers (e.g. ruined grass;
    a str value is for the logs only, e.g. Turf's ruined cells).
Deterministic discrete ones also provide `get_state()` (hashable, the *true* state) and
`set_state(state)`, which the exact reversibility oracle (`envs.oracle`) uses.

Some environments also have a vectorised batch (`envs.batch.BatchedEnvironment`) that steps K
copies with array operations, for actors that step many at once:

    batch = envs.make_batch('sokoban', seeds=[1, 2, 3], max_steps=50)   # if has_batch('sokoban')
"""
import importlib
import inspect
from typing import Any, Dict, Sequence, Tuple

import dm_env

# name -> (module, class). Imported lazily so that e.g. Sokoban's deps load only when used.
_REGISTRY: Dict[str, Tuple[str, str]] = {
    'cartpole': ('envs.cartpole', 'CartPole'),
    'turf': ('envs.turf', 'Turf'),
    'cliff': ('envs.cliff', 'WindyCliff'),
    'sokoban': ('envs.sokoban', 'Sokoban'),
}

# name -> (module, class) of a vectorised batch taking (seeds, **the same options).
_BATCH_REGISTRY: Dict[str, Tuple[str, str]] = {
    'sokoban': ('envs.sokoban_batch', 'SokobanBatch'),
}


class EnvError(ValueError):
  """Bad environment name or options."""


def names():
  return sorted(_REGISTRY)


def env_class(name: str):
  if name not in _REGISTRY:
    raise EnvError(f'unknown environment {name!r}; known: {", ".join(names())}')
  module, cls = _REGISTRY[name]
  return getattr(importlib.import_module(module), cls)


def parse_value(text: str) -> Any:
  """'true'/'false' -> bool, then int, then float, else the string itself."""
  text = text.strip()
  if text.lower() in ('true', 'false'):
    return text.lower() == 'true'
  for cast in (int, float):
    try:
      return cast(text)
    except ValueError:
      pass
  return text


def parse_options(items: Sequence[str], flag: str = '--env_option') -> Dict[str, Any]:
  """['wind=0.2', 'max_steps=50000'] -> {'wind': 0.2, 'max_steps': 50000} (command-line options)."""
  options = {}
  for item in items or ():
    key, sep, value = item.partition('=')
    if not sep or not key.strip():
      raise EnvError(f'{flag} expects key=value, got {item!r}')
    options[key.strip()] = parse_value(value)
  return options


def _check_options(name: str, cls, options: Dict[str, Any]) -> None:
  """EnvError naming every option that environment class `cls` does not take."""
  params = inspect.signature(cls.__init__).parameters
  accepted = [p for p in params if p not in ('self', 'seed')]
  unknown = sorted(set(options) - set(accepted))
  if unknown:
    raise EnvError(f'environment {name!r} has no option(s) {", ".join(unknown)}; '
                   f'its options are: {", ".join(accepted) or "(none)"}')


def make(name: str, seed: int = 0, **options: Any) -> dm_env.Environment:
  """Builds environment `name` with `options`; raises EnvError naming any bad option."""
  cls = env_class(name)
  _check_options(name, cls, options)
  try:
    return cls(seed=seed, **options)
  except (TypeError, ValueError) as e:
    if isinstance(e, EnvError):
      raise
    raise EnvError(f'environment {name!r}: {e}') from e


def has_batch(name: str) -> bool:
  """Whether environment `name` has a vectorised batch (`make_batch`)."""
  return name in _BATCH_REGISTRY


def make_batch(name: str, seeds: Sequence[int], **options: Any):
  """K = len(seeds) copies of environment `name` as one vectorised `envs.batch.BatchedEnvironment`,
  copy k behaving as `make(name, seed=seeds[k], **options)` (float32 rewards and discounts);
  EnvError for a name without one (see `has_batch`) or a bad option."""
  if name not in _BATCH_REGISTRY:
    env_class(name)  # an unknown name says so
    raise EnvError(f'environment {name!r} has no vectorised batch; environments with one: '
                   f'{", ".join(sorted(_BATCH_REGISTRY))}')
  module, cls_name = _BATCH_REGISTRY[name]
  cls = getattr(importlib.import_module(module), cls_name)
  _check_options(name, env_class(name), options)
  try:
    return cls(seeds, **options)
  except (TypeError, ValueError) as e:
    raise EnvError(f'environment {name!r}: {e}') from e

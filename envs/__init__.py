"""Environments of the paper as `dm_env.Environment`s, built by name.

    env = envs.make('cartpole', seed=0, reward_free=True, max_steps=200)

Every environment class here takes `seed` plus its own keyword options, and provides:
  - `observation_spec()` / `action_spec()` (actions: int32 `DiscreteArray`),
  - `render() -> np.ndarray` (H x W x 3 uint8 RGB frame of the current state),
  - `episode_info() -> dict[str, float]`: per-episode metrics for loggers (e.g. ruined grass).
Deterministic discrete ones also provide `get_state()` (hashable, the *true* state) and
`set_state(state)`, which the exact reversibility oracle (`envs.oracle`) uses.
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


def make(name: str, seed: int = 0, **options: Any) -> dm_env.Environment:
  """Builds environment `name` with `options`; raises EnvError naming any bad option."""
  cls = env_class(name)
  params = inspect.signature(cls.__init__).parameters
  accepted = [p for p in params if p not in ('self', 'seed')]
  unknown = sorted(set(options) - set(accepted))
  if unknown:
    raise EnvError(f'environment {name!r} has no option(s) {", ".join(unknown)}; '
                   f'its options are: {", ".join(accepted) or "(none)"}')
  try:
    return cls(seed=seed, **options)
  except (TypeError, ValueError) as e:
    if isinstance(e, EnvError):
      raise
    raise EnvError(f'environment {name!r}: {e}') from e

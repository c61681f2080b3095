"""Shared command-line plumbing of the estimator tools (train, evaluate, predict)."""
import dataclasses
import sys


def quiet_logs(flag_values):
  """Library INFO/WARNING chatter (jax backend probing, tfds deprecations) off, unless the user
  asked for a --verbosity (in `flag_values`, the entry module's FlagValues); keeps errors to
  one line."""
  from absl import logging

  from envs import quiet
  quiet.quiet_startup()   # gym's deprecation notice, jax's backend probing
  if not flag_values['verbosity'].present:
    logging.set_verbosity(logging.ERROR)


def unexpected_arguments(argv) -> bool:
  """Prints a one-line error for positional arguments (the tools take flags only)."""
  if len(argv) > 1:
    print(f'error: unexpected arguments: {" ".join(argv[1:])}', file=sys.stderr)
    return True
  return False


def options_from_flags(options_class, flag_values):
  """The typed options of a tool from its parsed flags: one field per flag of the same name
  (lists become tuples, so the options stay immutable)."""
  values = {}
  for field in dataclasses.fields(options_class):
    value = getattr(flag_values, field.name)
    values[field.name] = tuple(value) if isinstance(value, list) else value
  return options_class(**values)

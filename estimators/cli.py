"""Shared command-line plumbing of the estimator tools (train, evaluate, predict)."""
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
  """The typed options of a tool whose flags are its options dataclass's field flags
  (envs.cli.define_field_flags), from the parsed flags: lists become tuples, so the options
  stay immutable."""
  from envs import cli as envs_cli
  section = envs_cli.Section('', options_class)
  return options_class(**envs_cli.field_values(flag_values, (section,))[''])

"""absl flags for the tools whose `main(argv)` is also called in-process (tests, other tools):
each call defines the tool's flags on a fresh `flags.FlagValues`, so two tools that share a flag
name (--out, --seed) never clash, and nothing is defined when a module is imported.

    def define_flags(fv):
      flags.DEFINE_string('out', None, 'PNG to write.', flag_values=fv)

    def main(argv=None):
      args, positional = cli.parse(define_flags, argv, prog='python -m launch.plot',
                                   description=..., positional='RUN_DIR ...', required=('out',))

The spelling is absl's, as for launch.train: --name=value or --name value, booleans as --name,
--noname or --name=false, lists comma-separated, --flagfile. --help (or -h) prints the flags and
exits 0; a bad command line is one line on stderr, `error: ...`, and exit code 2.

The lowest layer, beside envs.paths, so the CLIs of every layer (envs.render included) share it.
"""
import sys
import types
from typing import Callable, List, Optional, Sequence, Tuple

from absl import flags

HELP = ('-h', '-help', '--help', '--helpshort', '--helpfull')


class UsageError(Exception):
  """A command line the tool refuses (its message is the one line printed)."""


def one_line(e: BaseException) -> str:
  """An exception as one line for an error message: its type and the first line of its message
  (TensorFlow's errors keep theirs in .message), at most 300 characters."""
  text = str(getattr(e, 'message', None) or e).strip().splitlines()
  return (f'{type(e).__name__}: {text[0]}' if text else type(e).__name__)[:300]


def fail(message: str) -> None:
  """Prints `error: message` on stderr and exits 2 (a bad command line)."""
  print(f'error: {message}', file=sys.stderr)
  sys.exit(2)


def _usage(prog: str, positional: str) -> str:
  return f'usage: {prog} [flags]' + (f' {positional}' if positional else '')


def parse(define: Callable[[flags.FlagValues], None], argv: Optional[Sequence[str]] = None, *,
          prog: str, description: str = '', positional: str = '',
          required: Sequence[str] = ()) -> Tuple[types.SimpleNamespace, List[str]]:
  """The flags that `define(fv)` defines, parsed from `argv` (default: sys.argv[1:]), as a
  namespace of values, and the positional arguments (only where `positional`, their usage,
  is given: a tool without one refuses them). `required` flags must be given a value."""
  argv = list(sys.argv[1:] if argv is None else argv)
  fv = flags.FlagValues()
  define(fv)
  head = argv[:argv.index('--')] if '--' in argv else argv
  if any(a in HELP for a in head):
    print(_usage(prog, positional) + (f'\n\n{description}' if description else ''))
    print('\nflags:' + fv.get_help(include_special_flags=False))
    sys.exit(0)
  try:
    rest = fv([prog] + argv)[1:]
  except (flags.Error, ValueError) as e:
    fail(str(e).splitlines()[0] if str(e) else type(e).__name__)
  if rest and not positional:
    fail(f'unexpected arguments: {" ".join(rest)}')
  missing = [name for name in required if fv[name].value is None]
  if missing:
    fail(f'--{missing[0]} is required')
  return types.SimpleNamespace(**fv.flag_values_dict()), rest

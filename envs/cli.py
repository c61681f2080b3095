"""absl flags for the tools whose `main(argv)` is also called in-process (tests, other tools):
each call defines the tool's flags on a fresh `flags.FlagValues`, so two tools that share a flag
name (--out, --seed) never clash, and nothing is defined when a module is imported.

    def define_flags(fv):
      flags.DEFINE_string('out', None, 'PNG to write.', flag_values=fv)

    def main(argv=None):
      args, positional = cli.parse(define_flags, argv, prog='python -m experiments.plot',
                                   description=..., positional='RUN_DIR ...', required=('out',))

The spelling is absl's, as for launch.train: --name=value or --name value, booleans as --name,
--noname or --name=false, lists comma-separated, --flagfile. --help (or -h) prints the flags and
exits 0; a bad command line is one line on stderr, `error: ...`, and exit code 2.

A tool whose settings are config dataclasses generates its flags from them (`Section`,
`field_flags`, `define_field_flags`, `field_values`): one flag per field, named after it (with
its section's prefix), its type the field's, its help the field's `metadata['help']`;
`metadata['choices']` makes it an enum, `metadata['repeat']` a flag given once per value of a
tuple field (other tuple fields are comma-separated lists).

The lowest layer, beside envs.paths, so the CLIs of every layer (envs.render included) share it.
"""
import dataclasses
import sys
import types
import typing
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from absl import flags

# The flags define_field_flags makes belong to the module that asked for them (absl skips this
# module when it looks for the module defining a flag).
flags.disclaim_key_flags()

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


def int_list(values: Sequence[str], flag: str) -> List[int]:
  """A list flag's values as integers; one that is not is the one-line usage error naming
  `--flag`."""
  try:
    return [int(v) for v in values]
  except ValueError:
    fail(f'--{flag} expects comma-separated integers, got {",".join(values)}')


def _usage(prog: str, positional: str) -> str:
  return f'usage: {prog} [flags]' + (f' {positional}' if positional else '')


def parse(define: Callable[[flags.FlagValues], None], argv: Optional[Sequence[str]] = None, *,
          prog: str, description: str = '', positional: str = '',
          required: Sequence[str] = (),
          flag_values: Optional[flags.FlagValues] = None,
          ) -> Tuple[types.SimpleNamespace, List[str]]:
  """The flags that `define(fv)` defines, parsed from `argv` (default: sys.argv[1:]), as a
  namespace of values, and the positional arguments (only where `positional`, their usage,
  is given: a tool without one refuses them). `required` flags must be given a value.
  `flag_values`: the FlagValues to define them on and parse into, for a tool that drives a
  library reading flags other modules defined there (bench.throughput: launch.train's run
  flags on the global FLAGS); default a fresh one."""
  argv = list(sys.argv[1:] if argv is None else argv)
  fv = flags.FlagValues() if flag_values is None else flag_values
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


def field(default: Any, help_text: str, **metadata: Any) -> Any:
  """A dataclass field with its flag's help (and `choices=`, `repeat=`, see above)."""
  return dataclasses.field(default=default, metadata={'help': help_text, **metadata})


@dataclasses.dataclass(frozen=True)
class Section:
  """A config dataclass the command line sets, or the fields of it that it sets."""
  name: str                       # where the tool keeps it ('' for the tool's own settings)
  cls: type
  prefix: str = ''                # of its flag names
  exclude: Tuple[str, ...] = ()   # fields the tool sets, not the user
  only: Tuple[str, ...] = ()      # when given: the fields the command line sets


@dataclasses.dataclass(frozen=True)
class FieldFlag:
  section: str
  field: str
  flag: str
  kind: type                      # int, float, bool or str (of each value, for a tuple field)
  help: str
  default: Any                    # the field's own default (dataclasses.MISSING: none)
  many: bool = False              # a tuple field
  repeat: bool = False            # ... given as one flag per value, not a comma-separated list
  choices: Tuple[str, ...] = ()


def _flag_kind(cls: type, name: str, hint: Any) -> Tuple[type, bool]:
  """(the type of the field's values, whether it holds a tuple of them)."""
  if typing.get_origin(hint) is typing.Union:   # Optional[X]
    hint = [a for a in typing.get_args(hint) if a is not type(None)][0]
  many = typing.get_origin(hint) is tuple
  kind = typing.get_args(hint)[0] if many else hint
  if kind not in (int, float, bool, str):
    raise TypeError(f'{cls.__name__}.{name}: a {hint} field has no flag type (exclude it from '
                    'its Section)')
  return kind, many


def field_flags(sections: Sequence[Section]) -> List[FieldFlag]:
  """Every flag a field of `sections` gets, in the order of the sections and their fields."""
  out = []
  for section in sections:
    hints = typing.get_type_hints(section.cls)
    for f in dataclasses.fields(section.cls):
      if not f.init or f.name in section.exclude or (section.only and f.name not in section.only):
        continue
      kind, many = _flag_kind(section.cls, f.name, hints[f.name])
      if not f.metadata.get('help'):
        raise TypeError(f"{section.cls.__name__}.{f.name} has no metadata['help'] (its flag's help)")
      default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
      out.append(FieldFlag(section.name, f.name, section.prefix + f.name, kind, f.metadata['help'],
                           default, many, bool(f.metadata.get('repeat')),
                           tuple(f.metadata.get('choices', ()))))
  return out


_DEFINE = {int: flags.DEFINE_integer, float: flags.DEFINE_float, bool: flags.DEFINE_bool,
           str: flags.DEFINE_string}


def define_field_flags(flag_values: flags.FlagValues, sections: Sequence[Section],
                       default: Callable[[FieldFlag], Any] = lambda ff: ff.default,
                       note: Callable[[FieldFlag], str] = lambda ff: '') -> None:
  """Defines one flag per field of `sections` on `flag_values`, as flags of the module calling
  this; its default `default(ff)` (the field's own unless told), its help the field's and
  `note(ff)` after it."""
  for ff in field_flags(sections):
    value, text = default(ff), ff.help + note(ff)
    if isinstance(value, tuple):
      value = list(value)
    if ff.repeat:
      flags.DEFINE_multi_string(ff.flag, value, text, flag_values=flag_values)
    elif ff.many:
      flags.DEFINE_list(ff.flag, value, text, flag_values=flag_values)
    elif ff.choices:
      flags.DEFINE_enum(ff.flag, value, list(ff.choices), text, flag_values=flag_values)
    else:
      _DEFINE[ff.kind](ff.flag, value, text, flag_values=flag_values)


def field_values(flag_values: flags.FlagValues,
                 sections: Sequence[Section]) -> Dict[str, Dict[str, Any]]:
  """{section: {field: value}} of every field flag of `sections`, None where the flag has no
  value; a list's values as a tuple (of strings: the tool reads their numbers)."""
  out: Dict[str, Dict[str, Any]] = {s.name: {} for s in sections}
  for ff in field_flags(sections):
    value = flag_values[ff.flag].value
    out[ff.section][ff.field] = tuple(value) if isinstance(value, list) else value
  return out

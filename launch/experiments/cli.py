"""Command lines of the stand-alone experiment modules (sokoban_gate, single_process, rac_probe,
...): argparse, as below launch/'s entry modules, with flags spelled the way absl spells them
(those modules took absl flags before they moved here), so their documented commands still
parse: booleans as --name, --noname or --name=false, lists comma-separated."""
import argparse
from typing import List, Optional

_TRUE, _FALSE = ('true', 't', '1', 'yes', 'y'), ('false', 'f', '0', 'no', 'n')


def _bool(text: str) -> bool:
  if text.lower() in _TRUE:
    return True
  if text.lower() in _FALSE:
    return False
  raise argparse.ArgumentTypeError(f'expected true or false, got {text!r}')


def add_bool(parser: argparse.ArgumentParser, name: str, default: Optional[bool],
             help: str) -> None:  # pylint: disable=redefined-builtin
  """--name (true), --noname (false) and --name=true|false, into `name`."""
  parser.add_argument(f'--{name}', dest=name, nargs='?', const=True, default=default,
                      type=_bool, help=help)
  parser.add_argument(f'--no{name}', dest=name, action='store_false', help=argparse.SUPPRESS)


def comma_list(text: str) -> List[str]:
  """absl's DEFINE_list: 'a,b,c' -> ['a', 'b', 'c'] ('' -> [])."""
  return [part.strip() for part in text.split(',') if part.strip()]

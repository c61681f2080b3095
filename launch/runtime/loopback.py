"""Loopback-only local launches (and own-address cluster nodes): builds the bind() shim in
launch/runtime/native/ and names it for LD_PRELOAD (see bind_loopback.c for why). Built once per source version with the system C
compiler into ~/.cache/noturningback/; without a compiler the run goes on, listening on all
interfaces, and says so."""
import hashlib
import os
import shutil
import subprocess
from typing import Optional, Tuple

from envs import paths


class _BuildFailed(Exception):
  """The compiler's last error line."""


SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'native', 'bind_loopback.c')


def shim_path() -> Tuple[Optional[str], str]:
  """(path of the built shim, '') or (None, why it could not be built)."""
  with open(SOURCE, 'rb') as f:
    digest = hashlib.sha256(f.read()).hexdigest()[:16]
  cache = os.path.join(os.environ.get('XDG_CACHE_HOME', os.path.expanduser('~/.cache')),
                       'noturningback')
  path = os.path.join(cache, f'bind_loopback-{digest}.so')
  if os.path.exists(path):
    return path, ''
  cc = os.environ.get('CC') or shutil.which('cc') or shutil.which('gcc')
  if cc is None:
    return None, 'no C compiler (cc) to build the loopback shim'
  try:
    os.makedirs(cache, exist_ok=True)
    with paths.atomic_path(path) as tmp:
      r = subprocess.run([cc, '-shared', '-fPIC', '-O2', '-o', tmp, SOURCE, '-ldl'],
                         capture_output=True, text=True)
      if r.returncode != 0:
        raise _BuildFailed((r.stderr.strip().splitlines() or ['?'])[-1])
  except _BuildFailed as e:
    return None, f'building the loopback shim failed: {e}'
  except OSError as e:
    return None, f'cannot build the loopback shim in {cache}: {e.strerror or e}'
  return path, ''


BIND_ADDRESS_ENV = 'NTB_BIND_ADDRESS'   # read by the shim: the address wildcard binds go to


def preload_env(env: dict, address: Optional[str] = None) -> Tuple[dict, str]:
  """`env` with the shim added to LD_PRELOAD, and a warning ('' when it is in place). Wildcard
  binds go to `address` (an IP literal) when given, else to loopback."""
  env = {k: v for k, v in env.items() if k != BIND_ADDRESS_ENV}
  if address:
    env[BIND_ADDRESS_ENV] = address
  path, why = shim_path()
  if path is None:
    return env, f'warning: nodes will listen on all interfaces ({why})'
  preload = ' '.join(p for p in (path, env.get('LD_PRELOAD', '')) if p)
  return dict(env, LD_PRELOAD=preload), ''

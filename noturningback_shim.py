"""Compatibility shim: lets Acme 0.4.0 run on jax 0.4.13.

Acme 0.4.0 was written against an older jax and touches names that jax 0.4.13 removed
(`xla.Device`, `xla.DeviceArray`, `pxla.ShardedDeviceArray`). We alias them to their modern
equivalents *before* the first `import acme`.

Launchpad's local_mp workers unpickle Acme objects before any project code runs, so this must
happen at interpreter start in every process: `scripts/setup_venv.sh` drops a `.pth` file into the
venv that imports this module. To keep plain interpreter start cheap (pip, tools), we do not
import jax here; we install a meta-path hook that applies the aliases the moment `acme` is
first imported.
"""
import importlib.abc
import sys

_applied = False


def apply() -> None:
  """Applies the jax aliases Acme 0.4.0 expects. Idempotent."""
  global _applied
  if _applied:
    return
  _applied = True
  import jax
  from jax.interpreters import pxla, xla
  # Assigned unconditionally: jax 0.4.13 still exports a deprecated `ShardedDeviceArray` class
  # that real arrays are not instances of, which makes Acme's `get_variables` fail.
  xla.Device = jax.Device
  xla.DeviceArray = jax.Array
  pxla.ShardedDeviceArray = jax.Array
  # jax >= 0.4.2x no longer exports `jax.xla`, where Acme 0.4.0 reads `jax.xla.Device`.
  if 'xla' not in vars(jax):
    jax.xla = xla
  import jax.numpy as jnp
  if 'DeviceArray' not in vars(jnp):   # and `jnp.DeviceArray`
    jnp.DeviceArray = jax.Array


class _PatchBeforeAcme(importlib.abc.MetaPathFinder):

  def find_spec(self, fullname, path=None, target=None):
    if fullname == 'acme' and not _applied:
      apply()
    return None  # Let the regular finders import the module.


if not any(isinstance(f, _PatchBeforeAcme) for f in sys.meta_path):
  sys.meta_path.insert(0, _PatchBeforeAcme())

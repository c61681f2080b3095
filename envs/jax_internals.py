"""The private parts of jax this project uses, in one place, written against jax and jaxlib
0.4.13 (constraints.txt, requirements.lock). tests/test_private_apis.py checks that the installed
jax is that version and that each part below is still there as used; a jax upgrade starts there.

  - `jax._src.xla_bridge._backends`: the backends this process has started (XLA has read
    XLA_FLAGS once they have), which agents.impala_step reads before it asks for host devices;
  - the logger `jax._src.xla_bridge`, whose records about backends it could not find
    envs.quiet filters at a command's start.

jax itself is imported only when `backends_started` is called: importing this module costs
nothing."""
JAX_VERSION = '0.4.13'
XLA_BRIDGE_MODULE = 'jax._src.xla_bridge'
# The logger of XLA_BRIDGE_MODULE (logging.getLogger(__name__) there).
XLA_BRIDGE_LOGGER = XLA_BRIDGE_MODULE


def backends_started() -> bool:
  """Whether this process's jax has created its backends (XLA has read XLA_FLAGS)."""
  from jax._src import xla_bridge
  return bool(getattr(xla_bridge, '_backends', None))

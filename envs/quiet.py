"""What a newcomer's terminal does not need at start-up: Gym's deprecation notice (gym prints it
on stderr when first imported, gym_notices) and jax's lines about the CUDA, ROCm and TPU
backends it could not find (absl-formatted records of jax's xla_bridge, envs.jax_internals). Entry modules call
`quiet_startup()` before anything imports gym or uses jax; node processes do not, so their logs
keep the lines. Other messages of both libraries pass."""
import contextlib
import io
import logging

from envs import jax_internals

_BACKEND_PROBING = ('Unable to initialize backend', 'No GPU/TPU found')


class _NoBackendProbing(logging.Filter):

  def filter(self, record):
    return not str(record.msg).startswith(_BACKEND_PROBING)


_FILTER = _NoBackendProbing()


def quiet_startup() -> None:
  """Idempotent: gym imported once with stderr muted; jax's backend probing lines filtered."""
  logger = logging.getLogger(jax_internals.XLA_BRIDGE_LOGGER)
  if _FILTER not in logger.filters:
    logger.addFilter(_FILTER)
  with contextlib.redirect_stderr(io.StringIO()):
    import gym  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import

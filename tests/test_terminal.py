"""A newcomer's terminal: the CLIs keep Gym's deprecation notice and jax's lines about backends
it could not find (CUDA, ROCm, TPU) off it (envs.quiet); other output is unchanged."""
import os
import subprocess
import sys

import pytest

from envs import jax_internals, quiet

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))
NOISE = ('Gym has been unmaintained', 'Unable to initialize backend', 'No GPU/TPU found')


def _run(code_or_module, *args, module=True):
  # As in a user's shell: conftest's JAX_PLATFORMS=cpu would skip the probing of CUDA/ROCm/TPU.
  env = {k: v for k, v in os.environ.items() if k != 'JAX_PLATFORMS'}
  env['PYTHONPATH'] = ROOT + os.pathsep + os.environ.get('PYTHONPATH', '')
  cmd = [sys.executable] + (['-m', code_or_module] if module else ['-c', code_or_module]) + list(args)
  return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


# jax's backend lines are INFO/WARNING records: shown at absl's INFO verbosity (launch.train's).
PROBE = ('import sys\n'
         'from absl import logging as absl_logging\n'
         'absl_logging.use_absl_handler()\n'
         'absl_logging.set_verbosity(absl_logging.INFO)\n'
         'if sys.argv[1] == "quiet":\n'
         '  from envs import quiet; quiet.quiet_startup()\n'
         'import jax.numpy as jnp, gym\n'
         'print(float(jnp.ones(3).sum()))\n')


def test_the_noise_is_there_without_it_and_gone_with_it():
  loud = _run(PROBE, 'loud', module=False)
  assert loud.returncode == 0, loud.stderr[-2000:]
  assert all(n in loud.stderr for n in NOISE), loud.stderr[-2000:]   # else this test tests nothing
  calm = _run(PROBE, 'quiet', module=False)
  assert calm.returncode == 0 and calm.stdout.strip() == '3.0', calm.stderr[-2000:]
  assert not [n for n in NOISE if n in calm.stderr], calm.stderr[-2000:]


@pytest.mark.parametrize('env', ['cartpole', 'sokoban'])
def test_train_prints_no_library_noise(env):
  r = _run('launch.train', '--show_config', '--env', env)
  assert r.returncode == 0, r.stderr[-2000:]
  assert '"env": "%s"' % env in r.stdout
  assert not [n for n in NOISE if n in r.stderr], r.stderr[-2000:]


def test_other_jax_warnings_pass():
  import logging
  record = logging.LogRecord(jax_internals.XLA_BRIDGE_LOGGER, logging.WARNING, __file__, 1,
                             'An NVIDIA GPU may be present on this machine', None, None)
  quiet.quiet_startup()
  assert all(f.filter(record) for f in logging.getLogger(jax_internals.XLA_BRIDGE_LOGGER).filters)

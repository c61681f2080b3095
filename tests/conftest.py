import dataclasses
import os
import shutil
import subprocess
import sys

import pytest

# Tests run from the repo root; make the project importable even without the editable install.
sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), '..')))
os.environ.setdefault('JAX_PLATFORMS', 'cpu')


def pytest_configure(config):
  # The default suite checks behaviour, not speed: XLA's optimisation passes cost it about 40% of
  # its CPU time in compiling, so they are off for it (and for the processes its tests start).
  # The slow tests (learning runs, benchmarks) keep them: those run the compiled code for long.
  if config.getoption('markexpr') == 'not slow':
    os.environ.setdefault('JAX_DISABLE_MOST_OPTIMIZATIONS', '1')


def _can_create_in(path) -> bool:
  try:
    os.mkdir(os.path.join(path, 'probe'))
  except OSError:
    return False
  os.rmdir(os.path.join(path, 'probe'))
  return True


@pytest.fixture
def read_only_dir(tmp_path):
  """A directory nothing can be created in. Root ignores permission bits, so there it is made
  immutable (chattr +i) instead; skipped where neither works."""
  path = tmp_path / 'read_only'
  path.mkdir()
  path.chmod(0o555)
  immutable = False
  if _can_create_in(path) and shutil.which('chattr'):
    immutable = subprocess.run(['chattr', '+i', str(path)], capture_output=True).returncode == 0
  if _can_create_in(path):
    path.chmod(0o755)
    pytest.skip('cannot make a read-only directory here (root, no chattr +i)')
  yield path
  if immutable:
    subprocess.run(['chattr', '-i', str(path)], check=True)
  path.chmod(0o755)


@pytest.fixture
def small_tmpfs(tmp_path):
  """A factory: mount(size) mounts a tmpfs of `size` (mount's syntax: '1m') under tmp_path and
  returns its path, unmounted when the test ends; a disk that fills up for real. Skipped unless
  root, who alone may mount."""
  if os.geteuid() != 0:
    pytest.skip('mounting a tmpfs needs root')
  mounts = []

  def mount(size):
    path = tmp_path / f'tmpfs{len(mounts)}'
    path.mkdir()
    subprocess.run(['mount', '-t', 'tmpfs', '-o', f'size={size}', 'tmpfs', str(path)], check=True)
    mounts.append(path)
    return path
  yield mount
  for path in mounts:
    subprocess.run(['umount', '-l', str(path)], check=False)


@pytest.fixture
def untrained_estimator_checkpoint(tmp_path):
  """A factory: make(env, obs_shape, dtype, num_actions=4) writes a real, untrained psi+phi
  checkpoint of `env`'s default network under tmp_path and returns its path."""
  def make(env, obs_shape, dtype, num_actions=4):
    import jax
    import numpy as np

    from estimators import checkpoint, training
    from estimators import networks as nets
    config = nets.default_estimator_config(env)
    est = nets.make_estimators(config, num_actions)
    x = np.zeros((2, *obs_shape), dtype)
    path = str(tmp_path / f'{env}.ckpt')
    # What a training records of itself; phi's target is read from it (estimators.predict).
    metadata = {'train_config': dataclasses.asdict(training.TrainConfig())}
    checkpoint.save(path, config, num_actions, tuple(obs_shape), dtype,
                    est.psi_init(jax.random.PRNGKey(0), x), est.phi_init(jax.random.PRNGKey(1), x),
                    metadata)
    return path
  return make

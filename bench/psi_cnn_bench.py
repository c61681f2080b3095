"""psi CNN training speed: our jitted Haiku step against the same network in PyTorch, same machine.

One training step = psi forward on a batch of pairs (both observations through the Siamese
encoder), BCE, backward, Adam. Batch 128 pairs of uint8 images (the paper's batch), fixed data,
so only the network step is timed (the sampler and gathers are timed by `bench.estimators_bench`).

JAX forms compared in one invocation, each in its own process (XLA flags are read at start-up):
  production the network of `estimators.networks`: the shared encoder called once per observation
  one_call   one encoder call on both observations stacked on the batch axis
  nchw       one call, channels-first convolutions
  + the production network under each XLA:CPU flag in --xla_flag_sets
PyTorch: the same network and optimiser, run by --torch_python (an interpreter with torch; the
project's venv does not ship it) with the same thread count. Writes --out (JSON).

  python -m bench.psi_cnn_bench --torch_python /path/to/python-with-torch \
      [--other_jax_python /path/to/python-with-newer-jax]
"""
import json
import os
import subprocess
import sys
import time

import numpy as np

BATCH = 128
NETS = ('turf', 'sokoban')
DEFAULT_FLAG_SETS = ('--xla_cpu_enable_fast_math=true',
                     '--xla_cpu_enable_mlir_tiling_and_fusion=true',
                     '--xla_cpu_use_xla_runtime=true')


def _obs_shape(net):
  return (10, 10, 3)  # Turf and Sokoban observations are both 10x10 RGB, one pixel per cell


def _time_steps(step, state, seconds):
  import jax
  state = step(*state)
  jax.block_until_ready(state)
  n, t0 = 0, time.perf_counter()
  while time.perf_counter() - t0 < seconds:
    state = step(*state)
    n += 1
  jax.block_until_ready(state)
  return n * BATCH / (time.perf_counter() - t0)


def jax_worker(net: str, form: str, seconds: float) -> float:
  """Pairs/s of one jitted Haiku psi training step (runs in a fresh process)."""
  import haiku as hk
  import jax
  import jax.numpy as jnp
  import optax
  from estimators import losses
  from estimators import networks as nets

  # The PyTorch twins below are the paper's nets, so the Sokoban row times the paper's psi.
  config = nets.default_config({'sokoban': 'sokoban_paper'}.get(net, net))
  rng = np.random.default_rng(0)
  shape = (BATCH,) + _obs_shape(net)
  x = jnp.asarray(rng.integers(0, 256, shape, dtype=np.uint8))
  y = jnp.asarray(rng.integers(0, 256, shape, dtype=np.uint8))
  labels = jnp.asarray(rng.integers(0, 2, BATCH).astype(np.float32))

  if form == 'production':
    apply = nets.make_estimators(config, 4).psi_apply
    params = nets.make_estimators(config, 4).psi_init(jax.random.PRNGKey(0), x)
  else:
    def logits(a, b, is_training):
      if form == 'nchw':
        enc = _NchwEncoder(config)
        e = enc(jnp.concatenate([a, b], 0))
        h = jnp.concatenate(jnp.split(e, 2, 0), -1)
      else:  # one_call
        e = nets.Encoder(config)(jnp.concatenate([a, b], 0))
        h = jnp.concatenate(jnp.split(e, 2, 0), -1)
      for size in config.psi_head_sizes:
        h = jax.nn.relu(hk.Linear(size)(h))
        if is_training and config.dropout > 0:
          h = hk.dropout(hk.next_rng_key(), config.dropout, h)
      return hk.Linear(1)(h)[..., 0]
    t = hk.transform(logits)
    apply = t.apply
    params = t.init(jax.random.PRNGKey(0), x, y, False)

  opt = optax.adam(1e-3)

  @jax.jit
  def step(params, opt_state, key):
    key, k_drop = jax.random.split(key)
    def loss_fn(p):
      return losses.precedence_bce(apply(p, k_drop, x, y, True), labels)
    g = jax.grad(loss_fn)(params)
    upd, opt_state = opt.update(g, opt_state, params)
    return optax.apply_updates(params, upd), opt_state, key

  return _time_steps(step, (params, opt.init(params), jax.random.PRNGKey(1)), seconds)


def _NchwEncoder(config):
  """The production encoder's layers with channels-first convolutions (built inside hk.transform)."""
  import haiku as hk
  import jax
  import jax.numpy as jnp

  def encode(x):
    x = jnp.transpose(x.astype(jnp.float32) / 255.0, (0, 3, 1, 2))
    n = len(config.conv_channels)
    for i, (ch, st) in enumerate(zip(config.conv_channels, config.conv_strides)):
      x = hk.Conv2D(ch, 3, stride=st, padding='VALID', data_format='NCHW')(x)
      if i < n - 1 or config.relu_after_last_conv:
        x = jax.nn.relu(x)
    x = hk.Flatten()(x)
    if config.embedding_size:
      x = hk.Linear(config.embedding_size)(x)
    return x
  return encode


TORCH_SCRIPT = r'''
import json, sys, time
import numpy as np, torch, torch.nn as nn
net, threads, seconds, batch = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
torch.set_num_threads(threads)
if net == 'turf':   # App. C.2: 3 valid 3x3 convs 32/64/64, linear 64, concat, linear -> 1
  enc = nn.Sequential(nn.Conv2d(3, 32, 3), nn.ReLU(), nn.Conv2d(32, 64, 3), nn.ReLU(),
                      nn.Conv2d(64, 64, 3), nn.ReLU(), nn.Flatten(), nn.Linear(1024, 64))
  head = nn.Linear(128, 1)
else:               # App. C.3: convs 8/8 strides 2/1 (no ReLU after the last), MLP 64x3 + dropout
  enc = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2), nn.ReLU(), nn.Conv2d(8, 8, 3), nn.Flatten())
  head = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 64), nn.ReLU(),
                       nn.Dropout(0.1), nn.Linear(64, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 1))
params = list(enc.parameters()) + list(head.parameters())
opt = torch.optim.Adam(params, 1e-3)
rng = np.random.default_rng(0)
x = torch.tensor(rng.integers(0, 256, (batch, 3, 10, 10), dtype=np.uint8))
y = torch.tensor(rng.integers(0, 256, (batch, 3, 10, 10), dtype=np.uint8))
labels = torch.tensor(rng.integers(0, 2, batch).astype(np.float32))
bce = nn.BCEWithLogitsLoss()
def step():
  opt.zero_grad()
  a, b = enc(x.float() / 255), enc(y.float() / 255)
  bce(head(torch.cat([a, b], -1))[:, 0], labels).backward()
  opt.step()
for _ in range(5):
  step()
n, t0 = 0, time.perf_counter()
while time.perf_counter() - t0 < seconds:
  step(); n += 1
print(json.dumps({'pairs_per_s': n * batch / (time.perf_counter() - t0), 'torch': torch.__version__,
                  'threads': torch.get_num_threads()}))
'''


def _run_jax(net, form, seconds, xla_flags='', python=sys.executable):
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  env = dict(os.environ, XLA_FLAGS=xla_flags, TF_CPP_MIN_LOG_LEVEL='3',
             PYTHONPATH=root + os.pathsep + os.environ.get('PYTHONPATH', ''))
  cmd = [python, '-m', 'bench.psi_cnn_bench', '--worker', net, form, str(seconds)]
  r = subprocess.run(cmd, env=env, capture_output=True, text=True)
  for line in reversed(r.stdout.splitlines()):
    if line.startswith('{'):
      return json.loads(line)['pairs_per_s']
  return {'error': (r.stderr.strip().splitlines() or ['no output'])[-1][:300]}


def _run_torch(python, net, seconds):
  r = subprocess.run([python, '-c', TORCH_SCRIPT, net, str(os.cpu_count() or 1), str(seconds),
                      str(BATCH)], capture_output=True, text=True)
  for line in reversed(r.stdout.splitlines()):
    if line.startswith('{'):
      return json.loads(line)
  return {'error': (r.stderr.strip().splitlines() or ['no output'])[-1][:300]}


def main():
  import argparse
  if len(sys.argv) > 1 and sys.argv[1] == '--worker':
    net, form, seconds = sys.argv[2], sys.argv[3], float(sys.argv[4])
    print(json.dumps({'pairs_per_s': jax_worker(net, form, seconds)}))
    return
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument('--torch_python', default='', help='interpreter with torch for the reference')
  p.add_argument('--other_jax_python', default='',
                 help="','-separated interpreters with another jax/haiku/optax: the production "
                      'form is timed under each (what an upgrade of the pinned jax would give)')
  p.add_argument('--seconds', type=float, default=6.0, help='timed seconds per measurement')
  p.add_argument('--repeats', type=int, default=2, help='interleaved repeats of the JAX forms')
  p.add_argument('--nets', default=','.join(NETS))
  p.add_argument('--xla_flag_sets', default=';'.join(DEFAULT_FLAG_SETS),
                 help="';'-separated XLA_FLAGS values, each timed on the production form")
  p.add_argument('--out', default='results/psi_cnn_bench.json')
  args = p.parse_args()
  import jax
  out = {'batch_pairs': BATCH, 'jax': jax.__version__, 'cpus': os.cpu_count(),
         'load_avg_1min_start': os.getloadavg()[0], 'nets': {}}
  for net in args.nets.split(','):
    if net not in NETS:
      sys.exit(f'unknown net {net!r}; choose from {NETS}')
    # Forms interleaved and repeated; the best of --repeats is kept (2 cores are easily disturbed).
    runs = {}
    for _ in range(args.repeats):
      for form in ('production', 'one_call', 'nchw'):
        runs.setdefault(form, []).append(_run_jax(net, form, args.seconds))
    row = {form: max(v for v in vals if isinstance(v, float)) if any(
        isinstance(v, float) for v in vals) else vals[0] for form, vals in runs.items()}
    row['all_runs'] = runs
    row['xla_flags'] = {f: _run_jax(net, 'production', args.seconds, f)
                        for f in args.xla_flag_sets.split(';') if f}
    row['other_jax'] = {}
    for python in filter(None, args.other_jax_python.split(',')):
      version = subprocess.run([python, '-c', 'import jax; print(jax.__version__)'],
                               capture_output=True, text=True).stdout.strip() or python
      row['other_jax'][version] = _run_jax(net, 'production', args.seconds, python=python)
    if args.torch_python:
      row['torch'] = _run_torch(args.torch_python, net, args.seconds)
      ref = row['torch'].get('pairs_per_s')
      if ref and isinstance(row['production'], float):
        row['production_over_torch'] = row['production'] / ref
    out['nets'][net] = row
    print(json.dumps({net: row}), flush=True)
  out['load_avg_1min_end'] = os.getloadavg()[0]
  os.makedirs(os.path.dirname(args.out) or '.', exist_ok=True)
  with open(args.out, 'w') as f:
    json.dump(out, f, indent=1)
  print('wrote', args.out)


if __name__ == '__main__':
  main()

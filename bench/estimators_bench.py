r"""psi training throughput: pairs/s of the real training path (`training.make_update`: pair
sampling from a flat dataset + step, `--steps_per_call` steps per call) against a bare jitted loop
of the same network and batch on pre-sampled fixed pairs, same run, and their ratio: Cartpole MLP
(batch 128, 256) and Turf CNN (batch 128), on random-policy episodes of the real environments
(the collection's own episode stream, `launch.runtime.collection`).

    python -m bench.estimators_bench --out results/estimators_bench.json

The machine's load average is recorded with each timing: other jobs share the 2 cores.
"""
import json
import math
import os
import sys
import time
from itertools import islice
from typing import Any, Dict

import numpy as np
from absl import flags

from bench import common
from envs import cli

# Pairs/s reported elsewhere for the same networks, for the JSON's reader.
PEER_REFERENCE = {'authors_pytorch_cartpole_mlp_b256_pairs_per_s': 370_000,
                  'authors_pytorch_turf_cnn_b256_pairs_per_s': 6_600,
                  'jitted_haiku_turf_cnn_pairs_per_s': [2_800, 3_200]}


def define_flags(fv: flags.FlagValues) -> None:
  """This bench's own knobs (the networks and batches it times are fixed, see `measure`)."""
  flags.DEFINE_string('out', 'results/estimators_bench.json', 'JSON output.', flag_values=fv)
  flags.DEFINE_float('seconds', 6.0, 'Target measuring time per configuration.', flag_values=fv)
  flags.DEFINE_integer('mlp_steps_per_call', 200, 'steps_per_call for the MLP measurements.',
                       flag_values=fv)
  flags.DEFINE_integer('conv_steps_per_call', 10, 'steps_per_call for the CNN measurements.',
                       flag_values=fv)
  flags.DEFINE_integer('cartpole_episodes', 20_000, 'Random Cartpole episodes of the dataset.',
                       flag_values=fv)
  flags.DEFINE_integer('turf_episodes', 300, 'Random Turf episodes of the dataset.',
                       flag_values=fv)
  flags.DEFINE_string('note', None, 'Free text stored with the results (e.g. provenance).',
                      flag_values=fv)


def _load() -> float:
  return round(os.getloadavg()[0], 2)


def random_flat(env_name: str, episodes: int, seed: int = 0):
  """`episodes` random-policy episodes of `env_name`, as the collection draws them, in the flat
  layout training reads (`estimators.dataset.FlatData`)."""
  from estimators import dataset
  from launch.runtime import collection
  return dataset.flatten(list(islice(collection.episode_stream(env_name, {}, [seed], False),
                                     episodes)))


def _timed_calls(fn, state, *args, seconds: float, per_call: int):
  """Warm-up (compile) call, then calls for about `seconds`; returns (items/s, calls, state)."""
  import jax
  state, m = fn(state, *args)
  jax.block_until_ready(m)
  t0 = time.perf_counter()
  state, m = fn(state, *args)
  jax.block_until_ready(m)
  one = time.perf_counter() - t0
  calls = max(1, int(seconds / max(one, 1e-6)))
  t0 = time.perf_counter()
  for _ in range(calls):
    state, m = fn(state, *args)
  jax.block_until_ready(m)
  dt = time.perf_counter() - t0
  return calls * per_call / dt, calls, state


def measure_throughput(name: str, network, flat, window: int, batch_size: int,
                       steps_per_call: int, seconds: float, num_actions: int) -> Dict[str, Any]:
  import jax
  import optax

  from estimators import losses, training
  from estimators import networks as nets
  from estimators import pairs as pairs_lib
  from estimators import train as train_lib

  est = nets.make_estimators(network, num_actions)
  config = training.TrainConfig(window=window, batch_size=batch_size)
  batch = train_lib.flat_batch(flat)
  state = training.init_state(est, config, np.asarray(flat.observations[0]))
  k = steps_per_call

  # Real path: exactly what estimators.train and the precedence learner run.
  update = training.make_update(est, config, steps_per_call=k)
  load0 = _load()
  real, real_calls, _ = _timed_calls(update, state, batch, seconds=seconds, per_call=k * batch_size)

  # Bare: the same network, loss and Adam on one fixed pre-sampled batch of pairs, no sampling
  # or gathering; the same loop structure (lax.scan of k steps, or a Python loop of jitted
  # steps where make_update uses one: conv nets on CPU).
  p = pairs_lib.sample_pairs(jax.random.PRNGKey(0), batch.last, batch.starts, batch.num_starts,
                             batch_size, window)
  x, y, label = batch.observations[p.first], batch.observations[p.second], p.label
  opt = optax.adam(config.learning_rate)

  def step(carry, _):
    params, opt_state, key = carry
    key, k_drop = jax.random.split(key)
    def loss_fn(prm):
      return losses.precedence_bce(est.psi_apply(prm, k_drop, x, y, True), label)
    loss, g = jax.value_and_grad(loss_fn)(params)
    upd, opt_state = opt.update(g, opt_state, params)
    return (optax.apply_updates(params, upd), opt_state, key), loss

  carry = (state.psi_params, opt.init(state.psi_params), jax.random.PRNGKey(1))
  scan_ok = not (network.torso == 'conv' and jax.default_backend() == 'cpu')
  if scan_ok:
    bare_fn = jax.jit(lambda c: jax.lax.scan(step, c, None, length=k))
    bare_call = lambda c: bare_fn(c)  # noqa: E731
  else:
    one = jax.jit(lambda c: step(c, None))

    def bare_call(c):
      for _ in range(k):
        c, loss = one(c)
      return c, loss
  bare, bare_calls, _ = _timed_calls(bare_call, carry, seconds=seconds, per_call=k * batch_size)
  # One jitted step per Python call (no amortisation), for reference.
  single = jax.jit(lambda c: step(c, None))
  single_rate, _, _ = _timed_calls(single, carry, seconds=min(seconds, 3.0), per_call=batch_size)
  out = {
      'network': name, 'batch_size': batch_size, 'window': window, 'steps_per_call': k,
      'dataset_observations': int(len(flat.last)),
      'real_pairs_per_s': real, 'bare_pairs_per_s': bare, 'ratio_real_to_bare': real / bare,
      'bare_single_step_pairs_per_s': single_rate,
      'real_calls_timed': real_calls, 'bare_calls_timed': bare_calls,
      'bare_loop': 'lax.scan' if scan_ok else 'python loop of jitted steps',
      'load_avg_1min': [load0, _load()],
  }
  if not scan_ok:
    # Why conv nets do not scan on CPU: a 2-step lax.scan of the same bare step.
    scan2 = jax.jit(lambda c: jax.lax.scan(step, c, None, length=2))
    out['bare_lax_scan_pairs_per_s'], _, _ = _timed_calls(
        lambda c: scan2(c), carry, seconds=1.0, per_call=2 * batch_size)
  return out


def measure(seconds: float, mlp_steps_per_call: int, conv_steps_per_call: int,
            cartpole_episodes: int, turf_episodes: int, batches=(128, 256)) -> Dict[str, Any]:
  """The Cartpole MLP at each of `batches` (w = 200) and the Turf CNN at batch 128 (w = 120)."""
  from estimators import networks as nets
  cart = random_flat('cartpole', cartpole_episodes, seed=1)
  turf = random_flat('turf', turf_episodes)
  results = []
  for batch in batches:
    results.append(measure_throughput('cartpole_mlp', nets.default_estimator_config('cartpole'), cart, 200,
                                      batch, mlp_steps_per_call, seconds, 2))
    print(json.dumps(results[-1]), flush=True)
  results.append(measure_throughput('turf_cnn', nets.default_estimator_config('turf'), turf, 120, 128,
                                    conv_steps_per_call, seconds, 4))
  print(json.dumps(results[-1]), flush=True)
  return {'configs': results, 'peer_reference': PEER_REFERENCE}


def _jsonable(o):
  if isinstance(o, dict):
    return {k: _jsonable(v) for k, v in o.items()}
  if isinstance(o, (list, tuple)):
    return [_jsonable(v) for v in o]
  if isinstance(o, np.ndarray):
    return _jsonable(o.tolist())
  if isinstance(o, (np.floating, float)):
    return float(o) if math.isfinite(o) else None
  if isinstance(o, np.integer):
    return int(o)
  return o


def main(argv=None) -> int:
  args, _ = cli.parse(define_flags, argv, prog='python -m bench.estimators_bench',
                      description=__doc__.split('\n\n')[0])
  import jax
  t0 = time.time()
  results = measure(args.seconds, args.mlp_steps_per_call, args.conv_steps_per_call,
                    args.cartpole_episodes, args.turf_episodes)
  results.update(machine={'cpus': os.cpu_count(), 'jax': jax.__version__,
                          'backend': jax.default_backend(), 'device': str(jax.devices()[0])},
                 seconds=time.time() - t0, measured_at=time.strftime('%Y-%m-%dT%H:%M:%S%z'))
  if args.note:
    results['note'] = args.note
  common.write_json(args.out, _jsonable(results))
  print(f'wrote {args.out}', file=sys.stderr)
  return 0


if __name__ == '__main__':
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  sys.exit(main())

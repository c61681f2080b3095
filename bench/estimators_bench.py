r"""Estimator benchmarks: psi training throughput, the Cartpole+ offline recipe, and end-to-end
accuracy of offline psi on Turf and Sokoban against the exact oracle.

    python -m bench.estimators_bench --out results/estimators_bench.json
    python -m bench.estimators_bench --sections throughput,cartpole_recipe   # a subset

Sections (each writes its own key of the JSON; an existing JSON keeps the other sections):
  throughput       psi pairs/s of the real training path (`training.make_update`: pair sampling
                   from a flat dataset + step, `--steps_per_call` steps per call) vs a bare jitted
                   loop of the same network and batch on pre-sampled fixed pairs, same run, and
                   their ratio: Cartpole MLP (batch 128, 256), Turf CNN (batch 128).
  cartpole_recipe  Appendix C, Cartpole+: 100k random trajectories (vectorised numpy simulation
                   of gym's dynamics, checked against envs.cartpole), w=200, 3M pairs, batch 128,
                   Adam 0.01, then phi on 100k transitions, through `estimators.train.train`.
                   If a short calibration run projects more than --max_recipe_seconds, it trains
                   on fewer pairs and extrapolates (said so in the JSON).
  turf_e2e         launch.collect (random, --turf_episodes) -> estimators.train (w=120) ->
                   estimators.evaluate (oracle, --eval_transitions): psi/phi AUROC.
  sokoban_e2e      the same for Sokoban (w=15, the paper's Sokoban net and optimiser, 20M pairs).
  sokoban_wide_e2e Sokoban with a wider encoder (convs 16,16, strides 1,1), --sokoban_wide_pairs.
The end-to-end sections run the real CLIs as subprocesses and record their exact commands.
The machine's load average is recorded with each timing: other jobs share the 2 cores.
"""
import json
import math
import os
import shlex
import subprocess
import sys
import time
from typing import Any, Dict, List

import numpy as np
from absl import app, flags
from bench import common

FLAGS = flags.FLAGS
flags.DEFINE_string('out', 'results/estimators_bench.json', 'JSON output (sections are merged).')
flags.DEFINE_list('sections', ['throughput', 'cartpole_recipe', 'turf_e2e', 'sokoban_e2e',
                                'sokoban_wide_e2e'],
                  'Sections to run.')
flags.DEFINE_string('workdir', '/tmp/estimators_bench', 'Datasets, checkpoints, evaluations.')
flags.DEFINE_float('seconds', 6.0, 'Target measuring time per throughput configuration.')
flags.DEFINE_integer('mlp_steps_per_call', 200, 'steps_per_call for the MLP measurements.')
flags.DEFINE_integer('conv_steps_per_call', 10, 'steps_per_call for the CNN measurements.')
flags.DEFINE_integer('cartpole_trajectories', 100_000, 'Cartpole+ recipe: random trajectories.')
flags.DEFINE_integer('cartpole_pairs', 3_000_000, 'Cartpole+ recipe: psi pairs.')
flags.DEFINE_integer('max_recipe_seconds', 300, 'Above this projected time, extrapolate.')
flags.DEFINE_integer('turf_episodes', 3000, 'Turf: random episodes collected.')
flags.DEFINE_integer('turf_pairs', 300_000, 'Turf: psi pairs.')
flags.DEFINE_integer('sokoban_episodes', 20_000, 'Sokoban: random episodes collected (paper: 100k).')
flags.DEFINE_integer('sokoban_pairs', 20_000_000, 'Sokoban: psi pairs (paper: 20M).')
flags.DEFINE_integer('eval_transitions', 2000, 'Oracle-labelled transitions per evaluation.')
flags.DEFINE_integer('sokoban_eval_transitions', 4000, 'Sokoban evaluation transitions (its '
                     'irreversible transitions are rare).')
flags.DEFINE_string('sokoban_levels', None, 'Sokoban level file for collection and evaluation '
                    '(default: the env default set); pin it while the default set is changing.')
flags.DEFINE_integer('sokoban_wide_pairs', 5_000_000, 'sokoban_wide_e2e: psi pairs.')
flags.DEFINE_string('note', None, 'Free text stored with each section run (e.g. provenance).')
flags.DEFINE_bool('reuse_data', True, 'Reuse a dataset already collected in --workdir.')
flags.DEFINE_bool('reuse_checkpoints', False, 'Reuse a checkpoint already trained in --workdir '
                  '(same env, window, pairs, episodes): only evaluate.')

PY = sys.executable


def _load() -> float:
  return round(os.getloadavg()[0], 2)


# --------------------------------------------------------------------------------------------- #
# Cartpole: vectorised random trajectories (gym 0.26 CartPoleEnv dynamics, Euler)
# --------------------------------------------------------------------------------------------- #

_G, _MC, _MP, _HALF_LEN, _FORCE, _TAU = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
_TOTAL = _MC + _MP
_PML = _MP * _HALF_LEN
_THETA_MAX = 12 * 2 * math.pi / 360
_X_MAX = 2.4


def cartpole_step(state: np.ndarray, action: np.ndarray) -> np.ndarray:
  x, x_dot, theta, theta_dot = state.T
  force = np.where(action == 1, _FORCE, -_FORCE)
  cos, sin = np.cos(theta), np.sin(theta)
  temp = (force + _PML * theta_dot ** 2 * sin) / _TOTAL
  theta_acc = (_G * sin - cos * temp) / (_HALF_LEN * (4.0 / 3.0 - _MP * cos ** 2 / _TOTAL))
  x_acc = temp - _PML * theta_acc * cos / _TOTAL
  return np.stack([x + _TAU * x_dot, x_dot + _TAU * x_acc,
                   theta + _TAU * theta_dot, theta_dot + _TAU * theta_acc], axis=1)


def _terminated(state):
  return (np.abs(state[:, 0]) > _X_MAX) | (np.abs(state[:, 2]) > _THETA_MAX)


def cartpole_random_flat(num_episodes: int, seed: int = 0, max_steps: int = 50_000,
                         chunk: int = 20_000):
  """Random-policy Cartpole+ trajectories in the flat layout (`estimators.dataset.FlatData`)."""
  from estimators.dataset import FlatData
  rng = np.random.default_rng(seed)
  obs_parts, act_parts, len_parts = [], [], []
  for start in range(0, num_episodes, chunk):
    e = min(chunk, num_episodes - start)
    state = rng.uniform(-0.05, 0.05, size=(e, 4))
    alive = np.ones(e, bool)
    length = np.zeros(e, np.int64)  # transitions
    obs_t, act_t = [state.astype(np.float32)], []
    t = 0
    while alive.any() and t < max_steps:
      a = rng.integers(0, 2, size=e)
      state = np.where(alive[:, None], cartpole_step(state, a), state)
      act_t.append(np.where(alive, a, 0).astype(np.int32))
      obs_t.append(state.astype(np.float32))
      length += alive
      alive &= ~_terminated(state)
      t += 1
    act_t.append(np.zeros(e, np.int32))             # no action at the final observation
    obs = np.stack(obs_t, axis=1)                    # [e, T+1, 4]
    act = np.stack(act_t, axis=1)                    # [e, T+1]
    keep = np.arange(obs.shape[1])[None, :] <= length[:, None]
    obs_parts.append(obs[keep])
    act_parts.append(act[keep])
    len_parts.append(length + 1)
  lengths = np.concatenate(len_parts)
  ends = np.cumsum(lengths) - 1
  return FlatData(np.concatenate(obs_parts), np.concatenate(act_parts),
                  np.repeat(ends, lengths).astype(np.int32), lengths)


def check_cartpole_sim(steps: int = 30) -> float:
  """Max |difference| between the numpy simulation and envs.cartpole on one random episode."""
  import envs
  env = envs.make('cartpole', seed=3, max_steps=50_000)
  ts = env.reset()
  state = np.asarray(env._env.state, np.float64)[None]  # pylint: disable=protected-access
  rng = np.random.default_rng(0)
  err = 0.0
  for _ in range(steps):
    a = int(rng.integers(2))
    ts = env.step(a)
    state = cartpole_step(state, np.array([a]))
    err = max(err, float(np.max(np.abs(state[0].astype(np.float32) - ts.observation))))
    if ts.last():
      assert bool(_terminated(state)[0]) == (float(ts.discount) == 0.0)
      break
  return err


# --------------------------------------------------------------------------------------------- #
# Throughput: real training path vs bare loop on fixed pairs
# --------------------------------------------------------------------------------------------- #

def _turf_flat(num_episodes: int = 300, seed: int = 0):
  import envs
  from estimators import dataset
  env = envs.make('turf', seed=seed)
  rng = np.random.default_rng(seed)
  eps = []
  for _ in range(num_episodes):
    ts = env.reset()
    obs, acts = [ts.observation], []
    while not ts.last():
      a = int(rng.integers(4))
      ts = env.step(a)
      obs.append(ts.observation)
      acts.append(a)
    eps.append(dataset.Episode(np.stack(obs), np.asarray(acts, np.int32),
                               np.zeros(len(acts), np.float32), np.ones(len(acts), np.float32)))
  return dataset.flatten(eps)


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
  import jax.numpy as jnp
  import optax
  from estimators import losses
  from estimators import networks as nets
  from estimators import pairs as pairs_lib
  from estimators import train as train_lib
  from estimators import training

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


def section_throughput() -> Dict[str, Any]:
  from estimators import networks as nets
  cart = cartpole_random_flat(20_000, seed=1)
  turf = _turf_flat(300)
  results = []
  for batch in (128, 256):
    results.append(measure_throughput('cartpole_mlp', nets.default_config('cartpole'), cart, 200,
                                      batch, FLAGS.mlp_steps_per_call, FLAGS.seconds, 2))
    print(json.dumps(results[-1]), flush=True)
  results.append(measure_throughput('turf_cnn', nets.default_config('turf'), turf, 120, 128,
                                    FLAGS.conv_steps_per_call, FLAGS.seconds, 4))
  print(json.dumps(results[-1]), flush=True)
  return {'configs': results,
          'peer_reference': {'authors_pytorch_cartpole_mlp_b256_pairs_per_s': 370_000,
                             'authors_pytorch_turf_cnn_b256_pairs_per_s': 6_600,
                             'jitted_haiku_turf_cnn_pairs_per_s': [2_800, 3_200]}}


# --------------------------------------------------------------------------------------------- #
# Cartpole+ recipe
# --------------------------------------------------------------------------------------------- #

def section_cartpole_recipe() -> Dict[str, Any]:
  import jax
  from estimators import checkpoint
  from estimators import evaluate
  from estimators import networks as nets
  from estimators import train as train_lib
  from estimators import training

  sim_err = check_cartpole_sim()
  t0 = time.time()
  flat = cartpole_random_flat(FLAGS.cartpole_trajectories, seed=0)
  gen_s = time.time() - t0
  lengths = flat.lengths - 1
  network = nets.default_config('cartpole')
  config = training.TrainConfig(window=200, batch_size=128, learning_rate=1e-2,
                                phi_batch_size=128, phi_learning_rate=1e-2)
  out: Dict[str, Any] = {
      'trajectories': int(len(lengths)), 'mean_length': float(lengths.mean()),
      'max_length': int(lengths.max()), 'observations': int(len(flat.last)),
      'generation_seconds': gen_s, 'sim_vs_env_max_abs_diff': sim_err,
      'window': 200, 'batch_size': 128, 'learning_rate': 1e-2,
      'requested_pairs': FLAGS.cartpole_pairs, 'phi_transitions': 100_000,
  }
  # Calibration: 200 calls worth of steps, to project the full run.
  calib_pairs = 128 * FLAGS.mlp_steps_per_call * 20
  _, _, calib = train_lib.train(flat, network, 2, config, calib_pairs, phi=False,
                                steps_per_call=FLAGS.mlp_steps_per_call, progress=False)
  rate = calib['psi']['steady_items_per_s'] or calib['psi']['items_per_s']
  projected = FLAGS.cartpole_pairs / rate
  pairs = FLAGS.cartpole_pairs
  if projected > FLAGS.max_recipe_seconds:
    pairs = int(rate * FLAGS.max_recipe_seconds * 0.5)
    out['extrapolated'] = (f'projected {projected:.0f}s > {FLAGS.max_recipe_seconds}s: trained on '
                           f'{pairs:,} pairs and extrapolated to {FLAGS.cartpole_pairs:,}')
  load0 = _load()
  psi_params, phi_params, summary = train_lib.train(
      flat, network, 2, config, pairs, phi=True, phi_transitions=100_000,
      steps_per_call=FLAGS.mlp_steps_per_call, progress=True, eval_pairs=20_000)
  psi, phi = summary['psi'], summary['phi']
  scale = FLAGS.cartpole_pairs / psi['items']
  out.update({
      'trained_pairs': psi['items'], 'psi_seconds': psi['wall_s'],
      'psi_first_call_seconds': psi['first_call_s'],
      'psi_pairs_per_s': psi['items_per_s'], 'psi_steady_pairs_per_s': psi['steady_items_per_s'],
      'psi_seconds_for_requested_pairs': psi['wall_s'] * scale,
      'phi_seconds': phi['wall_s'], 'phi_transitions_per_s': phi['items_per_s'],
      'total_training_seconds': psi['wall_s'] * scale + phi['wall_s'],
      'psi_final_loss': psi['final']['psi_loss'], 'psi_final_accuracy': psi['final']['psi_accuracy'],
      'psi_eval_accuracy': summary['psi_eval_accuracy'], 'phi_final_loss': phi['final']['phi_loss'],
      'load_avg_1min': [load0, _load()],
  })
  # Quality check of the result: the paper's pictures and physical consistency of phi.
  os.makedirs(FLAGS.workdir, exist_ok=True)
  ckpt_path = os.path.join(FLAGS.workdir, 'cartpole_plus.ckpt')
  checkpoint.save(ckpt_path, network, 2, (4,), np.float32, psi_params, phi_params,
                  {'env_name': 'cartpole', 'env_options': {'max_steps': 50_000}, 'window': 200,
                   'num_pairs': psi['items'], 'bench': 'cartpole_recipe'})
  report = evaluate.evaluate_cartpole(checkpoint.load(ckpt_path), {'max_steps': 200}, 20_000,
                                      0.7, 0.4, os.path.join(FLAGS.workdir, 'eval_cartpole'))
  out['evaluation'] = {'psi_terminal_auroc': report['psi']['terminal_auroc'],
                       'phi_terminal_auroc': report['phi']['terminal_auroc'],
                       'phi_lean_agreement': report['phi']['lean_agreement'],
                       'phi_mean_per_action': np.asarray(report['phi']['mean_per_action']).tolist(),
                       'pngs': report['pngs']}
  out['checkpoint'] = ckpt_path
  return out


# --------------------------------------------------------------------------------------------- #
# End to end through the CLIs
# --------------------------------------------------------------------------------------------- #

def _run(cmd: List[str], log: str) -> Dict[str, Any]:
  print('$ ' + ' '.join(shlex.quote(c) for c in cmd), flush=True)
  t0 = time.time()
  load0 = _load()
  with open(log, 'w') as f:
    proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                          cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  wall = time.time() - t0
  if proc.returncode != 0:
    with open(log) as f:
      tail = f.read()[-2000:]
    raise RuntimeError(f'command failed ({proc.returncode}): {" ".join(cmd)}\n{tail}')
  return {'command': ' '.join(shlex.quote(c) for c in cmd), 'seconds': wall,
          'load_avg_1min': [load0, _load()], 'log': log}


def end_to_end(env: str, episodes: int, window: int, pairs: int, transitions: int,
               extra_train: List[str] = (), env_options: List[str] = (),
               tag: str = '') -> Dict[str, Any]:
  from estimators import dataset
  work = os.path.join(FLAGS.workdir, env)
  os.makedirs(work, exist_ok=True)
  data = os.path.join(work, f'{env}_random_{episodes}')
  ckpt = os.path.join(work, f'{env}_{episodes}ep_w{window}_{pairs}{tag}.ckpt')
  eval_dir = os.path.join(work, f'eval_{transitions}{tag}')
  options = [f'--env_option={o}' for o in env_options]
  steps: Dict[str, Any] = {}
  collect_cmd = [PY, '-m', 'launch.collect', f'--env={env}', '--policy=random',
                 f'--episodes={episodes}', f'--out={data}', '--overwrite',
                 '--progress=false'] + options
  if FLAGS.reuse_data and dataset.dataset_exists(data):
    steps['collect'] = {'reused': data, 'metadata': dataset.read_metadata(data),
                        'command_to_recollect': ' '.join(shlex.quote(c) for c in collect_cmd)}
  else:
    steps['collect'] = _run(collect_cmd, os.path.join(work, 'collect.log'))
  train_cmd = [PY, '-m', 'estimators.train', f'--dataset={data}', f'--window={window}',
               f'--num_pairs={pairs}', '--batch_size=128', '--phi', '--phi_transitions=100000',
               f'--out={ckpt}', '--progress=false'] + list(extra_train)
  if FLAGS.reuse_checkpoints and os.path.isfile(ckpt):
    steps['train'] = {'reused': ckpt, 'command_that_trained_it': ' '.join(shlex.quote(c) for c in train_cmd)}
  else:
    steps['train'] = _run(train_cmd, os.path.join(work, f'train{tag}.log'))
  steps['evaluate'] = _run([PY, '-m', 'estimators.evaluate', f'--checkpoint={ckpt}',
                            f'--env={env}', f'--transitions={transitions}', f'--out={eval_dir}',
                            f'--labels_cache={os.path.join(FLAGS.workdir, "labels")}'] + options,
                           os.path.join(work, f'evaluate{tag}.log'))
  from estimators import checkpoint
  meta = checkpoint.load(ckpt).metadata
  with open(os.path.join(eval_dir, 'report.json')) as f:
    report = json.load(f)
  strip = lambda d: {k: v for k, v in (d or {}).items() if k != 'calibration'}  # noqa: E731
  return {
      'steps': steps,
      'train': {k: meta.get(k) for k in (
          'window', 'num_pairs', 'batch_size', 'learning_rate', 'weight_decay', 'psi_loss',
          'psi_accuracy', 'psi_eval_accuracy', 'psi_train_seconds', 'psi_pairs_per_s',
          'psi_steady_pairs_per_s', 'phi_transitions', 'phi_loss', 'phi_train_seconds',
          'dataset_episodes', 'dataset_transitions')},
      'evaluation': {'labels': report['labels'], 'evaluated': report['evaluated'],
                     'episodes': report['episodes'], 'psi_beta': report['psi_beta'],
                     'phi_beta': report['phi_beta'], 'psi': strip(report['psi']),
                     'phi': strip(report['phi']), 'seconds': report['seconds'],
                     'calibration_png': report['calibration_png']},
      'psi_auroc': report['psi']['auroc'],
      'phi_auroc': (report['phi'] or {}).get('auroc'),
      'target_psi_auroc': 0.95,
  }


def section_turf_e2e():
  return end_to_end('turf', FLAGS.turf_episodes, 120, FLAGS.turf_pairs, FLAGS.eval_transitions,
                    ['--steps_per_call=20'])


def _sokoban_options():
  return [f'levels={FLAGS.sokoban_levels}'] if FLAGS.sokoban_levels else []


def section_sokoban_e2e():
  return end_to_end('sokoban', FLAGS.sokoban_episodes, 15, FLAGS.sokoban_pairs,
                    FLAGS.sokoban_eval_transitions, ['--steps_per_call=50'], _sokoban_options())


def section_sokoban_wide_e2e():
  """The paper's Sokoban recipe with a wider encoder: two 3x3 convs of 16, both stride 1."""
  return end_to_end('sokoban', FLAGS.sokoban_episodes, 15, FLAGS.sokoban_wide_pairs,
                    FLAGS.sokoban_eval_transitions,
                    ['--steps_per_call=50', '--conv_channels=16,16', '--conv_strides=1,1'],
                    _sokoban_options(), tag='_c16s1')


SECTIONS = {'throughput': section_throughput, 'cartpole_recipe': section_cartpole_recipe,
            'turf_e2e': section_turf_e2e, 'sokoban_e2e': section_sokoban_e2e,
            'sokoban_wide_e2e': section_sokoban_wide_e2e}


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


def main(argv):
  del argv
  unknown = [s for s in FLAGS.sections if s not in SECTIONS]
  if unknown:
    print(f'error: unknown section(s) {unknown}; known: {sorted(SECTIONS)}', file=sys.stderr)
    return 2
  results = {}
  if os.path.exists(FLAGS.out):
    with open(FLAGS.out) as f:
      results = json.load(f)
  import jax
  results['machine'] = {'cpus': os.cpu_count(), 'jax': jax.__version__,
                        'backend': jax.default_backend(), 'device': str(jax.devices()[0])}
  for name in FLAGS.sections:
    print(f'== {name}', flush=True)
    t0 = time.time()
    try:
      results[name] = SECTIONS[name]()
    except Exception as e:  # record and go on with the other sections
      results[name] = {'error': f'{type(e).__name__}: {e}'[:3000]}
    results[name]['section_seconds'] = time.time() - t0
    if FLAGS.note:
      results[name]['note'] = FLAGS.note
    results[name]['measured_at'] = time.strftime('%Y-%m-%dT%H:%M:%S%z')
    common.write_json(FLAGS.out, _jsonable(results))
    print(json.dumps(_jsonable(results[name]), indent=2)[:4000], flush=True)
  return 0


if __name__ == '__main__':
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  import tensorflow  # noqa: F401  (before app.run: see estimators/train.py)
  app.run(main)

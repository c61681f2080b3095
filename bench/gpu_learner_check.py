r"""The learner's speed on a GPU (or any jax device), with nothing of the project's stack but jax,
haiku, optax, rlax and numpy: the Sokoban preset's network with the batch-16 recipe's V-trace
loss, self-imitation and optimiser (agents.impala_step; experiments.sokoban.BATCH16_AGENT, the
agent launch.runtime.host_preset sizes), fed a fixed random batch on the device, at that batch
shape (16 x 20) and larger ones, within a time budget; then the projection of the whole
program's env steps/s on a host with this device and N cores (launch.runtime.host_preset):

    learner env steps/s = learner frames/s / samples per sequence (4)
    actor env steps/s   = (N - 2) x the per-core actor ceiling measured on the dev machine
    program             = the smaller of the two

    python -m bench.gpu_learner_check --cores 16 --out results/bench/gpu_learner_check.json
    bash bench/gpu_learner_check.sh          # on a GPU host: installs the carried wheels first

Then the precedence learner's update (estimators.training: psi and phi together, the Sokoban
preset's networks and window) on windows as the precedence learner gets them from Reverb, at
psi batches of 128 pairs (the recipe's) and larger.

It imports neither Acme, Launchpad, Reverb, TensorFlow nor gym (a GPU host may have none of
them); tests/test_impala_step.py checks that its network is the Sokoban preset's and its loss
the batch-16 recipe's.
"""
import json
import os
import sys
import time
from typing import Optional

import jax
import numpy as np
import optax
from absl import flags

from agents import host_devices, impala_step, policy_net
from envs import cli, presets
from estimators import networks as estimator_nets
from estimators import training as estimator_training
from launch.runtime import host_preset

# The Sokoban preset's policy network (envs.presets, 'sokoban'; the test compares them) and its
# observations: 10x10 RGB rooms, 4 actions.
SOKOBAN_POLICY = dict(
    torso='conv', conv_channels=(8, 16, 16), conv_strides=(2, 1, 1), conv_paddings=('SAME',) * 3,
    relu_after_last_conv=False, shared_hidden=(64, 64), head_hidden=(64,), init='orthogonal',
    centre_on=((160, 212, 56), (219, 212, 56)), canvas_size=15)
OBSERVATION_SHAPE = (10, 10, 3)
NUM_ACTIONS = 4
# The batch-16 recipe's IMPALA settings the update uses.
LOSS = impala_step.LossConfig(discount=0.99, entropy_cost=0.01, baseline_cost=0.5)
# The precedence learner's windows per Reverb sample (launch.program.config's default).
PSI_WINDOWS = 64


RULE = ('env steps/s = min(learner frames/s / samples per sequence ({spi:g}), (N - 2) x {a:,.0f} '
        'env steps/s per actor core); N - 2: one core for the learner, one for replay, counter '
        'and coordinator')


def sokoban_optimizer():
  """The batch-16 recipe's IMPALA optimiser (clip 1, Adam 5e-4, b1 0, b2 0.99)."""
  return optax.chain(optax.clip_by_global_norm(1.0), optax.adam(5e-4, b1=0.0, b2=0.99))


def projected_env_steps_per_s(learner_frames_per_s: float, cores: int,
                              samples_per_sequence: float = host_preset.SAMPLES_PER_SEQUENCE,
                              actor_env_steps_per_core: float = host_preset.ACTOR_ENV_STEPS_PER_CORE,
                              actor_cores: Optional[int] = None) -> dict:
  """The whole program's env steps/s on a host: the smaller of what its learner consumes
  (frames/s / samples per sequence) and what its actor cores make (cores x per-core ceiling)."""
  actor_cores = cores - 1 - host_preset.SERVICE_CORES if actor_cores is None else actor_cores
  learner = learner_frames_per_s / samples_per_sequence
  actors = max(1, actor_cores) * actor_env_steps_per_core
  return {'learner_env_steps_per_s': learner, 'actor_env_steps_per_s': actors,
          'env_steps_per_s': min(learner, actors),
          'bound_by': 'learner' if learner < actors else 'actors'}


def random_batch(batch: int, length: int, rng: np.random.Generator) -> impala_step.Sequences:
  obs = rng.integers(0, 4, size=(batch, length) + OBSERVATION_SHAPE).astype(np.uint8) * 60
  obs[:, :, 4, 4] = SOKOBAN_POLICY['centre_on'][0]   # an agent in every room
  start = np.zeros((batch, length), bool)
  start[:, length // 2] = True
  return impala_step.Sequences(
      observation=obs, action=rng.integers(0, NUM_ACTIONS, size=(batch, length)).astype(np.int32),
      reward=rng.normal(size=(batch, length)).astype(np.float32),
      discount=np.ones((batch, length), np.float32), start_of_episode=start,
      extras={'logits': rng.normal(size=(batch, length, NUM_ACTIONS)).astype(np.float32),
              'core_state': np.zeros((batch, length), np.float32)})


def _timed(step, state, data, seconds: float, calls_per_round: int):
  """Runs `state, metrics = step(state, data)` once (compiling), then in rounds of
  `calls_per_round` calls for `seconds` (at least 3 rounds). Returns (state, metrics, first
  call's seconds, median seconds per call, timed calls)."""
  t0 = time.perf_counter()
  state, metrics = step(state, data)
  jax.block_until_ready(metrics)
  first_s = time.perf_counter() - t0
  rounds, end = [], time.perf_counter() + seconds
  while time.perf_counter() < end or len(rounds) < 3:
    t0 = time.perf_counter()
    for _ in range(calls_per_round):
      state, metrics = step(state, data)
    jax.block_until_ready(metrics)
    rounds.append((time.perf_counter() - t0) / calls_per_round)
  return state, metrics, first_s, float(np.median(rounds)), calls_per_round * len(rounds)


def measure(batch: int, length: int, seconds: float, devices, self_imitation_batch: int = 0,
            updates_per_call: int = 1):
  """frames/s of the V-trace update at batch x length (median of timed rounds after compiling),
  `updates_per_call` updates per jitted call (Update.sgd_many) when above 1."""
  config = policy_net.PolicyNetConfig(**SOKOBAN_POLICY)
  net = policy_net.make_unroll(NUM_ACTIONS, config)
  rng = np.random.default_rng(0)
  data = random_batch(batch, length, rng)
  params = net.init(jax.random.PRNGKey(0), data.observation[0], policy_net.DUMMY_CORE_STATE)
  update = impala_step.Update(net.apply, sokoban_optimizer(), LOSS,
                              initial_core=policy_net.DUMMY_CORE_STATE, devices=devices)
  state = update.init(params)
  k = updates_per_call
  if k > 1:
    data = jax.tree_util.tree_map(lambda x: np.stack([x] * k), data)
    step = update.sgd_many
  else:
    step = update.sgd
  data = jax.device_put(data, devices[0]) if len(devices) == 1 else data
  state, metrics, compile_s, per_call, calls = _timed(step, state, data, seconds, 10)
  per_update = per_call / k
  out = {'batch_size': batch, 'sequence_length': length, 'updates_per_call': k,
         'first_update_s': compile_s,
         'seconds_per_update': per_update, 'frames_per_s': batch * length / per_update,
         'timed_updates': k * calls,
         'loss_finite': bool(np.all(np.isfinite(metrics['loss'])))}
  if self_imitation_batch:
    obs = jax.device_put(data.observation.reshape((-1,) + OBSERVATION_SHAPE)[:self_imitation_batch])
    actions = np.arange(self_imitation_batch, dtype=np.int32) % NUM_ACTIONS
    returns = np.linspace(-1, 10, self_imitation_batch, dtype=np.float32)
    state, m = update.imitate(state, obs, actions, returns)
    jax.block_until_ready(m)
    t0 = time.perf_counter()
    for _ in range(20):
      state, m = update.imitate(state, obs, actions, returns)
    jax.block_until_ready(m)
    out['seconds_per_self_imitation_update'] = (time.perf_counter() - t0) / 20
  return out


def measure_psi(pairs: int, window: int, windows: int, seconds: float, device):
  """Precedence-learner updates/s (psi + phi) of the Sokoban preset's estimators on `windows`
  windows of 2 x `window` steps, `pairs` psi pairs and as many phi transitions per update."""
  est = estimator_nets.make_estimators(estimator_nets.default_estimator_config('sokoban'),
                                       NUM_ACTIONS)
  config = estimator_training.TrainConfig(window=window, batch_size=pairs, phi_batch_size=pairs,
                                          learning_rate=5e-4, weight_decay=1e-4, train_phi=True)
  rng = np.random.default_rng(0)
  length = 2 * window
  obs = rng.integers(0, 4, size=(windows, length) + OBSERVATION_SHAPE).astype(np.uint8) * 60
  actions = rng.integers(0, NUM_ACTIONS, size=(windows, length)).astype(np.int32)
  # One episode running through every window (no filler, no episode start): the update's cost
  # does not depend on where segments end.
  valid = np.ones((windows, length), bool)
  start_of_episode = np.zeros((windows, length), bool)
  batch = jax.device_put(estimator_training.windows_to_batch(obs, actions, valid, start_of_episode,
                                                             window), device)
  update = estimator_training.make_update(est, config)
  state = estimator_training.init_state(est, config, obs[0, 0])
  state, metrics, compile_s, per_update, _ = _timed(update, state, batch, seconds, 20)
  return {'psi_pairs_per_update': pairs, 'windows': windows, 'window': window,
          'first_update_s': compile_s, 'seconds_per_update': per_update,
          'pairs_per_s': pairs / per_update,
          'loss_finite': bool(np.isfinite(metrics['psi_loss']))}


def define_flags(fv: flags.FlagValues) -> None:
  """This check's own knobs: the shapes it times and the projection's figures (the run
  configuration's dataclasses are not imported here: they need Acme)."""
  flags.DEFINE_list('batch_sizes', ['16', '64', '256', '1024', '4096'],
                    "Sequences per update, the preset's (16) first.", flag_values=fv)
  flags.DEFINE_integer('sequence_length', 20, 'Steps per sequence.', flag_values=fv)
  flags.DEFINE_list('updates_per_call', ['1'],
                    'Updates per jitted call (one lax.scan over stacked batches) measured at the '
                    'first batch size, e.g. 1,4,16 (the larger sizes: 1).', flag_values=fv)
  flags.DEFINE_float('seconds', 20.0, 'Timed seconds per batch size.', flag_values=fv)
  flags.DEFINE_float('budget_s', 420.0,
                     'Stop starting new batch sizes after this many seconds in all.',
                     flag_values=fv)
  flags.DEFINE_integer('cores', 0, "N of the projection (0: this host's).", flag_values=fv)
  flags.DEFINE_float('samples_per_sequence', host_preset.SAMPLES_PER_SEQUENCE,
                     'Times the learner samples each sequence (the projection divides by it).',
                     flag_values=fv)
  flags.DEFINE_float('actor_env_steps_per_core', host_preset.ACTOR_ENV_STEPS_PER_CORE,
                     "One core's actor ceiling, env steps/s, measured on the dev machine.",
                     flag_values=fv)
  flags.DEFINE_integer('self_imitation_batch', 256,
                       'Steps per self-imitation update timed at the first shape (0: none).',
                       flag_values=fv)
  flags.DEFINE_list('psi_batch_sizes', ['128', '1024', '8192'],
                    "psi pairs per precedence-learner update, the recipe's (128) first; empty: "
                    'no psi measurement.', flag_values=fv)
  flags.DEFINE_float('psi_budget_s', 120.0,
                     'Seconds left for the psi measurement (taken from the end of budget_s).',
                     flag_values=fv)
  flags.DEFINE_string('out', 'results/bench/gpu_learner_check.json', 'JSON to write.',
                      flag_values=fv)


def main(argv=None):
  args, _ = cli.parse(define_flags, argv, prog='python -m bench.gpu_learner_check',
                      description=__doc__.split('\n\n')[0])
  start = time.perf_counter()
  devices = jax.devices()[:1]
  cores = args.cores or host_devices.cores_available()
  out = {'rule': RULE.format(spi=args.samples_per_sequence, a=args.actor_env_steps_per_core),
         'device': str(devices[0]), 'platform': devices[0].platform, 'jax': jax.__version__,
         'python': sys.version.split()[0], 'cores': cores, 'shapes': []}
  print(f"{out['device']} ({out['platform']}), jax {out['jax']}, python {out['python']}", flush=True)
  policy_budget = args.budget_s - (args.psi_budget_s if args.psi_batch_sizes else 0)
  sizes = [int(x) for x in args.batch_sizes]
  shapes = [(sizes[0], int(k)) for k in args.updates_per_call] + [(b, 1) for b in sizes[1:]]
  for i, (b, k) in enumerate(shapes):
    if time.perf_counter() - start > policy_budget:
      out['skipped_after_budget'] = b
      break
    try:
      r = measure(b, args.sequence_length, args.seconds, devices,
                  args.self_imitation_batch if i == 0 else 0, k)
    except Exception as e:   # e.g. out of memory at the largest shape: keep what was measured
      print(f'batch {b}: {type(e).__name__}: {str(e).splitlines()[0][:200]}', flush=True)
      break
    r['projection'] = projected_env_steps_per_s(
        r['frames_per_s'], cores, args.samples_per_sequence, args.actor_env_steps_per_core)
    out['shapes'].append(r)
    _write(args.out, out)   # after each shape: a run cut short by its timeout keeps them
    pr = r['projection']
    print(f"batch {b} x {args.sequence_length}" + (f', {k} updates/call' if k > 1 else '')
          + f": {r['frames_per_s']:,.0f} frames/s "
          f"({1e3 * r['seconds_per_update']:.2f} ms/update, compile {r['first_update_s']:.1f} s) "
          f"-> learner {pr['learner_env_steps_per_s']:,.0f} env steps/s vs {cores} cores' actors "
          f"{pr['actor_env_steps_per_s']:,.0f}: {pr['env_steps_per_s']:,.0f} "
          f"({pr['bound_by']}-bound)", flush=True)
  print(out['rule'])
  out['psi'] = []
  for pairs in (int(x) for x in args.psi_batch_sizes):
    if time.perf_counter() - start > args.budget_s:
      out['psi_skipped_after_budget'] = pairs
      break
    try:
      r = measure_psi(pairs, presets.get('sokoban').estimator_recipe['window'], PSI_WINDOWS, args.seconds / 2, devices[0])
    except Exception as e:
      print(f'psi batch {pairs}: {type(e).__name__}: {str(e).splitlines()[0][:200]}', flush=True)
      break
    out['psi'].append(r)
    _write(args.out, out)
    print(f"psi+phi {pairs} pairs/update: {r['pairs_per_s']:,.0f} pairs/s "
          f"({1e3 * r['seconds_per_update']:.2f} ms/update, compile {r['first_update_s']:.1f} s)",
          flush=True)
  out['elapsed_s'] = time.perf_counter() - start
  _write(args.out, out)
  print(f'written: {args.out} ({out["elapsed_s"]:.0f} s)')


def _write(path: str, out: dict) -> None:
  if os.path.dirname(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, 'w') as f:
    json.dump(out, f, indent=2)


if __name__ == '__main__':
  main()

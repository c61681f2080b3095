r"""IMPALA learner update speed on this machine: frames/s of `agents.learning.IMPALALearner` at
a given batch x unroll, for an environment's network (the real learner step, fed a fixed batch
so only the update is timed), and optionally what one self-imitation update
(`IMPALALearner.imitate`, as --self_imitation_updates 1 adds after each V-trace update) costs.

    python -m bench.learner_bench --env sokoban --batch_size 256 --sequence_length 20 \
        --out results/learner_bench_sokoban.json
    python -m bench.learner_bench --env sokoban --batch_size 16 --sequence_length 20 \
        --self_imitation_batch 256 --out results/sokoban/learner_bench_self_imitation.json
    # Each batch split over 1 and 2 XLA host devices (one process each, alternated 3 times):
    python -m bench.learner_bench --env sokoban --batch_size 16 --devices 1,2 --repeats 3 \
        --out results/bench/learner_devices_sokoban.json
"""
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
import types

import jax
import numpy as np
import optax
from absl import flags
from acme import specs, wrappers
from acme.adders.reverb.base import Trajectory
from acme.utils import loggers

from agents import host_devices, learning
from agents import networks as agent_networks
from bench import common
from envs import cli

# The fields of the run configuration this bench takes, with its own defaults: the paper's
# Sokoban batch, and no self-imitation timing unless asked for.
CONFIG_DEFAULTS = {'env': 'sokoban', 'batch_size': 256, 'self_imitation_batch': 0}
CONFIG_NOTES = {'env': ' Its network preset is timed.',
                'self_imitation_batch': ' Timed only when > 0 (0, the default here: not '
                                        'measured).'}


def _sections():
  from launch.program.config import ImpalaConfig, RunConfig
  return (cli.Section('', RunConfig, only=('env',)),
          cli.Section('', ImpalaConfig,
                      only=('batch_size', 'sequence_length', 'self_imitation_batch')))


def define_flags(fv: flags.FlagValues) -> None:
  """The run configuration's fields this bench varies, then its own knobs."""
  cli.define_field_flags(fv, _sections(), lambda ff: CONFIG_DEFAULTS.get(ff.field, ff.default),
                         lambda ff: CONFIG_NOTES.get(ff.field, ''))
  flags.DEFINE_integer('updates', 10, 'Timed updates (after one compiling update).',
                       flag_values=fv)
  flags.DEFINE_list('canvas_sizes', [], "Policies centred on the agent (sokoban): time each of "
                    "these canvas sides in one invocation (0: 2H-1); default: the preset's.",
                    flag_values=fv)
  flags.DEFINE_list('devices', ['1'], 'Split each batch over this many XLA host devices (CPU), '
                    'one process per count, each timed in this invocation: e.g. 1,2.',
                    flag_values=fv)
  flags.DEFINE_integer('repeats', 1, 'With several --devices: rounds, each timing every count '
                       'once in turn (a busy machine shifts them alike); the median is kept.',
                       flag_values=fv)
  flags.DEFINE_string('out', 'results/learner_bench.json', 'JSON output.', flag_values=fv)


def fixed_batch(spec, batch, length, rng):
  obs_shape = (batch, length) + spec.observations.shape
  if spec.observations.dtype == np.uint8:
    obs = rng.integers(0, 256, size=obs_shape, dtype=np.uint8)
  else:
    obs = rng.normal(size=obs_shape).astype(spec.observations.dtype)
  a = spec.actions.num_values
  start = np.zeros((batch, length), bool)
  start[:, length // 2] = True
  data = Trajectory(
      observation=obs, action=rng.integers(0, a, size=(batch, length)).astype(np.int32),
      reward=rng.normal(size=(batch, length)).astype(np.float32),
      discount=np.ones((batch, length), np.float32), start_of_episode=start,
      extras={'logits': rng.normal(size=(batch, length, a)).astype(np.float32),
              'core_state': np.zeros((batch, length), np.float32)})
  return types.SimpleNamespace(data=data)


def measure(env_name, batch, length, updates, self_imitation_batch=0, canvas_size=None,
            devices=1):
  import envs
  options = {'reward_free': False} if env_name == 'cartpole' else {}
  spec = specs.make_environment_spec(wrappers.SinglePrecisionWrapper(envs.make(env_name, seed=0, **options)))
  config = agent_networks.default_policy_config(env_name, agent_networks.is_image_spec(spec))
  if canvas_size is not None:
    config = dataclasses.replace(config, canvas_size=canvas_size)
  nets = agent_networks.make_networks(spec, config)
  sample = fixed_batch(spec, batch, length, np.random.default_rng(0))

  def forever():
    while True:
      yield sample

  # No log files: Acme's default logger would write a CSV under ~/acme at every update.
  learner = learning.IMPALALearner(nets, forever(), optax.adam(5e-4, b1=0.0, b2=0.99),
                                   jax.random.PRNGKey(0), logger=loggers.NoOpLogger(),
                                   devices=jax.devices()[:devices])
  t0 = time.perf_counter()
  learner.step()
  compile_s = time.perf_counter() - t0
  t0, c0 = time.perf_counter(), time.process_time()
  for _ in range(updates):
    learner.step()
  per_update = (time.perf_counter() - t0) / updates
  # CPU of every thread of this process (XLA's pool included): what the update takes from the
  # other nodes of a run sharing the cores.
  cpu_per_update = (time.process_time() - c0) / updates
  out = {'env': env_name, 'batch_size': batch, 'sequence_length': length,
         'canvas_size': config.canvas_size,
         'first_update_s': compile_s, 'seconds_per_update': per_update,
         'frames_per_s': batch * length / per_update,
         'cpu_seconds_per_update': cpu_per_update,
         'cpu_us_per_frame': 1e6 * cpu_per_update / (batch * length),
         'backend': jax.default_backend(), 'devices': devices,
         'cores_available': host_devices.cores_available()}
  if self_imitation_batch:
    steps = self_imitation_batch
    observations = sample.data.observation.reshape((-1,) + spec.observations.shape)
    observations = observations[np.arange(steps) % len(observations)]
    actions = np.arange(steps, dtype=np.int32) % spec.actions.num_values
    returns = np.linspace(-1.0, 10.0, steps, dtype=np.float32)
    learner.imitate(observations, actions, returns)   # compiles
    t0 = time.perf_counter()
    for _ in range(updates):
      learner.imitate(observations, actions, returns)
    per_imitation = (time.perf_counter() - t0) / updates
    out.update(self_imitation_batch=steps, seconds_per_self_imitation_update=per_imitation,
               # learner time per V-trace update with one self-imitation update after each
               learner_work_with_self_imitation=(per_update + per_imitation) / per_update)
  return out


def _child(args, devices: int) -> dict:
  """One measurement in a fresh process with `devices` host devices: XLA reads the count once,
  when jax starts, which importing the agents' modules may already do. The child gets this
  invocation's settings, as parsed, but for the device counts, rounds and output."""
  with tempfile.TemporaryDirectory() as tmp:
    out = os.path.join(tmp, 'out.json')
    settings = [f'--{name}={",".join(value) if isinstance(value, list) else value}'
                for name, value in vars(args).items()
                if name not in ('devices', 'repeats', 'out') and value is not None]
    env = dict(os.environ, XLA_FLAGS=host_devices.with_host_devices(
        os.environ.get('XLA_FLAGS', ''), devices))
    subprocess.run([sys.executable, '-m', 'bench.learner_bench', *settings,
                    f'--devices={devices}', f'--out={out}'],
                   check=True, stdout=subprocess.DEVNULL, env=env)
    with open(out) as f:
      return json.load(f)


def device_scaling(args, counts, repeats: int) -> dict:
  """frames/s per device count (median over rounds), and against one device's: the speed-up
  and the efficiency (speed-up / count; host sizing assumes 0.7:
  launch.runtime.host_preset.LEARNER_CORE_EFFICIENCY)."""
  runs = {n: [] for n in counts}
  for _ in range(repeats):
    for n in counts:
      runs[n].append(_child(args, n))
  out = {'device_counts': counts, 'repeats': repeats, 'runs': {str(n): r for n, r in runs.items()}}
  median = {n: float(np.median([r['frames_per_s'] for r in rs])) for n, rs in runs.items()}
  out['frames_per_s'] = {str(n): v for n, v in median.items()}
  if 1 in median:
    out['speedup'] = {str(n): v / median[1] for n, v in median.items()}
    out['efficiency'] = {str(n): v / median[1] / n for n, v in median.items()}
  return out


def main(argv=None) -> int:
  args, _ = cli.parse(define_flags, argv, prog='python -m bench.learner_bench',
                      description=__doc__.split('\n\n')[0])
  try:
    counts = [int(c) for c in args.devices]
    canvas_sizes = [int(c) for c in args.canvas_sizes]
  except ValueError:
    cli.fail('--devices and --canvas_sizes expect comma-separated integers')
  if len(counts) > 1 or args.repeats > 1:
    out = device_scaling(args, counts, args.repeats)
    out['cores_available'] = host_devices.cores_available()
    common.write_json(args.out, out)
    print(json.dumps({k: v for k, v in out.items() if k != 'runs'}, indent=2))
    return 0
  devices = counts[0]
  if devices > 1:
    host_devices.request_host_devices(devices)
  if canvas_sizes:
    out = {f'canvas_size_{c}': measure(args.env, args.batch_size, args.sequence_length,
                                       args.updates, args.self_imitation_batch, c, devices)
           for c in canvas_sizes}
  else:
    out = measure(args.env, args.batch_size, args.sequence_length, args.updates,
                  args.self_imitation_batch, devices=devices)
  common.write_json(args.out, out)
  print(json.dumps(out, indent=2))
  return 0


if __name__ == '__main__':
  sys.exit(main())

r"""Where the online precedence learner's time goes, per psi update, on a real Reverb table.

Fills a 'precedence' table with the windows the actors write (random-policy episodes through
`agents.adders.TrajectoryAdder`), then does what the `PrecedenceLearner` node does, unthrottled,
with the same functions, and times its parts per update: Reverb sampling plus the tf.data reader
(the node's `make_window_iterator`), the windows -> batch step, and the jitted update. Copying the
parameters out for the actors ('publish') is timed once: the node does it per actor fetch, not
per update. Each setting is a
(windows per sample, updates per sample) pair; the paper's recipe and ours are one sample of 16
windows per update. Larger, rarer samples (several updates on one sample's pairs) trade pair
freshness for reader cost; the JSON reports CPU seconds per update, the figure that decides how
much of a 2-core machine the node takes at a given `--precedence_env_steps_per_update`.

    python -m bench.precedence_bench --env sokoban --settings 16x1,16x4,64x4,64x8 \
        --out results/bench/precedence_sokoban.json
"""
import json
import os
import sys
import time

import jax
import numpy as np
import reverb
from absl import flags
from acme import specs, wrappers

from agents import adders
from bench import common
from envs import cli
from estimators import networks as est_nets
from estimators import recipes, training
from launch.program import precedence_learner
from launch.program.config import RunConfig


def define_flags(fv: flags.FlagValues) -> None:
  """--env is the run configuration's field; the rest are this bench's own knobs (a setting
  pairs the precedence learner's window_batch and updates_per_sample; --phi is what --mode rac
  makes of the estimator's train_phi)."""
  cli.define_field_flags(fv, (cli.Section('', RunConfig, only=('env',)),),
                         lambda ff: 'sokoban', lambda ff: ' Its estimator network and window.')
  flags.DEFINE_integer('episodes', 200, 'Random-policy episodes written to the table.',
                       flag_values=fv)
  flags.DEFINE_list('settings', ['16x1', '64x4'],
                    'WINDOWSxUPDATES: windows per Reverb sample, psi updates per sample.',
                    flag_values=fv)
  flags.DEFINE_integer('updates', 40, 'Timed psi updates per setting (after a compiling one).',
                       flag_values=fv)
  flags.DEFINE_bool('phi', False, 'Train phi too (RAC).', flag_values=fv)
  flags.DEFINE_string('out', 'results/bench/precedence.json', 'JSON output.', flag_values=fv)


def parse_setting(text: str):
  try:
    windows, updates = (int(v) for v in text.lower().split('x'))
  except ValueError:
    raise ValueError(f'setting must be WINDOWSxUPDATES (e.g. 16x1), got {text!r}') from None
  if windows < 1 or updates < 1:
    raise ValueError(f'setting {text!r}: windows and updates must be >= 1')
  return windows, updates


def fill_table(env_name: str, episodes: int, window: int, seed: int = 0):
  """A Reverb server whose precedence table holds the windows of `episodes` random episodes."""
  import envs
  env = wrappers.SinglePrecisionWrapper(envs.make(env_name, seed=seed))
  spec = specs.make_environment_spec(env)
  table = reverb.Table(adders.PRECEDENCE_TABLE, sampler=reverb.selectors.Uniform(),
                       remover=reverb.selectors.Fifo(), max_size=1_000_000,
                       rate_limiter=reverb.rate_limiters.MinSize(1),
                       signature=adders.precedence_signature(spec))
  server = reverb.Server([table])
  client = reverb.Client(f'localhost:{server.port}')
  adder = adders.TrajectoryAdder(client, window=window)
  rng = np.random.default_rng(seed)
  steps = 0
  for _ in range(episodes):
    ts = env.reset()
    adder.add_first(ts)
    while not ts.last():
      action = np.int32(rng.integers(spec.actions.num_values))
      ts = env.step(action)
      adder.add(action, ts)
      steps += 1
  adder.flush()
  return server, client, spec, steps


class _Clock:
  """Cumulative wall and CPU seconds of named parts."""

  def __init__(self):
    self.wall, self.cpu = {}, {}

  def timed(self, name, fn, *args):
    w, c = time.perf_counter(), time.process_time()
    out = fn(*args)
    out = jax.block_until_ready(out)
    self.wall[name] = self.wall.get(name, 0.0) + time.perf_counter() - w
    self.cpu[name] = self.cpu.get(name, 0.0) + time.process_time() - c
    return out


def measure(client, spec, env_name: str, windows: int, updates_per_sample: int, updates: int,
            train_phi: bool) -> dict:
  recipe = recipes.recipe(env_name)
  config = training.TrainConfig(window=recipe.window, learning_rate=recipe.learning_rate,
                                weight_decay=recipe.weight_decay,
                                pair_sampling=recipe.pair_sampling, train_phi=train_phi)
  est = est_nets.make_estimators(est_nets.default_estimator_config(env_name), spec.actions.num_values)
  iterator = precedence_learner.make_window_iterator(client, windows, 2 * recipe.window)
  obs_example = np.zeros(spec.observations.shape, spec.observations.dtype)
  state = training.init_state(est, config, obs_example)
  update = training.make_update(est, config)
  to_batch = jax.jit(training.windows_to_batch, static_argnums=3)
  clock = _Clock()

  def one_sample():
    sample = clock.timed('sample', next, iterator)
    data = sample.data
    return clock.timed('to_batch', to_batch, data.observation, data.action,
                       data.extras['valid'], recipe.window)

  # Compile (not timed).
  batch = one_sample()
  state, _ = update(state, batch)
  jax.block_until_ready(state)
  clock = _Clock()
  wall0, cpu0 = time.perf_counter(), time.process_time()
  done = 0
  while done < updates:
    batch = one_sample()
    for _ in range(min(updates_per_sample, updates - done)):
      state, _ = clock.timed('update', update, state, batch)
      done += 1
  wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
  publish = _Clock()
  for _ in range(10):
    publish.timed('publish', jax.device_get, (state.psi_params, state.phi_params))
  return {'windows_per_sample': windows, 'updates_per_sample': updates_per_sample,
          'updates': done, 'wall_ms_per_update': 1e3 * wall / done,
          'cpu_ms_per_update': 1e3 * cpu / done,
          'wall_ms_per_update_by_part': {k: 1e3 * v / done for k, v in clock.wall.items()},
          'cpu_ms_per_update_by_part': {k: 1e3 * v / done for k, v in clock.cpu.items()},
          'publish_cpu_ms': 1e3 * publish.cpu['publish'] / 10}


def main(argv=None) -> int:
  args, _ = cli.parse(define_flags, argv, prog='python -m bench.precedence_bench',
                      description=__doc__.split('\n\n')[0])
  try:
    settings = [parse_setting(s) for s in args.settings]
  except ValueError as e:
    cli.fail(f'--settings: {e}')
  window = recipes.recipe(args.env).window
  server, client, spec, steps = fill_table(args.env, args.episodes, window)
  results = []
  for windows, per_sample in settings:
    r = measure(client, spec, args.env, windows, per_sample, args.updates, args.phi)
    print(json.dumps(r))
    results.append(r)
  out = {'env': args.env, 'window': window, 'table_steps': steps, 'phi': args.phi,
         'backend': jax.default_backend(),
         'load_average_at_end': list(os.getloadavg()),
         'settings': results}
  common.write_json(args.out, out)
  server.stop()
  print(json.dumps(out, indent=2))
  return 0


if __name__ == '__main__':
  sys.exit(main())

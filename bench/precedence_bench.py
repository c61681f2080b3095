r"""Where the online precedence learner's time goes, per psi update, on a real Reverb table.

Fills a 'precedence' table with the windows one actor writes for its K rooms (random-policy
episodes stepped by `agents.loop.BatchedEnvironmentLoop` into one `agents.adders.ActorWriter`:
items of 2w rows of the K rooms, one every w rows of the stream), then does what the
`PrecedenceLearner` node does, unthrottled, with the same functions, and times its parts per
update: Reverb sampling plus the tf.data reader (the node's `agents.adders.precedence_windows`,
which unpacks the items into one window per room), the windows -> batch step, and the jitted
update. Copying the parameters out for the actors ('publish') is timed once: the node does it
per actor fetch, not per update. Each setting is a (windows per sample, updates per sample) pair;
the paper's recipe and ours are one sample of 16 windows per update (a sample reads whole items,
so the windows are rounded up to a multiple of K). Larger, rarer samples (several updates on one
sample's pairs) trade pair freshness for reader cost; the JSON reports CPU seconds per update,
the figure that decides how much of a 2-core machine the node takes at a given
`--precedence_env_steps_per_update`.

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
from acme.utils import counting, loggers

from agents import acting, adders
from agents import loop as loop_lib
from bench import common
from envs import cli
from estimators import networks as est_nets
from estimators import recipes, training
from launch.program.config import RunConfig

# Rooms of the actor that fills the table (and of each item: windows are sampled K at a time).
ROOMS = 8


def define_flags(fv: flags.FlagValues) -> None:
  """--env is the run configuration's field; the rest are this bench's own knobs (a setting
  pairs the precedence learner's window_batch and updates_per_sample; --phi is what --mode rac
  makes of the estimator's train_phi)."""
  cli.define_field_flags(fv, (cli.Section('', RunConfig, only=('env',)),),
                         lambda ff: 'sokoban', lambda ff: ' Its estimator network and window.')
  flags.DEFINE_integer('episodes', 200, 'Random-policy episodes written to the table (at '
                       'least; stepping goes on until it holds a window).', flag_values=fv)
  flags.DEFINE_integer('rooms', ROOMS, "Rooms of the actor writing the table: each item's "
                       'windows.', flag_values=fv)
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


def fill_table(env_name: str, episodes: int, window: int, seed: int = 0, rooms: int = ROOMS):
  """A Reverb server whose precedence table holds the windows an actor of `rooms` rooms writes
  while its random policy plays at least `episodes` episodes (summed over the rooms), stepping on
  until the table holds at least one item; (server, client, spec, env steps taken)."""
  import envs
  environments = [wrappers.SinglePrecisionWrapper(envs.make(env_name, seed=seed + k))
                  for k in range(rooms)]
  spec = specs.make_environment_spec(environments[0])
  table = reverb.Table(adders.PRECEDENCE_TABLE, sampler=reverb.selectors.Uniform(),
                       remover=reverb.selectors.Fifo(), max_size=1_000_000,
                       rate_limiter=reverb.rate_limiters.MinSize(1),
                       signature=adders.precedence_signature(spec, window, rooms))
  server = reverb.Server([table])
  client = reverb.Client(f'localhost:{server.port}')
  counter = counting.Counter()

  def filled() -> bool:
    return (counter.get_counts().get('episodes', 0) >= episodes and
            client.server_info()[adders.PRECEDENCE_TABLE].current_size > 0)

  loop = loop_lib.BatchedEnvironmentLoop(
      environments, acting.BatchedActor(spec.actions.num_values, acting.ReversibilityConfig(),
                                        [seed + k for k in range(rooms)]),
      'none', adders.ActorWriter(client, rooms, window=window), counter=counter,
      logger=loggers.NoOpLogger(), should_stop=filled)
  steps = loop.run(num_steps=sys.maxsize)   # until filled()
  loop.close()
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
  # The table's rooms per item (its signature: [2w, G, ...]); a sample reads whole items.
  rooms = client.server_info()[adders.PRECEDENCE_TABLE].signature['observation'].shape[1]
  iterator = adders.precedence_windows(client, windows, rooms)
  obs_example = np.zeros(spec.observations.shape, spec.observations.dtype)
  state = training.init_state(est, config, obs_example)
  update = training.make_update(est, config)
  to_batch = jax.jit(training.windows_to_batch, static_argnums=4)
  clock = _Clock()

  def one_sample():
    sample = clock.timed('sample', next, iterator)
    data = sample.data
    return clock.timed('to_batch', to_batch, data.observation, data.action,
                       data.extras['valid'], data.start_of_episode, recipe.window)

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
  return {'windows_per_sample': -(-windows // rooms) * rooms, 'rooms_per_item': rooms,
          'updates_per_sample': updates_per_sample,
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
  server, client, spec, steps = fill_table(args.env, args.episodes, window, rooms=args.rooms)
  results = []
  for windows, per_sample in settings:
    r = measure(client, spec, args.env, windows, per_sample, args.updates, args.phi)
    print(json.dumps(r))
    results.append(r)
  out = {'env': args.env, 'window': window, 'rooms': args.rooms, 'table_steps': steps,
         'table_items': client.server_info()[adders.PRECEDENCE_TABLE].current_size,
         'phi': args.phi,
         'backend': jax.default_backend(),
         'load_average_at_end': list(os.getloadavg()),
         'settings': results}
  common.write_json(args.out, out)
  server.stop()
  print(json.dumps(out, indent=2))
  return 0


if __name__ == '__main__':
  sys.exit(main())

r"""What a replay checkpoint costs: seconds and MB to save a full precedence table, seconds to
restore it, what the checkpoint directory holds after several saves, and whether a save holds
up the writers (one client's inserts per second alone and while a save runs).

The table is the run's own (`launch.program.builder.make_tables`, `--env`'s window and
`table_max_windows`, for actors of K = `--envs` rooms: items of K windows), filled past its size
(FIFO steady state, so chunks are shared the way they are in a long run) with random-policy
episodes of one actor's K rooms, stepped by the actor's loop into the actor's writer (one row per
actor step for all K rooms, `launch.program.builder.make_actor_writer`); saved through a Reverb
client as the coordinator does (`launch.program.replay`), and restored by a second server on the
same checkpoint directory, as a restarted replay node does. Table sizes are reported in windows
(items x K); inserts per second count items, each K windows of 2w rows.

    python -m bench.replay_checkpoint_bench --env sokoban --out results/bench/replay_checkpoint_sokoban.json
"""
import dataclasses
import os
import shutil
import sys
import tempfile
import threading
import time
from typing import Optional

import numpy as np
import reverb
from absl import flags
from acme.utils import loggers
from reverb.platform import checkpointers_lib

from agents import adders
from agents import loop as loop_lib
from agents.acting import BatchedActor, ReversibilityConfig
from bench import common
from envs import cli
from estimators import recipes
from estimators.training import TrainConfig
from launch.program import builder as build
from launch.program import replay
from launch.program.config import RunConfig
from launch.runtime import run_state


def define_flags(fv: flags.FlagValues) -> None:
  """--env is the run configuration's field; the rest are this bench's own knobs."""
  cli.define_field_flags(fv, (cli.Section('', RunConfig, only=('env',)),),
                         lambda ff: 'sokoban', lambda ff: ' Its window and observation.')
  flags.DEFINE_integer('envs', 16, "Rooms of the actor writing the table (one writer, one row "
                       "per actor step for all of them; each item holds their K windows).",
                       flag_values=fv)
  flags.DEFINE_float('fill', 1.2, 'Windows written, as a multiple of the table size.',
                     flag_values=fv)
  flags.DEFINE_integer('saves', 3, 'Checkpoints timed.', flag_values=fv)
  flags.DEFINE_string('out', 'results/bench/replay_checkpoint.json', 'JSON output.',
                      flag_values=fv)


def fill(client: reverb.Client, cfg: RunConfig, windows: int) -> int:
  """Steps random-policy episodes of one actor's `cfg.envs_per_actor` rooms into the actor's
  writer until the table has taken `windows` windows (whole items); env steps."""
  num_envs = cfg.envs_per_actor
  seeds = list(range(1, num_envs + 1))
  batch = build.make_environments(cfg, seeds)
  items = -(-windows // build.rooms_per_item(cfg))

  def filled() -> bool:
    info = client.server_info()[adders.PRECEDENCE_TABLE]
    return info.rate_limiter_info.insert_stats.completed >= items

  loop = loop_lib.BatchedEnvironmentLoop(
      batch, BatchedActor(batch.action_spec().num_values, ReversibilityConfig(), seeds), 'none',
      build.make_actor_writer(cfg, client, num_envs), logger=loggers.NoOpLogger(),
      should_stop=filled)
  steps = loop.run(num_steps=sys.maxsize)   # until filled()
  loop.close()
  return steps


def inserts_per_second(client: reverb.Client, seconds: float, during=None) -> float:
  """Items one client thread inserts into the precedence table per second, for `seconds` or
  while `during()` runs in another thread (does a save hold up the actors?): one row appended
  per item, each item the last 2w rows (the table's signature: [2w, K, ...])."""
  signature = client.server_info()[adders.PRECEDENCE_TABLE].signature
  row = {name: np.zeros(spec.shape[1:], spec.dtype.as_numpy_dtype) for name, spec in signature.items()}
  length = signature['observation'].shape[0]
  done = threading.Event()
  if during is not None:
    worker = threading.Thread(target=lambda: (during(), done.set()))
    worker.start()
  else:
    threading.Timer(seconds, done.set).start()
  n, start = 0, time.time()
  with client.trajectory_writer(num_keep_alive_refs=length) as writer:
    for _ in range(length - 1):
      writer.append(row)
    while not done.is_set():
      writer.append(row)
      writer.create_item(adders.PRECEDENCE_TABLE, 1.0,
                         {name: column[-length:] for name, column in writer.history.items()})
      writer.flush()
      n += 1
  return n / (time.time() - start)


def measure(env_name: str, num_envs: int, fill_factor: float, saves: int,
            table_max_windows: Optional[int] = None, insert_seconds: float = 2.0) -> dict:
  """Fills the run's precedence table of `env_name` for actors of `num_envs` rooms
  (`table_max_windows`: its size, default the run's) to `fill_factor` times its size, saves it
  `saves` times, times one client's inserts alone and during a save, and restores it with a
  second server."""
  root = tempfile.mkdtemp(prefix='replay-ckpt-bench-')
  try:
    recipe = recipes.recipe(env_name)
    cfg = RunConfig(env=env_name, agent='random', run_dir=root, envs_per_actor=num_envs,
                    reversibility=ReversibilityConfig(mode='rae'),
                    estimator_train=TrainConfig(window=recipe.window))
    if table_max_windows is not None:
      cfg = dataclasses.replace(cfg, precedence=dataclasses.replace(
          cfg.precedence, table_max_windows=table_max_windows))
    ckpt_dir = replay.checkpoint_dir(root)
    server = reverb.Server(build.make_tables(cfg),
                           checkpointer=checkpointers_lib.DefaultCheckpointer(ckpt_dir))
    client = reverb.Client(f'localhost:{server.port}')
    max_windows = cfg.precedence.table_max_windows
    rooms = build.rooms_per_item(cfg)
    start = time.time()
    steps = fill(client, cfg, int(fill_factor * max_windows))
    fill_s = time.time() - start
    size = replay.table_sizes(client)[adders.PRECEDENCE_TABLE] * rooms
    saver = replay.Checkpoints(client, run_state.RunRecords(root), period_s=3600.0)
    timed = [saver.save('bench') for _ in range(saves)]
    alone = inserts_per_second(client, insert_seconds)
    during_save = inserts_per_second(client, 0.0, during=lambda: timed.append(saver.save('bench')))
    kept = sorted(os.listdir(ckpt_dir))
    server.stop()
    start = time.time()
    restored_server = reverb.Server(build.make_tables(cfg),
                                    checkpointer=checkpointers_lib.DefaultCheckpointer(ckpt_dir))
    restore_s = time.time() - start
    restored = replay.table_sizes(reverb.Client(f'localhost:{restored_server.port}'))
    restored_server.stop()
    obs = build.environment_spec(cfg).observations
    return {
        'env': env_name, 'window': cfg.window, 'table_max_windows': max_windows,
        'envs': num_envs, 'rooms_per_item': rooms,
        'observation': {'shape': list(obs.shape), 'dtype': str(obs.dtype)},
        'env_steps_written': steps, 'fill_seconds': round(fill_s, 1), 'table_size': size,
        'save_seconds': [t['seconds'] for t in timed], 'save_mb': [t['mb'] for t in timed],
        'checkpoints_kept_after_saves': len(kept), 'restore_seconds': round(restore_s, 3),
        'inserts_per_second_alone': round(alone),
        'inserts_per_second_during_a_save': round(during_save),
        'restored_size': restored[adders.PRECEDENCE_TABLE] * rooms,
        'load_average': os.getloadavg()}
  finally:
    shutil.rmtree(root, ignore_errors=True)


def main(argv=None) -> int:
  args, _ = cli.parse(define_flags, argv, prog='python -m bench.replay_checkpoint_bench',
                      description=__doc__.split('\n\n')[0])
  result = measure(args.env, args.envs, args.fill, args.saves)
  print(result)
  common.write_json(args.out, result)
  return 0


if __name__ == '__main__':
  sys.exit(main())

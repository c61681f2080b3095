#!/usr/bin/env python
"""Generates the fixed Sokoban level set (paper Appendix C: 1000 levels, 10x10, 4 boxes).

Uses gym-sokoban's own generator (`gym_sokoban.envs.room_utils.generate_room`), which draws from
the global `random` and `np.random` modules. Each level i is generated after seeding both with
`seed * 1_000_003 + i` (plus a retry counter when the generator gives up on a room), so level i
does not depend on how many levels were generated before it in this run: an interrupted run can be
resumed and gives the same file as an uninterrupted one.

Levels are appended to the output (Boxoban form, `; i` headers) and flushed one by one. On start
the existing file is parsed; complete levels are kept and generation resumes after the last one
(a partly written last level is cut off first). Takes ~4 s per level.

    nice -n 19 .venv/bin/python scripts/generate_sokoban_levels.py            # 1000 levels
    .venv/bin/python scripts/generate_sokoban_levels.py -n 3 -o /tmp/three.txt
"""
import os
import random
import sys
import time
import warnings

import numpy as np
from absl import flags

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))

from envs import cli  # pylint: disable=wrong-import-position
from envs import levels as levels_lib  # pylint: disable=wrong-import-position

DEFAULT_OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, 'envs', 'data',
                           'sokoban_1000.txt')


def generate_one(index: int, seed: int, dim=(10, 10), num_boxes=4, max_tries=100):
  """Level `index` of the set: gym-sokoban's generator, seeded per level, retried on failure."""
  from gym_sokoban.envs import room_utils  # pylint: disable=import-outside-toplevel
  num_steps = int(1.7 * (dim[0] + dim[1]))  # SokobanEnv's default num_gen_steps
  for attempt in range(max_tries):
    s = (seed * 1_000_003 + index * 1_009 + attempt) % (2**32)
    random.seed(s)
    np.random.seed(s)
    try:
      with warnings.catch_warnings():
        warnings.simplefilter('error', RuntimeWarning)
        room_fixed, room_state, _ = room_utils.generate_room(
            dim=dim, num_steps=num_steps, num_boxes=num_boxes)
    except (RuntimeError, RuntimeWarning, ValueError):
      continue  # the generator raises when it cannot make a room; try the next seed
    room_fixed = np.asarray(room_fixed, dtype=int)
    room_state = np.asarray(room_state, dtype=int)
    level = levels_lib.level_from_arrays(room_fixed, room_state, name=f'; {index}', index=index)
    # Keep only rooms our parser accepts (closed, boxes == targets == num_boxes, none solved).
    text = levels_lib.format_level(level)
    try:
      (parsed,) = levels_lib.parse_levels(text, source='generated')
    except levels_lib.LevelFileError:
      continue
    if len(parsed.boxes) != num_boxes or set(parsed.boxes) == set(parsed.targets):
      continue
    return parsed, attempt
  raise RuntimeError(f'level {index}: generator failed {max_tries} times')


def existing_levels(path: str, first: int = 0):
  """Complete levels already in `path` (rewriting the file without a partial tail)."""
  if not os.path.exists(path):
    return 0
  with open(path, 'r', encoding='utf-8') as f:
    text = f.read()
  blocks = text.split('\n\n')
  # Every complete level ends with a blank line, so the last block is partial (or empty).
  complete = [b for b in blocks[:-1] if b.strip()]
  good = []
  for b in complete:
    try:
      good.extend(levels_lib.parse_levels(b + '\n', source=os.path.basename(path)))
    except levels_lib.LevelFileError:
      break
  for i, level in enumerate(good):
    if level.name != f'; {first + i}':
      good = good[:i]
      break
  kept = ''.join(levels_lib.format_level(level) for level in good)
  if kept != text:
    with open(path, 'w', encoding='utf-8') as f:
      f.write(kept)
  return len(good)


def define_flags(fv: flags.FlagValues) -> None:
  flags.DEFINE_integer('num_levels', 1000, 'levels in the set', short_name='n', flag_values=fv)
  flags.DEFINE_alias('num-levels', 'num_levels', flag_values=fv)
  flags.DEFINE_string('out', DEFAULT_OUT, 'level file to write (resumed where it stops)',
                      short_name='o', flag_values=fv)
  flags.DEFINE_integer('seed', 0, 'seed of the set', flag_values=fv)
  flags.DEFINE_integer('boxes', 4, 'boxes per level', flag_values=fv)
  flags.DEFINE_integer('size', 10, 'rows and columns of a level', flag_values=fv)
  flags.DEFINE_bool('fresh', False, 'overwrite instead of resuming', flag_values=fv)
  flags.DEFINE_integer('first', 0, 'index of the first level in --out (to generate a shard of the '
                       'set in parallel: level i depends only on (seed, i); concatenate shards '
                       'after)', flag_values=fv)


def main(argv=None):
  args, _ = cli.parse(define_flags, argv, prog='scripts/generate_sokoban_levels.py',
                      description=__doc__.split('\n')[0])

  from tqdm import tqdm  # pylint: disable=import-outside-toplevel
  out = os.path.abspath(args.out)
  os.makedirs(os.path.dirname(out), exist_ok=True)
  if args.fresh and os.path.exists(out):
    os.remove(out)
  done = args.first + existing_levels(out, args.first)
  if done >= args.num_levels:
    print(f'{out}: already has {done} levels')
    return 0
  print(f'{out}: {done} levels present, generating {args.num_levels - done} more', flush=True)
  start = time.time()
  retries = 0
  with open(out, 'a', encoding='utf-8') as f, \
      tqdm(total=args.num_levels, initial=done, unit='level', mininterval=5.0) as bar:
    for i in range(done, args.num_levels):
      level, attempts = generate_one(i, args.seed, dim=(args.size, args.size),
                                     num_boxes=args.boxes)
      retries += attempts
      f.write(levels_lib.format_level(level, header=f'; {i}'))
      f.flush()
      bar.update(1)
  elapsed = time.time() - start
  print(f'done: {args.num_levels} levels in {out} ({elapsed:.0f} s this run, '
        f'{retries} generator retries)', flush=True)
  return 0


if __name__ == '__main__':
  sys.exit(main())

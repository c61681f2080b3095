"""Writes an animated GIF (plus a PNG of its first frame) of an environment under a random policy.

    python -m envs.render --env turf --policy random --episodes 3 --out /tmp/turf.gif
    python -m envs.render --env cliff --option wind=0.2 --episodes 5 --out /tmp/cliff.gif

`--option key=value` (repeatable) passes extra options to `envs.make`; values are parsed as
bool (true/false), int, float, or left as strings. The PNG goes next to the GIF (FILE.png).
"""
import os
import sys
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
from absl import flags
from PIL import Image

import envs
from envs import cli, paths


def parse_options(items: Sequence[str]) -> Dict[str, Any]:
  return envs.parse_options(items, flag='--option')


def random_frames(env, episodes: int, seed: int, max_frames: int) -> List[np.ndarray]:
  rng = np.random.default_rng(seed)
  n = int(env.action_spec().num_values)
  frames = []
  for _ in range(episodes):
    ts = env.reset()
    frames.append(env.render())
    while not ts.last() and len(frames) < max_frames:
      ts = env.step(int(rng.integers(n)))
      frames.append(env.render())
    if len(frames) >= max_frames:
      break
  return frames


def write_gif(frames: Sequence[np.ndarray], path: str, fps: float) -> str:
  """Writes `frames` to `path` (GIF) and the first frame to the sibling .png; returns PNG path."""
  images = [Image.fromarray(np.asarray(f, dtype=np.uint8)) for f in frames]
  directory = os.path.dirname(os.path.abspath(path))
  os.makedirs(directory, exist_ok=True)
  images[0].save(path, format='GIF', save_all=True, append_images=images[1:],
                 duration=max(1, int(round(1000.0 / fps))), loop=0)
  png = os.path.splitext(path)[0] + '.png'
  images[0].save(png, format='PNG')
  return png


def define_flags(fv: flags.FlagValues) -> None:
  flags.DEFINE_string('env', None, f'one of: {", ".join(envs.names())}', flag_values=fv)
  flags.DEFINE_enum('policy', 'random', ['random'], 'policy that acts', flag_values=fv)
  flags.DEFINE_integer('episodes', 1, 'episodes drawn', flag_values=fv)
  flags.DEFINE_string('out', None, 'output .gif path', flag_values=fv)
  flags.DEFINE_integer('seed', 0, 'seed of the environment and the policy', flag_values=fv)
  flags.DEFINE_float('fps', 10.0, 'frames per second of the GIF', flag_values=fv)
  flags.DEFINE_integer('max_frames', 2000, 'frames drawn at most', flag_values=fv)
  flags.DEFINE_alias('max-frames', 'max_frames', flag_values=fv)
  flags.DEFINE_multi_string('option', [], 'KEY=VALUE: extra environment option (repeatable)',
                            flag_values=fv)


class RenderError(ValueError):
  """A bad argument, reported as one line (exit code 2)."""


def unwritable_reason(path: str) -> Optional[str]:
  """Why `path` cannot be written (None when it can)."""
  if os.path.isdir(path):
    return 'it is a directory'
  return paths.unwritable_reason(path)


def check_args(args):
  """Every numeric argument and the output, before any frame is drawn."""
  for name, value, low in (('episodes', args.episodes, 1), ('max_frames', args.max_frames, 1),
                           ('seed', args.seed, 0)):
    if value < low:
      raise RenderError(f'--{name} must be >= {low}, got {value}')
  if not args.fps > 0:   # also refuses nan
    raise RenderError(f'--fps must be > 0, got {args.fps}')
  problem = unwritable_reason(args.out)
  if problem:
    raise RenderError(f'cannot write --out {os.path.abspath(args.out)}: {problem}')


def main(argv: Optional[Sequence[str]] = None) -> int:
  args, _ = cli.parse(define_flags, argv, prog='python -m envs.render',
                      description=__doc__.split('\n')[0], required=('env', 'out'))
  try:
    check_args(args)
    env = envs.make(args.env, seed=args.seed, **parse_options(args.option))
  except (RenderError, envs.EnvError) as e:
    print(f'error: {e}', file=sys.stderr)
    return 2
  frames = random_frames(env, args.episodes, args.seed, args.max_frames)
  try:
    png = write_gif(frames, args.out, args.fps)
  except OSError as e:   # e.g. the disk filled up, or --out changed since the check
    print(f'error: cannot write {args.out}: {e.strerror or e}', file=sys.stderr)
    return 2
  print(f'wrote {args.out} ({len(frames)} frames) and {png}')
  return 0


if __name__ == '__main__':
  sys.exit(main())

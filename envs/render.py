"""Writes an animated GIF (plus a PNG of its first frame) of an environment under a random policy.

    python -m envs.render --env turf --policy random --episodes 3 --out /tmp/turf.gif
    python -m envs.render --env cliff --option wind=0.2 --episodes 5 --out /tmp/cliff.gif

`--option key=value` (repeatable) passes extra options to `envs.make`; values are parsed as
bool (true/false), int, float, or left as strings. The PNG goes next to the GIF (FILE.png).
"""
import argparse
import os
import sys
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
from PIL import Image

import envs
from envs import paths


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


def build_parser() -> argparse.ArgumentParser:
  p = argparse.ArgumentParser(prog='python -m envs.render', description=__doc__.split('\n')[0])
  p.add_argument('--env', required=True, help=f'one of: {", ".join(envs.names())}')
  p.add_argument('--policy', default='random', choices=['random'])
  p.add_argument('--episodes', type=int, default=1)
  p.add_argument('--out', required=True, help='output .gif path')
  p.add_argument('--seed', type=int, default=0)
  p.add_argument('--fps', type=float, default=10.0)
  p.add_argument('--max_frames', '--max-frames', type=int, default=2000)
  p.add_argument('--option', action='append', default=[], metavar='KEY=VALUE',
                 help='extra environment option (repeatable)')
  return p


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
  args = build_parser().parse_args(argv)
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

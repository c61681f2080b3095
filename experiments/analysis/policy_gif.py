"""Watching a trained agent: an evaluated episode (its record holds the actions as digits) is
replayed on its level and written as an animated GIF, the room on the left and, for an RAE run,
psi(x_t, x_t+1) of every step so far on the right with the threshold beta, so one can see which
moves the penalty fell on. `experiments.evaluate_policy --gif` is the command."""
import os
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from envs import paths

CELL_PX = 16            # pixels per room cell
PANEL_W = 200           # the psi panel's width
TEXT_H = 14             # a caption line above the room
FRAME_MS = 150          # per step; the last frame of an episode is held longer
HOLD_MS = 1200
BACKGROUND = (255, 255, 255)
INK = (40, 40, 40)
PSI_COLOUR = (31, 119, 180)
ABOVE_BETA = (214, 39, 40)


def replay(env, actions: str):
  """(rooms rendered at CELL_PX, observations x_0 .. x_T) from the reset through every action of
  a recorded episode: what the GIF shows and what psi is given, in one pass."""
  ts = env.reset()
  frames, observations = [env.render(CELL_PX)], [ts.observation]
  for digit in actions:
    ts = env.step(int(digit))
    frames.append(env.render(CELL_PX))
    observations.append(ts.observation)
    if ts.last():
      break
  return frames, np.stack(observations)


def _font():
  from PIL import ImageFont
  return ImageFont.load_default()


def _psi_panel(draw, x0: int, height: int, psi: Sequence[float], t: int, beta: float,
               num_steps: int) -> None:
  """psi of steps 1..t as a line on [0, 1], beta dashed, the step just taken marked."""
  left, right, top, bottom = x0 + 28, x0 + PANEL_W - 6, TEXT_H + 6, height - 14
  draw.rectangle([left, top, right, bottom], outline=INK)
  font = _font()
  for value in (0.0, 0.5, 1.0):
    y = bottom - value * (bottom - top)
    draw.text((x0 + 2, y - 5), f'{value:.1f}', fill=INK, font=font)
  y_beta = bottom - beta * (bottom - top)
  for x in range(left, right, 6):
    draw.line([x, y_beta, min(x + 3, right), y_beta], fill=ABOVE_BETA)
  draw.text((right - 56, y_beta - 12), f'beta {beta:g}', fill=ABOVE_BETA, font=font)
  span = max(num_steps - 1, 1)
  points = [(left + (i / span) * (right - left), bottom - float(p) * (bottom - top))
            for i, p in enumerate(psi[:t])]
  if len(points) > 1:
    draw.line(points, fill=PSI_COLOUR, width=1)
  if t:
    x, y = points[-1]
    colour = ABOVE_BETA if psi[t - 1] > beta else PSI_COLOUR
    draw.ellipse([x - 2, y - 2, x + 2, y + 2], fill=colour)
    draw.text((left + 4, bottom + 1), f'psi(x{t - 1}, x{t}) = {psi[t - 1]:.2f}', fill=colour,
              font=font)
  draw.text((left + 4, top - TEXT_H + 2), 'psi per step', fill=INK, font=font)


def episode_images(frames: List[np.ndarray], caption: str, psi: Optional[Sequence[float]],
                   beta: Optional[float]):
  """One PIL image per frame: caption, room, and the psi panel when psi is given."""
  from PIL import Image, ImageDraw
  room_h, room_w = frames[0].shape[:2]
  width = room_w + (PANEL_W if psi is not None else 0)
  height = max(room_h + TEXT_H, 120 if psi is not None else 0)
  images = []
  for t, frame in enumerate(frames):
    image = Image.new('RGB', (width, height), BACKGROUND)
    image.paste(Image.fromarray(np.asarray(frame, np.uint8)), (0, TEXT_H))
    draw = ImageDraw.Draw(image)
    draw.text((2, 1), f'step {t}  {caption}', fill=INK, font=_font())
    if psi is not None:
      _psi_panel(draw, room_w, height, psi, t, beta, len(frames))
    images.append(image)
  return images


def write_gif(episodes: List[Dict[str, Any]], out_path: str) -> str:
  """`episodes`: dicts with 'frames', 'caption' and optionally 'psi' and 'beta'; played one
  after the other, each last frame held. Written whole or not at all; returns the path."""
  images, durations = [], []
  for e in episodes:
    shot = episode_images(e['frames'], e['caption'], e.get('psi'), e.get('beta'))
    images += shot
    durations += [FRAME_MS] * (len(shot) - 1) + [HOLD_MS]
  if not images:
    raise ValueError('no frames to write')
  # One palette for the whole GIF: the room's few colours and the panel's would otherwise be
  # re-quantised per frame and flicker.
  from PIL import Image
  picks = [images[0], images[len(images) // 2], images[-1]]
  mosaic = Image.new('RGB', (picks[0].width, picks[0].height * len(picks)))
  for i, im in enumerate(picks):
    mosaic.paste(im, (0, i * picks[0].height))
  palette = mosaic.quantize(colors=64)
  frames = [im.quantize(palette=palette) for im in images]
  os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
  with paths.atomic_path(out_path) as tmp:
    frames[0].save(tmp, format='GIF', save_all=True, append_images=frames[1:],
                   duration=durations, loop=0, optimize=False)
  return out_path


def psi_of_episodes(checkpoint_path: str, observations: List[np.ndarray]) -> List[np.ndarray]:
  """psi(x_t, x_t+1) of every step of each episode, from a frozen estimator checkpoint."""
  from estimators import checkpoint, psi_trace
  ckpt = checkpoint.load(checkpoint_path)
  return [psi_trace.psi_along(ckpt, obs) for obs in observations]


def gif_of_evaluation(cfg, result: Dict[str, Any], level_set: Sequence[Any], options: Dict[str, Any],
                      levels: Sequence[int], policy: str, out_path: str) -> str:
  """The evaluated episodes of `policy` on `levels` (indices into the evaluated set), replayed
  into one GIF; an RAE run with a frozen psi shows psi per step beside the room."""
  import envs
  records = {r['level']: r for r in result['episodes'][policy]}
  show_psi = cfg.reversibility.mode == 'rae' and bool(cfg.estimator_checkpoint)
  episodes, observations = [], []
  for level in levels:
    record = records[level]
    env = envs.make('sokoban', seed=0, **options, levels=[level_set[level]])
    outcome = 'solved' if record['solved'] else f"{record['boxes_on_target']} on target"
    frames, obs = replay(env, record['actions'])
    episodes.append({'frames': frames, 'caption': f'level {level} {policy}: {outcome}'})
    observations.append(obs)
  if show_psi:
    for episode, psi in zip(episodes, psi_of_episodes(cfg.estimator_checkpoint, observations)):
      episode.update(psi=psi, beta=cfg.reversibility.beta)
  return write_gif(episodes, out_path)

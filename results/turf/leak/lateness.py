"""psi's logit is linear in the two embeddings (Turf preset: no head layer), so
logit(x, y) = A(x) + B(y) + c: psi is a difference of per-image scores. B(y) - B(y0) on the
clean map, the agent on each cell, read from logit(x_ref, y) with x_ref fixed: how "late" psi
finds each agent position with every cell green. Usage: lateness.py CKPT..."""
import sys
import numpy as np
import envs
from estimators import checkpoint, predict

env = envs.make('turf')
imgs = []
cells = [(r, c) for r in range(10) for c in range(10)]
for r, c in cells:
  env.set_state((r, c, 0))
  imgs.append(np.asarray(env.observation()))
imgs = np.stack(imgs)
ref = np.repeat(imgs[90:91], len(imgs), axis=0)   # agent on the start (9, 0)
logit = lambda p: np.log(p) - np.log1p(-p)
for path in sys.argv[1:]:
  pred = predict.Predictor(checkpoint.load(path), batch=128)
  b = logit(np.clip(pred.psi(ref, imgs), 1e-6, 1 - 1e-6))
  a = -logit(np.clip(pred.psi(imgs, ref), 1e-6, 1 - 1e-6))
  print(path, ': B(y) - B(start), rows 0-9 (cols 0-9), then -A(x) + A(start)')
  for m, name in ((b - b[90], 'B'), (a - a[90], '-A')):
    grid = m.reshape(10, 10)
    for r in range(10):
      print(f'  {name} row {r}: ' + ' '.join(f'{v:6.2f}' for v in grid[r]))

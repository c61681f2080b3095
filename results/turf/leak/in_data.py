"""psi(x, x') of checkpoints at the fresh-grass entries the random data itself holds (the maps as
the walk had ruined them), per move; the clean-map corner is out of that distribution.
Usage: in_data.py DATASET OUT.json CKPT..."""
import json
import sys
import numpy as np
from estimators.rlds import flat
from estimators import checkpoint, predict
from envs import turf

data, _ = flat.load_flat(sys.argv[1])
obs = data.observations
agent = np.all(obs == np.array(turf.AGENT, np.uint8), axis=-1).reshape(len(obs), -1)
pos = np.argmax(agent, axis=1)
green = np.all(obs == np.array(turf.GRASS, np.uint8), axis=-1).reshape(len(obs), -1)
same = data.last[:-1] == data.last[1:]
moves = [((1, 8), (1, 9)), ((1, 8), (2, 8)), ((2, 7), (2, 8)), ((0, 8), (0, 7)), ((3, 9), (2, 9)),
         ((2, 7), (3, 7)), ((8, 1), (8, 2)), ((9, 0), (9, 1))]
results = {}
for path in sys.argv[3:]:
  results[path] = {}
  pred = predict.Predictor(checkpoint.load(path), batch=256)
  print(path)
  for a, b in moves:
    ka, kb = a[0] * 10 + a[1], b[0] * 10 + b[1]
    idx = np.flatnonzero(same & (pos[:-1] == ka) & (pos[1:] == kb) & green[:-1, kb])
    if not len(idx):
      print(f'  {a}->{b}: none'); continue
    p = pred.psi(obs[idx], obs[idx + 1])
    nbrown = (~green[idx] & turf.GRASS_MASK.reshape(-1)[None] & ~agent[idx]).sum(1)
    results[path][f'{a}->{b}'] = dict(n=int(len(idx)), mean=float(p.mean()),
                                      median=float(np.median(p)), above_08=float(np.mean(p > 0.8)))
    print(f'  {a}->{b}: n {len(idx)}, psi mean {p.mean():.3f} median {np.median(p):.3f} '
          f'frac>0.8 {np.mean(p > 0.8):.2f}; ruined cells in x: mean {nbrown.mean():.1f}')
with open(sys.argv[2], 'w') as f:
  json.dump(results, f, indent=1)

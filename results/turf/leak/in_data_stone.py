"""psi(x, x') at the stone moves (1, 8) -> (0, 8) and (0, 8) -> (1, 8) of the random data (reversible),
beside the grass entry (1, 8) -> (1, 9) of in_data.py. Usage: in_data_stone.py DATASET CKPT..."""
import sys
import numpy as np
from estimators.rlds import flat
from estimators import checkpoint, predict
from envs import turf

data, _ = flat.load_flat(sys.argv[1])
obs = data.observations
agent = np.all(obs == np.array(turf.AGENT, np.uint8), axis=-1).reshape(len(obs), -1)
pos = np.argmax(agent, axis=1)
same = data.last[:-1] == data.last[1:]
for path in sys.argv[2:]:
  pred = predict.Predictor(checkpoint.load(path), batch=256)
  for a, b in (((1, 8), (0, 8)), ((0, 8), (1, 8)), ((1, 9), (1, 8))):
    ka, kb = a[0] * 10 + a[1], b[0] * 10 + b[1]
    idx = np.flatnonzero(same & (pos[:-1] == ka) & (pos[1:] == kb))
    p = pred.psi(obs[idx], obs[idx + 1])
    print(f'{path} {a}->{b}: n {len(idx)}, psi mean {p.mean():.3f}, share > 0.8 {np.mean(p > 0.8):.2f}')

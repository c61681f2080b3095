"""How often random data shows each grass cell entered fresh, and how many observations of its
episode follow the entry and follow the cell's ruin becoming visible (the evidence psi has to
learn that standing on that cell comes after the cell was green)."""
import sys
import numpy as np
from estimators.rlds import flat
from envs import turf

path = sys.argv[1]
data, meta = flat.load_flat(path)
obs = data.observations
agent = np.all(obs == np.array(turf.AGENT, np.uint8), axis=-1)   # [N,10,10]
pos = np.argwhere(agent.reshape(len(obs), -1))[:, 1]
brown = np.all(obs == np.array(turf.RUINED, np.uint8), axis=-1).reshape(len(obs), -1)
last = data.last
N = len(obs)
cells = [(1, 9), (2, 8), (2, 9), (0, 7), (9, 1), (8, 2), (5, 0), (3, 8)]
print(f'{path}: {N} observations, {len(data.lengths)} episodes')
print('| cell | fresh entries | entries from (1,8) | mean obs after entry | share of entries <=2 obs before end | cell seen turning brown, not at the end (also when the agent leaves it already ruined) | mean obs after that | pairs starting at an entry (w = 120) |')
print('|---|---|---|---|---|---|---|---|')
for (r, c) in cells:
  k = r * 10 + c
  # fresh entry: agent at k at t+1, not at t, cell not brown at t, same episode
  at = pos == k
  idx = np.flatnonzero(at[1:] & ~at[:-1] & ~brown[:-1, k] & (last[:-1] == last[1:])) + 1
  from18 = np.sum(pos[idx - 1] == 18)
  after = last[idx] - idx
  # ruin shown: first obs of an episode where k is brown and k was not brown before
  shown = np.flatnonzero(brown[1:, k] & ~brown[:-1, k] & (last[:-1] == last[1:])) + 1
  nonfinal = shown[last[shown] > shown]
  after_ruin = last[shown] - shown
  pairs = np.minimum(after, 120).sum()
  print(f'| {(r, c)} | {len(idx)} | {from18} | {after.mean():.1f} | {np.mean(after <= 2):.2f} | {len(nonfinal)} of {len(shown)} | {after_ruin.mean():.1f} | {pairs} |')

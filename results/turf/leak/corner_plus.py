"""psi (and phi) of checkpoints at the goal's corner and at other fresh-grass entries, map clean
(launch.studies.turf_corner's scoring, more transitions). Usage: corner_plus.py OUT.json CKPT..."""
import json
import sys

from launch.studies import turf_corner as tc

U, D, L, R = range(4)
TRANSITIONS = tc.TRANSITIONS + (
    ((0, 8), L, 'onto (0, 7) beside the road end'),
    ((3, 9), U, 'onto (2, 9) below (1, 9)'),
    ((2, 7), R, 'onto (2, 8)'),
    ((8, 1), R, 'onto (8, 2) near the start'),
    ((0, 8), D, 'stone to stone'),
    ((2, 6), U, 'stone to stone'),
)

out = sys.argv[1]
results = {p: tc.score(p, TRANSITIONS) for p in sys.argv[2:]}
text = tc.markdown(results)
print(text, end='')
with open(out, 'w') as f:
  json.dump(results, f, indent=1)
with open(out[:-5] + '.md', 'w') as f:
  f.write(text)

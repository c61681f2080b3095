"""psi (and phi) of checkpoints at the goal's corner and at other fresh-grass entries, map clean
(launch.studies.turf_corner's scoring, more transitions). Usage: corner_plus.py OUT.json CKPT..."""
import json
import sys

from launch.studies import turf_corner as tc

TRANSITIONS = tc.TRANSITIONS + (
    ((0, 8), tc.LEFT, 'onto (0, 7) beside the road end'),
    ((3, 9), tc.UP, 'onto (2, 9) below (1, 9)'),
    ((2, 7), tc.RIGHT, 'onto (2, 8)'),
    ((8, 1), tc.RIGHT, 'onto (8, 2) near the start'),
    ((0, 8), tc.DOWN, 'stone to stone'),
    ((2, 6), tc.UP, 'stone to stone'),
)

out = sys.argv[1]
results = {p: tc.score(p, TRANSITIONS) for p in sys.argv[2:]}
text = tc.markdown(results)
print(text, end='')
with open(out, 'w') as f:
  json.dump(results, f, indent=1)
with open(out[:-5] + '.md', 'w') as f:
  f.write(text)

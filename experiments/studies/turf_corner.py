r"""psi and phi of estimator checkpoints at named Turf transitions on the clean map: the grass
entries next to the goal that RAC lets through, both ways into the goal, and the start's first
grass entry, each with the exact oracle's label.

Question: What do psi and phi say at the Turf goal's corner, where RAC lets grass through?
Reported in RESULTS.md, "Turf", "The authors' recipe as released": the goal's corner
(results/turf/paper_as_released/corner.md).

    python -m experiments.studies.turf_corner --checkpoint results/turf/paper_as_released/psi.ckpt \
        --checkpoint results/turf/paper_phi_coverage/estimators.ckpt --out corner.json

Per transition x -a-> x' (all grass fresh): psi(x, x') (the chance x comes first: high means
irreversible, what RAE penalises), psi(x', x) (phi's regression target: the chance of going
back), and phi(x, a) when the checkpoint has phi. RAC at beta forbids a when phi(x, a) < beta.
Writes JSON and a markdown table beside it (same name, .md).
"""
from typing import Any, Dict, List, Sequence, Tuple

import numpy as np
from absl import flags

from envs import cli
from experiments import pages

UP, DOWN, LEFT, RIGHT = range(4)
ACTION_NAMES = ('up', 'down', 'left', 'right')
# (cell, action, what it is); the map clean, the agent on `cell`.
TRANSITIONS: Tuple[Tuple[Tuple[int, int], int, str], ...] = (
    ((9, 0), RIGHT, 'start onto grass'),
    ((1, 8), RIGHT, 'onto the grass beside the goal'),
    ((1, 8), DOWN, 'onto grass below the road'),
    ((2, 7), DOWN, 'onto grass below the road'),
    ((1, 8), UP, 'stone to stone'),
    ((0, 8), RIGHT, 'into the goal from the road'),
    ((1, 9), UP, 'into the goal from the grass'),
)


def score(checkpoint_path: str, transitions=TRANSITIONS) -> List[Dict[str, Any]]:
  import envs
  from envs import oracle
  from estimators import checkpoint, predict

  ckpt = checkpoint.load(checkpoint_path)
  predictor = predict.Predictor(ckpt, batch=64)
  env = envs.make('turf')
  rows = []
  for cell, action, what in transitions:
    state = (cell[0], cell[1], 0)
    env.set_state(state)
    x = np.asarray(env.observation())
    env.set_state(state)
    x_next = np.asarray(env.step(action).observation)
    label = oracle.check(env, state, action)
    row = {'cell': list(cell), 'action': ACTION_NAMES[action], 'what': what,
           'oracle': label.status,
           'psi_forward': float(predictor.psi(x[None], x_next[None])[0]),
           'psi_back': float(predictor.psi(x_next[None], x[None])[0])}
    if ckpt.phi_params is not None:
      row['phi'] = float(predictor.phi(x[None])[0, action])
    rows.append(row)
  return rows


def markdown(results: Dict[str, List[Dict[str, Any]]]) -> str:
  lines = ['# psi and phi at named Turf transitions, map clean', '',
           "psi(x, x'): high = irreversible; phi's target is psi(x', x) (ours) or 1 - psi(x, x') "
           "(the authors' code, `--phi_target one_minus_forward`); RAC at beta forbids the "
           'move when phi < beta.', '',
           "| checkpoint | transition | oracle | psi(x, x') | psi(x', x) | phi(x, a) |",
           '|---|---|---|---|---|---|']
  for name, rows in results.items():
    for r in rows:
      phi = f"{r['phi']:.3f}" if 'phi' in r else '–'
      lines.append(f"| `{name}` | {tuple(r['cell'])} {r['action']} ({r['what']}) | "
                   f"{r['oracle']} | {r['psi_forward']:.3f} | {r['psi_back']:.3f} | {phi} |")
  return '\n'.join(lines) + '\n'


def run(checkpoints: Sequence[str], out: str = None) -> Dict[str, List[Dict[str, Any]]]:
  results = {path: score(path) for path in checkpoints}
  text = markdown(results)
  pages.show_report(out, results, text)
  return results


def define_flags(fv):
  flags.DEFINE_multi_string('checkpoint', None, 'Estimator checkpoint (repeatable).',
                            flag_values=fv)
  flags.DEFINE_string('out', None, 'JSON file to write (and .md beside it).', flag_values=fv)


def main(argv=None) -> int:
  args, _ = cli.parse(define_flags, argv, prog='python -m experiments.studies.turf_corner',
                      description=__doc__.split('\n\n')[0], required=('checkpoint',))
  from envs import quiet
  quiet.quiet_startup()
  run(args.checkpoint, args.out)
  return 0


if __name__ == '__main__':
  raise SystemExit(main())

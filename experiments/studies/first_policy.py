r"""The Sokoban policy network's first policy, before any update, under the initialisations and
pixel scales a reader of App. C.3 could have run: how far from uniform it is, and how much it
differs from state to state.

Question: Does Haiku's default initialisation (Acme's) start from a uniform policy, as ours does,
or does it depend on how the observation's bytes are scaled? Reported in BUILD_NOTES.md, "The
authors' recipe at equal learner updates".

    python -m experiments.studies.first_policy --out results/sokoban_authors/first_policy.json

Observations: random play on the 1k training set (`--episodes` episodes of `--steps` steps). Per
variant and initialisation seed: the mean entropy of the policy over those states (ln 4 = 1.386
is uniform), the logits' standard deviation across states (mean over the actions) and the
values'. Writes JSON and a markdown table beside it (same name, .md).
"""
import dataclasses
from typing import Any, Dict, List

import numpy as np
from absl import flags

from envs import cli
from experiments import pages

# (name, changes to the preset's policy network).
VARIANTS = (
    ('preset: orthogonal, centred, bytes / 255', {}),
    ("Haiku's init, centred, bytes / 255", {'init': 'lecun'}),
    ("Haiku's init, as drawn, bytes / 255", {'init': 'lecun', 'centre_on': (), 'canvas_size': 0}),
    ("Haiku's init, as drawn, bytes as they are",
     {'init': 'lecun', 'centre_on': (), 'canvas_size': 0, 'pixel_scale': 1.0}),
    ('orthogonal, as drawn, bytes as they are',
     {'centre_on': (), 'canvas_size': 0, 'pixel_scale': 1.0}),
)


def random_play(episodes: int, steps: int, seed: int) -> np.ndarray:
  """[N, 10, 10, 3] observations of uniform random play on the 1k set, first ones included."""
  from envs import sokoban
  env = sokoban.Sokoban(seed=seed)
  rng = np.random.default_rng(seed)
  frames = []
  for _ in range(episodes):
    ts = env.reset()
    frames.append(ts.observation)
    for _ in range(steps):
      ts = env.step(int(rng.integers(env.action_spec().num_values)))
      frames.append(ts.observation)
      if ts.last():
        break
  return np.stack(frames)


def first_policy(changes: Dict[str, Any], frames: np.ndarray, seed: int) -> Dict[str, float]:
  """The initialised network's policy entropy and spreads over `frames`."""
  import haiku as hk
  import jax

  from agents import policy_net
  config = dataclasses.replace(policy_net.default_policy_config('sokoban', image=True), **changes)
  net = hk.without_apply_rng(hk.transform(lambda o: policy_net.PolicyValueNet(4, config)(o)))
  params = net.init(jax.random.PRNGKey(seed), frames[:1])
  logits, values = (np.asarray(a, np.float64) for a in net.apply(params, frames))
  logp = logits - logits.max(-1, keepdims=True)
  logp -= np.log(np.exp(logp).sum(-1, keepdims=True))
  return {'entropy': float(-(np.exp(logp) * logp).sum(-1).mean()),
          'logit_std_across_states': float(logits.std(0).mean()),
          'value_std_across_states': float(values.std())}


def run(episodes: int, steps: int, seeds: int, out: str = None) -> Dict[str, Any]:
  frames = random_play(episodes, steps, seed=0)
  results: Dict[str, List[Dict[str, float]]] = {
      name: [first_policy(changes, frames, seed) for seed in range(seeds)]
      for name, changes in VARIANTS}
  report = {'observations': int(len(frames)), 'episodes': episodes, 'seeds': seeds,
            'variants': results}
  text = markdown(report)
  pages.show_report(out, report, text)
  return report


def markdown(report: Dict[str, Any]) -> str:
  lines = ["# The Sokoban policy network's first policy", '',
           f"{report['observations']:,} observations of random play ({report['episodes']} "
           f"episodes on the 1k set); {report['seeds']} initialisation seeds per variant: mean "
           '(lowest entropy of the seeds). Uniform over 4 actions: entropy 1.386.', '',
           '| network | entropy | logits, std across states | values, std across states |',
           '|---|---|---|---|']
  for name, rows in report['variants'].items():
    ent = [r['entropy'] for r in rows]
    lines.append(f'| {name} | {np.mean(ent):.3f} ({min(ent):.3f}) | '
                 f"{np.mean([r['logit_std_across_states'] for r in rows]):.4f} | "
                 f"{np.mean([r['value_std_across_states'] for r in rows]):.4f} |")
  return '\n'.join(lines) + '\n'


def define_flags(fv):
  flags.DEFINE_integer('episodes', 40, 'Random episodes whose states the policies are read on.',
                       flag_values=fv)
  flags.DEFINE_integer('steps', 30, 'Steps per random episode.', flag_values=fv)
  flags.DEFINE_integer('seeds', 5, 'Initialisation seeds per variant.', flag_values=fv)
  flags.DEFINE_string('out', None, 'JSON file to write (and .md beside it).', flag_values=fv)


def main(argv=None) -> int:
  args, _ = cli.parse(define_flags, argv, prog='python -m experiments.studies.first_policy',
                      description=__doc__.split('\n\n')[0])
  for name in ('episodes', 'steps', 'seeds'):
    if getattr(args, name) < 1:
      raise SystemExit(f'error: --{name} must be >= 1')
  from envs import quiet
  quiet.quiet_startup()
  run(args.episodes, args.steps, args.seeds, args.out)
  return 0


if __name__ == '__main__':
  raise SystemExit(main())

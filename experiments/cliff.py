"""Windy cliff-walk, Tables 1-2 (App. D): the random policy, and the random policy + RAC with
psi/phi trained offline; its steps per scale and the paper's grid on its page.

Seed k of a wind is an estimator training and a run: psi/phi are trained with `--seed k` on the
wind's random episodes (seed 0 keeps the name estimators/pK.ckpt, the others pK-eK.ckpt), and
the RAC runs of seed k use that checkpoint. So the spread of a Table 2 cell over `--seeds` is
the spread over estimator trainings (and run seeds), which is what moves the middle
thresholds; the random policy's cells vary by run seed only.
"""
import os
from typing import List, Optional, Sequence

from experiments.spec import Step, scale_settings, train_step

CLIFF_WINDS = (0.0, 0.1, 0.2, 0.3, 0.4)
CLIFF_BETAS = (0.0, 0.1, 0.2, 0.3, 0.4)
CLIFF_SCALES = {
    'tiny': dict(episodes=100, pairs=20_000, transitions=2_000, max_steps=3_000, winds=(0.0, 0.2),
                 betas=(0.0, 0.3), run_seconds=40),
    # small: ~240+ episodes per cell (RAC episodes last up to the 250-step limit).
    'small': dict(episodes=2_000, pairs=1_000_000, transitions=100_000, max_steps=60_000,
                  winds=CLIFF_WINDS, betas=CLIFF_BETAS, run_seconds=45),
    # paper: 5,000 episodes per cell.
    'paper': dict(episodes=20_000, pairs=3_000_000, transitions=100_000, max_steps=1_250_000,
                  winds=CLIFF_WINDS, betas=CLIFF_BETAS, run_seconds=300),
}
# Tables 1 and 2 of the paper: mean return (steps alive, at most 250) per wind p and threshold.
CLIFF_PAPER_RANDOM = {0.0: 57.5, 0.1: 29.8, 0.2: 18.6, 0.3: 13.4, 0.4: 10.5}  # beta column 0
CLIFF_PAPER_RAC = {
    0.0: (59.1, 250.0, 250.0, 250.0, 250.0), 0.1: (29.2, 56.0, 56.3, 80.2, 248.5),
    0.2: (18.7, 26.7, 29.2, 85.8, 238.6), 0.3: (13.2, 16.8, 19.6, 77.6, 250.0),
    0.4: (10.4, 12.5, 24.9, 152.2, 250.0)}


def estimator_name(tag: str, seed: int) -> str:
  """The checkpoint of estimator training `seed` for wind `tag`, relative to the output dir."""
  return f'estimators/{tag}.ckpt' if seed == 0 else f'estimators/{tag}-e{seed}.ckpt'


def cliff_steps(scale: str, seeds: int) -> List[Step]:
  s = scale_settings(CLIFF_SCALES, scale, 'cliff')
  steps = []
  for p in s['winds']:
    tag = f'p{p:g}'
    option = ('--env_option', f'wind={p:g}')
    steps.append(Step(f'collect_{tag}', 'launch.collect',
                      ('--env', 'cliff', *option, '--episodes', str(s['episodes']),
                       '--out', f'{{out}}/data/{tag}', '--resume', '--noprogress'),
                      done=f'data/{tag}/noturningback.json', est_seconds=s['episodes'] * 0.02))
    for seed in range(seeds):
      ckpt = estimator_name(tag, seed)
      steps.append(Step(f'estimators_{tag}' + (f'-e{seed}' if seed else ''), 'estimators.train',
                        ('--dataset', f'{{out}}/data/{tag}', '--out', f'{{out}}/{ckpt}',
                         '--num_pairs', str(s['pairs']), '--phi', '--phi_transitions',
                         str(s['transitions']), '--seed', str(seed), '--noprogress'),
                        done=ckpt, est_seconds=60))
    for seed in range(seeds):
      common = ('--env', 'cliff', *option, '--agent', 'random', '--num_actors', '1')
      steps.append(train_step(f'random-{tag}-s{seed}', f'random p={p:g}', seed, s['max_steps'],
                          s['run_seconds'], *common, '--mode', 'none'))
      for beta in s['betas']:
        steps.append(train_step(f'rac-{tag}-b{beta:g}-s{seed}', f'RAC p={p:g} beta={beta:g}', seed,
                            s['max_steps'], s['run_seconds'], *common, '--mode', 'rac',
                            '--beta', f'{beta:g}', '--estimator_checkpoint',
                            f'{{out}}/{estimator_name(tag, seed)}'))
  return steps


def cell_text(mean: Optional[float], per_seed: Sequence[Optional[float]] = ()) -> str:
  """A grid cell: the mean, and with several seeds their range [min-max] (the spread over
  estimator trainings)."""
  if mean is None:
    return '–'
  values = [v for v in per_seed if v is not None and v == v]
  if len(values) < 2:
    return f'{mean:.1f}'
  return f'{mean:.1f} [{min(values):.1f}-{max(values):.1f}]'


def cliff_grid_markdown(table: dict, out: str = '') -> str:
  """Tables 1-2 laid out as in the paper: ours (paper) per wind p and threshold beta; with
  several seeds, each cell also gives the range over them."""
  rows = {r['group']: r for r in table['rows']}

  def cell(group: str, paper: float) -> str:
    m = rows.get(group, {}).get('episode_return', {})
    return f'{cell_text(m.get("mean"), m.get("per_seed") or ())} ({paper})'

  several = any(len(r.get('episode_return', {}).get('per_seed') or ()) > 1
                for r in table['rows'])
  lines = ['## Tables 1-2: mean return, ours (paper)', '']
  if several:
    lines += ['Ours: mean over seeds [lowest-highest seed]; seed k of a RAC cell is estimator '
              'training k (psi/phi retrained with `--seed k` on the same random episodes) and '
              'run seed k.', '']
  lines += ['| p | random | ' + ' | '.join(f'RAC beta={b:g}' for b in CLIFF_BETAS) + ' |',
            '|---|---|' + '---|' * len(CLIFF_BETAS)]
  for p in CLIFF_WINDS:
    cells = [f'{p:g}', cell(f'random p={p:g}', CLIFF_PAPER_RANDOM[p])]
    cells += [cell(f'RAC p={p:g} beta={b:g}', CLIFF_PAPER_RAC[p][i])
              for i, b in enumerate(CLIFF_BETAS)]
    lines.append('| ' + ' | '.join(cells) + ' |')
  text = '\n'.join(lines) + '\n'
  spread = os.path.join(out, 'spread.md') if out else ''
  # experiments.studies.cliff_spread: Table 2 over estimator trainings
  if spread and os.path.exists(spread):
    with open(spread) as f:
      text += '\n#' + f.read()
  return text

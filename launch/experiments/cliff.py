"""Windy cliff-walk, Tables 1-2 (App. D): the random policy, and the random policy + RAC with
psi/phi trained offline; its steps per scale and the paper's grid on its page."""
from typing import List

from launch.experiments.spec import Step, train_step

# --------------------------------------------------------------------------------------------- #
# Windy cliff-walk, Tables 1-2 (App. D): random policy, and random policy + RAC
# --------------------------------------------------------------------------------------------- #

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


def cliff_steps(scale: str, seeds: int) -> List[Step]:
  s = CLIFF_SCALES[scale]
  steps = []
  for p in s['winds']:
    tag = f'p{p:g}'
    option = ('--env_option', f'wind={p:g}')
    steps.append(Step(f'collect_{tag}', 'launch.collect',
                      ('--env', 'cliff', *option, '--episodes', str(s['episodes']),
                       '--out', f'{{out}}/data/{tag}', '--resume', '--noprogress'),
                      done=f'data/{tag}/noturningback.json', est_seconds=s['episodes'] * 0.02))
    steps.append(Step(f'estimators_{tag}', 'estimators.train',
                      ('--dataset', f'{{out}}/data/{tag}', '--out', f'{{out}}/estimators/{tag}.ckpt',
                       '--num_pairs', str(s['pairs']), '--phi', '--phi_transitions',
                       str(s['transitions']), '--noprogress'),
                      done=f'estimators/{tag}.ckpt', est_seconds=60))
    for seed in range(seeds):
      common = ('--env', 'cliff', *option, '--agent', 'random', '--num_actors', '1')
      steps.append(train_step(f'random-{tag}-s{seed}', f'random p={p:g}', seed, s['max_steps'],
                          s['run_seconds'], *common, '--mode', 'none'))
      for beta in s['betas']:
        steps.append(train_step(f'rac-{tag}-b{beta:g}-s{seed}', f'RAC p={p:g} beta={beta:g}', seed,
                            s['max_steps'], s['run_seconds'], *common, '--mode', 'rac',
                            '--beta', f'{beta:g}', '--estimator_checkpoint',
                            f'{{out}}/estimators/{tag}.ckpt'))
  return steps


def cliff_grid_markdown(table: dict, out: str = '') -> str:
  """Tables 1-2 laid out as in the paper: ours (paper) per wind p and threshold beta."""
  rows = {r['group']: r for r in table['rows']}
  value = lambda g: rows.get(g, {}).get('episode_return', {}).get('mean')  # noqa: E731
  fmt = lambda v: '–' if v is None else f'{v:.1f}'  # noqa: E731
  lines = ['## Tables 1-2: mean return, ours (paper)', '',
           '| p | random | ' + ' | '.join(f'RAC beta={b:g}' for b in CLIFF_BETAS) + ' |',
           '|---|---|' + '---|' * len(CLIFF_BETAS)]
  for p in CLIFF_WINDS:
    cells = [f'{p:g}', f'{fmt(value(f"random p={p:g}"))} ({CLIFF_PAPER_RANDOM[p]})']
    cells += [f'{fmt(value(f"RAC p={p:g} beta={b:g}"))} ({CLIFF_PAPER_RAC[p][i]})'
              for i, b in enumerate(CLIFF_BETAS)]
    lines.append('| ' + ' | '.join(cells) + ' |')
  return '\n'.join(lines) + '\n'

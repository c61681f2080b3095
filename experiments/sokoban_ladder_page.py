"""The Sokoban ladder's page, one rung (scale) at a time: how hard the rung's levels are, the env
steps each arm took to a solved fraction, RAE against IMPALA seed by seed (final policies
included: held-out levels, irreversible pushes and dead ends by the exact oracle), and psi
against the oracle. Its steps: `experiments.sokoban_ladder`."""
import functools
import os

from envs import sokoban as sokoban_env
from experiments.sokoban_ladder import LADDER_SCALES, ladder_agent, ladder_steps
from experiments.sokoban_page import sokoban_milestones_markdown, sokoban_paired_markdown
from experiments.sokoban_psi_page import sokoban_psi_markdown

# `python -m experiments.studies.level_sets` over every rung's level files (envs.level_stats), committed
# beside them.
LEVEL_STATS = os.path.join(os.path.dirname(sokoban_env.DEFAULT_LEVELS), 'sokoban_ladder_levels.json')
# The final-policy measures compared seed by seed: (label, eval file, policy, key, digits).
LADDER_PAIRED_EVALS = tuple(
    (f'{label}, {policy}', file, policy, key, digits)
    for label, file, key, digits in (
        ('solved, training levels', 'eval_train.json', 'solved_fraction', 3),
        ('solved, held-out levels', 'eval_held_out.json', 'solved_fraction', 3),
        ('episodes entering a dead end', 'eval_irreversible.json', 'dead_end_fraction', 3),
        ('irreversible pushes per episode', 'eval_irreversible.json',
         'mean_irreversible_excl_solving', 2),
        ('irreversible per push', 'eval_irreversible.json', 'irreversible_per_push', 3))
    for policy in ('greedy', 'sampled'))


def ladder_levels_markdown(table: dict) -> str:
  """The rung's level files as `envs.level_stats` measured them (LEVEL_STATS)."""
  from experiments.pages import read_json
  s = LADDER_SCALES[table['scale']]
  report = read_json(LEVEL_STATS) or {'sets': []}
  files = [os.path.basename(sokoban_env.level_file(s[key])) for key in ('levels', 'held_out')]
  rows = [r for r in report['sets'] if r['name'] in files]
  lines = ['## The rung', '',
           f'Training levels `{files[0]}`, held-out levels `{files[1]}`; '
           f"{s['max_steps']:,} env steps per run, "
           f"{s['actors']} actors x {s['envs_per_actor']} rooms. The agent, every rung and both "
           'arms: ' + ', '.join(f'{k} {v:,}' if isinstance(v, int) else f'{k} {v:g}'
                                for k, v in ladder_agent(table['scale']).items()) + '.', '']
  if rows:
    from envs import level_stats
    text = level_stats.markdown(dict(report, sets=rows))
    lines += text.split('\n', 2)[2].rstrip('\n').split('\n')   # its table, without its title
  return '\n'.join(lines) + '\n'


def ladder_markdown(table: dict, out: str) -> str:
  from experiments.analysis import aggregate
  load = functools.lru_cache(maxsize=None)(aggregate.load)  # each run's logs read once
  steps = ladder_steps(table['scale'], table['seeds'])
  psi_sets = (('train_levels', 'training levels'), ('held_out', 'held-out levels'))
  return '\n'.join(part for part in (
      ladder_levels_markdown(table),
      sokoban_milestones_markdown(table, out, load, steps),
      sokoban_paired_markdown(table, out, load, steps, LADDER_PAIRED_EVALS),
      sokoban_psi_markdown(table, out, (('', 'Sokoban preset'),), psi_sets)) if part)

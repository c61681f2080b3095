"""The Sokoban question on a ladder of rooms where this machine's agents learn: IMPALA against
IMPALA + RAE (Sec. 5.3, Fig. 5b) on gym-sokoban's registered room sizes, one scale per rung,
3 seeds per arm. Each rung has its own random episodes and psi (the Sokoban preset's recipe),
and one agent recipe serves every rung and both arms. Its page:
`experiments.sokoban_ladder_page`."""
import os
from typing import List

from experiments.sokoban import (
  FIELD_ENV_OPTIONS,
  SOKOBAN_BETA,
  agent_flags,
  field_reuse_agent,
  sokoban_psi_steps,
)
from experiments.spec import Step, scale_settings, train_step

# The longest run of any rung, and the horizon of the learning rate's linear decay in every
# run: the same schedule on every rung, so that a rung's one-seed budget probe is its seed 0.
LADDER_MAX_STEPS = 20_000_000
# The agent: the recipe comparison's winner (experiments.sokoban.field_reuse_agent).
LADDER_AGENT = field_reuse_agent(LADDER_MAX_STEPS)
LADDER_RAE_LAM = 0.1   # the penalty weight of the Sokoban preset's RAE (beta: SOKOBAN_BETA)


def _levels(rooms: str, part: str) -> str:
  """A shipped level set by name (envs/data/NAME.txt), so that the runs' saved options name
  the same levels in any checkout and a run resumes from another one."""
  return f'sokoban_{rooms}_{part}'


def _rung(train: str, held_out: str, budget: int) -> dict:
  """A rung's settings: its level files and its env-step budget per run, with the sizes every
  rung shares: psi's random episodes and pairs, 2 actors x 32 rooms, evaluation levels."""
  return dict(levels=train, held_out=held_out, max_steps=budget, episodes=20_000,
              pairs=5_000_000, actors=2, envs_per_actor=32, eval_levels=1000, eval_held_out=500,
              eval_oracle_levels=100, eval_transitions=2000)


# Per rung (gym-sokoban's id in brackets): 1,000 training levels (seed 0) and 500 held out
# (seed 1) from scripts/generate_sokoban_levels.py; the 10x10 / 4-box rung trains on the 1k
# set. A rung's budget is where its one-seed probe (impala-s0, taken to 2.5M, 5M, 10M, 15M and
# 20M env steps in turn) first passed 50% solved, LADDER_MAX_STEPS until it has been probed.
LADDER_SCALES = {
    'tiny': dict(_rung(_levels('7x7_2boxes', 'train'), _levels('7x7_2boxes', 'heldout'),
                       20_000), episodes=200, pairs=50_000, actors=1, envs_per_actor=8,
                 eval_levels=20, eval_held_out=20, eval_oracle_levels=4, eval_transitions=100),
    # Sokoban-small-v0: probed (its probe passed 50% between 10M and 15M; RESULTS.md, the ladder)
    '7x7_2boxes': _rung(_levels('7x7_2boxes', 'train'), _levels('7x7_2boxes', 'heldout'),
                        15_000_000),
    # Sokoban-small-v1
    '7x7_3boxes': _rung(_levels('7x7_3boxes', 'train'), _levels('7x7_3boxes', 'heldout'),
                        LADDER_MAX_STEPS),
    # Sokoban-v0
    '10x10_3boxes': _rung(_levels('10x10_3boxes', 'train'), _levels('10x10_3boxes', 'heldout'),
                          LADDER_MAX_STEPS),
    # Sokoban-v1, the paper's rooms
    '10x10_4boxes': _rung('default', _levels('10x10_4boxes', 'heldout'),
                          LADDER_MAX_STEPS),
}
# The runs' batch is 256 sequences; the tiny scale's 8 rooms fill it too slowly for a test.
_TINY_AGENT = dict(batch_size=16, minibatches=2, replay_size=64)


def ladder_agent(scale: str) -> dict:
  """The ImpalaConfig fields every run of `scale` writes on its command line."""
  return dict(LADDER_AGENT, **(_TINY_AGENT if scale == 'tiny' else {}))


def ladder_steps(scale: str, seeds: int) -> List[Step]:
  s = scale_settings(LADDER_SCALES, scale, 'sokoban_ladder')
  levels = ('--env_option', f"levels={s['levels']}")
  steps = [Step('collect_random', 'launch.collect',
                ('--env', 'sokoban', *levels, '--episodes', str(s['episodes']), '--out',
                 '{out}/data/random', '--num_actors', '1', '--resume', '--noprogress'),
                done='data/random/noturningback.json', est_seconds=s['episodes'] * 0.02)]
  steps += sokoban_psi_steps(s, '', 'sokoban', (('train_levels', s['levels']),
                                                 ('held_out', s['held_out'])))
  # Both arms share every setting, seed included; only the RAE flags differ.
  common = ('--env', 'sokoban', *levels, '--num_actors', str(s['actors']), '--envs_per_actor',
            str(s['envs_per_actor']), *FIELD_ENV_OPTIONS, *agent_flags(ladder_agent(scale)))
  runs = []
  for seed in range(seeds):
    runs.append(train_step(f'impala-s{seed}', 'IMPALA', seed, s['max_steps'],
                           s['max_steps'] / 4000, *common, '--mode', 'none'))
    runs.append(train_step(f'impala_rae-s{seed}', 'IMPALA+RAE', seed, s['max_steps'],
                           s['max_steps'] / 3500, *common, '--mode', 'rae',
                           '--estimator_checkpoint', '{out}/psi.ckpt', '--beta',
                           str(SOKOBAN_BETA), '--lam', str(LADDER_RAE_LAM)))
  # Each run's final policy, greedy and sampled: on its training levels, on the held-out ones,
  # and on the first training levels with the exact oracle counting irreversible pushes and the
  # episodes that entered a dead end.
  for run in runs:
    steps.append(run)
    for name, level_file, n, extra in (
        ('eval_train', s['levels'], s['eval_levels'], ()),
        ('eval_held_out', s['held_out'], s['eval_held_out'], ()),
        ('eval_irreversible', s['levels'], s['eval_oracle_levels'],
         ('--count_irreversible', '--max_expansions', '20000'))):
      steps.append(Step(
          f'{run.name}-{name}', 'experiments.evaluate_policy',
          ('--run_dir', os.path.join('{out}', run.run_dir), '--levels', level_file,
           '--num_levels', str(n), '--policy', 'both', *extra,
           '--out', os.path.join('{out}', run.run_dir, f'{name}.json')),
          done=os.path.join(run.run_dir, f'{name}.json'),
          est_seconds=n * (1.0 if extra else 0.05)))
  return steps

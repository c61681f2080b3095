"""Which Sokoban agent learns, per env step and per wall-hour on this machine: our batch-16 recipe
(`experiments.sokoban.BATCH16_AGENT`) against the field's (`experiments.sokoban.field_agent`)
with each policy-network preset, and the field's recipe without its biggest single piece; one
run each per seed, on the small rooms (7x7, 2 boxes) to 5M env steps or on the 1k set (10x10,
4 boxes) to 10M. Each run's final policy is then played on its training levels and on held-out
ones. Its page: `experiments.sokoban_recipe_page`."""
import os
from typing import List

from envs import sokoban as sokoban_env
from experiments.sokoban import (
  BATCH16_AGENT,
  BATCH16_ENV_OPTIONS,
  BOXOBAN_LEVELS,
  FIELD_ENV_OPTIONS,
  agent_flags,
  field_agent,
)
from experiments.spec import Step, scale_settings, train_step

LEVELS_DIR = os.path.dirname(sokoban_env.DEFAULT_LEVELS)
# gym-sokoban's Sokoban-small-v0 rooms: 1,000 training levels (seed 0) and 500 held out (seed 1),
# from scripts/generate_sokoban_levels.py --size 7 --boxes 2.
SMALL_ROOMS = os.path.join(LEVELS_DIR, 'sokoban_7x7_2boxes_train.txt')
SMALL_ROOMS_HELD_OUT = os.path.join(LEVELS_DIR, 'sokoban_7x7_2boxes_heldout.txt')

# The batch-16 arm's agent on the 1k set, 3 seeds to 30M env steps: the committed IMPALA runs of
# the Sokoban benchmark (`python -m experiments sokoban --scale long`), the reference's band.
REFERENCE_1K = dict(runs=tuple(os.path.join('results', 'sokoban_30m', 'runs', f'impala-s{seed}')
                               for seed in range(3)),
                    label='batch-16 recipe, preset net: the 30M benchmark\'s IMPALA, 3 seeds')

# Per scale: the training and held-out levels, env steps per run, the env steps at which the
# page compares the arms, and the evaluation sizes.
RECIPE_SCALES = {
    'tiny': dict(levels=SMALL_ROOMS, held_out=SMALL_ROOMS_HELD_OUT, max_steps=30_000,
                 marks=(10_000, 20_000), actors=1, envs_per_actor=8, field_batch=64,
                 eval_levels=20, eval_held_out=20),
    'small_rooms': dict(levels=SMALL_ROOMS, held_out=SMALL_ROOMS_HELD_OUT, max_steps=5_000_000,
                        marks=(1_000_000, 2_500_000, 5_000_000), actors=2, envs_per_actor=32,
                        field_batch=256, eval_levels=1000, eval_held_out=500),
    'boxoban_1k': dict(levels='default', held_out=BOXOBAN_LEVELS, max_steps=10_000_000,
                       marks=(1_000_000, 2_500_000, 5_000_000, 10_000_000), actors=2,
                       envs_per_actor=32, field_batch=256, eval_levels=1000, eval_held_out=500,
                       reference=REFERENCE_1K),
}


def recipe_arms(s: dict):
  """(run name, group, flags) of each arm at scale `s`. The arm named `preset` is the Sokoban
  comparison's batch-16 agent on 2 x 16 rooms; the field's arms run 64 rooms in all, as the
  authors' scale does."""
  preset_flags = (*agent_flags(BATCH16_AGENT), *BATCH16_ENV_OPTIONS)
  field = dict(field_agent(s['max_steps']), batch_size=s['field_batch'])
  rooms = ('--num_actors', str(s['actors']))
  field_rooms = (*rooms, '--envs_per_actor', str(s['envs_per_actor']), *FIELD_ENV_OPTIONS)
  field_flags = (*field_rooms, *agent_flags(field))
  return (
      ('preset', 'batch-16 recipe, preset net',
       (*rooms, '--envs_per_actor', str(max(1, s['envs_per_actor'] // 2)), *preset_flags)),
      ('field', "field's recipe, preset net", field_flags),
      ('field_resnet', "field's recipe, ResNet",
       (*field_flags, '--policy_preset', 'sokoban_resnet')),
      # The ablation: the field's recipe with IMPALA's lambda of 1, the piece our earlier try
      # of the field's recipe (batch 32, clip 2.5e-4, b1 0.9, lr 4e-4) lacked and did not learn.
      ('field_lambda1', "field's recipe, lambda 1, preset net",
       (*field_rooms, *agent_flags(dict(field, vtrace_lambda=1.0)))),
      # The field's recipe makes one Adam step per 608 env steps: 8k in 5M, where its own runs
      # take 50k+ to 30M and beyond. Two ways to 4x the steps per env step: minibatches of 8
      # sequences (the same learner compute), or each sequence sampled 4 times from a replay
      # (4x the compute).
      ('field_mb32', "field's recipe, 32 minibatches of 8, preset net",
       (*field_rooms, *agent_flags(dict(field, minibatches=32)))),
      ('field_reuse4', "field's recipe, each sequence 4 times, preset net",
       (*field_rooms, *agent_flags(dict(field, samples_per_insert=4,
                                        replay_size=4 * s['field_batch'])))),
      # Both at once: 16x the field's Adam steps per env step, one per 38.
      ('field_mb32_reuse4', "field's recipe, 32 minibatches, each sequence 4 times, preset net",
       (*field_rooms, *agent_flags(dict(field, minibatches=32, samples_per_insert=4,
                                        replay_size=4 * s['field_batch'])))),
  )


def recipe_steps(scale: str, seeds: int) -> List[Step]:
  s = scale_settings(RECIPE_SCALES, scale, 'sokoban_recipe')
  steps = []
  for name, group, flags in recipe_arms(s):
    for seed in range(seeds):
      run = train_step(f'{name}-s{seed}', group, seed, s['max_steps'], s['max_steps'] / 2000,
                       '--env', 'sokoban', '--env_option', f"levels={s['levels']}", *flags,
                       '--mode', 'none')
      steps.append(run)
      for eval_name, levels, n in (('eval_train', s['levels'], s['eval_levels']),
                                   ('eval_held_out', s['held_out'], s['eval_held_out'])):
        steps.append(Step(
            f'{run.name}-{eval_name}', 'experiments.evaluate_policy',
            ('--run_dir', os.path.join('{out}', run.run_dir), '--levels', levels,
             '--num_levels', str(n), '--policy', 'both',
             '--out', os.path.join('{out}', run.run_dir, f'{eval_name}.json')),
            done=os.path.join(run.run_dir, f'{eval_name}.json'), est_seconds=n * 0.05))
  return steps

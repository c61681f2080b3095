"""The registry of named experiments (`python -m experiments NAME`): an entry per paper
experiment names its module's steps function (data, estimators, training runs, evaluations;
what a step is: experiments.spec), its scales and how its table is made (docs/experiments.md,
"Adding an experiment").
"""
from typing import Dict

from experiments import cartpole_plus, cartpole_reward_free, turf_page
from experiments import turf as turf_exps
from experiments.cliff import CLIFF_SCALES, cliff_grid_markdown, cliff_steps
from experiments.sokoban import SOKOBAN_SCALES, sokoban_reference_runs, sokoban_steps
from experiments.sokoban_ladder import LADDER_SCALES, ladder_steps
from experiments.sokoban_ladder_page import ladder_markdown
from experiments.sokoban_page import SOKOBAN_MILESTONE_EPISODES, sokoban_markdown
from experiments.sokoban_recipe import RECIPE_SCALES, recipe_steps
from experiments.sokoban_recipe_page import recipe_markdown
from experiments.spec import Experiment

EXPERIMENTS: Dict[str, Experiment] = {
    'sokoban': Experiment(
        name='sokoban',
        description='IMPALA vs IMPALA+RAE on the 1k-level Sokoban set, psi trained offline on '
                    'random episodes and frozen from step 1 (Sec. 5.3, Fig. 5b)',
        paper='Fig. 5b: IMPALA+RAE learns faster than IMPALA and consistently solves all levels '
              'of the 1k set; psi matches the exact ground truth with high accuracy (Fig. 5c).',
        steps=sokoban_steps,
        scales=tuple(SOKOBAN_SCALES),
        metrics=('episode_return', 'solved', 'boxes_on_target', 'penalised_steps',
                 'episode_length', 'policy_entropy'),
        # penalised_steps: RAE's penalties per episode (psi > beta), how much RAE shapes.
        table_metrics=('episode_return', 'solved', 'boxes_on_target', 'penalised_steps'),
        table_last_n=SOKOBAN_MILESTONE_EPISODES,
        references=('sokoban_fig5b.json',),
        reference_runs=sokoban_reference_runs,
        evaluations=(
            ('solved 1k greedy', 'eval_train.json', 'greedy', 'solved_fraction'),
            ('solved 1k sampled', 'eval_train.json', 'sampled', 'solved_fraction'),
            ('solved Boxoban greedy', 'eval_boxoban.json', 'greedy', 'solved_fraction'),
            ('solved Boxoban sampled', 'eval_boxoban.json', 'sampled', 'solved_fraction'),
            ('irreversible/episode greedy', 'eval_irreversible.json', 'greedy',
             'mean_irreversible_excl_solving'),
            ('irreversible/episode sampled', 'eval_irreversible.json', 'sampled',
             'mean_irreversible_excl_solving'),
            # Only a push can be irreversible: per push, apart from how much an agent pushes.
            ('irreversible/push greedy', 'eval_irreversible.json', 'greedy',
             'irreversible_per_push'),
            ('irreversible/push sampled', 'eval_irreversible.json', 'sampled',
             'irreversible_per_push'),
        ),
        extra_markdown=sokoban_markdown,
    ),
    'sokoban_recipe': Experiment(
        name='sokoban_recipe',
        description="which Sokoban agent learns per env step and per wall-hour here: our "
                    "preset's recipe against the field's IMPALA recipe with each policy-network "
                    'preset, and one ablation; the small rooms (7x7, 2 boxes) or the 1k set',
        paper='Not a claim of the paper: the agent its Sokoban comparison (Sec. 5.3) needs. The '
              "field's IMPALA-trained Boxoban agents solve 61-71% (ResNet) and 87-92% (DRC(3,3)) "
              'of held-out levels at 30M env steps.',
        steps=recipe_steps,
        scales=tuple(RECIPE_SCALES),
        metrics=('solved', 'boxes_on_target', 'episode_return', 'policy_entropy'),
        table_metrics=('solved', 'boxes_on_target', 'episode_return'),
        table_last_n=1000,
        evaluations=(
            ('solved train greedy', 'eval_train.json', 'greedy', 'solved_fraction'),
            ('solved held-out greedy', 'eval_held_out.json', 'greedy', 'solved_fraction'),
        ),
        extra_markdown=recipe_markdown,
    ),
    'sokoban_ladder': Experiment(
        name='sokoban_ladder',
        description="IMPALA vs IMPALA+RAE on gym-sokoban's ladder of rooms (7x7 with 2 and 3 "
                    'boxes, 10x10 with 3 and 4), one rung per scale: psi trained offline on '
                    "the rung's random episodes and frozen, one agent recipe for every rung and "
                    'arm, 3 seeds each',
        paper='Fig. 5b: IMPALA+RAE learns faster than IMPALA; RAE is meant to keep the agent out '
              'of irreversible pushes, so fewer of its episodes should enter a dead end.',
        steps=ladder_steps,
        scales=tuple(LADDER_SCALES),
        metrics=('solved', 'boxes_on_target', 'episode_return', 'penalised_steps',
                 'policy_entropy'),
        table_metrics=('solved', 'boxes_on_target', 'episode_return', 'penalised_steps'),
        table_last_n=SOKOBAN_MILESTONE_EPISODES,
        evaluations=(
            ('solved train greedy', 'eval_train.json', 'greedy', 'solved_fraction'),
            ('solved train sampled', 'eval_train.json', 'sampled', 'solved_fraction'),
            ('solved held-out greedy', 'eval_held_out.json', 'greedy', 'solved_fraction'),
            ('solved held-out sampled', 'eval_held_out.json', 'sampled', 'solved_fraction'),
            ('dead-end episodes sampled', 'eval_irreversible.json', 'sampled',
             'dead_end_fraction'),
            ('irreversible/push sampled', 'eval_irreversible.json', 'sampled',
             'irreversible_per_push'),
        ),
        extra_markdown=ladder_markdown,
    ),
    'cliff': Experiment(
        name='cliff',
        description='random policy and random policy + RAC in the windy cliff-walk, wind p x '
                    'threshold beta, estimators trained offline on random trajectories per p '
                    '(App. D, Tables 1-2)',
        paper='Table 1: a random policy scores 57.5 (p=0) down to 10.5 (p=0.4); Table 2: with '
              'RAC and beta >= 0.1 it stays alive the whole 250 steps at p=0, and at beta=0.4 '
              'for every p (238.6-250).',
        steps=cliff_steps,
        scales=tuple(CLIFF_SCALES),
        metrics=('episode_return', 'rejections'),
        table_metrics=('episode_return', 'rejections'),
        table_last_n=10**9,
        extra_markdown=cliff_grid_markdown,
    ),
    'cartpole_plus': Experiment(
        name='cartpole_plus',
        description='Cartpole+ (50k-step episodes): a random policy with RAC, psi/phi trained '
                    'offline on random trajectories, against DQN and M-DQN trained with App. '
                    "C.4's settings (Sec. 5.4, Fig. 6)",
        paper='Fig. 6a: a random policy with RAC reaches "seemingly infinite" scores (10 seeds); '
              'DQN and M-DQN reach a maximum evaluation score of 1152 and 2801 in 2M steps; '
              'Fig. 6b/c: phi prefers pushing the cart towards the side the pole leans to.',
        steps=cartpole_plus.cartpole_plus_steps,
        scales=tuple(cartpole_plus.CARTPOLE_PLUS_SCALES),
        metrics=('episode_length', 'rejections'),
        table_metrics=('episode_length',),
        # DQN / M-DQN evaluations are in the page's own table, read on the scale's grid.
        table_last_n=10**9,
        extra_markdown=cartpole_plus.cartpole_plus_markdown,
    ),
    'cartpole_reward_free': Experiment(
        name='cartpole_reward_free',
        description='reward-free Cartpole: IMPALA + RAE with psi learned online and no '
                    'extrinsic reward, plain IMPALA as the control (Sec. 5.1, Fig. 3)',
        paper='Fig. 3a: PPO + RAE reaches and holds the 200-step cap (10 seeds); the intrinsic '
              'return goes from 0 to negative and back to 0 as the agent learns to avoid '
              'penalties; Fig. 3b/c: psi grows with the angle and angular velocity.',
        steps=cartpole_reward_free.cartpole_reward_free_steps,
        scales=tuple(cartpole_reward_free.REWARD_FREE_SCALES),
        metrics=('episode_length', 'intrinsic_return', 'psi_accuracy'),
        table_metrics=('episode_length', 'intrinsic_return'),
        extra_markdown=cartpole_reward_free.reward_free_markdown,
    ),
    'turf': Experiment(
        name='turf',
        description='Turf: IMPALA, IMPALA + RAE (psi online), IMPALA + RAC (psi/phi offline, '
                    'beta = 0.2) and the RAC threshold sweep (Sec. 5.2, 5.4, Fig. 4, Fig. 7)',
        paper='Fig. 4: PPO tramples grass, PPO + RAE keeps to the stone path; PPO + RAC '
              '(beta = 0.2) ruins no grass over the whole of training and still learns to reach '
              'the goal; Fig. 7: beta > 0.4 never reaches the goal, beta >= 0.2 ruins nothing.',
        steps=turf_exps.turf_steps,
        scales=tuple(turf_exps.TURF_SCALES),
        metrics=('episode_return', 'ruined_grass', 'episode_length', 'intrinsic_return',
                 'rejections'),
        table_metrics=('episode_return', 'ruined_grass', 'episode_length'),
        extra_markdown=turf_page.turf_markdown,
    ),
}


def get(name: str) -> Experiment:
  if name not in EXPERIMENTS:
    raise ValueError(f'unknown experiment {name!r}; known: {", ".join(sorted(EXPERIMENTS))}')
  return EXPERIMENTS[name]

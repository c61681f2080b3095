"""Sokoban (Sec. 5.3, Fig. 5b/5c): IMPALA vs IMPALA + RAE with a psi trained offline; its
steps per scale. Its page: `experiments.sokoban_page`."""
import os
from typing import Dict, List

from envs import presets
from experiments.spec import Step, scale_settings, train_step
from launch.runtime import run_export

# Per scale: random episodes for psi, psi pairs, env steps per run, envs per actor, the agent's
# changes to the comparison's agent (`agent`, ImpalaConfig fields) and the evaluation sizes.
#
# The agent of the `tiny`, `small`, `long` and `host` scales (and, changed, of `authors` and
# `paper`), "our recipe" in RESULTS.md: C.3's Adam (learning rate 5e-4, b1 0, b2 0.99) and
# discount, batch 16 x 20, each sequence sampled 4 times from a replay of 64, the gradient norm
# clipped at 1, no self-imitation (it learned less on the 1k set and costs learner time;
# BUILD_NOTES.md), every training episode to 120 steps (BATCH16_ENV_OPTIONS). Every field the
# Sokoban preset sets is written on each run's command line, so these runs keep their agent
# whatever the preset (the field's recipe) says.
BATCH16_AGENT = dict(discount=0.99, entropy_cost=0.01, baseline_cost=0.5, vtrace_lambda=1.0,
                     learning_rate=5e-4, learning_rate_decay_steps=0, adam_b1=0.0, adam_b2=0.99,
                     adam_eps=1e-8, batch_size=16, minibatches=1, sequence_length=20,
                     max_gradient_norm=1.0, samples_per_insert=4.0, replay_size=64,
                     logit_l2_cost=0.0, weight_l2_cost=0.0, self_imitation_updates=0)
BATCH16_ENV_OPTIONS = ('--env_option', 'max_steps_min=0')
# The field's IMPALA recipe for Boxoban (AlignmentResearch/train-learned-planner, the configs of
# its logged learned-planner runs), as ImpalaConfig fields: V-trace lambda 0.5, discount 0.97,
# value cost 0.25, Adam b1 0.9 / b2 0.99 / eps 1.6e-7, learning rate 4e-4 annealed linearly to 0
# over the run, every gradient clipped to norm 2.5e-4 (about 0.045 unclipped: a normalised step),
# 256 sequences of 20 steps split into 8 minibatches of 32, each used once (a queue). Its logit L2
# is 1.6e-6 x the squares summed over a 32-room minibatch; ours averages the per-sequence sums,
# so 32x that. No self-imitation. The episode's limit is drawn from [30, 120] at each reset
# (FIELD_ENV_OPTIONS); evaluation plays to 120. The Sokoban preset is field_reuse_agent's.
def field_agent(max_steps: int) -> dict:
  """The field's recipe, its learning rate decaying to 0 over `max_steps` env steps."""
  return dict(batch_size=256, minibatches=8, sequence_length=20, samples_per_insert=0,
              discount=0.97, baseline_cost=0.25, entropy_cost=0.01, vtrace_lambda=0.5,
              learning_rate=4e-4, learning_rate_decay_steps=max_steps, adam_b1=0.9,
              adam_b2=0.99, adam_eps=1.6e-7, max_gradient_norm=2.5e-4,
              logit_l2_cost=1.6e-6 * 32, weight_l2_cost=1.6e-8, self_imitation_updates=0)


FIELD_ENV_OPTIONS = ('--env_option', 'max_steps_min=30')


def field_reuse_agent(max_steps: int) -> dict:
  """The field's recipe with 16x its Adam steps per env step, sized for this machine: 32
  minibatches of 8 sequences per batch of 256, each sequence sampled 4 times from a replay of
  1,024 (one Adam step per 38 env steps). Of the recipe comparison's arms it learned most per env
  step and per quiet wall-hour on the 7x7 rooms and on the 1k set (RESULTS.md, "Which agent
  learns Sokoban here")."""
  return dict(field_agent(max_steps), minibatches=32, samples_per_insert=4, replay_size=1024)


def agent_flags(agent: dict) -> tuple:
  """ImpalaConfig fields as launch.train flags."""
  return tuple(arg for name, value in agent.items()
               for arg in (f'--{name}', str(value) if isinstance(value, int) else f'{value:g}'))


SOKOBAN_SCALES = {
    'tiny': dict(episodes=200, pairs=50_000, max_steps=20_000, actors=1, envs_per_actor=4,
                 run_seconds=90, run_flags=BATCH16_ENV_OPTIONS,
                 eval_transitions=100,
                 eval_levels=20, eval_boxoban_levels=20, eval_oracle_levels=4),
    # small: 5M steps, where IMPALA has clearly left random play (RESULTS.md), reached over
    # several launches of the same command; batch 16 x replay 4 (BATCH16_AGENT; BUILD_NOTES.md,
    # "Sokoban learning").
    'small': dict(episodes=20_000, pairs=5_000_000, max_steps=5_000_000, actors=2,
                  envs_per_actor=16, run_seconds=2400, run_flags=BATCH16_ENV_OPTIONS,
                  eval_transitions=2000, eval_levels=1000, eval_boxoban_levels=500,
                  eval_oracle_levels=100),
    # long: to where the paper's curves separate (Fig. 5b, 25-30M); two arms, IMPALA and IMPALA
    # + RAE with the preset psi (BUILD_NOTES.md, "Sokoban's long scale"). A shorter budget first
    # (--max_steps 10000000, then 20M, 30M) keeps the arms level over several launches.
    'long': dict(episodes=20_000, pairs=5_000_000, max_steps=30_000_000, actors=2,
                 envs_per_actor=16, run_seconds=12_000, rae_arms=('impala_rae',),
                 run_flags=BATCH16_ENV_OPTIONS, eval_transitions=2000, eval_levels=1000,
                 eval_boxoban_levels=500, eval_oracle_levels=100),
    # authors: App. C.3's agent as the authors ran it, Acme's distributed IMPALA at its defaults
    # (batch 256, the queue, gradient-norm clip 40, no self-imitation), 64 rooms in all as their
    # 64 actors (a cluster takes --num_actors 64 --envs_per_actor 1), 50M env steps reached over
    # several launches in rungs (scripts/sokoban_benchmark.sh).
    'authors': dict(episodes=20_000, pairs=5_000_000, max_steps=50_000_000, actors=2,
                    envs_per_actor=32, run_seconds=7_000, rae_arms=('impala_rae',),
                    diagnostics=('impala_drawn', 'impala_drawn_haiku', 'impala_drawn_haiku_bytes',
                                 'impala_timeout_ends'),
                    agent=dict(batch_size=256, samples_per_insert=0, max_gradient_norm=40),
                    run_flags=BATCH16_ENV_OPTIONS, eval_transitions=2000, eval_levels=1000,
                    eval_boxoban_levels=500, eval_oracle_levels=100),
    # field: the field's recipe (field_agent) to 30M env steps, both arms, in rungs as 'long'.
    'field': dict(episodes=20_000, pairs=5_000_000, max_steps=30_000_000, actors=2,
                  envs_per_actor=32, run_seconds=7_000, rae_arms=('impala_rae',),
                  agent=field_agent(30_000_000), run_flags=FIELD_ENV_OPTIONS,
                  eval_transitions=2000, eval_levels=1000, eval_boxoban_levels=500,
                  eval_oracle_levels=100),
    # field_reuse: the recipe comparison's winner (field_reuse_agent) to 30M env steps, both
    # arms, in rungs as 'long'.
    'field_reuse': dict(episodes=20_000, pairs=5_000_000, max_steps=30_000_000, actors=2,
                        envs_per_actor=32, run_seconds=7_000, rae_arms=('impala_rae',),
                        agent=field_reuse_agent(30_000_000), run_flags=FIELD_ENV_OPTIONS,
                        eval_transitions=2000, eval_levels=1000, eval_boxoban_levels=500,
                        eval_oracle_levels=100),
    # host: 'long' sized for the host it runs on by launch.runtime.host_preset.
    'host': lambda: _host_scale(),
    # paper: 100k episodes, 20M pairs (App. C.3), 64 actors, batch 256; the budget of Fig. 5b.
    'paper': dict(episodes=100_000, pairs=20_000_000, max_steps=500_000_000, actors=64,
                  envs_per_actor=1, run_seconds=0,
                  agent=dict(batch_size=256, samples_per_insert=0, max_gradient_norm=40),
                  run_flags=BATCH16_ENV_OPTIONS, eval_transitions=10_000, eval_levels=1000,
                  eval_boxoban_levels=1000, eval_oracle_levels=1000),
}


def _host_scale() -> dict:
  from launch.runtime import host_preset
  sizes = host_preset.this_host()
  return dict(SOKOBAN_SCALES['long'], actors=sizes.num_actors,
              envs_per_actor=sizes.envs_per_actor, agent=dict(batch_size=sizes.batch_size),
              run_flags=('--learner_device', sizes.learner_device, '--learner_host_devices',
                         str(sizes.learner_host_devices), '--updates_per_call',
                         str(sizes.updates_per_call), *BATCH16_ENV_OPTIONS))


# The RAE arms: (run name, group, psi checkpoint, penalty weight lambda or None for the preset's).
# The paper names no lambda; the preset's 0.1 is small beside the +1/-1 box rewards, so one arm
# takes 1.0.
SOKOBAN_RAE_ARMS = (
    ('impala_rae', 'IMPALA+RAE', 'psi.ckpt', None),
    ('impala_rae_paper_psi', "IMPALA+RAE (paper's psi)", 'psi_paper.ckpt', None),
    ('impala_rae_lam1', 'IMPALA+RAE (lambda 1)', 'psi.ckpt', 1.0),
)
_ALL_ARMS = tuple(arm[0] for arm in SOKOBAN_RAE_ARMS)   # a scale's default 'rae_arms'
# A scale's `diagnostics`: one seed each of IMPALA changed towards the authors' system. The
# first three change the agent towards what their unreleased network may have been, each adding
# one change to the one before, in the order they are worth measuring: the room as App. C.3 draws
# it (not centred on the agent); then Haiku's default initialisation, as Acme's networks have it;
# then the bytes fed unscaled, whose first policy is near-deterministic
# (experiments.studies.first_policy). The last changes only the environment: the step limit ends the
# episode (discount 0), as gym-sokoban's `done` does under Acme's GymWrapper, where ours truncates
# and bootstraps. (run name, group, flags)
SOKOBAN_DIAGNOSTICS = (
    ('impala_drawn', 'IMPALA, room as drawn', ('--nopolicy_centre_on_agent',)),
    ('impala_drawn_haiku', "IMPALA, room as drawn, Haiku's init",
     ('--nopolicy_centre_on_agent', '--policy_init', 'lecun')),
    ('impala_drawn_haiku_bytes', "IMPALA, room as drawn, Haiku's init, bytes unscaled",
     ('--nopolicy_centre_on_agent', '--policy_init', 'lecun', '--policy_pixel_scale', '1')),
    ('impala_timeout_ends', 'IMPALA, step limit ends episodes',
     ('--env_option', 'timeout_terminates=true')),
)
SOKOBAN_BETA = presets.thresholds('sokoban', 'rae')['beta']
SOKOBAN_GIF = 'policy_boxoban.gif'   # the final greedy policy on SOKOBAN_GIF_LEVEL of Boxoban
SOKOBAN_GIF_LEVEL = 0
# Earlier comparisons drawn on a scale's curves beside its own runs, from their committed exports
# in this checkout: the authors' recipe beside our recipe's 30M-step runs (scale `long`).
SOKOBAN_REFERENCE_RUNS = {
    'authors': ('long', 'our recipe, 30M', os.path.abspath(os.path.join(
        os.path.dirname(__file__), '..', 'results', 'sokoban_30m'))),
}
# Public Boxoban levels (DeepMind's unfiltered test file 000), shipped beside the checkout.
BOXOBAN_LEVELS = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', 'shared',
                                              'data', 'boxoban', 'unfiltered_test_000.txt'))


def sokoban_psi_steps(s: dict, suffix: str, preset: str,
                      eval_levels=(('train_levels', 'default'), ('boxoban', BOXOBAN_LEVELS)),
                      ) -> List[Step]:
  """Train one psi on the random episodes and score it against the oracle: random transitions
  from each of `eval_levels` ((name, level file): by default the training levels and Boxoban
  levels it never saw; Sec. 5.3: "high accuracy"; the labels are cached, so each psi is scored
  on the same transitions), and along a solution of the first one's level 0."""
  ckpt = f'psi{suffix}.ckpt'
  steps = [Step(f'train_psi{suffix}', 'estimators.train',
                ('--dataset', '{out}/data/random', '--out', f'{{out}}/{ckpt}', '--network_preset',
                 preset, '--num_pairs', str(s['pairs']), '--noprogress'),
                done=ckpt, est_seconds=s['pairs'] / 20_000)]
  for name, levels in eval_levels:
    steps.append(Step(
        f'eval_psi{suffix}_{name}', 'estimators.evaluate',
        ('--checkpoint', f'{{out}}/{ckpt}', '--env', 'sokoban', '--env_option', f'levels={levels}',
         '--transitions', str(s['eval_transitions']), '--beta', str(SOKOBAN_BETA),
         '--labels_cache', '{out}/psi_labels', '--out', f'{{out}}/psi_eval{suffix}/{name}'),
        done=f'psi_eval{suffix}/{name}/report.json', est_seconds=s['eval_transitions'] * 0.1))
  steps.append(Step(f'psi_trace{suffix}', 'estimators.psi_trace',
                    ('--checkpoint', f'{{out}}/{ckpt}', '--levels', eval_levels[0][1], '--level',
                     '0', '--beta', str(SOKOBAN_BETA),
                     '--out', f'{{out}}/psi_trace{suffix}.png',
                     '--json', f'{{out}}/psi_eval{suffix}/trace.json'),
                    done=f'psi_eval{suffix}/trace.json', est_seconds=60))
  return steps


def sokoban_steps(scale: str, seeds: int) -> List[Step]:
  s = scale_settings(SOKOBAN_SCALES, scale, 'sokoban')
  steps = [
      Step('collect_random', 'launch.collect',
           ('--env', 'sokoban', '--episodes', str(s['episodes']), '--out', '{out}/data/random',
            '--num_actors', '1', '--resume', '--noprogress'),
           done='data/random/noturningback.json', est_seconds=s['episodes'] * 0.02),
  ]
  # Two psi: the Sokoban preset (the best of experiments.studies.psi_ablation) drives IMPALA+RAE; the paper's
  # network (App. C.3) drives a second RAE group, so the page shows what the better psi changes.
  arms = [arm for arm in SOKOBAN_RAE_ARMS if arm[0] in s.get('rae_arms', _ALL_ARMS)]
  steps += sokoban_psi_steps(s, '', 'sokoban')
  if any(ckpt == 'psi_paper.ckpt' for _, _, ckpt, _ in arms):
    steps += sokoban_psi_steps(s, '_paper', 'sokoban_paper')
  # Every arm gets the same agent settings; only the RAE flags differ.
  agent = {**BATCH16_AGENT, **s.get('agent', {})}
  common = ('--env', 'sokoban', '--num_actors', str(s['actors']), '--envs_per_actor',
            str(s['envs_per_actor']), *agent_flags(agent), *s['run_flags'])
  runs = []
  for seed in range(seeds):
    runs.append(train_step(f'impala-s{seed}', 'IMPALA', seed, s['max_steps'], s['run_seconds'],
                       *common, '--mode', 'none'))
    for name, group, ckpt, lam in arms:
      lam_flags = () if lam is None else ('--lam', str(lam))
      runs.append(train_step(f'{name}-s{seed}', group, seed, s['max_steps'], s['run_seconds'],
                             *common, '--mode', 'rae', '--estimator_checkpoint', f'{{out}}/{ckpt}',
                             '--beta', str(SOKOBAN_BETA), *lam_flags))
  for name, group, flags in SOKOBAN_DIAGNOSTICS:
    if name in s.get('diagnostics', ()):
      runs.append(train_step(f'{name}-s0', group, 0, s['max_steps'], s['run_seconds'], *common,
                             '--mode', 'none', *flags))
  # Each run is followed by the evaluations of its final policy, so that a budget reached over
  # several sessions shows every finished run whole: greedy and sampled, on the 1k training
  # levels, on Boxoban levels it never saw, and (oracle-counted irreversible actions, expensive)
  # on the first levels.
  for run in runs:
    steps.append(run)
    # Seed 0 of every arm is also watched, on the same level none of them trained on.
    watch = (('--gif', os.path.join('{out}', run.run_dir, SOKOBAN_GIF), '--gif_levels',
              str(SOKOBAN_GIF_LEVEL)) if run.seed == 0 else ())
    for name, levels, n, extra in (
        ('eval_train', 'default', s['eval_levels'], ()),
        ('eval_boxoban', BOXOBAN_LEVELS, s['eval_boxoban_levels'], watch),
        ('eval_irreversible', 'default', s['eval_oracle_levels'],
         ('--count_irreversible', '--max_expansions', '2000'))):
      steps.append(Step(
          f'{run.name}-{name}', 'experiments.evaluate_policy',
          ('--run_dir', os.path.join('{out}', run.run_dir), '--levels', levels, '--num_levels',
           str(n), '--policy', 'both', *extra, '--out', os.path.join('{out}', run.run_dir, f'{name}.json')),
          done=os.path.join(run.run_dir, f'{name}.json'), est_seconds=n * (1.5 if extra else 0.05)))
  return steps


def sokoban_reference_runs(scale: str) -> Dict[str, List[str]]:
  """{line label: exported run directories} of the comparison drawn beside `scale`'s runs; the
  runs whose export is missing are left out, so a checkout without them draws its own alone."""
  if scale not in SOKOBAN_REFERENCE_RUNS:
    return {}
  ref_scale, note, out = SOKOBAN_REFERENCE_RUNS[scale]
  groups: Dict[str, List[str]] = {}
  for step in sokoban_steps(ref_scale, seeds=3):
    export = os.path.join(out, step.run_dir, run_export.EXPORT_SUBDIR)
    if step.is_training and os.path.isdir(os.path.join(export, 'logs')):
      groups.setdefault(f'{step.group} ({note})', []).append(export)
  return groups

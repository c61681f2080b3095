"""One preset per environment: every setting a run on it takes when the command line leaves it
out, in one place, each value with where it comes from (the paper's section, or "ours" with the
BUILD_NOTES.md row that says why).

    preset = presets.get('sokoban')          # PresetError (one line) for an env without one
    preset.impala['batch_size'], preset.thresholds['rae']['beta'], preset.estimator_recipe['window']

A preset gathers, per environment: the IMPALA settings, the precedence learner's throttle, the
thresholds of each mode (beta, lambda, reward form), the psi/phi training recipe (window,
learning rate, weight decay, pair sampling, offline budgets), the estimator (psi/phi) network,
the policy network, and whether the environment's datasets keep oracle states. Each section is a mapping of
the keyword arguments of the typed config it feeds, under that config's own field names:

    impala            launch.program.config.ImpalaConfig
    precedence        launch.program.config.PrecedenceConfig
    thresholds[mode]  agents.acting.ReversibilityConfig (beta, lam, reward_form)
    estimator_recipe  estimators.recipes.EstimatorRecipe
    estimator_network estimators.networks.EstimatorNetConfig
    policy_network    agents.networks.PolicyNetConfig
    train_env_options the environment's options in a training run (launch.train), e.g.
                      Sokoban's time limit drawn per episode; collection and evaluation keep
                      the environment's defaults
    watch             the episode measures a user of the environment watches while a run goes
                      (the progress line, the run summary, TensorBoard): (actor log column,
                      label) pairs; each mode adds its own (MODE_WATCH)

Why here, at the bottom layer, as plain values: the settings are read on every layer (the offline
estimator CLI, estimators.train, reads the recipe and the estimator network; estimators.evaluate the
thresholds; agents.networks the policy network; launch.train all of it), and envs/ is the one
layer all of them may import (tests/test_layering.py). The typed configs live with the code that
uses them, above; the layer that owns a config builds it from its section
(`launch.program.presets`, `estimators.recipes.recipe`, `estimators.networks.default_estimator_config`,
`agents.policy_net.default_policy_config`), which validates it, and tests/test_presets.py builds
every section of every preset, so a misspelt field fails there and not in a run.

Adding an environment (docs/configuration.md, "Adding an environment"): its module in envs/, one `EnvPreset` in
`PRESETS` below, one line in `envs._REGISTRY`.
"""
import dataclasses
from typing import Any, Dict, Mapping, Optional, Tuple

from envs import EnvError
from envs import sokoban as sokoban_env

MODES = ('none', 'rae', 'rac')
PAPER_NETWORK_SUFFIX = '_paper'   # estimators.train --network_preset sokoban_paper
# An IMPALA learning-rate decay over the run's own budget: launch.train sets
# learning_rate_decay_steps to the run's --max_steps (a resumed run keeps its first launch's).
RUN_MAX_STEPS = 'max_steps'


class PresetError(EnvError):
  """An environment (or mode) without a preset; one line naming what is missing."""


@dataclasses.dataclass(frozen=True)
class EnvPreset:
  """Everything a run on one environment defaults to. Sections: see the module docstring."""
  impala: Mapping[str, Any]
  precedence: Mapping[str, Any]
  thresholds: Mapping[str, Mapping[str, Any]]   # 'rae' and 'rac'; 'none' uses no threshold
  estimator_recipe: Mapping[str, Any]
  estimator_network: Mapping[str, Any]
  policy_network: Mapping[str, Any]
  # Deterministic discrete states (get_state/set_state): datasets keep them and the exact
  # reversibility oracle (envs.oracle) labels transitions.
  oracle_states: bool
  sources: Mapping[str, str]   # per section ('impala', 'rae', 'rac', 'estimator_recipe')
  # The paper's psi/phi network where ours differs (`--network_preset <env>_paper`).
  paper_estimator_network: Optional[Mapping[str, Any]] = None
  # Environment options of a training run (launch.train), under those given; data collection and
  # evaluation keep the environment's own defaults.
  train_env_options: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  watch: Tuple[Tuple[str, str], ...] = (('episode_length', 'length'),)

  def __post_init__(self):
    missing = [m for m in ('rae', 'rac') if m not in self.thresholds]
    if missing:
      raise PresetError(f'a preset needs thresholds for every mode, missing: {", ".join(missing)}')


PRESETS: Dict[str, EnvPreset] = {
    'cartpole': EnvPreset(
        # The paper trains PPO here (C.1: entropy 0.05, against SB3's per-batch normalised
        # advantages). IMPALA's advantages are not normalised and RAE's penalties are small (under
        # 0.3 a step), so 0.05 kept the policy random enough to drop the pole in 1 episode of 4-6;
        # 0.001 holds the 200 cap (BUILD_NOTES.md). Discount 0.9: with 0.99 the agent learned to
        # end episodes early.
        impala=dict(discount=0.9, entropy_cost=0.001, learning_rate=1e-3, adam_b1=0.9,
                    adam_b2=0.999, batch_size=16, sequence_length=20, max_gradient_norm=40.0,
                    samples_per_insert=0.0, replay_size=256, self_imitation_updates=0),
        precedence=dict(env_steps_per_update=100),   # ours (the paper: 1 per 500; BUILD_NOTES.md)
        thresholds={
            # C.1: beta 0.7 (tuned over 0.5..0.9); the hinge reward -max(psi - beta, 0) is the
            # authors' released Cartpole code.
            'rae': dict(beta=0.7, lam=1.0, reward_form='hinge'),
            # Sec. 5.4 / Fig. 6a sweeps several thresholds without naming one; 0.4 is ours.
            'rac': dict(beta=0.4, lam=1.0, reward_form='paper'),
        },
        # C.4 (Cartpole+, the offline recipe; C.1 uses the same optimiser online): w = 200, the
        # episode limit; 3M pairs; phi on 100k transitions; Adam 0.01. Pairs 'start_uniform'
        # (ours): with the paper's uniform pairs the reward-free Cartpole main job plateaued at a
        # mean length of ~100 instead of reaching 150 (BUILD_NOTES.md, "Deviations from the paper").
        estimator_recipe=dict(window=200, learning_rate=1e-2, weight_decay=0.0,
                              num_pairs=3_000_000, phi_transitions=100_000,
                              pair_sampling='start_uniform'),
        # C.1 / C.4: two FC layers of 64 + ReLU per observation, concat, linear -> logit;
        # phi (Cartpole+): "a shallow feed-forward network with a single hidden layer of size 64
        # followed by a ReLU": input -> 64 -> one logit per action (phi_encoder='torso').
        estimator_network=dict(torso='mlp', mlp_sizes=(64, 64), phi_hidden_sizes=(64,)),
        # C.4 (Cartpole PPO): "both the policy network and the value network are composed of two
        # hidden layers of size 64": two separate 2x64 MLPs, nothing shared.
        policy_network=dict(torso='mlp', shared_hidden=(), head_hidden=(64, 64)),
        oracle_states=False,   # continuous states: no exact oracle
        sources={'impala': 'ours (IMPALA: discount, entropy, lr)', 'rae': 'Sec. 5.1, C.1',
                 'rac': 'Sec. 5.4 (beta ours)', 'estimator_recipe': 'App. C.1, C.4'},
    ),
    'turf': EnvPreset(
        # The paper trains PPO (C.2: entropy 0.05); IMPALA settings ours.
        impala=dict(discount=0.99, entropy_cost=0.05, learning_rate=1e-3, adam_b1=0.9,
                    adam_b2=0.999, batch_size=16, sequence_length=20, max_gradient_norm=40.0,
                    samples_per_insert=0.0, replay_size=256, self_imitation_updates=0),
        precedence=dict(env_steps_per_update=100),   # ours (BUILD_NOTES.md)
        thresholds={
            # C.2: r = -0.1 * 1[psi > 0.8] * psi.
            'rae': dict(beta=0.8, lam=0.1, reward_form='paper'),
            # Sec. 5.4: beta 0.2 (C.7: above 0.4 the agent never reaches the goal).
            'rac': dict(beta=0.2, lam=1.0, reward_form='paper'),
        },
        # C.6: "the same offline training procedure that was used for Cartpole+", w = 120.
        estimator_recipe=dict(window=120, learning_rate=1e-2, weight_decay=0.0,
                              num_pairs=3_000_000, phi_transitions=100_000,
                              pair_sampling='uniform'),
        # C.2 / C.6: 3 convs (3x3) of 32/64/64, flatten, linear to 64, concat, linear -> logit;
        # phi: the same convs, flattened, then one hidden layer of 64 + ReLU -> logits (no
        # embedding projection: phi_encoder='torso').
        estimator_network=dict(torso='conv', conv_channels=(32, 64, 64), conv_strides=(1, 1, 1),
                               embedding_size=64, phi_hidden_sizes=(64,)),
        # C.2 (Turf PPO agent): convs 32/64/64, flatten, FC 512, ReLU after every layer, linear
        # policy and value. The observation is a 10x10x3 image: 3x3 stride-1 VALID convs give
        # 8x8 -> 6x6 -> 4x4 (1024 features), the same convs as the Turf psi/phi encoder; SAME
        # would keep 10x10 and make the 512 layer ~6x larger for no gain in receptive field.
        policy_network=dict(torso='conv', conv_channels=(32, 64, 64), conv_strides=(1, 1, 1),
                            conv_paddings=('VALID',) * 3, relu_after_last_conv=True,
                            shared_hidden=(512,), head_hidden=()),
        oracle_states=True,
        # Turf's return is 1 at the goal and 0 otherwise: its mean is the goal rate.
        watch=(('episode_return', 'goal'), ('ruined_grass', 'ruined grass')),
        sources={'impala': 'C.2 (entropy); discount, lr, IMPALA ours', 'rae': 'Sec. 5.2, C.2',
                 'rac': 'Sec. 5.4, C.7', 'estimator_recipe': 'App. C.2, C.6'},
    ),
    'sokoban': EnvPreset(
        # The field's IMPALA recipe for Boxoban (the configs of AlignmentResearch/learned-planner's
        # logged runs): V-trace lambda 0.5, discount 0.97, value cost 0.25, entropy 0.01, Adam
        # b1 0.9 / b2 0.99 / eps 1.6e-7, learning rate 4e-4 falling linearly to 0 over the run's
        # --max_steps, every gradient clipped to norm 2.5e-4 (a normalised step), tiny L2 terms
        # (their logit term sums over a 32-room minibatch, ours averages per sequence: 32x theirs),
        # no self-imitation; and the time limit of each training episode drawn from [30, 120]
        # (train_env_options). Sized for this machine: each batch of 256 sequences is split into
        # 32 minibatches of 8 and each sequence is sampled 4 times from a replay of 1,024, one Adam
        # step per 38 env steps where theirs takes one per 640. Of the recipes measured it learned
        # most per env step and per wall-hour on 7x7 rooms and on the 1k set (BUILD_NOTES.md,
        # "Sokoban recipe and networks"; RESULTS.md). It learns single levels 37 and 7; level 1,
        # a trap for greedy pushing, only with --self_imitation_updates 32, which stays off here
        # (not measured on the 1k set with this recipe; with batch 16 it learned less there).
        # C.3's own agent (batch 256 from 64 actors, each once, clip 40) stays at random play.
        impala=dict(discount=0.97, entropy_cost=0.01, baseline_cost=0.25, vtrace_lambda=0.5,
                    learning_rate=4e-4, learning_rate_decay_steps=RUN_MAX_STEPS, adam_b1=0.9,
                    adam_b2=0.99, adam_eps=1.6e-7, batch_size=256, minibatches=32,
                    sequence_length=20, max_gradient_norm=2.5e-4, samples_per_insert=4.0,
                    replay_size=1024, logit_l2_cost=1.6e-6 * 32, weight_l2_cost=1.6e-8,
                    self_imitation_updates=0),
        train_env_options=dict(max_steps_min=30),
        # The online psi update rate is C.3's (1 per 500 env steps): a Sokoban psi update costs
        # ~8-10 ms of CPU (bench.precedence_bench), 1 per 100 would take ~0.9 of a core at 10K env
        # steps/s; at 1 per 500 a 20M-step run still makes 40K updates (5.1M pairs, the
        # small-scale offline budget).
        precedence=dict(env_steps_per_update=500),
        thresholds={
            # C.3: beta 0.9; the penalty weight is not given (0.1 as in Turf, ours).
            'rae': dict(beta=0.9, lam=0.1, reward_form='paper'),
            # Not in the paper: C.7's advice (start at 0.5, lower it until the task is solved).
            'rac': dict(beta=0.4, lam=1.0, reward_form='paper'),
        },
        # C.3: 20M pairs, w = 15, Adam 5e-4 (b1 0.9, b2 0.999), weight decay 1e-4.
        estimator_recipe=dict(window=15, learning_rate=5e-4, weight_decay=1e-4,
                              num_pairs=20_000_000, phi_transitions=100_000,
                              pair_sampling='uniform'),
        # Ours, not the paper's psi: the paper's Siamese net with VALID convs (below,
        # 'sokoban_paper') ranks irreversible random transitions at AUROC 0.66 on unseen Boxoban
        # levels; its two convs (strides 2, 1) applied to both frames stacked along channels,
        # with SAME padding and 32 channels each, at 0.95 (experiments.studies.psi_ablation; BUILD_NOTES.md,
        # "Sokoban psi").
        estimator_network=dict(torso='conv', conv_channels=(32, 32), conv_strides=(2, 1),
                               conv_padding='SAME', psi_fusion='early',
                               relu_after_last_conv=False, psi_head_sizes=(64, 64, 64),
                               phi_hidden_sizes=(64, 64, 64), dropout=0.1),
        # C.3: 2 convs of 8, strides 2 and 1 (no ReLU after the last), 3-layer MLP of 64 with
        # dropout 0.1, final single neuron. phi is not described in the paper for Sokoban: we keep
        # the same convs + 3 hidden layers of 64 (no embedding_size, so 'torso' == 'full' here).
        paper_estimator_network=dict(torso='conv', conv_channels=(8, 8), conv_strides=(2, 1),
                                     conv_padding='VALID', psi_fusion='siamese',
                                     relu_after_last_conv=False, psi_head_sizes=(64, 64, 64),
                                     phi_hidden_sizes=(64, 64, 64), dropout=0.1),
        # C.3 (Sokoban): convs 8/16/16, 3x3, strides 2/1/1, ReLU except after the last; 2 shared
        # FC layers of 64 + ReLU; policy and value each get their own FC layer of 64 + ReLU. C.3
        # names no padding: SAME (Haiku's and so Acme's default) keeps 5x5x16 = 400 features of a
        # 10x10 room; VALID would leave nothing after the third conv (10 -> 4 -> 2 -> 0). C.3
        # names no initialisation: with Haiku's default (variance 1/fan_in) the signal's variance
        # halves at each of the 6 ReLU layers, every state got nearly the same value and policy,
        # and no level was learned; orthogonal weights with ReLU gain (and a near-uniform first
        # policy) learn them (BUILD_NOTES.md, "Sokoban learning"). Not in C.3: the room is first
        # centred on the agent, on a 15x15 canvas (-> 8x8x16 = 1024 features). With the room as
        # drawn, the dense layers must learn "box ahead, target beyond" once per agent position,
        # and on the 1k set the agent stayed at random play for 9M steps; centred, it left it
        # within 1M. A room's outer ring is always wall, which the canvas's zeros already show:
        # 15x15 holds the cells 19x19 (2H-1) does at 0.65x the learner's CPU per frame
        # (BUILD_NOTES.md, "Sokoban learning" and "Sokoban throughput").
        policy_network=dict(torso='conv', conv_channels=(8, 16, 16), conv_strides=(2, 1, 1),
                            conv_paddings=('SAME',) * 3, relu_after_last_conv=False,
                            shared_hidden=(64, 64), head_hidden=(64,), init='orthogonal',
                            centre_on=sokoban_env.PLAYER_COLOURS, canvas_size=15),
        oracle_states=True,
        # Episodes end at the time limit until levels are solved: the length says nothing.
        watch=(('solved', 'solved'), ('boxes_on_target', 'boxes on target'),
               ('episode_return', 'return')),
        sources={'impala': "the field's Boxoban recipe; 32 minibatches + replay x4 ours",
                 'rae': 'Sec. 5.3, C.3 (lambda ours)', 'rac': 'not in the paper: C.7 advice',
                 'estimator_recipe': 'App. C.3'},
    ),
    'cliff': EnvPreset(
        # App. D runs a random policy; these apply when an IMPALA agent is trained on the cliff.
        impala=dict(discount=0.99, entropy_cost=0.01, learning_rate=1e-3, adam_b1=0.9,
                    adam_b2=0.999, batch_size=16, sequence_length=20, max_gradient_norm=40.0,
                    samples_per_insert=0.0, replay_size=256, self_imitation_updates=0),
        precedence=dict(env_steps_per_update=50),   # ours
        thresholds={
            # Not in the paper: Cartpole's beta.
            'rae': dict(beta=0.7, lam=1.0, reward_form='paper'),
            # App. D, Table 2: beta 0.4 is the best column for every wind probability.
            'rac': dict(beta=0.4, lam=1.0, reward_form='paper'),
        },
        # App. D gives no estimator recipe for the cliff: Cartpole+'s, with w = 200 (episodes
        # <= 250).
        estimator_recipe=dict(window=200, learning_rate=1e-2, weight_decay=0.0,
                              num_pairs=3_000_000, phi_transitions=100_000,
                              pair_sampling='uniform'),
        # Cartpole's networks (vector observation, not specified in the paper).
        estimator_network=dict(torso='mlp', mlp_sizes=(64, 64), phi_hidden_sizes=(64,)),
        policy_network=dict(torso='mlp', shared_hidden=(), head_hidden=(64, 64)),
        oracle_states=True,
        watch=(('fell', 'fell'), ('episode_return', 'return'), ('episode_length', 'length')),
        sources={'impala': 'ours (App. D: random policy)',
                 'rae': "not in the paper: Cartpole's beta", 'rac': 'App. D, Table 2',
                 'estimator_recipe': 'App. D (recipe of C.4)'},
    ),
}


# Policy networks a run may take instead of its environment's (launch.train --policy_preset),
# named '<env>_<kind>'. Sokoban's are sized for a 2-core CPU learner against what the field's
# Boxoban agents use (a ResNet of 9 blocks of 32-64 channels, or a DRC ConvLSTM, 10-100x our
# preset's cost per step): BUILD_NOTES.md, "Sokoban recipe and networks".
POLICY_NETWORKS: Dict[str, Mapping[str, Any]] = {
    # The preset's (8, 16, 16) network, centred on the agent, by name.
    'sokoban_small': PRESETS['sokoban'].policy_network,
    # A small ResNet on the room as drawn (SAME convs, so no canvas is needed): a 3x3 stem of 16
    # channels and a residual block at the room's size, then a stride-2 conv of 32 channels
    # (10x10 -> 5x5) and a block, one dense layer of 256 shared by the two linear heads. About
    # 4x the preset's multiply-adds per frame; 2 blocks per stage cost 20x.
    'sokoban_resnet': dict(torso='resnet', conv_channels=(16, 32), conv_strides=(1, 2),
                           conv_paddings=('SAME', 'SAME'), residual_blocks=1,
                           shared_hidden=(256,), head_hidden=(), init='orthogonal'),
}


def policy_network_names() -> Tuple[str, ...]:
  return tuple(sorted(POLICY_NETWORKS))


def policy_network(name: str, env: str) -> Mapping[str, Any]:
  """PolicyNetConfig fields of policy-network preset `name`, which must be one of `env`'s."""
  if name not in POLICY_NETWORKS:
    raise PresetError(f'unknown policy network preset {name!r}; presets: '
                      f'{", ".join(policy_network_names())}')
  if not name.startswith(env + '_'):
    raise PresetError(f'policy network preset {name!r} is not one of {env}\'s')
  return POLICY_NETWORKS[name]


# What each mode adds to an environment's watched measures (agents.loop's per-episode columns).
MODE_WATCH = {'none': (), 'rae': (('penalised_steps', 'penalised steps'),),
              'rac': (('rejections', 'refused'),)}


def watched(env: str, mode: str) -> Tuple[Tuple[str, str], ...]:
  """(actor log column, label) of the measures a run of `env` in `mode` shows while it goes."""
  if mode not in MODES:
    raise PresetError(f'unknown mode {mode!r}; expected one of {MODES}')
  return tuple(get(env).watch) + MODE_WATCH[mode]


def names() -> Tuple[str, ...]:
  return tuple(sorted(PRESETS))


def get(env: str) -> EnvPreset:
  """The preset of environment `env`; PresetError (one line) when it has none."""
  if env not in PRESETS:
    raise PresetError(f'environment {env!r} has no preset: add one to envs.presets.PRESETS '
                      f'(docs/configuration.md, "Adding an environment"); presets: {", ".join(names())}')
  return PRESETS[env]


def thresholds(env: str, mode: str) -> Mapping[str, Any]:
  """ReversibilityConfig fields of (env, mode); mode 'none' uses no threshold (the config's
  defaults stand)."""
  if mode not in MODES:
    raise PresetError(f'unknown mode {mode!r}; expected one of {MODES}')
  return {} if mode == 'none' else get(env).thresholds[mode]


def network_names() -> Tuple[str, ...]:
  """The psi/phi network presets: each environment's, and '<env>_paper' where ours differs."""
  return tuple(sorted(list(PRESETS) + [env + PAPER_NETWORK_SUFFIX for env, p in PRESETS.items()
                                       if p.paper_estimator_network is not None]))


def network_env(name: str) -> str:
  """The environment a psi/phi network preset belongs to ('sokoban_paper' -> 'sokoban')."""
  if name not in PRESETS and name.endswith(PAPER_NETWORK_SUFFIX):
    return name[:-len(PAPER_NETWORK_SUFFIX)]
  return name


def estimator_network(name: str) -> Mapping[str, Any]:
  """EstimatorNetConfig fields of network preset `name` (an environment, or '<env>_paper')."""
  preset = get(network_env(name))
  if name == network_env(name):
    return preset.estimator_network
  if preset.paper_estimator_network is None:
    raise PresetError(f'network preset {name!r}: the {network_env(name)} preset keeps the '
                      "paper's network as its own (use it without the suffix)")
  return preset.paper_estimator_network


def markdown_table() -> str:
  """The presets table of docs/configuration.md: one row per (environment, mode), with the
  estimator recipe and sources."""
  head = ('| env | mode | beta | lambda | reward | w | pairs | psi lr / wd | IMPALA lr, Adam b1/b2 | '
          'batch x unroll | discount | entropy | sources |')
  lines = [head, '|' + '---|' * 13]
  for env, preset in PRESETS.items():
    a, r = preset.impala, preset.estimator_recipe
    lr = f"{a['learning_rate']:g}" + (' to 0 over the run' if a.get('learning_rate_decay_steps')
                                      else '')
    batch = (f"{a['batch_size']} x {a['sequence_length']}"
             + (f" in {a['minibatches']} minibatches" if a.get('minibatches', 1) > 1 else '')
             + (f", replay x{a['samples_per_insert']:g}" if a['samples_per_insert'] else ''))
    for mode in ('rae', 'rac'):
      t = preset.thresholds[mode]
      reward = t['reward_form'] if mode == 'rae' else '-'
      lam = f"{t['lam']:g}" if mode == 'rae' else '-'
      lines.append(
          f"| {env} | {mode} | {t['beta']:g} | {lam} | {reward} | {r['window']} | "
          f"{r['pair_sampling']} | {r['learning_rate']:g} / {r['weight_decay']:g} | {lr}, "
          f"{a['adam_b1']:g}/{a['adam_b2']:g} | {batch} | {a['discount']:g} | "
          f"{a['entropy_cost']:g} | {preset.sources[mode]}; agent: {preset.sources['impala']}; "
          f"estimators: {preset.sources['estimator_recipe']} |")
  return '\n'.join(lines)

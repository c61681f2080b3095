"""IMPALA in one process, without Reverb or Launchpad: the check that separates the algorithm
from the plumbing.

Question: When Sokoban does not learn, is it the algorithm (network, loss, learner) or the
distributed plumbing (Reverb, Launchpad, policy lag)?
Reported in RESULTS.md, "Sokoban: IMPALA vs IMPALA + RAE": agents that learn, the learned level 1,
the 1k set before centring; every run in BUILD_NOTES.md, "Sokoban learning".

The same network (agents.networks), learner and loss (agents.learning.IMPALALearner), actor
(agents.acting.BatchedActor) and environments as a distributed run. K environments are stepped in
lock-step; each environment's steps are cut into sequences exactly as the adder writes them
(length T every T - 1 steps of its stream, episodes back to back, each closed by its filler row);
every K sequences make a batch, which the learner trains on `--reuse` times in a row before the
actor acts again with the new parameters (reuse 1: on-policy, A2C-like; 4: each sequence used 4
times, like PPO's epochs, with V-trace correcting the small lag).

    python -m launch.studies.single_process --level 7         # the Sokoban preset network
    python -m launch.studies.single_process --level 7 --init lecun \
        --padding VALID,VALID,SAME --reuse 1

Writes --out (JSON): the settings and, every --log_every env steps, the solved fraction and boxes
on target of the last 200 episodes and the learner's diagnostics (entropy, advantages, rho...).
"""
import dataclasses
import json
import os
import time
from typing import Dict, List

import numpy as np
from absl import flags

from agents import adders
from envs import cli


def define_flags(fv: flags.FlagValues) -> None:
  flags.DEFINE_integer('level', 7, 'Level index of the shipped 1k set (-1: sample levels).',
                       flag_values=fv)
  flags.DEFINE_integer('envs', 16, 'Environments stepped together (K; also the batch size).',
                       flag_values=fv)
  flags.DEFINE_integer('steps', 1_000_000, 'Env steps.', flag_values=fv)
  flags.DEFINE_integer('reuse', 4, 'SGD steps on each batch before acting again.', flag_values=fv)
  flags.DEFINE_enum('init', None, ['lecun', 'orthogonal'], 'Network init (default: the '
                    'preset).', flag_values=fv)
  flags.DEFINE_list('padding', None, 'Conv paddings, e.g. VALID,VALID,SAME (default: the '
                    'preset).', flag_values=fv)
  flags.DEFINE_list('strides', None, 'Conv strides, e.g. 1,1,1 (default: the preset).',
                    flag_values=fv)
  flags.DEFINE_list('channels', None, 'Conv channels, e.g. 32,64,64 (default: the preset).',
                    flag_values=fv)
  flags.DEFINE_list('hidden', None, 'Shared hidden layers, e.g. 256 (default: the preset).',
                    flag_values=fv)
  flags.DEFINE_float('entropy_cost', None, 'Entropy cost (default: the preset).', flag_values=fv)
  flags.DEFINE_float('learning_rate', None, 'Learning rate (default: the preset).', flag_values=fv)
  flags.DEFINE_bool('normalize_advantages', False, 'Normalise V-trace advantages over each '
                    'batch.', flag_values=fv)
  flags.DEFINE_bool('centre_on_agent', None, 'Centre each observation on the player (default: '
                    'the preset, which does).', flag_values=fv)
  flags.DEFINE_integer('self_imitation', 0, 'Self-imitation updates after each V-trace update '
                       '(0: none; agents.self_imitation).', flag_values=fv)
  flags.DEFINE_integer('sil_batch', 256, 'Steps per self-imitation update.', flag_values=fv)
  flags.DEFINE_integer('sil_episodes', 64, 'Best episodes the self-imitation buffer keeps.',
                       flag_values=fv)
  flags.DEFINE_float('stop_at', 0.0, 'Stop once the last 200 episodes solved at least this '
                     'fraction (0: run all --steps).', flag_values=fv)
  flags.DEFINE_integer('seed', 0, 'Seed.', flag_values=fv)
  flags.DEFINE_integer('log_every', 20_000, 'Env steps between records.', flag_values=fv)
  flags.DEFINE_string('out', 'results/single_process.json', 'Output JSON.', flag_values=fv)


def parse_args(argv=None):
  args, _ = cli.parse(define_flags, argv, prog='python -m launch.studies.single_process',
                       description=__doc__.split('\n\n')[0])
  if args.reuse < 1 or args.envs < 1 or args.steps < 1:
    cli.fail('--reuse, --envs and --steps must be >= 1')
  return args


class _Batches:
  """The learner's iterator: yields whatever batch was put in last."""
  batch = None

  def __next__(self):
    return self.batch


class _LearnerParams:
  """The actor's view of the learner's current parameters and their version."""

  def __init__(self, learner):
    self._learner = learner

  @property
  def params(self):
    return self._learner.get_variables(['policy'])[0]

  @property
  def version(self) -> float:
    return float(self._learner.get_variables(['policy_version'])[0])

  def update(self, wait: bool = False):
    del wait


def stack(sequences: List[List[Dict]]):
  from acme.adders.reverb.base import Trajectory
  col = lambda key: np.stack([np.stack([row[key] for row in s]) for s in sequences])
  data = Trajectory(observation=col('observation'), action=col('action'), reward=col('reward'),
                    discount=col('discount'), start_of_episode=col('start_of_episode'),
                    extras={k: col(k) for k in ('core_state', 'logits', 'policy_version')})

  class Sample:   # the .data of a reverb.ReplaySample is all the learner reads
    pass
  sample = Sample()
  sample.data = data
  return sample


def main(argv=None):
  args = parse_args(argv)
  import jax
  from acme import specs, wrappers

  import envs
  from agents import acting, learning, self_imitation
  from agents import networks as agent_networks
  from launch.program import presets
  from launch.program.builder import make_optimizer
  from launch.program.config import ImpalaConfig

  options = {} if args.level < 0 else {'level_index': args.level}
  seeds = [args.seed * 1000 + k + 1 for k in range(args.envs)]
  environments = [wrappers.SinglePrecisionWrapper(envs.make('sokoban', seed=s, **options))
                  for s in seeds]
  spec = specs.make_environment_spec(environments[0])
  net_config = agent_networks.default_policy_config('sokoban', True)
  if args.init:
    net_config = dataclasses.replace(net_config, init=args.init)
  if args.padding:
    net_config = dataclasses.replace(net_config, conv_paddings=tuple(args.padding))
  if args.strides:
    net_config = dataclasses.replace(net_config, conv_strides=tuple(int(x) for x in args.strides))
  if args.channels:
    net_config = dataclasses.replace(net_config,
                                     conv_channels=tuple(int(x) for x in args.channels))
  if args.hidden:
    net_config = dataclasses.replace(net_config, shared_hidden=tuple(int(x) for x in args.hidden))
  if args.centre_on_agent is not None:
    from envs import sokoban as sokoban_env
    net_config = dataclasses.replace(
        net_config, centre_on=sokoban_env.PLAYER_COLOURS if args.centre_on_agent else (),
        canvas_size=net_config.canvas_size if args.centre_on_agent else 0)
  networks = agent_networks.make_networks(spec, net_config)
  preset = presets.agent('sokoban')
  impala = ImpalaConfig(
      batch_size=args.envs, sequence_length=preset.sequence_length,
      learning_rate=preset.learning_rate if args.learning_rate is None else args.learning_rate,
      adam_b1=preset.adam_b1, adam_b2=preset.adam_b2, discount=preset.discount,
      entropy_cost=preset.entropy_cost if args.entropy_cost is None else args.entropy_cost,
      max_gradient_norm=preset.max_gradient_norm)
  batches = _Batches()
  logged: List[Dict] = []

  class Logger:
    def write(self, row):
      logged.append(row)

    def close(self):
      pass

  learner = learning.IMPALALearner(networks, batches, make_optimizer(impala),
                                   jax.random.PRNGKey(args.seed), discount=impala.discount,
                                   entropy_cost=impala.entropy_cost,
                                   baseline_cost=impala.baseline_cost,
                                   normalize_advantages=args.normalize_advantages,
                                   logger=Logger())
  source = _LearnerParams(learner)
  actor = acting.BatchedActor(spec.actions.num_values, acting.ReversibilityConfig(), seeds,
                              policy_forward=networks.forward_fn, policy_source=source)
  cutters = [adders.SequenceCutter(impala.sequence_length) for _ in environments]
  best = self_imitation.BestEpisodes(args.sil_episodes, impala.discount, seed=args.seed)
  current = [([], [], []) for _ in environments]   # this episode's observations, actions, rewards
  imitation: Dict = {}
  pending, ready, episodes, records = [], [], [], []

  timesteps = [env.reset() for env in environments]
  pending = [(ts.observation, True) for ts in timesteps]
  obs = np.stack([ts.observation for ts in timesteps])
  out, version = actor.step(obs, obs, obs), source.version
  from launch.runtime.run_state import write_json
  os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)

  def save():   # after every record, so a stopped run keeps its curve
    write_json(args.out, {
        'level': args.level, 'envs': args.envs, 'reuse': args.reuse, 'seed': args.seed,
        'normalize_advantages': args.normalize_advantages,
        'self_imitation': args.self_imitation, 'sil_batch': args.sil_batch,
        'sil_episodes': args.sil_episodes,
        'centre_on_agent': bool(net_config.centre_on),
        'network': dataclasses.asdict(net_config), 'impala': dataclasses.asdict(impala),
        'records': records})

  steps, start, next_log = 0, time.time(), args.log_every
  while steps < args.steps:
    next_obs = []
    for k, env in enumerate(environments):
      ts = env.step(out.action[k])
      observation, first = pending[k]
      row = {'observation': observation, 'start_of_episode': np.bool_(first),
             'action': np.int32(out.action[k]), 'reward': np.float32(ts.reward),
             'discount': np.float32(ts.discount), 'logits': out.logits[k],
             'core_state': np.float32(0.0), 'policy_version': np.float32(version)}
      rows = [row]
      for column, value in zip(current[k], (observation, row['action'], row['reward'])):
        column.append(value)
      if ts.last():
        best.add(*(np.asarray(column) for column in current[k]), terminated=ts.discount == 0)
        current[k] = ([], [], [])
        filler = {key: np.zeros_like(v) for key, v in row.items()}
        filler['observation'] = ts.observation
        rows.append(filler)
        episodes.append(env.episode_info())
        ts = env.reset()
      pending[k] = (ts.observation, ts.first())
      for r in rows:
        sequence = cutters[k].add(r)
        if sequence is not None:
          ready.append(sequence)
      next_obs.append(ts.observation)
    steps += len(environments)
    while len(ready) >= args.envs:
      batches.batch = stack(ready[:args.envs])
      del ready[:args.envs]
      for _ in range(args.reuse):
        learner.step()
        for _ in range(args.self_imitation if len(best) else 0):
          imitation = learner.imitate(*best.sample(args.sil_batch))
    obs = np.stack(next_obs)
    out, version = actor.step(obs, obs, obs), source.version
    if steps >= next_log:
      next_log += args.log_every
      last = episodes[-200:]
      diagnostics = {k: float(np.asarray(v)) for k, v in (logged[-1] if logged else {}).items()
                     if np.asarray(v).size == 1}
      record = {'env_steps': steps, 'wall_time_s': time.time() - start,
                'episodes': len(episodes),
                'solved_last_200': float(np.mean([e['solved'] for e in last])) if last else 0.0,
                'boxes_on_target_last_200': float(np.mean([e['boxes_on_target'] for e in last]))
                if last else 0.0, **diagnostics,
                **{k: float(v) for k, v in imitation.items()},
                **({'sil_best_return': max(best.totals), 'sil_worst_return': min(best.totals)}
                   if len(best) else {})}
      records.append(record)
      save()
      print(json.dumps({k: record[k] for k in ('env_steps', 'solved_last_200',
                                               'boxes_on_target_last_200')}
                       | {'entropy': record.get('policy_entropy')}), flush=True)
      if args.stop_at and len(last) == 200 and record['solved_last_200'] >= args.stop_at:
        break
  save()


if __name__ == '__main__':
  main()

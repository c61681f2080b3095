"""IMPALA in one process: the check that separates the algorithm from the distributed plumbing.

Question: When Sokoban does not learn, is it the algorithm (network, loss, learner) or the
distributed plumbing (Launchpad's processes, a remote replay, policy lag)?
Reported in RESULTS.md, "Sokoban: IMPALA vs IMPALA + RAE": agents that learn, the learned level 1,
the 1k set before centring; every run in BUILD_NOTES.md, "Sokoban learning".

A run's own parts (launch.program.builder, the batch-16 recipe), one actor's K environments, in
one process and in this order:

1. the environments, the policy network and the actor (agents.acting.BatchedActor);
2. the replay: the run's Reverb tables (the 'impala' table a queue here), served in this process;
3. the learner (agents.learning.IMPALALearner) on batches of K sequences read from the queue as
   a run's learner reads them, each batch trained on `--reuse` times in a row (1: on-policy,
   A2C-like; 4: like PPO's epochs, V-trace correcting the small lag);
4. the actor loop (agents.loop.BatchedEnvironmentLoop): the K environments stepped in lock-step,
   one row per step for all of them through the run's writer (agents.adders.ActorWriter, which
   cuts each room's sequences: length T every T - 1 rows of its stream, episodes back to back,
   each closed by its filler row) into the queue. Once per loop step, after choosing the next actions, the actor asks
   for fresh parameters: here that is the learner's turn (`LearnerTurn`), which trains on every
   full batch written so far before the actor acts with its parameters.

The writer waits until its items are in the queue before the next row is written, so the queue
holds the sequences in the order the loop wrote them and a seed gives the same batches on every
run (tests/test_studies.py checks them against what a run's actor writes on the same seeds).
Self-imitation (`--self_imitation`) goes through the run's self-imitation table and writer too.

    python -m experiments.studies.single_process --level 7         # the Sokoban preset network
    python -m experiments.studies.single_process --level 7 --init lecun \
        --padding VALID,VALID,SAME --reuse 1

Writes --out (JSON): the settings and, at the first episode end past every --log_every env steps,
the solved fraction and boxes on target of the last 200 episodes and the learner's diagnostics
(entropy, advantages, rho...).
"""
import dataclasses
import json
import time
from typing import Dict, Iterator, List

import numpy as np
from absl import flags

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
  flags.DEFINE_integer('sil_batch', None, 'Steps per self-imitation update (default: the '
                       'preset).', flag_values=fv)
  flags.DEFINE_integer('sil_episodes', None, 'Best episodes the actor forwards to the '
                       'self-imitation table (default: the preset).', flag_values=fv)
  flags.DEFINE_float('stop_at', 0.0, 'Stop once the last 200 episodes solved at least this '
                     'fraction (0: run all --steps).', flag_values=fv)
  flags.DEFINE_integer('seed', 0, 'Seed.', flag_values=fv)
  flags.DEFINE_integer('log_every', 20_000, 'Env steps between records.', flag_values=fv)
  flags.DEFINE_string('out', 'results/single_process.json', 'Output JSON.', flag_values=fv)


def parse_args(argv=None):
  args, _ = cli.parse(define_flags, argv, prog='python -m experiments.studies.single_process',
                       description=__doc__.split('\n\n')[0])
  if args.reuse < 1 or args.envs < 1 or args.steps < 1:
    cli.fail('--reuse, --envs and --steps must be >= 1')
  return args


def run_config(args):
  """The run this study makes in one process: the Sokoban preset's network with the batch-16
  recipe (experiments.sokoban.BATCH16_AGENT), one actor of --envs environments, the 'impala'
  table a queue (each sequence read once: --reuse trains on it again here), and the policy
  network and IMPALA settings the flags change."""
  from agents import networks as agent_networks
  from envs import sokoban
  from experiments.sokoban import BATCH16_AGENT
  from launch.program.config import ImpalaConfig, RunConfig

  net = agent_networks.default_policy_config('sokoban', True)
  changes = {'init': args.init,
             'conv_paddings': args.padding and tuple(args.padding),
             'conv_strides': args.strides and tuple(int(x) for x in args.strides),
             'conv_channels': args.channels and tuple(int(x) for x in args.channels),
             'shared_hidden': args.hidden and tuple(int(x) for x in args.hidden)}
  if args.centre_on_agent is not None:
    changes.update(centre_on=sokoban.PLAYER_COLOURS if args.centre_on_agent else (),
                   canvas_size=net.canvas_size if args.centre_on_agent else 0)
  net = dataclasses.replace(net, **{k: v for k, v in changes.items() if v is not None})
  impala = {'batch_size': args.envs, 'samples_per_insert': 0.0,
            'self_imitation_updates': args.self_imitation,
            'learning_rate': args.learning_rate, 'entropy_cost': args.entropy_cost,
            'self_imitation_batch': args.sil_batch, 'self_imitation_episodes': args.sil_episodes}
  return RunConfig(
      env='sokoban', env_options={} if args.level < 0 else {'level_index': args.level},
      num_actors=1, envs_per_actor=args.envs, max_steps=args.steps, seed=args.seed,
      impala=ImpalaConfig(**{**BATCH16_AGENT, **{k: v for k, v in impala.items() if v is not None}}),
      policy_network=net)


def repeated(batches: Iterator, times: int) -> Iterator:
  """Each batch of `batches`, `times` times in a row."""
  for batch in batches:
    for _ in range(times):
      yield batch


class LearnerTurn:
  """The actor's policy source in one process (`.params`, `.version` and `.update()`, as
  agents.acting.PolicyClient offers them in a run). The loop calls `update()` once per step,
  after the actor has chosen its next actions; here the learner first trains, `reuse` times on
  each, on every full batch of sequences written to the queue so far."""

  def __init__(self, learner, replay, batch_size: int, reuse: int, rooms: int):
    """rooms: the sequences of one queue item (launch.program.builder.rooms_per_item)."""
    self._learner, self._replay, self._rooms = learner, replay, rooms
    self._batch_size, self._reuse = batch_size, reuse
    self._taken = 0   # sequences of the queue the learner has trained on

  @property
  def params(self):
    return self._learner.get_variables(['policy'])[0]

  @property
  def version(self) -> float:
    from agents import learning
    return float(self._learner.get_variables([learning.POLICY_VERSION])[0])

  def update(self, wait: bool = False):
    del wait
    from agents import adders
    table = self._replay.server_info()[adders.IMPALA_TABLE]
    written = table.rate_limiter_info.insert_stats.completed * self._rooms
    while written - self._taken >= self._batch_size:
      for _ in range(self._reuse):
        self._learner.step()   # its iterator repeats each batch `reuse` times
      self._taken += self._batch_size


class Records:
  """The loop's episode logger: at the first episode end past every `log_every` env steps, a
  record of the last 200 episodes and the learner's last diagnostics, the whole output saved at
  once (a stopped run keeps its curve)."""

  def __init__(self, args, cfg, learner_log):
    self._args, self._cfg, self._learner_log = args, cfg, learner_log
    self.episodes: List[Dict] = []
    self.records: List[Dict] = []
    self._next = args.log_every
    self._start = time.time()

  def write(self, row: Dict):
    self.episodes.append(row)
    if row['actor_steps'] < self._next:
      return
    self._next += self._args.log_every * (1 + (row['actor_steps'] - self._next) //
                                          self._args.log_every)
    last = self.episodes[-200:]
    learner = self._learner_log.data[-1] if self._learner_log.data else {}
    record = {'env_steps': int(row['actor_steps']), 'wall_time_s': time.time() - self._start,
              'episodes': len(self.episodes),
              'solved_last_200': float(np.mean([e['solved'] for e in last])),
              'boxes_on_target_last_200': float(np.mean([e['boxes_on_target'] for e in last])),
              **{k: float(v) for k, v in learner.items() if k != 'actor_steps'
                 and np.asarray(v).size == 1 and np.isfinite(float(v))}}
    self.records.append(record)
    self.save()
    print(json.dumps({k: record[k] for k in ('env_steps', 'solved_last_200',
                                             'boxes_on_target_last_200')}
                     | {'entropy': record.get('policy_entropy')}), flush=True)

  def passed(self) -> bool:
    """--stop_at reached: the last 200 episodes solved at least that fraction."""
    last = self.episodes[-200:]
    return bool(self._args.stop_at and len(last) == 200 and self.records
                and self.records[-1]['solved_last_200'] >= self._args.stop_at)

  def save(self):
    from envs import paths
    args, cfg = self._args, self._cfg
    paths.write_json(args.out, {
        'level': args.level, 'envs': args.envs, 'reuse': args.reuse, 'seed': args.seed,
        'normalize_advantages': args.normalize_advantages,
        'self_imitation': args.self_imitation, 'sil_batch': cfg.impala.self_imitation_batch,
        'sil_episodes': cfg.impala.self_imitation_episodes,
        'centre_on_agent': bool(cfg.policy_network.centre_on),
        'network': dataclasses.asdict(cfg.policy_network),
        'impala': dataclasses.asdict(cfg.impala), 'records': self.records}, make_dirs=True)

  def close(self):
    pass


def main(argv=None):
  args = parse_args(argv)
  import jax
  import reverb
  from acme import specs
  from acme.utils import counting, loggers

  from agents import acting, adders, learning, policy_inference
  from agents import loop as loop_lib
  from launch.program import builder

  cfg = run_config(args)
  impala = cfg.impala

  # 1. The environments and the policy network, as a run's actor 0 has them.
  seeds = builder.actor_seeds(cfg, 0)
  environments = builder.make_environments(cfg, seeds)
  spec = specs.make_environment_spec(environments)
  networks = builder.policy_networks(cfg, spec)

  # 2. The replay: the run's tables, served in this process.
  server = reverb.Server(builder.make_tables(cfg))
  replay = reverb.Client(f'localhost:{server.port}')

  # 3. The learner, on the queue's batches, each `reuse` times in a row.
  imitation = {}
  if impala.uses_self_imitation:
    imitation = dict(
        imitation_iterator=builder.imitation_batches(replay, impala.self_imitation_batch),
        imitation_updates=impala.self_imitation_updates,
        imitation_ready=lambda: replay.server_info()[
            adders.SELF_IMITATION_TABLE].current_size > 0)
  learner_log = loggers.InMemoryLogger()
  learner = learning.IMPALALearner(
      networks, repeated(builder.impala_batches(replay, impala.batch_size, builder.rooms_per_item(cfg)),
               args.reuse),
      builder.make_optimizer(impala), jax.random.PRNGKey(args.seed), discount=impala.discount,
      entropy_cost=impala.entropy_cost, baseline_cost=impala.baseline_cost,
      normalize_advantages=args.normalize_advantages,
      self_imitation_value_cost=impala.self_imitation_value_cost, logger=learner_log,
      **imitation)

  # 4. The actor, acting with the learner's parameters once the learner has had its turn (its
  # policy folded for inference, as a run's actors have it), and its loop, writing through the
  # run's writer (its items in the queue before the next row).
  actor = acting.BatchedActor(
      spec.actions.num_values, cfg.reversibility, seeds, policy_forward=networks.forward_fn,
      policy_source=LearnerTurn(learner, replay, impala.batch_size, args.reuse,
                                builder.rooms_per_item(cfg)),
      policy_inference=policy_inference.policy_inference(builder.policy_config(cfg, spec),
                                                         spec.observations.shape))
  records = Records(args, cfg, learner_log)
  loop = loop_lib.BatchedEnvironmentLoop(
      environments, actor, cfg.reversibility.mode,
      builder.make_actor_writer(cfg, replay, len(seeds), max_in_flight_items=0),
      counter=counting.Counter(prefix='actor'), logger=records, should_stop=records.passed)
  try:
    loop.run(num_steps=args.steps)
    records.save()
  finally:
    loop.close()
    server.stop()


if __name__ == '__main__':
  main()

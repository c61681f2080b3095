r"""Throughput of the whole distributed program, modes none / rae / rac, with frozen estimators
(a checkpoint) and with the online precedence learner, plus this machine's ceiling, in one
invocation (so the ratios compare runs made one after the other under the same conditions).

    python -m bench.throughput --env cartpole --reward_free=false --max_steps 150000 \
        --out results/throughput_cartpole.json
    python -m bench.throughput --env sokoban --envs_per_actor 16 --batch_size 32 \
        --max_steps 300000 --out results/throughput_sokoban.json

All of launch.train's flags apply to every run (--env, --num_actors, --envs_per_actor, ...).
Cartpole should run with its extrinsic reward (--reward_free=false) so episode lengths, and
with them the per-episode costs, match across modes.

Per run: env steps/s from the actors' episode logs between the first episode that ends after
`--warmup_steps` and the last (start-up and compilation excluded); learner frames/s achieved
(frames consumed per wall second) and its capacity (frames per second of update compute); the
actors' per-step time breakdown (environment, fused inference call, Reverb writes, logging) from
their cumulative loop timers. The ceiling is `bench.actor_bench` at the same K: one process, no
Reverb, no learner.
"""
import json
import os
import sys
import tempfile
import time

from absl import flags

from bench import common
from envs import cli
from launch import train  # defines the run flags (--env, --num_actors, --max_steps, ...)
from launch.runtime import lifecycle, run_state, summary

FLAGS = flags.FLAGS


def define_flags(fv: flags.FlagValues) -> None:
  """This bench's own knobs, beside launch.train's run flags on the same FlagValues (the global
  FLAGS, which launch.train's config_from_flags reads); only when run as a script:
  bench.sokoban_speed and the tests import the readers below beside other modules' flags."""
  flags.DEFINE_integer('warmup_steps', 10_000, 'Steps excluded from the measurement.',
                       flag_values=fv)
  flags.DEFINE_list('modes', ['none', 'rae', 'rac'], 'Modes to compare (first is the baseline).',
                    flag_values=fv)
  flags.DEFINE_list('estimator_sources', ['frozen', 'online'],
                    "For rae/rac: 'frozen' (an untrained checkpoint: same cost as a trained one) "
                    "and/or 'online' (the precedence-learner node).", flag_values=fv)
  flags.DEFINE_bool('ceiling', True, 'Also measure the single-process ceiling (bench.actor_bench).',
                    flag_values=fv)
  flags.DEFINE_integer('ceiling_steps', 20_000, 'Environment steps of the ceiling measurement.',
                       flag_values=fv)
  flags.DEFINE_string('out', 'results/throughput.json', 'JSON output.', flag_values=fv)
  flags.DEFINE_string('workdir', None, 'Where runs go (default: a temp dir).', flag_values=fv)


def timed_episodes(run_dir: str):
  """The run's actor episodes that carry a unix time, in time order."""
  rows = [e for e in summary.actor_episodes(run_dir) if 'unix_time' in e]
  return sorted(rows, key=lambda e: e['unix_time'])


def steps_per_second(rows, warmup: int) -> dict:
  after = [e for e in rows if e['actor_steps'] >= warmup]
  if len(after) < 2:
    raise RuntimeError('not enough episodes after warm-up')
  steps = after[-1]['actor_steps'] - after[0]['actor_steps']
  seconds = after[-1]['unix_time'] - after[0]['unix_time']
  return {'env_steps_per_s': steps / seconds, 'measured_steps': steps, 'measured_seconds': seconds}


def actor_breakdown(run_dir: str) -> dict:
  """Microseconds per env step in each part of the actors' loops (last row of each actor)."""
  return {f'us_per_step_{k}': v for k, v in common.actor_loop_us(run_dir).items()}


def learner_rates(run_dir: str, cfg) -> dict:
  rows = summary.read_log(run_dir, 'learner')
  if not rows:
    return {}
  frames = cfg.impala.batch_size * cfg.impala.sequence_length
  last = rows[-1]
  out = {'learner_steps': last.get('learner_steps', 0)}
  if last.get('learner_time_elapsed'):
    out['learner_capacity_frames_per_s'] = out['learner_steps'] * frames / last['learner_time_elapsed']
  return out


def frozen_checkpoint(path: str) -> str:
  """Untrained psi/phi for the env (throughput does not depend on the parameters' values)."""
  from launch.program import builder as program
  cfg = train.config_from_flags()
  return common.untrained_estimators(path, cfg.env, program.environment_spec(cfg))


def run_one(mode: str, source: str, run_dir: str, ckpt: str) -> dict:
  FLAGS.mode, FLAGS.run_dir = mode, run_dir
  FLAGS.estimator_checkpoint = ckpt if source == 'frozen' else None
  cfg = train.config_from_flags()
  start = time.time()
  s = lifecycle.run_local(cfg, run_state.RunRecords(cfg.run_dir))
  rows = timed_episodes(run_dir)
  out = steps_per_second(rows, FLAGS.warmup_steps)
  out.update(total_wall_s=time.time() - start, precedence_steps=s.get('precedence_steps'),
             mean_episode_length_last=s.get('mean_episode_length_last'))
  out.update(learner_rates(run_dir, cfg))
  if 'learner_steps' in out:
    # The IMPALA table is a queue: every step the actors write is trained on once.
    out['learner_frames_per_s'] = out['env_steps_per_s']
    cap = out.get('learner_capacity_frames_per_s')
    if cap:
      out['learner_busy_fraction'] = out['env_steps_per_s'] / cap
  out['actor_breakdown'] = actor_breakdown(run_dir)
  return out


def main(argv=None) -> int:
  cli.parse(define_flags, argv, prog='python -m bench.throughput',
            description=__doc__.split('\n\n')[0], flag_values=FLAGS)
  workdir = FLAGS.workdir or tempfile.mkdtemp(prefix='bench-throughput-')
  ckpt = frozen_checkpoint(os.path.join(workdir, 'untrained.ckpt'))
  results = {'env': FLAGS.env, 'num_actors': FLAGS.num_actors, 'envs_per_actor': FLAGS.envs_per_actor,
             'max_steps': FLAGS.max_steps, 'warmup_steps': FLAGS.warmup_steps, 'runs': {},
             'ratios': {}}
  base_mode = FLAGS.modes[0]
  for mode in FLAGS.modes:
    sources = ['-'] if mode == 'none' else FLAGS.estimator_sources
    for source in sources:
      name = mode if mode == 'none' else f'{mode}/{source}'
      print(f'--- {name}', flush=True)
      results['runs'][name] = run_one(mode, source, os.path.join(workdir, name.replace('/', '-')), ckpt)
      common.write_json(FLAGS.out, results)   # partial results survive an interruption
  base = results['runs'][base_mode]['env_steps_per_s']
  for name, r in results['runs'].items():
    if name != base_mode:
      results['ratios'][f'{name} / {base_mode}'] = r['env_steps_per_s'] / base
  if FLAGS.ceiling:
    from bench import actor_bench
    # The environments stepped as the runs' actors stepped them (--vectorised_env).
    stepper = 'vectorised' if FLAGS.vectorised_env else 'one_by_one'
    ceiling = actor_bench.measure(FLAGS.env, [FLAGS.envs_per_actor], ['impala'],
                                  FLAGS.ceiling_steps, 1, steppers=(stepper,))
    row = ceiling['results'][f'impala/K={FLAGS.envs_per_actor}'
                             + ('' if stepper == 'vectorised' else f'/{stepper}')]
    results['ceiling_single_process'] = {m: row[m]['env_steps_per_s'] for m in ('none', 'rae', 'rac')}
    results['fraction_of_ceiling'] = {
        name: r['env_steps_per_s'] / row[name.split('/')[0]]['env_steps_per_s']
        for name, r in results['runs'].items()}
  common.write_json(FLAGS.out, results)
  print(json.dumps(results, indent=2))
  return 0


if __name__ == '__main__':
  sys.exit(main())

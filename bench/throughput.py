r"""Env steps/s of the distributed program with --mode none vs --mode rae, same settings.

    python -m bench.throughput --max_steps 150000 --out results/throughput.json

All of launch.train's flags apply to both runs (--env, --num_actors, --max_steps, ...).

Throughput is measured from the actors' episode logs between the first episode that ends after
`--warmup_steps` and the last one (start-up and jit compilation excluded): total actor steps
divided by wall time. Both runs are launched from this one invocation, one after the other.
"""
import json
import os
import sys
import tempfile
import time

from absl import app, flags

from launch import summary
from launch import train  # defines the run flags (--env, --num_actors, --max_steps, ...)
from bench import common

FLAGS = flags.FLAGS
flags.DEFINE_integer('warmup_steps', 10_000, 'Steps excluded from the measurement.')
flags.DEFINE_list('modes', ['none', 'rae'], 'Modes to compare (first is the baseline).')
flags.DEFINE_string('out', 'results/throughput.json', 'JSON output.')
flags.DEFINE_string('workdir', None, 'Where runs go (default: a temp dir).')


def steps_per_second(run_dir: str, warmup: int) -> dict:
  episodes = [e for e in summary.actor_episodes(run_dir) if 'unix_time' in e]
  episodes.sort(key=lambda e: e['unix_time'])
  after = [e for e in episodes if e['actor_steps'] >= warmup]
  if len(after) < 2:
    raise RuntimeError(f'not enough episodes after warm-up in {run_dir}')
  steps = after[-1]['actor_steps'] - after[0]['actor_steps']
  seconds = after[-1]['unix_time'] - after[0]['unix_time']
  return {'env_steps_per_s': steps / seconds, 'measured_steps': steps, 'measured_seconds': seconds}


def run_mode(mode: str, run_dir: str) -> dict:
  FLAGS.mode, FLAGS.run_dir = mode, run_dir
  cfg = train.config_from_flags()
  start = time.time()
  s = train.run(cfg)
  out = steps_per_second(run_dir, FLAGS.warmup_steps)
  out.update(total_wall_s=time.time() - start, learner_steps=s.get('learner_steps'),
             precedence_steps=s.get('precedence_steps'),
             mean_episode_length_last=s.get('mean_episode_length_last'))
  return out


def main(argv):
  del argv
  workdir = FLAGS.workdir or tempfile.mkdtemp(prefix='bench-throughput-')
  results = {'env': FLAGS.env, 'num_actors': FLAGS.num_actors, 'max_steps': FLAGS.max_steps,
             'warmup_steps': FLAGS.warmup_steps, 'runs': {}}
  for mode in FLAGS.modes:
    results['runs'][mode] = run_mode(mode, os.path.join(workdir, mode))
  base = results['runs'][FLAGS.modes[0]]['env_steps_per_s']
  for mode in FLAGS.modes[1:]:
    results[f'ratio_{mode}_over_{FLAGS.modes[0]}'] = results['runs'][mode]['env_steps_per_s'] / base
  common.write_json(FLAGS.out, results)
  print(json.dumps(results, indent=2))


if __name__ == '__main__':
  app.run(main)

r"""Trains the paper's DQN or M-DQN baseline (App. C.4) on Cartpole+ and evaluates it as it goes.

    python -m launch.train_dqn --algorithm dqn --run_dir runs/dqn              # 2M steps, Cartpole+
    python -m launch.train_dqn --algorithm mdqn --max_steps 300000 --run_dir runs/mdqn --seed 1

One process, no Launchpad: Acme's agent (actor and learner in lock-step, one gradient step every
--update_every env steps, as the paper's baselines) with an in-process Reverb replay server
(agents/dqn.py), driven by the loop of launch/runtime/dqn.py. Every --eval_every env steps one greedy evaluation
episode is played on a separate environment; the run reports the maximum (the paper's figure:
DQN 1152, M-DQN 2801) and the mean of those evaluation returns.

RUN_DIR holds what `launch.analysis.aggregate`, `launch.plot` and `launch.experiment` read from any run:
  config.json, flags.json   the resolved configuration and the command-line flags
  logs/actor_0/logs.csv     one row per training episode (actor_steps, episode_length,
                            episode_return, epsilon, unix_time, ...)
  logs/evaluator/logs.csv   one row per evaluation episode (actor_steps, eval_return, eval_length)
  logs/learner/logs.csv     the learner's loss, at most one row a second
  counts.json, run_state.json, summary.json (status, eval_max_return, eval_mean_return, ...),
  eval.json                 the evaluation summary in launch.evaluate_policy's layout
A RUN_DIR that holds a run is refused unless --resume. --resume on a run that completed
--max_steps does nothing; on a stopped or shorter one it starts the run again from step 0 (the
replay buffer is not saved, so there is no exact continuation). Ctrl-C / SIGTERM stop the run
with status 'stopped by user' (exit code 130).
"""
import os
import shutil
import sys
import time

from absl import app, flags

from agents import dqn_config
from envs import cli, quiet
from launch.runtime import termination
from launch.runtime.dqn import OUTPUTS, DQNRunConfig, train

FLAGS = flags.FLAGS
# The agent's flags: one per DQNConfig field, its help the field's.
AGENT = cli.Section('', dqn_config.DQNConfig)
cli.define_field_flags(FLAGS, (AGENT,))
flags.DEFINE_string('env', 'cartpole', 'Environment name (envs.make); vector observations only.')
flags.DEFINE_integer('episode_steps', 50_000, "Environment time limit (its 'max_steps' option): "
                     "50000 is the paper's Cartpole+.")
flags.DEFINE_multi_string('env_option', [], 'Extra environment option key=value (repeatable).')
flags.DEFINE_integer('max_steps', 2_000_000, 'Training env steps (the paper: 2M).')
flags.DEFINE_integer('eval_every', 1000, 'Env steps between greedy evaluation episodes.')
flags.DEFINE_integer('seed', 0, 'Random seed (network, exploration, environments).')
flags.DEFINE_string('run_dir', None, 'Output directory (default: runs/<env>-<algorithm>-<time>).')
flags.DEFINE_bool('resume', False, 'Continue the run in --run_dir: nothing to do when it '
                  'completed --max_steps, else it starts again from step 0.')
flags.DEFINE_float('progress_every_s', 30.0, 'Seconds between progress lines.')


def config_from_flags() -> DQNRunConfig:
  """Parses the flags into a typed config; raises ValueError with a one-line message."""
  import envs
  options = envs.parse_options(FLAGS.env_option)
  if FLAGS.episode_steps is not None:
    options['max_steps'] = FLAGS.episode_steps
  env = envs.make(FLAGS.env, seed=0, **options)  # a bad name or option fails here, in one line
  if len(env.observation_spec().shape) != 1:
    raise ValueError(f'--env {FLAGS.env}: DQN here takes vector observations, this environment '
                     f'gives {tuple(env.observation_spec().shape)}')
  fields = cli.field_values(FLAGS, (AGENT,))['']
  fields['hidden_sizes'] = tuple(cli.int_list(fields['hidden_sizes'], 'hidden_sizes'))
  agent = dqn_config.DQNConfig(**fields)
  run_dir = FLAGS.run_dir or os.path.join(
      'runs', f'{FLAGS.env}-{FLAGS.algorithm}-{time.strftime("%Y%m%d-%H%M%S")}')
  return DQNRunConfig(env=FLAGS.env, env_options=options, max_steps=FLAGS.max_steps,
                      eval_every=FLAGS.eval_every, seed=FLAGS.seed,
                      run_dir=os.path.abspath(run_dir), agent=agent)


def main(argv):
  del argv
  quiet.quiet_startup()
  termination.stop_like_ctrl_c_on_termination()
  from launch.runtime import lifecycle, run_state
  try:
    run_state.check_run_dir_use(FLAGS.run_dir, FLAGS.resume)
    if FLAGS.resume:
      lifecycle.apply_saved_flags(FLAGS, FLAGS.run_dir)
    cfg = config_from_flags()
    run_state.check_writable(cfg.run_dir)
    if FLAGS.resume:
      lifecycle.check_resume(cfg, allowed='max_steps')
  except ValueError as e:
    print(f'error: {e}', file=sys.stderr)
    sys.exit(2)
  if FLAGS.resume:
    summary = run_state.read_json(os.path.join(cfg.run_dir, 'summary.json'), {}) or {}
    if summary.get('status') == run_state.COMPLETED and summary.get('actor_steps', 0) >= cfg.max_steps:
      print(f'nothing to do: {cfg.run_dir} already completed {summary["actor_steps"]:,} env steps')
      return
    print(f'{cfg.run_dir}: the run stopped before --max_steps; starting it again from step 0 '
          '(its replay buffer was not saved)', flush=True)
    for name in OUTPUTS:  # what the previous attempt wrote; config.json and flags.json stay
      path = os.path.join(cfg.run_dir, name)
      if os.path.isdir(path):
        shutil.rmtree(path)
      elif os.path.exists(path):
        os.remove(path)
  else:
    run_state.write_json(os.path.join(cfg.run_dir, run_state.FLAGS_FILE),
                         {f.name: f.value for f in FLAGS.get_flags_for_module(sys.modules[__name__])})
  lifecycle.write_config(cfg)
  print(f'run directory: {cfg.run_dir} ({cfg.agent.algorithm}, {cfg.max_steps:,} env steps)',
        flush=True)
  summary = train(cfg, FLAGS.progress_every_s)
  from launch.runtime import summary as summary_lib
  print(summary_lib.format_summary(summary))
  if summary['status'] != run_state.COMPLETED:
    print(f'stopped; run it again with: python -m launch.train_dqn --run_dir {cfg.run_dir} --resume')
    sys.exit(130)


if __name__ == '__main__':
  app.run(main)

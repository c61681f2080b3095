r"""Trains the paper's DQN or M-DQN baseline (App. C.4) on Cartpole+ and evaluates it as it goes.

    python -m launch.train_dqn --algorithm dqn --run_dir runs/dqn              # 2M steps, Cartpole+
    python -m launch.train_dqn --algorithm mdqn --max_steps 300000 --run_dir runs/mdqn --seed 1

One process, no Launchpad: Acme's agent (actor and learner in lock-step, one gradient step every
--update_every env steps, as the paper's baselines) with an in-process Reverb replay server
(agents/dqn.py), driven by the loop below. Every --eval_every env steps one greedy evaluation
episode is played on a separate environment; the run reports the maximum (the paper's figure:
DQN 1152, M-DQN 2801) and the mean of those evaluation returns.

RUN_DIR holds what `experiments.analysis.aggregate`, `experiments.plot` and `experiments` read from any run:
  config.json, flags.json   the resolved configuration and the command-line flags
  logs/actor_0/logs.csv     one row per training episode (actor_steps, episode_length,
                            episode_return, epsilon, unix_time, ...)
  logs/evaluator/logs.csv   one row per evaluation episode (actor_steps, eval_return, eval_length)
  logs/learner/logs.csv     the learner's loss, at most one row a second
  counts.json, run_state.json, summary.json (status, eval_max_return, eval_mean_return, ...),
  eval.json                 the evaluation summary in experiments.evaluate_policy's layout
A RUN_DIR that holds a run is refused unless --resume. --resume on a run that completed
--max_steps does nothing; on a stopped or shorter one it starts the run again from step 0 (the
replay buffer is not saved, so there is no exact continuation). Ctrl-C / SIGTERM stop the run
with status 'stopped by user' (exit code 130).
"""
import dataclasses
import os
import shutil
import sys
import time
from typing import Any, Dict, List

from absl import app, flags

from agents import dqn_config
from envs import cli, quiet
from launch.runtime import run_state, termination
from launch.runtime import summary as summary_lib

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

ACTOR_LOG, EVAL_LOG, LEARNER_LOG = 'actor_0', 'evaluator', 'learner'
EVAL_FILE = 'eval.json'
OUTPUTS = ('logs', 'counts.json', 'run_state.json', 'summary.json', EVAL_FILE)


@dataclasses.dataclass(frozen=True)
class DQNRunConfig:
  env: str
  env_options: Dict[str, Any]
  max_steps: int
  eval_every: int
  seed: int
  run_dir: str
  agent: dqn_config.DQNConfig

  def __post_init__(self):
    if self.max_steps < 1:
      raise ValueError(f'--max_steps must be >= 1, got {self.max_steps}')
    if self.eval_every < 1:
      raise ValueError(f'--eval_every must be >= 1, got {self.eval_every}')


class _WithSteps:
  """A logger that adds the run's env step count (the x axis of every curve) to each row."""

  def __init__(self, inner, steps_fn):
    self._inner, self._steps_fn = inner, steps_fn

  def write(self, data):
    self._inner.write({**data, 'actor_steps': self._steps_fn(), 'unix_time': time.time()})

  def close(self):
    self._inner.close()


def _csv(run_dir: str, label: str, time_delta: float = 0.0):
  from acme.utils import loggers
  return loggers.CSVLogger(run_dir, label=label, add_uid=False, time_delta=time_delta,
                           flush_every=1)


def eval_summary(returns: List[float], lengths: List[float]) -> Dict[str, Any]:
  """The evaluation episodes' max and mean (the paper reports the max)."""
  import numpy as np
  if not returns:
    return {'episodes': 0, 'max_return': None, 'mean_return': None, 'last_return': None,
            'max_length': None}
  return {'episodes': len(returns), 'max_return': float(np.max(returns)),
          'mean_return': float(np.mean(returns)), 'last_return': float(returns[-1]),
          'max_length': float(np.max(lengths))}


@dataclasses.dataclass
class _Tally:
  """What the run has done so far: env steps, training episodes, evaluation episodes."""
  steps: int = 0
  episodes: int = 0
  eval_returns: List[float] = dataclasses.field(default_factory=list)
  eval_lengths: List[float] = dataclasses.field(default_factory=list)

  def counts(self) -> Dict[str, int]:
    return {'actor_steps': self.steps, 'actor_episodes': self.episodes}


def train(cfg: DQNRunConfig, records: run_state.RunRecords,
          progress_every_s: float = 30.0) -> Dict[str, Any]:
  """Runs the training loop to cfg.max_steps (or Ctrl-C), printing a progress line every
  `progress_every_s`; returns the summary it writes into the run's `records`."""
  import acme
  from acme import specs
  from acme.utils import counting, loggers

  from agents import dqn
  from launch.program.builder import make_environment

  env = make_environment(cfg, cfg.seed * 1000 + 1)
  eval_env = make_environment(cfg, cfg.seed * 1000 + 2)
  spec = specs.make_environment_spec(env)
  tally = _Tally()
  logs = {ACTOR_LOG: _csv(cfg.run_dir, ACTOR_LOG), EVAL_LOG: _csv(cfg.run_dir, EVAL_LOG),
          LEARNER_LOG: _WithSteps(_csv(cfg.run_dir, LEARNER_LOG, time_delta=1.0),
                                  lambda: tally.steps)}
  agent = dqn.make_agent(spec, cfg.agent, cfg.seed, env_steps=lambda: tally.steps,
                         counter=counting.Counter(prefix='learner', time_delta=0.0),
                         learner_logger=logs[LEARNER_LOG])
  # Evaluation results are logged below, with the training step; the loop's own logger
  # (Acme's default writes under ~/acme) gets nothing.
  evaluation = acme.EnvironmentLoop(eval_env, agent.evaluator, should_update=False,
                                    logger=loggers.NoOpLogger())
  records.begin_segment(0)
  status = run_state.STOPPED
  try:
    _loop(cfg, records, env, agent, evaluation, logs, tally, progress_every_s)
    status = run_state.COMPLETED
  except KeyboardInterrupt:
    status = run_state.STOPPED
  finally:
    for log in logs.values():
      log.close()
    summary = _finish(cfg, records, tally, status)
    # Flush the adder's items while the server still runs: a writer flushed after the server
    # stopped waits 10 s for a timeout when it is deleted.
    agent.replay.adder.reset()
    agent.replay.server.stop()
  return summary


def _loop(cfg: DQNRunConfig, records: run_state.RunRecords, env, agent, evaluation, logs,
          tally: _Tally, progress_every_s: float) -> None:
  """Acts and learns in lock-step to cfg.max_steps: a row of the actor's log per training
  episode, a greedy evaluation episode every cfg.eval_every env steps, a progress line (and
  counts.json) every `progress_every_s`."""
  start = last_progress = time.time()
  timestep = env.reset()
  agent.agent.observe_first(timestep)
  ep_len, ep_return, ep_start = 0, 0.0, time.time()
  while tally.steps < cfg.max_steps:
    action = agent.agent.select_action(timestep.observation)
    timestep = env.step(action)
    agent.agent.observe(action, timestep)
    agent.agent.update()
    tally.steps += 1
    ep_len += 1
    ep_return += float(timestep.reward)
    if timestep.last():
      tally.episodes += 1
      logs[ACTOR_LOG].write({'actor_steps': tally.steps, 'actor_episodes': tally.episodes,
                             'episode_length': ep_len, 'episode_return': ep_return,
                             'epsilon': cfg.agent.epsilon(tally.steps),
                             'steps_per_second': ep_len / max(time.time() - ep_start, 1e-9),
                             'unix_time': time.time()})
      timestep = env.reset()
      agent.agent.observe_first(timestep)
      ep_len, ep_return, ep_start = 0, 0.0, time.time()
    if tally.steps % cfg.eval_every == 0:
      _evaluate(agent, evaluation, logs[EVAL_LOG], tally)
    if time.time() - last_progress >= progress_every_s:
      last_progress = time.time()
      _progress_line(cfg, records, tally, start)


def _evaluate(agent, evaluation, eval_log, tally: _Tally) -> None:
  """One greedy episode with the learner's current parameters, logged at the run's step."""
  agent.evaluator_variables.update_and_wait()
  result = evaluation.run_episode()
  tally.eval_returns.append(float(result['episode_return']))
  tally.eval_lengths.append(float(result['episode_length']))
  eval_log.write({'actor_steps': tally.steps, 'eval_return': tally.eval_returns[-1],
                  'eval_length': tally.eval_lengths[-1], 'unix_time': time.time()})


def _progress_line(cfg: DQNRunConfig, records: run_state.RunRecords, tally: _Tally,
                   start: float) -> None:
  """The progress line, and the counts saved so far."""
  best = max(tally.eval_returns) if tally.eval_returns else float('nan')
  print(f'[{time.time() - start:6.0f}s] env steps {tally.steps:>9,}/{cfg.max_steps:,}  '
        f'episodes {tally.episodes:>6}  eval max {best:8.1f}  '
        f'epsilon {cfg.agent.epsilon(tally.steps):.3f}', flush=True)
  records.save_counts(tally.counts())


def _finish(cfg: DQNRunConfig, records: run_state.RunRecords, tally: _Tally,
            status: str) -> Dict[str, Any]:
  """Closes the run's segment and writes its counts, eval.json and summary.json (returned)."""
  records.save_counts(tally.counts())
  records.end_segment(status, tally.steps)
  evals = eval_summary(tally.eval_returns, tally.eval_lengths)
  records.write(EVAL_FILE, {'algorithm': cfg.agent.algorithm, 'eval_every': cfg.eval_every,
                            'actor_steps': tally.steps, 'policies': {'greedy': evals}})
  summary = summary_lib.summarize(records, with_wall_time=True)
  summary['actor_steps'] = tally.steps  # also when no training episode has ended yet
  summary.update({'status': status, 'algorithm': cfg.agent.algorithm,
                  **{f'eval_{k}': v for k, v in evals.items()}})
  records.write(run_state.SUMMARY, summary)
  return summary


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
  from launch.runtime import lifecycle
  try:
    run_state.check_run_dir_use(FLAGS.run_dir, FLAGS.resume)
    records = None     # built once: a resumed run's hold its saved flags, so before the config
    if FLAGS.resume:   # (whose run_dir is the given --run_dir, absolute)
      records = run_state.RunRecords(os.path.abspath(FLAGS.run_dir))
      lifecycle.apply_saved_flags(FLAGS, records)
    cfg = config_from_flags()
    records = records or run_state.RunRecords(cfg.run_dir)
    run_state.check_writable(cfg.run_dir)
    if FLAGS.resume:
      lifecycle.check_resume(cfg, records.read(run_state.CONFIG), allowed='max_steps')
  except ValueError as e:
    print(f'error: {e}', file=sys.stderr)
    sys.exit(2)
  if FLAGS.resume:
    summary = records.read(run_state.SUMMARY, {}) or {}
    if summary.get('status') == run_state.COMPLETED and summary.get('actor_steps', 0) >= cfg.max_steps:
      print(f'nothing to do: {cfg.run_dir} already completed {summary["actor_steps"]:,} env steps')
      return
    print(f'{cfg.run_dir}: the run stopped before --max_steps; starting it again from step 0 '
          '(its replay buffer was not saved)', flush=True)
    for name in OUTPUTS:  # what the previous attempt wrote; config.json and flags.json stay
      path = records.path(name)
      if os.path.isdir(path):
        shutil.rmtree(path)
      elif os.path.exists(path):
        os.remove(path)
  else:
    records.write(run_state.FLAGS_FILE,
                  {f.name: f.value for f in FLAGS.get_flags_for_module(sys.modules[__name__])})
  lifecycle.write_config(records, cfg)
  print(f'run directory: {cfg.run_dir} ({cfg.agent.algorithm}, {cfg.max_steps:,} env steps)',
        flush=True)
  summary = train(cfg, records, FLAGS.progress_every_s)
  print(summary_lib.format_summary(summary))
  if summary['status'] != run_state.COMPLETED:
    print(f'stopped; run it again with: python -m launch.train_dqn --run_dir {cfg.run_dir} --resume')
    sys.exit(130)


if __name__ == '__main__':
  app.run(main)

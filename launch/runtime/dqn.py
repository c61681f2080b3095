"""The paper's DQN / M-DQN baseline (App. C.4) as one process: Acme's agent (actor and learner
in lock-step) with an in-process Reverb replay (agents/dqn.py), driven by the loop below, with a
greedy evaluation episode every `eval_every` env steps. `launch.train_dqn` is its entry module
(flags -> DQNRunConfig -> `train`); the run directory's layout is described there."""
import dataclasses
import os
import time
from typing import TYPE_CHECKING, Any, Dict, List

if TYPE_CHECKING:
  from agents import dqn_config

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
  agent: 'dqn_config.DQNConfig'

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


class _Discard:
  def write(self, data):
    del data

  def close(self):
    pass


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


def train(cfg: DQNRunConfig, progress_every_s: float = 30.0) -> Dict[str, Any]:
  """Runs the training loop to cfg.max_steps (or Ctrl-C), printing a progress line every
  `progress_every_s`; returns the summary it writes."""
  import acme
  from acme import specs
  from acme.utils import counting

  from agents import dqn
  from launch.program.builder import make_environment
  from launch.runtime import run_state
  from launch.runtime import summary as summary_lib

  env = make_environment(cfg, cfg.seed * 1000 + 1)
  eval_env = make_environment(cfg, cfg.seed * 1000 + 2)
  spec = specs.make_environment_spec(env)
  steps = [0]
  actor_log = _csv(cfg.run_dir, ACTOR_LOG)
  eval_log = _csv(cfg.run_dir, EVAL_LOG)
  learner_log = _WithSteps(_csv(cfg.run_dir, LEARNER_LOG, time_delta=1.0), lambda: steps[0])
  agent = dqn.make_agent(spec, cfg.agent, cfg.seed, env_steps=lambda: steps[0],
                         counter=counting.Counter(prefix='learner', time_delta=0.0),
                         learner_logger=learner_log)
  # Evaluation results are logged below, with the training step; the loop's own logger
  # (Acme's default writes under ~/acme) gets nothing.
  evaluation = acme.EnvironmentLoop(eval_env, agent.evaluator, should_update=False,
                                    logger=_Discard())
  eval_returns, eval_lengths = [], []
  run_state.begin_segment(cfg.run_dir, 0)
  start = last_progress = time.time()
  status = run_state.STOPPED
  episodes = 0
  try:
    timestep = env.reset()
    agent.agent.observe_first(timestep)
    ep_len, ep_return, ep_start = 0, 0.0, time.time()
    while steps[0] < cfg.max_steps:
      action = agent.agent.select_action(timestep.observation)
      timestep = env.step(action)
      agent.agent.observe(action, timestep)
      agent.agent.update()
      steps[0] += 1
      ep_len += 1
      ep_return += float(timestep.reward)
      if timestep.last():
        episodes += 1
        actor_log.write({'actor_steps': steps[0], 'actor_episodes': episodes,
                         'episode_length': ep_len, 'episode_return': ep_return,
                         'epsilon': cfg.agent.epsilon(steps[0]),
                         'steps_per_second': ep_len / max(time.time() - ep_start, 1e-9),
                         'unix_time': time.time()})
        timestep = env.reset()
        agent.agent.observe_first(timestep)
        ep_len, ep_return, ep_start = 0, 0.0, time.time()
      if steps[0] % cfg.eval_every == 0:
        agent.evaluator_variables.update_and_wait()
        result = evaluation.run_episode()
        eval_returns.append(float(result['episode_return']))
        eval_lengths.append(float(result['episode_length']))
        eval_log.write({'actor_steps': steps[0], 'eval_return': eval_returns[-1],
                        'eval_length': eval_lengths[-1], 'unix_time': time.time()})
      if time.time() - last_progress >= progress_every_s:
        last_progress = time.time()
        best = max(eval_returns) if eval_returns else float('nan')
        print(f'[{time.time() - start:6.0f}s] env steps {steps[0]:>9,}/{cfg.max_steps:,}  '
              f'episodes {episodes:>6}  eval max {best:8.1f}  '
              f'epsilon {cfg.agent.epsilon(steps[0]):.3f}', flush=True)
        run_state.save_counts(cfg.run_dir, {'actor_steps': steps[0], 'actor_episodes': episodes})
    status = run_state.COMPLETED
  except KeyboardInterrupt:
    status = run_state.STOPPED
  finally:
    for log in (actor_log, eval_log, learner_log):
      log.close()
    run_state.save_counts(cfg.run_dir, {'actor_steps': steps[0], 'actor_episodes': episodes})
    run_state.end_segment(cfg.run_dir, status, steps[0])
    evals = eval_summary(eval_returns, eval_lengths)
    run_state.write_json(os.path.join(cfg.run_dir, EVAL_FILE),
                         {'algorithm': cfg.agent.algorithm, 'eval_every': cfg.eval_every,
                          'actor_steps': steps[0], 'policies': {'greedy': evals}})
    summary = summary_lib.summarize(cfg.run_dir, with_wall_time=True)
    summary['actor_steps'] = steps[0]  # also when no training episode has ended yet
    summary.update({'status': status, 'algorithm': cfg.agent.algorithm,
                    **{f'eval_{k}': v for k, v in evals.items()}})
    run_state.write_json(os.path.join(cfg.run_dir, 'summary.json'), summary)
    # Flush the adder's items while the server still runs: a writer flushed after the server
    # stopped waits 10 s for a timeout when it is deleted.
    agent.replay.adder.reset()
    agent.replay.server.stop()
  return summary

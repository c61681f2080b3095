"""Plays a trained IMPALA policy on the first N levels of a Sokoban level set and scores it
(`experiments.evaluate_policy` is the command; its help says what is measured and how, and where the
policy comes from); the episodes are played by experiments.analysis.policy_episodes."""
import dataclasses
import inspect
import os
import time
from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np

from experiments.analysis.policy_episodes import (
  IrreversibilityJudge,
  make_act,
  play,
  summarize,
)
from launch.runtime import run_config

POLICIES = ('greedy', 'sampled')


class EvaluateError(ValueError):
  """Bad argument or input, reported as one line."""


# Run directory -> config, level set, policy ---------------------------------------------------

def learner_checkpoint_dir(run_dir: str) -> str:
  return os.path.join(run_dir, 'checkpoints', 'learner')


def check_run(raw: Dict[str, Any], run_dir: str) -> None:
  """A Sokoban IMPALA run with a learner checkpoint, or EvaluateError."""
  from launch.program import checkpointing
  if raw['env'] != 'sokoban':
    raise EvaluateError(f"{run_dir} is a {raw['env']!r} run; level evaluation needs a sokoban run")
  agent = raw.get('agent', 'impala')
  if agent != 'impala':
    raise EvaluateError(f'{run_dir} ran the {agent!r} agent: it has no policy network')
  if checkpointing.read_header(learner_checkpoint_dir(run_dir)) is None:
    raise EvaluateError(f'no learner checkpoint in {learner_checkpoint_dir(run_dir)}')


def evaluation_levels(levels: str, num_levels: int):
  """The first `num_levels` Levels of 'default' or a level file."""
  from envs import sokoban
  try:
    level_set = sokoban.load_level_set(levels)
  except (OSError, ValueError) as e:  # missing file, directory, bad level (LevelFileError)
    raise EvaluateError(f'cannot read levels {levels}: {e}') from None
  if num_levels > len(level_set):
    raise EvaluateError(f'--num_levels {num_levels} exceeds the {len(level_set)} levels in {levels}')
  return level_set[:num_levels]


def pad_levels(levels: Sequence[Any], shape: Tuple[int, int]) -> Tuple[Any, ...]:
  """Levels padded with walls (bottom/right) to the network's input shape, as the env pads a
  mixed set; a larger level cannot be fed to the network."""
  out = []
  for i, level in enumerate(levels):
    h, w = level.shape
    if h > shape[0] or w > shape[1]:
      raise EvaluateError(f'level {level.name!r} (index {i}) is {h}x{w}, larger than the '
                          f"run's {shape[0]}x{shape[1]} observations")
    walls = np.pad(level.walls, ((0, shape[0] - h), (0, shape[1] - w)), constant_values=True)
    out.append(dataclasses.replace(level, walls=walls))
  return tuple(out)


def load_policy(cfg, run_dir: str):
  """(networks, params, checkpoint steps, observation shape) of the run's learner checkpoint."""
  import jax

  from agents import impala_step
  from agents import networks as agent_networks
  from launch.program import builder, checkpointing
  try:
    spec = builder.environment_spec(cfg)
  except ValueError as e:  # e.g. the run's level file has moved
    raise EvaluateError(f"cannot rebuild the run's environment: {e}") from None
  networks = builder.policy_networks(cfg, spec)
  # The template only fixes structure and shapes; the values are replaced by the checkpoint's.
  params = networks.unroll_init_fn(jax.random.PRNGKey(0), agent_networks.DUMMY_CORE_STATE)
  template = impala_step.TrainingState(params, builder.make_optimizer(cfg.impala).init(params))
  state, steps = checkpointing.load_state(learner_checkpoint_dir(run_dir), template)
  return networks, state.params, steps, tuple(spec.observations.shape)


def episode_limit(options: Dict[str, Any]) -> int:
  from envs import sokoban
  default = inspect.signature(sokoban.Sokoban.__init__).parameters['max_steps'].default
  return int(options.get('max_steps', default))


# Playing ---------------------------------------------------------------------------------------


def check_args(num_levels: int, policies: Sequence[str], seed: int, max_expansions: int) -> None:
  if num_levels < 1:
    raise EvaluateError(f'--num_levels must be >= 1, got {num_levels}')
  if max_expansions < 1:
    raise EvaluateError(f'--max_expansions must be >= 1, got {max_expansions}')
  if seed < 0:
    raise EvaluateError(f'--seed must be >= 0, got {seed}')
  bad = [p for p in policies if p not in POLICIES]
  if bad or not policies:
    raise EvaluateError(f'policies must be some of {POLICIES}, got {list(policies)}')


def prepare(run_dir: str, levels: Optional[str], num_levels: int, policies: Sequence[str],
            seed: int, max_expansions: int):
  """Every check that needs neither jax nor the network, so that bad input fails fast:
  (raw config, level set name, Levels)."""
  check_args(num_levels, policies, seed, max_expansions)
  raw = run_config.read(run_dir)
  check_run(raw, run_dir)
  if levels is None:  # the run's own level set
    levels = (raw.get('env_options') or {}).get('levels', 'default')
  return raw, levels, evaluation_levels(levels, num_levels)


def check_gif(gif: Optional[str], gif_levels: Sequence[int], gif_policy: str, num_levels: int,
              policies: Sequence[str]) -> None:
  if not gif:
    return
  bad = [i for i in gif_levels if not 0 <= i < num_levels]
  if bad or not gif_levels:
    raise EvaluateError(f'--gif_levels must be among the {num_levels} levels evaluated '
                        f'(0..{num_levels - 1}), got {list(gif_levels)}')
  if gif_policy not in policies:
    raise EvaluateError(f'--gif_policy {gif_policy} is not among the policies evaluated '
                        f'({", ".join(policies)})')
  if not gif.endswith('.gif') or os.path.isdir(gif):
    raise EvaluateError(f'--gif {gif} must name a .gif file')


def evaluate(run_dir: str, levels: Optional[str] = None, num_levels: int = 100,
             policies: Sequence[str] = POLICIES, seed: int = 0, count_irreversible: bool = False,
             max_expansions: int = 100_000, gif: Optional[str] = None,
             gif_levels: Sequence[int] = (0,), gif_policy: str = 'greedy') -> Dict[str, Any]:
  """Plays the first `num_levels` levels of `levels` ('default', a file, None: the run's own)
  once per policy with the run's latest learner parameters; returns the results (JSON-able).
  `gif`: also replays `gif_policy`'s episodes on `gif_levels` into that GIF
  (experiments.analysis.policy_gif)."""
  start = time.time()
  policies = list(dict.fromkeys(policies))
  check_gif(gif, gif_levels, gif_policy, num_levels, policies)
  raw, levels, level_set = prepare(run_dir, levels, num_levels, policies, seed,
                                     max_expansions)
  import jax

  import envs
  from envs import sokoban
  cfg = run_config.from_dict(raw, run_dir)
  networks, params, steps, obs_shape = load_policy(cfg, run_dir)
  level_set = pad_levels(level_set, obs_shape[:2])
  # Every episode's env keeps the run's options (time limit, ...) but holds only its level, and
  # plays to the full limit where training drew a shorter one per episode.
  options = {k: v for k, v in cfg.env_options.items()
             if k not in ('levels', 'level_index', 'max_steps_min')}
  judge = IrreversibilityJudge(options, level_set, max_expansions) if count_irreversible else None
  episodes = [(p, i) for p in policies for i in range(num_levels)]
  level_envs = [envs.make('sokoban', seed=0, **options, levels=[level_set[i]]) for _, i in episodes]
  level_ids = np.array([i for _, i in episodes], np.uint32)
  keys = np.asarray(jax.vmap(jax.random.fold_in, (None, 0))(jax.random.PRNGKey(seed), level_ids))
  records = play(make_act(networks), params, level_envs, [i for _, i in episodes],
                 [p == 'greedy' for p, _ in episodes], keys, judge)
  by_policy = {p: [r for (q, _), r in zip(episodes, records) if q == p] for p in policies}
  result = {
      'run_dir': os.path.abspath(run_dir), 'env': cfg.env,
      'mode': cfg.reversibility.mode, 'checkpoint_steps': steps,
      'levels': levels if levels == 'default' else sokoban.level_file(levels),
      'num_levels': num_levels, 'seed': seed, 'max_episode_steps': episode_limit(options),
      'count_irreversible': count_irreversible,
      'max_expansions': max_expansions if count_irreversible else None,
      'policies': {p: summarize(rs, count_irreversible) for p, rs in by_policy.items()},
      'episodes': by_policy,
  }
  if judge is not None:
    result['oracle_unique_checks'] = judge.unique_checks
  if gif:
    from experiments.analysis import policy_gif
    result['gif'] = os.path.abspath(policy_gif.gif_of_evaluation(
        cfg, result, level_set, options, gif_levels, gif_policy, gif))
  result['wall_time_s'] = round(time.time() - start, 2)
  return result


def format_table(result: Dict[str, Any]) -> str:
  irr = result['count_irreversible']
  head = f"{'policy':<8} {'levels':>6} {'solved':>7} {'boxes':>6} {'length':>7} {'return':>7}"
  if irr:
    head += (f" {'irrev':>6} {'w/o solve':>9} {'pushes':>6} {'per push':>8} {'unknown':>7}"
             f" {'dead end':>8}")
  lines = [f"{result['run_dir']} at learner step {result['checkpoint_steps']}; levels "
           f"{result['levels']} (first {result['num_levels']})", head]
  for name, s in result['policies'].items():
    row = (f"{name:<8} {s['episodes']:>6} {s['solved_fraction']:>7.3f} "
           f"{s['mean_boxes_on_target']:>6.2f} {s['mean_episode_length']:>7.1f} {s['mean_return']:>7.2f}")
    if irr:
      per_push = s['irreversible_per_push']
      row += (f" {s['mean_irreversible']:>6.2f} {s['mean_irreversible_excl_solving']:>9.2f} "
              f"{s['mean_pushes']:>6.2f} {'-' if per_push is None else f'{per_push:.3f}':>8} "
              f"{s['oracle_unknown']:>7} {s['dead_end_fraction']:>8.3f}")
    lines.append(row)
  return '\n'.join(lines)

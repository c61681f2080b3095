r"""Evaluates a trained IMPALA policy on the first N levels of a Sokoban level set.

    python -m launch.evaluate_policy --run_dir runs/sokoban-rae --num_levels 200
    python -m launch.evaluate_policy --run_dir runs/sokoban-rae \
        --levels ../shared/data/boxoban/unfiltered_test_000.txt --num_levels 1000 \
        --policy both --count_irreversible --out results/sokoban-rae-boxoban.json

The policy network is rebuilt from RUN_DIR/config.json as `launch.program.build.make_learner` builds
it, and its parameters are read from the learner checkpoint RUN_DIR/checkpoints/learner.
Every level is played once per policy, in order, up to the run's time limit (its `max_steps`
environment option): 'greedy' takes the argmax of the logits, 'sampled' samples them (level i
uses key fold_in(PRNGKey(seed), i), so a level's episode does not depend on which other levels
are evaluated). One jitted forward pass per step covers every episode still running.
RAC runs are evaluated without their shield: this scores the learned policy pi itself.

Each episode plays in its own environment built on just its level (with the run's other
environment options), so resetting it starts that level: the same start as `level_index=i`
on the whole set, without each of N environments holding all N levels. Levels smaller than the
network's input are padded with walls (bottom/right), as the environment pads a mixed set.

Per policy: fraction solved, mean boxes on target, mean episode length and return; with
--count_irreversible also the mean number of actions per episode that the exact oracle
(`envs.oracle.check`, on the states actually visited, cached by (state, action)) judges
irreversible. The oracle counts the push that solves a level as irreversible (a terminal state
cannot be left), so `mean_irreversible_excl_solving` leaves it out; checks that hit
--max_expansions are 'unknown', counted apart and not as irreversible.

Bad input (no run directory, no checkpoint, a run that is not Sokoban/IMPALA, an unreadable
level file, impossible numbers, an --out that cannot be written) is one line on stderr, exit 2.
"""
import dataclasses
import inspect
import os
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
from absl import app, flags

FLAGS = flags.FLAGS
POLICIES = ('greedy', 'sampled')
MIN_BATCH = 8  # smallest padded batch: few levels then compile the forward pass once


class EvaluateError(ValueError):
  """Bad argument or input, reported as one line."""


def define_flags(flag_values=flags.FLAGS):
  """Only when run as a program: launch.train defines --seed too, and the experiment runner
  imports this module next to it."""
  fv = flag_values
  flags.DEFINE_string('run_dir', None, 'Run directory of a `launch.train --env sokoban` run.',
                      flag_values=fv)
  flags.DEFINE_string('levels', None, "Level set: 'default' (envs/data/sokoban_1000.txt) or a "
                      "Boxoban/XSB file (default: the run's own levels).", flag_values=fv)
  flags.DEFINE_integer('num_levels', 100, 'Evaluate the first N levels of the set.', flag_values=fv)
  flags.DEFINE_enum('policy', 'both', ['greedy', 'sampled', 'both'],
                    "'greedy' (argmax of the logits), 'sampled' (softmax) or both.", flag_values=fv)
  flags.DEFINE_integer('seed', 0, 'Seed of the sampled policy.', flag_values=fv)
  flags.DEFINE_bool('count_irreversible', False, 'Count the irreversible actions taken, by the '
                    'exact oracle (slow: a search per new (state, action)).', flag_values=fv)
  flags.DEFINE_integer('max_expansions', 100_000, 'Oracle search budget per check.', flag_values=fv)
  flags.DEFINE_string('out', None, 'Write the results as JSON to this file.', flag_values=fv)


# Run directory -> config, level set, policy ---------------------------------------------------

def read_run_config(run_dir: str) -> Dict[str, Any]:
  """RUN_DIR/config.json as written by launch.train (the RunConfig as a dict)."""
  from launch.runtime import run_state
  if not os.path.isdir(run_dir):
    raise EvaluateError(f'run directory not found: {run_dir}')
  path = os.path.join(run_dir, run_state.CONFIG)
  try:
    raw = run_state.read_json(path)
  except (OSError, ValueError) as e:
    raise EvaluateError(f'cannot read {path}: {e}') from None
  if raw is None:
    raise EvaluateError(f'{run_dir} holds no run (no {run_state.CONFIG})')
  if not isinstance(raw, dict) or not isinstance(raw.get('env'), str):
    raise EvaluateError(f'{path} is not a run configuration')
  return raw


def checkpoint_dir(run_dir: str) -> str:
  return os.path.join(run_dir, 'checkpoints', 'learner')


def check_run(raw: Dict[str, Any], run_dir: str) -> None:
  """A Sokoban IMPALA run with a learner checkpoint, or EvaluateError."""
  from launch.program import checkpointing
  if raw['env'] != 'sokoban':
    raise EvaluateError(f"{run_dir} is a {raw['env']!r} run; level evaluation needs a sokoban run")
  agent = raw.get('agent', 'impala')
  if agent != 'impala':
    raise EvaluateError(f'{run_dir} ran the {agent!r} agent: it has no policy network')
  if checkpointing.read_header(checkpoint_dir(run_dir)) is None:
    raise EvaluateError(f'no learner checkpoint in {checkpoint_dir(run_dir)}')


def run_config(raw: Dict[str, Any], run_dir: str):
  """A RunConfig with what this tool needs from config.json (env, env_options, agent, seed,
  impala); the rest at defaults. There is no loader of config.json elsewhere."""
  from launch.program import config as cfg_lib
  # Only known fields: a config.json from another version may carry others.
  known = {f.name for f in dataclasses.fields(cfg_lib.ImpalaConfig)}
  impala = {k: v for k, v in (raw.get('impala') or {}).items() if k in known}
  try:
    return cfg_lib.RunConfig(env=raw['env'], env_options=dict(raw.get('env_options') or {}),
                             agent=raw.get('agent', 'impala'), seed=int(raw.get('seed', 0)),
                             run_dir=os.path.abspath(run_dir),
                             impala=cfg_lib.ImpalaConfig(**impala))
  except (TypeError, ValueError) as e:
    raise EvaluateError(f'{run_dir}/config.json is not a usable run configuration ({e})') from None


def load_levels(levels: str, num_levels: int):
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
  from agents import learning
  from agents import networks as agent_networks
  from launch.program import checkpointing
  from launch.program import build as program
  try:
    spec = program.environment_spec(cfg)
  except ValueError as e:  # e.g. the run's level file has moved
    raise EvaluateError(f"cannot rebuild the run's environment: {e}") from None
  networks = agent_networks.make_networks(spec, agent_networks.default_policy_config(
      cfg.env, agent_networks.is_image_spec(spec)))
  # The template only fixes structure and shapes; the values are replaced by the checkpoint's.
  params = networks.unroll_init_fn(jax.random.PRNGKey(0), agent_networks.DUMMY_CORE_STATE)
  template = learning.TrainingState(params, program.make_optimizer(cfg.impala).init(params))
  state, steps = checkpointing.load_state(checkpoint_dir(run_dir), template)
  return networks, state.params, steps, tuple(spec.observations.shape)


def episode_limit(options: Dict[str, Any]) -> int:
  from envs import sokoban
  default = inspect.signature(sokoban.Sokoban.__init__).parameters['max_steps'].default
  return int(options.get('max_steps', default))


# Playing ---------------------------------------------------------------------------------------

def make_act(networks):
  """Jitted (params, obs [B,...], keys [B,2], greedy [B]) -> (actions [B], keys [B,2]).
  Sampling splits each key as the actors do (`agents.acting`): key, sub = split(key)."""
  import jax
  import jax.numpy as jnp
  from agents.networks import DUMMY_CORE_STATE

  def act(params, obs, keys, greedy):
    (logits, _), _ = networks.unroll_fn(params, obs, DUMMY_CORE_STATE)
    split = jax.vmap(jax.random.split)(keys)
    sampled = jax.vmap(jax.random.categorical)(split[:, 1], logits)
    actions = jnp.where(greedy, jnp.argmax(logits, axis=-1), sampled)
    return actions.astype(jnp.int32), split[:, 0]

  return jax.jit(act)


def padded_size(n: int) -> int:
  """Batch sizes are rounded up to powers of two so that a shrinking set of running episodes
  compiles the forward pass at most log2(N) times."""
  return max(MIN_BATCH, 1 << (n - 1).bit_length())


class IrreversibilityJudge:
  """Oracle verdicts on (level, state, action), each searched once (the search dominates)."""

  def __init__(self, env_options: Dict[str, Any], levels: Sequence[Any], max_expansions: int):
    import envs
    # A dedicated env over all levels: the oracle moves its env around; states name the level.
    self._env = envs.make('sokoban', seed=0, **{**env_options, 'levels': levels})
    self._max_expansions = max_expansions
    self._cache = {}

  def check(self, level: int, state, action: int):
    from envs import oracle
    key = ((level,) + tuple(state[1:]), int(action))
    if key not in self._cache:
      self._cache[key] = oracle.check(self._env, key[0], key[1],
                                      max_expansions=self._max_expansions)
    return self._cache[key]

  @property
  def unique_checks(self) -> int:
    return len(self._cache)


def play(act, params, level_envs: List[Any], levels: List[int], greedy: List[bool],
         keys: np.ndarray, judge: Optional[IrreversibilityJudge] = None) -> List[Dict[str, Any]]:
  """Plays episode e in level_envs[e] (level index levels[e]) to its end; one record each."""
  obs = [env.reset().observation for env in level_envs]
  keys, greedy = np.array(keys), np.asarray(greedy, bool)
  # Actions as digits: an episode can be replayed (and rendered) from its record.
  records = [{'level': int(level), 'length': 0, 'return': 0.0, 'actions': ''} for level in levels]
  if judge is not None:
    for r in records:
      r.update(irreversible=0, oracle_unknown=0)
  running = list(range(len(level_envs)))
  while running:
    batch = padded_batch(running, obs, keys, greedy)
    actions, new_keys = (np.asarray(x) for x in act(params, *batch))
    keys[running] = new_keys[:len(running)]
    for e, action in zip(running, actions[:len(running)]):
      obs[e] = take_step(level_envs[e], records[e], int(action), judge)
    running = [e for e in running if 'solved' not in records[e]]  # ended: outcome recorded
  return records


def padded_batch(running: List[int], obs: List[np.ndarray], keys: np.ndarray, greedy: np.ndarray):
  """(obs, keys, greedy) of the running episodes, padded to `padded_size` rows (padding rows
  are zeros and greedy; their actions are ignored)."""
  n, size = len(running), padded_size(len(running))
  batch_obs = np.zeros((size,) + obs[0].shape, obs[0].dtype)
  batch_obs[:n] = [obs[e] for e in running]
  batch_keys = np.zeros((size,) + keys.shape[1:], keys.dtype)
  batch_keys[:n] = keys[running]
  batch_greedy = np.ones(size, bool)
  batch_greedy[:n] = greedy[running]
  return batch_obs, batch_keys, batch_greedy


def take_step(env, record: Dict[str, Any], action: int,
              judge: Optional[IrreversibilityJudge]) -> np.ndarray:
  """Steps one episode, judging the action first (the oracle needs the state before it); at
  the episode's end records its outcome. Returns the new observation."""
  from envs import oracle
  if judge is not None:
    verdict = judge.check(record['level'], env.get_state(), action)
    record['irreversible'] += int(verdict.irreversible)
    record['oracle_unknown'] += int(verdict.status == oracle.UNKNOWN)
  ts = env.step(action)
  record['length'] += 1
  record['actions'] += str(action)
  record['return'] += float(ts.reward)
  if ts.last():
    info = env.episode_info()
    record.update(solved=bool(info['solved']), boxes_on_target=int(info['boxes_on_target']))
  return ts.observation


def summarize(records: List[Dict[str, Any]], count_irreversible: bool) -> Dict[str, Any]:
  def mean(key):
    return float(np.mean([r[key] for r in records]))
  out = {'episodes': len(records), 'solved_fraction': mean('solved'),
         'mean_boxes_on_target': mean('boxes_on_target'), 'mean_episode_length': mean('length'),
         'mean_return': mean('return')}
  if count_irreversible:
    # The oracle counts the solving push (terminal) as irreversible: one per solved episode.
    out.update(mean_irreversible=mean('irreversible'),
               mean_irreversible_excl_solving=mean('irreversible') - mean('solved'),
               oracle_checks=int(sum(r['length'] for r in records)),
               oracle_unknown=int(sum(r['oracle_unknown'] for r in records)))
  return out


# Entry point for the experiment runner ---------------------------------------------------------

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
  raw = read_run_config(run_dir)
  check_run(raw, run_dir)
  if levels is None:  # the run's own level set
    levels = (raw.get('env_options') or {}).get('levels', 'default')
  return raw, levels, load_levels(levels, num_levels)


def evaluate(run_dir: str, levels: Optional[str] = None, num_levels: int = 100,
             policies: Sequence[str] = POLICIES, seed: int = 0, count_irreversible: bool = False,
             max_expansions: int = 100_000) -> Dict[str, Any]:
  """Plays the first `num_levels` levels of `levels` ('default', a file, None: the run's own)
  once per policy with the run's latest learner parameters; returns the results (JSON-able)."""
  start = time.time()
  policies = list(dict.fromkeys(policies))
  raw, levels, level_set = prepare(run_dir, levels, num_levels, policies, seed,
                                     max_expansions)
  import envs
  import jax
  cfg = run_config(raw, run_dir)
  networks, params, steps, obs_shape = load_policy(cfg, run_dir)
  level_set = pad_levels(level_set, obs_shape[:2])
  # Every episode's env keeps the run's options (time limit, ...) but holds only its level.
  options = {k: v for k, v in cfg.env_options.items() if k not in ('levels', 'level_index')}
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
      'mode': (raw.get('reversibility') or {}).get('mode'), 'checkpoint_steps': steps,
      'levels': levels if levels == 'default' else os.path.abspath(levels),
      'num_levels': num_levels, 'seed': seed, 'max_episode_steps': episode_limit(options),
      'count_irreversible': count_irreversible,
      'max_expansions': max_expansions if count_irreversible else None,
      'policies': {p: summarize(rs, count_irreversible) for p, rs in by_policy.items()},
      'episodes': by_policy,
  }
  if judge is not None:
    result['oracle_unique_checks'] = judge.unique_checks
  result['wall_time_s'] = round(time.time() - start, 2)
  return result


def format_table(result: Dict[str, Any]) -> str:
  irr = result['count_irreversible']
  head = f"{'policy':<8} {'levels':>6} {'solved':>7} {'boxes':>6} {'length':>7} {'return':>7}"
  if irr:
    head += f" {'irrev':>6} {'w/o solve':>9} {'unknown':>7}"
  lines = [f"{result['run_dir']} at learner step {result['checkpoint_steps']}; levels "
           f"{result['levels']} (first {result['num_levels']})", head]
  for name, s in result['policies'].items():
    row = (f"{name:<8} {s['episodes']:>6} {s['solved_fraction']:>7.3f} "
           f"{s['mean_boxes_on_target']:>6.2f} {s['mean_episode_length']:>7.1f} {s['mean_return']:>7.2f}")
    if irr:
      row += (f" {s['mean_irreversible']:>6.2f} {s['mean_irreversible_excl_solving']:>9.2f} "
              f"{s['oracle_unknown']:>7}")
    lines.append(row)
  return '\n'.join(lines)


def check_out(path: Optional[str]) -> None:
  from estimators import dataset
  if not path:
    return
  if os.path.isdir(path):
    raise EvaluateError(f'--out {path} is a directory; give a file name')
  problem = dataset.unwritable_reason(path)
  if problem:
    raise EvaluateError(f'cannot write --out {os.path.abspath(path)}: {problem}')


def write_json(path: str, result: Dict[str, Any]) -> None:
  from launch.runtime import run_state
  # check_out allowed directories still to be made; written whole or not at all.
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  run_state.write_json(path, result)


def main(argv):
  from estimators import cli
  cli.quiet_logs(FLAGS)
  if cli.unexpected_arguments(argv):
    return 2
  policies = POLICIES if FLAGS.policy == 'both' else (FLAGS.policy,)
  try:
    if not FLAGS.run_dir:
      raise EvaluateError('--run_dir is required')
    check_out(FLAGS.out)
    result = evaluate(FLAGS.run_dir, FLAGS.levels, FLAGS.num_levels, policies, FLAGS.seed,
                      FLAGS.count_irreversible, FLAGS.max_expansions)
    if FLAGS.out:
      write_json(FLAGS.out, result)
  except (ValueError, OSError) as e:  # EvaluateError, CheckpointError, EnvError, ...
    print(f'error: {str(e).splitlines()[0] if str(e) else type(e).__name__}', file=sys.stderr)
    return 2
  print(format_table(result))
  if FLAGS.out:
    print(f'results: {os.path.abspath(FLAGS.out)}')
  return 0


if __name__ == '__main__':
  define_flags()
  app.run(main)

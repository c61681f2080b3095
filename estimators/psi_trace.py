"""psi along an episode that solves a Sokoban level (paper Sec. 5.3, Fig. 5c).

    python -m estimators.psi_trace --checkpoint psi.ckpt --level 3 --out fig.png --json trace.json

1. Solve: A* over push states of level I (`--levels default|PATH`), exact and move-optimal
   within `--max_solution_steps` (envs.sokoban_solver); it gives up after `--max_search_nodes`
   expanded states. The pushes are expanded into single moves (the env's 4 push actions).
2. Replay the moves in `envs.sokoban.Sokoban`, recording the observations x_0..x_T.
3. psi(x_t, x_{t+1}) for every step t (one batched call; high = x_t surely came first, i.e. the
   step looks irreversible) and the exact oracle's label of every (state, action) of the
   solution (`envs.oracle.check`: reversible / irreversible / unknown when the oracle's search
   exceeds `--oracle_expansions`). The last step solves the level, a termination, so the
   oracle labels it irreversible.
4. `--out`: PNG of a strip of frames (<= 16, every k-th on long episodes) over the psi curve,
   markers coloured by label, beta dashed. `--json`: per-step psi, labels, pushes, the action
   sequence and a summary: irreversible steps, steps with psi > beta, and the precision/recall of
   "psi > beta" as a detector of irreversible steps (over the steps the oracle could label).

Bad input (missing/incompatible checkpoint, unknown level, a level not solved within the
budgets, unwritable outputs) is one line on stderr, exit 2. Python callers: `trace(...)` ->
dict (its 'observations' array feeds `draw`), `draw(trace_dict, out_path)`,
`write_json(trace_dict, path)`.
"""
import io
import math
import os
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
from absl import flags

from envs import cli, paths, quiet, sokoban_solver

MAX_FRAMES = 16
LABEL_COLOURS = {'irreversible': 'tab:red', 'reversible': '0.6', 'unknown': 'black'}

class TraceError(ValueError):
  """Bad input or a level not solved within the budgets, reported as one line."""


def solve(level, max_nodes: int = 200_000, max_steps: int = 120) -> Tuple[List[int], int]:
  """envs.sokoban_solver.solve, its failures as TraceErrors naming this tool's flags."""
  try:
    return sokoban_solver.solve(level, max_nodes, max_steps)
  except sokoban_solver.Unsolved as e:
    if e.reason == 'max_nodes':
      raise TraceError(f'level {level.name!r} not solved within --max_search_nodes {max_nodes} '
                       f'(expanded states); raise it or pick another level') from None
    if e.reason == 'max_steps':
      raise TraceError(f'level {level.name!r} has no solution of at most {max_steps} moves '
                       f'(--max_solution_steps)') from None
    raise TraceError(str(e)) from None


# ------------------------------------------------------------------------------------------- #
# Episode, psi and oracle labels
# ------------------------------------------------------------------------------------------- #

def _make_env(levels: str, level_index: int, max_steps: int):
  from envs import sokoban
  try:
    # One step more than any solution may take, so the time limit never cuts the replay.
    return sokoban.Sokoban(levels=levels, level_index=level_index, max_steps=max_steps + 1)
  except ValueError as e:
    raise TraceError(f'--levels {levels} --level {level_index}: {e}') from e


def replay(env, actions: Sequence[int]) -> Tuple[np.ndarray, List[Any], List[bool]]:
  """Plays `actions` from a reset: observations [T+1, ...], true states (T+1), and whether each
  step pushed a box. Raises TraceError if the episode ends early or does not solve the level."""
  ts = env.reset()
  observations, states, pushes = [ts.observation], [env.get_state()], []
  for t, a in enumerate(actions):
    if ts.last():
      raise TraceError(f'the episode ended at step {t} of {len(actions)}: the solver and the env disagree')
    ts = env.step(a)
    observations.append(ts.observation)
    states.append(env.get_state())
    pushes.append(states[-1][2] != states[-2][2])
  if not env.solved():
    raise TraceError('the solution does not solve the level in the env: the solver and the env disagree')
  return np.stack(observations), states, pushes


def psi_along(ckpt, observations: np.ndarray) -> np.ndarray:
  """psi(x_t, x_{t+1}) for every step, in one batched forward pass."""
  from estimators import training
  obs = np.asarray(observations, dtype=np.dtype(ckpt.obs_dtype))
  psi = np.asarray(training.psi_prob(ckpt.estimators, ckpt.psi_params, obs[:-1], obs[1:]), np.float64)
  if not np.all(np.isfinite(psi)):
    raise TraceError(f'checkpoint {ckpt.path} gives non-finite psi on this episode')
  return psi


def _none_if_nan(value: float) -> Optional[float]:
  return None if value is None or np.isnan(value) else float(value)


def summarize(psi: np.ndarray, labels: Sequence[str], pushes: Sequence[bool], beta: float) -> Dict[str, Any]:
  """Counts, and precision/recall of 'psi > beta' against the oracle over the labelled steps
  (an unknown label is neither a hit nor a miss). None where a ratio is undefined."""
  from estimators import metrics
  labels = np.asarray(labels)
  known = labels != 'unknown'
  irreversible = labels == 'irreversible'
  above = np.asarray(psi) > beta
  pr = metrics.precision_recall(above[known], irreversible[known])
  return {
      'steps': int(len(labels)), 'pushes': int(np.sum(pushes)),
      'irreversible': int(irreversible.sum()), 'reversible': int(np.sum(labels == 'reversible')),
      'unknown': int(np.sum(~known)), 'psi_above_beta': int(above.sum()),
      'irreversible_above_beta': int(pr['tp']),
      'precision': _none_if_nan(pr['precision']), 'recall': _none_if_nan(pr['recall']),
  }


def _load_checkpoint(path: str):
  # Checked before importing jax (seconds), so that a wrong path is refused at once.
  if not os.path.isfile(path):
    raise TraceError(f'estimator checkpoint not found: {path}')
  from estimators import checkpoint
  return checkpoint.load(path)


def trace(checkpoint_path: str, levels: str = 'default', level_index: int = 0, beta: float = 0.9,
          max_solution_steps: int = 120, max_search_nodes: int = 200_000,
          oracle_expansions: int = 100_000) -> Dict[str, Any]:
  """Solves, replays, scores and labels level `level_index` (see the module docstring).

  Returns a JSON-ready dict (see `write_json`) plus 'observations', the frames [T+1, H, W, 3]
  uint8 that `draw` shows. Raises TraceError / CheckpointError (ValueErrors, one line).
  """
  _check_numbers(beta, max_solution_steps, max_search_nodes, oracle_expansions)
  ckpt = _load_checkpoint(checkpoint_path)
  from envs import oracle
  from envs.sokoban import ACTION_NAMES
  from estimators import checkpoint
  env = _make_env(levels, level_index, max_solution_steps)
  spec = env.observation_spec()
  checkpoint.check_compatible(ckpt, spec.shape, spec.dtype, env.num_actions, source='sokoban')
  level = env.levels[level_index]
  actions, expanded = solve(level, max_search_nodes, max_solution_steps)
  observations, states, pushes = replay(env, actions)
  psi = psi_along(ckpt, observations)
  # The oracle restores states itself; the replay is over, so the env can be reused.
  results = oracle.label_transitions(env, states[:-1], actions, max_expansions=oracle_expansions)
  labels = [r.status for r in results]
  return {
      'checkpoint': os.path.abspath(checkpoint_path), 'levels': levels,
      'level_index': int(level_index), 'level_name': level.name, 'level': level.to_text(),
      'beta': float(beta), 'search_expansions': int(expanded),
      'actions': [int(a) for a in actions], 'action_names': [ACTION_NAMES[a] for a in actions],
      'psi': [float(p) for p in psi], 'labels': labels,
      'steps_back': [r.steps_back for r in results], 'push': [bool(p) for p in pushes],
      'summary': summarize(psi, labels, pushes, beta),
      'observations': observations,
  }


def _check_numbers(beta, max_solution_steps, max_search_nodes, oracle_expansions) -> None:
  if not 0.0 <= beta <= 1.0:  # also refuses nan
    raise TraceError(f'--beta must be in [0, 1], got {beta}')
  for name, value in (('max_solution_steps', max_solution_steps),
                      ('max_search_nodes', max_search_nodes),
                      ('oracle_expansions', oracle_expansions)):
    if value < 1:
      raise TraceError(f'--{name} must be >= 1, got {value}')


# ------------------------------------------------------------------------------------------- #
# Output
# ------------------------------------------------------------------------------------------- #

def frame_indices(num_frames: int, max_frames: int = MAX_FRAMES) -> List[int]:
  """Every k-th frame, k chosen so that at most `max_frames` are shown; the last is always in."""
  k = max(1, math.ceil(num_frames / max_frames))
  idx = list(range(0, num_frames, k))
  if idx[-1] != num_frames - 1:
    if len(idx) == max_frames:
      idx[-1] = num_frames - 1
    else:
      idx.append(num_frames - 1)
  return idx


def _write_atomically(path: str, data: bytes) -> None:
  # A crash mid-write never leaves a truncated figure or JSON where a good one was.
  directory = os.path.dirname(os.path.abspath(path))
  os.makedirs(directory, exist_ok=True)
  with paths.atomic_write(path, 'wb') as f:
    f.write(data)


def draw(trace_dict: Dict[str, Any], out_path: str) -> str:
  """Frames strip over the psi curve (markers coloured by oracle label, beta dashed) -> PNG."""
  # A bare Figure on the Agg canvas, not pyplot, so a caller's backend and state are untouched.
  from matplotlib.backends.backend_agg import FigureCanvasAgg
  from matplotlib.figure import Figure
  obs = np.asarray(trace_dict['observations'])
  psi = np.asarray(trace_dict['psi'], float)
  labels = np.asarray(trace_dict['labels'])
  beta = trace_dict['beta']
  idx = frame_indices(len(obs))
  fig = Figure(figsize=(max(6.0, 0.75 * len(idx)), 4.5), dpi=100)
  FigureCanvasAgg(fig)
  grid = fig.add_gridspec(2, len(idx), height_ratios=[1, 1.8])
  for j, i in enumerate(idx):
    ax = fig.add_subplot(grid[0, j])
    ax.imshow(obs[i], interpolation='nearest')
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(f't={i}', fontsize=7)
  ax = fig.add_subplot(grid[1, :])
  steps = np.arange(len(psi))
  ax.plot(steps, psi, '-', color='0.75', linewidth=1, zorder=1)
  for label, colour in LABEL_COLOURS.items():
    mask = labels == label
    if mask.any():
      ax.scatter(steps[mask], psi[mask], s=18, color=colour, zorder=2,
                 label=f'{label} ({int(mask.sum())})')
  ax.axhline(beta, linestyle='--', color='tab:blue', linewidth=1, label=f'beta = {beta:g}')
  ax.set_xlim(-0.5, max(len(psi) - 0.5, 0.5))
  ax.set_ylim(-0.02, 1.02)
  ax.set_xlabel('step t (transition x_t -> x_t+1)')
  ax.set_ylabel('psi(x_t, x_t+1)')
  ax.legend(fontsize=7, loc='center left', bbox_to_anchor=(1.0, 0.5))
  s = trace_dict['summary']
  fig.suptitle(f"Sokoban level {trace_dict['level_index']}: {s['steps']} steps, "
               f"{s['irreversible']} irreversible, {s['psi_above_beta']} with psi > beta", fontsize=10)
  fig.tight_layout()
  buf = io.BytesIO()
  fig.savefig(buf, format='png')
  _write_atomically(out_path, buf.getvalue())
  return out_path


def write_json(trace_dict: Dict[str, Any], path: str) -> str:
  """The trace without its frames (those are in the figure)."""
  doc = {k: v for k, v in trace_dict.items() if k != 'observations'}
  return paths.write_json(path, doc, make_dirs=True)


# ------------------------------------------------------------------------------------------- #
# Command line
# ------------------------------------------------------------------------------------------- #

def define_flags(fv: flags.FlagValues) -> None:
  flags.DEFINE_string('checkpoint', None, 'estimator checkpoint with psi', flag_values=fv)
  flags.DEFINE_string('levels', 'default', "'default' or a Boxoban/XSB level file", flag_values=fv)
  flags.DEFINE_integer('level', 0, 'level index in --levels', flag_values=fv)
  flags.DEFINE_integer('max_solution_steps', 120, 'longest solution accepted, in moves (the env '
                       'time limit is 120)', flag_values=fv)
  flags.DEFINE_integer('max_search_nodes', 200_000, 'states the solver may expand before giving '
                       'up', flag_values=fv)
  flags.DEFINE_integer('oracle_expansions', 100_000, 'oracle search budget per step (past it, the '
                       "label is 'unknown')", flag_values=fv)
  flags.DEFINE_float('beta', 0.9, 'psi threshold drawn and scored', flag_values=fv)
  flags.DEFINE_string('out', None, 'PNG figure to write', flag_values=fv)
  flags.DEFINE_string('json', None, 'JSON trace to write', flag_values=fv)


def _check_outputs(paths: Sequence[Optional[str]]) -> None:
  from estimators import dataset
  for flag, path in zip(('--out', '--json'), paths):
    if path is None:
      continue
    if os.path.isdir(path):
      raise TraceError(f'{flag} {path} is a directory; give a file path')
    problem = dataset.unwritable_reason(path)
    if problem:
      raise TraceError(f'cannot write {flag} {os.path.abspath(path)}: {problem}')


def main(argv: Optional[Sequence[str]] = None) -> int:
  args, _ = cli.parse(define_flags, argv, prog='python -m estimators.psi_trace',
                      description=__doc__.split('\n')[0], required=('checkpoint',))
  quiet.quiet_startup()   # gym prints a notice on stderr when first imported (Sokoban env)
  try:
    _check_outputs((args.out, args.json))
    result = trace(args.checkpoint, args.levels, args.level, args.beta, args.max_solution_steps,
                   args.max_search_nodes, args.oracle_expansions)
    if args.out:
      draw(result, args.out)
    if args.json:
      write_json(result, args.json)
  except ValueError as e:  # TraceError, CheckpointError, LevelFileError
    print(f'error: {e}', file=sys.stderr)
    return 2
  except OSError as e:  # e.g. the disk filled up since the check
    print(f'error: {e.strerror or e}: {e.filename or ""}', file=sys.stderr)
    return 2
  s = result['summary']
  written = ', '.join(p for p in (args.out, args.json) if p) or 'nothing written'
  print(f"level {result['level_index']}: {s['steps']} steps ({s['pushes']} pushes), "
        f"{s['irreversible']} irreversible, {s['psi_above_beta']} with psi > {args.beta:g}, "
        f"precision {s['precision']}, recall {s['recall']}; {written}")
  return 0


if __name__ == '__main__':
  sys.exit(main())

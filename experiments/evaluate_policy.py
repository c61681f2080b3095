r"""Evaluates a trained IMPALA policy on the first N levels of a Sokoban level set.

    python -m experiments.evaluate_policy --run_dir runs/sokoban-rae --num_levels 200
    python -m experiments.evaluate_policy --run_dir runs/sokoban-rae \
        --levels ../shared/data/boxoban/unfiltered_test_000.txt --num_levels 1000 \
        --policy both --count_irreversible --out results/sokoban-rae-boxoban.json
    python -m experiments.evaluate_policy --run_dir runs/sokoban-rae --num_levels 4 \
        --gif runs/sokoban-rae/policy.gif --gif_levels 0,3     # watch it (psi beside, for RAE)

The policy network is rebuilt from RUN_DIR/config.json as `launch.program.builder.make_learner`
builds it, and its parameters are read from the learner checkpoint RUN_DIR/checkpoints/learner.
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
--max_expansions are 'unknown', counted apart and not as irreversible. It also counts the
pushes (steps that moved a box; only those can be irreversible): `mean_pushes`, and
`irreversible_per_push`, the fraction of the pushes outside a solution that were irreversible;
and `dead_end_fraction`, the episodes that entered a state from which the level can no longer be
solved (`envs.sokoban_solver.solvable`, asked after each irreversible step; searches past
--max_expansions are counted apart, in `dead_end_unknown`).

Bad input (no run directory, no checkpoint, a run that is not Sokoban/IMPALA, an unreadable
level file, impossible numbers, an --out that cannot be written) is one line on stderr, exit 2.
"""
import dataclasses
import os
import sys
from typing import Optional, Tuple

from absl import app, flags

from envs import cli as envs_cli
from envs import paths
from envs.cli import field
from experiments.analysis.policy_evaluation import (
  POLICIES,
  EvaluateError,
  evaluate,
  format_table,
)

FLAGS = flags.FLAGS


@dataclasses.dataclass(frozen=True)
class PolicyEvaluation:
  """What to evaluate and how: one flag per field (envs.cli field flags)."""
  run_dir: Optional[str] = field(None, 'Run directory of a `launch.train --env sokoban` run.')
  levels: Optional[str] = field(None, "Level set: 'default' (envs/data/sokoban_1000.txt) or a "
                                "Boxoban/XSB file (default: the run's own levels).")
  num_levels: int = field(100, 'Evaluate the first N levels of the set.')
  policy: str = field('both', "'greedy' (argmax of the logits), 'sampled' (softmax) or both.",
                      choices=('greedy', 'sampled', 'both'))
  seed: int = field(0, 'Seed of the sampled policy.')
  count_irreversible: bool = field(False, 'Count the irreversible actions taken, by the exact '
                                   'oracle (slow: a search per new (state, action)), and the '
                                   'episodes that entered a dead end.')
  max_expansions: int = field(100_000, 'Oracle (and dead-end) search budget per check.')
  out: Optional[str] = field(None, 'Write the results as JSON to this file.')
  gif: Optional[str] = field(None, 'Also write a GIF of the episodes played on --gif_levels: '
                             'the room, and for an RAE run with a frozen psi its value per step '
                             'beside it.')
  gif_levels: Tuple[int, ...] = field((0,), 'Indices, among the levels evaluated, of the '
                                      'episodes the GIF shows (one after the other).')
  gif_policy: str = field('greedy', 'The policy whose episodes the GIF shows.',
                          choices=('greedy', 'sampled'))


SECTIONS = (envs_cli.Section('', PolicyEvaluation),)


def define_flags(flag_values=flags.FLAGS):
  """Only when run as a program: launch.train defines --seed too, and the experiment runner
  imports this module next to it."""
  envs_cli.define_field_flags(flag_values, SECTIONS)


def check_out(path: Optional[str]) -> None:
  from estimators import dataset
  if not path:
    return
  if os.path.isdir(path):
    raise EvaluateError(f'--out {path} is a directory; give a file name')
  problem = dataset.unwritable_reason(path)
  if problem:
    raise EvaluateError(f'cannot write --out {os.path.abspath(path)}: {problem}')


def main(argv):
  from estimators import cli
  cli.quiet_logs(FLAGS)
  if cli.unexpected_arguments(argv):
    return 2
  e = PolicyEvaluation(**envs_cli.field_values(FLAGS, SECTIONS)[''])
  policies = POLICIES if e.policy == 'both' else (e.policy,)
  try:
    if not e.run_dir:
      raise EvaluateError('--run_dir is required')
    check_out(e.out)
    try:
      gif_levels = [int(i) for i in e.gif_levels]
    except ValueError:
      raise EvaluateError(f'--gif_levels must be level indices, got '
                          f'{",".join(map(str, e.gif_levels))}')
    result = evaluate(e.run_dir, e.levels, e.num_levels, policies, e.seed, e.count_irreversible,
                      e.max_expansions, e.gif, gif_levels, e.gif_policy)
    if e.out:   # check_out allowed directories still to be made
      paths.write_json(e.out, result, make_dirs=True)
  except (ValueError, OSError) as err:  # EvaluateError, CheckpointError, EnvError, ...
    print(f'error: {str(err).splitlines()[0] if str(err) else type(err).__name__}',
          file=sys.stderr)
    return 2
  print(format_table(result))
  if e.out:
    print(f'results: {os.path.abspath(e.out)}')
  if e.gif:
    print(f'gif: {result["gif"]}')
  return 0


if __name__ == '__main__':
  define_flags()
  app.run(main)

r"""Evaluates a trained IMPALA policy on the first N levels of a Sokoban level set.

    python -m launch.evaluate_policy --run_dir runs/sokoban-rae --num_levels 200
    python -m launch.evaluate_policy --run_dir runs/sokoban-rae \
        --levels ../shared/data/boxoban/unfiltered_test_000.txt --num_levels 1000 \
        --policy both --count_irreversible --out results/sokoban-rae-boxoban.json
    python -m launch.evaluate_policy --run_dir runs/sokoban-rae --num_levels 4 \
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
`irreversible_per_push`, the fraction of the pushes outside a solution that were irreversible.

Bad input (no run directory, no checkpoint, a run that is not Sokoban/IMPALA, an unreadable
level file, impossible numbers, an --out that cannot be written) is one line on stderr, exit 2.
"""
import os
import sys
from typing import Optional

from absl import app, flags

from envs import paths
from launch.analysis.policy_evaluation import (
  POLICIES,
  EvaluateError,
  evaluate,
  format_table,
)

FLAGS = flags.FLAGS


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
  flags.DEFINE_string('gif', None, 'Also write a GIF of the episodes played on --gif_levels: the '
                      'room, and for an RAE run with a frozen psi its value per step beside it.',
                      flag_values=fv)
  flags.DEFINE_list('gif_levels', ['0'], 'Indices, among the levels evaluated, of the episodes '
                    'the GIF shows (one after the other).', flag_values=fv)
  flags.DEFINE_enum('gif_policy', 'greedy', ['greedy', 'sampled'], 'The policy whose episodes '
                    'the GIF shows.', flag_values=fv)


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
  policies = POLICIES if FLAGS.policy == 'both' else (FLAGS.policy,)
  try:
    if not FLAGS.run_dir:
      raise EvaluateError('--run_dir is required')
    check_out(FLAGS.out)
    try:
      gif_levels = [int(i) for i in FLAGS.gif_levels]
    except ValueError:
      raise EvaluateError(f'--gif_levels must be level indices, got {",".join(FLAGS.gif_levels)}')
    result = evaluate(FLAGS.run_dir, FLAGS.levels, FLAGS.num_levels, policies, FLAGS.seed,
                      FLAGS.count_irreversible, FLAGS.max_expansions, FLAGS.gif, gif_levels,
                      FLAGS.gif_policy)
    if FLAGS.out:   # check_out allowed directories still to be made
      paths.write_json(FLAGS.out, result, make_dirs=True)
  except (ValueError, OSError) as e:  # EvaluateError, CheckpointError, EnvError, ...
    print(f'error: {str(e).splitlines()[0] if str(e) else type(e).__name__}', file=sys.stderr)
    return 2
  print(format_table(result))
  if FLAGS.out:
    print(f'results: {os.path.abspath(FLAGS.out)}')
  if FLAGS.gif:
    print(f'gif: {result["gif"]}')
  return 0


if __name__ == '__main__':
  define_flags()
  app.run(main)

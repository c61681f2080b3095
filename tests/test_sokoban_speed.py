"""bench.sokoban_speed's plumbing: each code version is timed on its own comparison flags."""
import os

from bench import sokoban_speed

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))


def test_a_trees_comparison_flags_are_read_from_that_tree():
  flags = sokoban_speed.tree_flags(ROOT, 'small')
  none, rae = flags['impala-s0'], flags['impala_rae-s0']
  assert none[none.index('--mode') + 1] == 'none' and rae[rae.index('--mode') + 1] == 'rae'
  assert '{out}/psi.ckpt' in rae
  # Both arms share the agent's settings: everything before --mode.
  assert none[:none.index('--mode')] == rae[:rae.index('--mode')]


def test_flags_are_set_once_whatever_their_form():
  out = sokoban_speed._with(['--env', 'sokoban', '--max_steps', '5', '--seed=3'], 'max_steps', 9)
  out = sokoban_speed._with(out, 'seed', 0)
  assert out == ['--env', 'sokoban', '--max_steps', '9', '--seed', '0']

"""estimators.psi_trace: solving a level, psi and oracle labels along the solution, the figure."""
import collections
import json
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

from envs import oracle
from envs.sokoban import Sokoban
from estimators import checkpoint, psi_trace
from estimators import networks as nets

REPO = Path(__file__).resolve().parents[1]

# Level 0: the shortest solution (7 moves) pushes the lower box right onto its target, then the
# upper one up into the top-left corner target. Both pushes are irreversible: a box in a corner
# never moves again, and the last push ends the episode. 7x7 because the Sokoban conv net needs
# observations of at least 7x7.
# Level 1: a box starts in a corner off the target, so no solution exists.
LEVELS = """\
; 0
#######
#.    #
#$    #
#  @  #
#   $.#
#     #
#######

; 1
#######
#$    #
#     #
#  @  #
#    .#
#     #
#######
"""


@pytest.fixture(scope='module')
def files(tmp_path_factory):
  """(level file, untrained psi checkpoint for its 7x7 observations)."""
  root = tmp_path_factory.mktemp('psi_trace')
  levels = root / 'levels.txt'
  levels.write_text(LEVELS)
  spec = Sokoban(levels=str(levels)).observation_spec()
  config = nets.default_estimator_config('sokoban')
  est = nets.make_estimators(config, 4)
  psi = est.psi_init(jax.random.PRNGKey(0), np.zeros((1,) + spec.shape, spec.dtype))
  ckpt = root / 'psi.ckpt'
  checkpoint.save(str(ckpt), config, 4, spec.shape, spec.dtype, psi, None)
  return levels, ckpt


def shortest_solution_length(env):
  """Plain BFS over the env's own dynamics: fewest moves that solve the level."""
  env.reset()
  start = env.get_state()
  depth = {start: 0}
  queue = collections.deque([start])
  while queue:
    s = queue.popleft()
    for a in range(env.num_actions):
      env.set_state(s)
      env.step(a)
      if env.solved():
        return depth[s] + 1
      n = env.get_state()
      if n not in depth:
        depth[n] = depth[s] + 1
        queue.append(n)
  return None


def test_solution_is_shortest_and_solves_the_level(files):
  levels, _ = files
  env = Sokoban(levels=str(levels), level_index=0)
  actions, _ = psi_trace.solve(env.levels[0])
  _, _, pushes = psi_trace.replay(env, actions)
  assert env.solved()
  assert len(actions) == shortest_solution_length(Sokoban(levels=str(levels), level_index=0)) == 7
  assert sum(pushes) == 2


def test_solver_limits(files):
  levels, _ = files
  level = Sokoban(levels=str(levels)).levels[0]
  with pytest.raises(psi_trace.TraceError, match='at most 6 moves'):
    psi_trace.solve(level, max_steps=6)
  with pytest.raises(psi_trace.TraceError, match='not solved within --max_search_nodes 1'):
    psi_trace.solve(level, max_nodes=1)


def test_trace_labels_json_and_figure(files, tmp_path):
  levels, ckpt = files
  out, out_json = tmp_path / 'fig.png', tmp_path / 'trace.json'
  assert psi_trace.main(['--checkpoint', str(ckpt), '--levels', str(levels), '--level', '0',
                         '--beta', '0.5', '--out', str(out), '--json', str(out_json)]) == 0
  doc = json.loads(out_json.read_text())
  steps = len(doc['actions'])
  assert len(doc['psi']) == len(doc['labels']) == len(doc['push']) == steps == 7
  assert all(0.0 <= p <= 1.0 for p in doc['psi'])
  # The labels are the oracle's, state by state along the replayed solution.
  env = Sokoban(levels=str(levels), level_index=0)
  env.reset()
  states = []
  for a in doc['actions']:
    states.append(env.get_state())
    env.step(a)
  expected = [oracle.check(Sokoban(levels=str(levels)), s, a).status
              for s, a in zip(states, doc['actions'])]
  assert doc['labels'] == expected
  # Both pushes are irreversible, every walking step reversible.
  assert [l == 'irreversible' for l in doc['labels']] == doc['push']
  s = doc['summary']
  above = [p > 0.5 for p in doc['psi']]
  assert s['irreversible'] == 2 and s['reversible'] == 5 and s['unknown'] == 0
  assert s['psi_above_beta'] == sum(above)
  hits = sum(a and l == 'irreversible' for a, l in zip(above, doc['labels']))
  assert s['recall'] == hits / 2
  assert s['precision'] == (hits / sum(above) if any(above) else None)
  assert out.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'


def test_frame_indices_keep_long_episodes_readable():
  assert psi_trace.frame_indices(5) == [0, 1, 2, 3, 4]
  idx = psi_trace.frame_indices(121)
  assert len(idx) <= psi_trace.MAX_FRAMES and idx[0] == 0 and idx[-1] == 120
  assert idx == sorted(set(idx))


def run_cli(*args):
  return subprocess.run([sys.executable, '-m', 'estimators.psi_trace', *args], cwd=REPO,
                        capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize('case, expected', [
    ('missing_checkpoint', 'estimator checkpoint not found'),
    ('level_out_of_range', 'level_index must be in [0, 2)'),
    ('unsolvable', 'has no solution'),
])
def test_bad_input_is_one_line_exit_2(files, tmp_path, case, expected):
  levels, ckpt = files
  args = {'missing_checkpoint': ['--checkpoint', str(tmp_path / 'nope.ckpt')],
          'level_out_of_range': ['--checkpoint', str(ckpt), '--level', '2'],
          'unsolvable': ['--checkpoint', str(ckpt), '--level', '1']}[case]
  out = tmp_path / 'fig.png'
  proc = run_cli(*args, '--levels', str(levels), '--out', str(out))
  assert proc.returncode == 2, proc.stderr
  lines = proc.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith('error: ') and expected in lines[0], proc.stderr
  assert not out.exists()

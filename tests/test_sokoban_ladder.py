"""The Sokoban ladder of rooms: dead ends (a state from which the level can no longer be solved)
decided by `envs.sokoban_solver.solvable` and counted along evaluated episodes, the level sets'
measures, and the ladder's steps (one agent for every rung and both arms)."""
import dataclasses
import os

import numpy as np
import pytest

from envs import level_stats, sokoban, sokoban_solver
from envs import levels as levels_lib

# Player @, box $, target . ; up, down, left, right are actions 0-3.
OPEN_ROOM = '; 0\n######\n#    #\n# $  #\n#  . #\n#@   #\n######\n'
UP, DOWN, LEFT, RIGHT = range(4)


def _level(text: str):
  (level,) = levels_lib.parse_levels(text, source='<test>')
  return level


def _state(level, player, boxes):
  return dataclasses.replace(level, player=player, boxes=tuple(sorted(boxes)))


# Dead ends -------------------------------------------------------------------------------------


def test_solvable_on_hand_built_states():
  room = _level(OPEN_ROOM)
  assert sokoban_solver.solvable(room) is True
  # The box against the top wall, the target below it: it can never be pushed down again.
  assert sokoban_solver.solvable(_state(room, (2, 2), [(1, 2)])) is False
  # On the target: solved.
  assert sokoban_solver.solvable(_state(room, (1, 1), [(3, 3)])) is True
  # Two boxes side by side under a wall, each beside a target on that row: neither can move
  # (the one a push would need to stand on is the other box), no cell of theirs is dead.
  frozen = _level('; 1\n########\n# $$.  #\n#    . #\n#@     #\n########\n')
  assert all(b in sokoban_solver.push_distances(np.asarray(frozen.walls), frozen.targets)
             for b in frozen.boxes)
  assert sokoban_solver.solvable(frozen) is False
  # Out of budget: no answer rather than a wrong one.
  assert sokoban_solver.solvable(room, max_nodes=1) is None


def test_solvable_agrees_with_the_exhaustive_solver_along_random_play():
  """After random pushes on 7x7 rooms, `solvable` says what the move-optimal A* finds with no
  step limit: a solution, or none (every push state tried)."""
  env = sokoban.Sokoban(seed=0, levels='sokoban_7x7_2boxes_train')   # a shipped set by name
  rng = np.random.default_rng(0)
  answers = {True: 0, False: 0}
  for _ in range(12):
    ts = env.reset()
    while not ts.last():
      ts = env.step(int(rng.integers(4)))
      index, player, boxes = env.get_state()
      state = _state(env.levels[index], player, boxes)
      try:
        sokoban_solver.solve(state, max_nodes=10**6, max_steps=10**6)
        expected = True
      except sokoban_solver.Unsolved as e:
        assert e.reason in ('dead_box', 'max_steps')
        expected = False
      assert sokoban_solver.solvable(state) is expected
      answers[expected] += 1
  assert answers[True] > 0 and answers[False] > 0   # both answers were checked


def _play(actions):
  """One evaluated episode of OPEN_ROOM played with `actions`, judged by the oracle."""
  from experiments.analysis import policy_episodes
  room = _level(OPEN_ROOM)
  env = sokoban.Sokoban(levels=[room], level_index=0, max_steps=20)
  judge = policy_episodes.IrreversibilityJudge({}, [room], max_expansions=10_000)
  record = {'level': 0, 'length': 0, 'return': 0.0, 'actions': '', 'irreversible': 0,
            'oracle_unknown': 0, 'pushes': 0, 'dead_end': 0, 'dead_end_unknown': 0}
  env.reset()
  for a in actions:
    policy_episodes.take_step(env, record, a, judge)
  return record


def test_an_evaluated_episode_counts_the_dead_end_it_entered():
  # Right, then up twice: the second up pushes the box against the wall, irreversibly, dead.
  dead = _play([RIGHT, UP, UP, DOWN])
  assert (dead['pushes'], dead['irreversible'], dead['dead_end']) == (1, 1, 1)
  # Around the box and push it right, then down onto the target: no dead end on the way.
  solved = _play([UP, UP, RIGHT, UP, RIGHT, DOWN])
  assert solved['solved'] and solved['pushes'] == 2 and solved['dead_end'] == 0


def test_summaries_report_the_dead_end_fraction():
  from experiments.analysis import policy_episodes
  records = [dict(_play([RIGHT, UP, UP]), solved=False, boxes_on_target=0),
             _play([UP, UP, RIGHT, UP, RIGHT, DOWN])]
  summary = policy_episodes.summarize(records, count_irreversible=True)
  assert summary['dead_end_fraction'] == 0.5 and summary['dead_end_unknown'] == 0


def test_random_play_measures_dead_ends_on_a_level_set(tmp_path):
  path = tmp_path / 'rooms.txt'
  path.write_text(OPEN_ROOM)
  r = level_stats.random_episodes(str(path), episodes=30, seed=0)
  lo, hi = r['dead_end_interval']
  assert 0 < r['dead_end_fraction'] < 1 and lo <= r['dead_end_fraction'] <= hi
  assert r['dead_end_unknown'] == 0
  row = level_stats.measure('rooms', str(path), 1, 1000, 5, 0)
  assert row['optimal']['solved'] == 1 and row['size'] == 1
  assert 'random play: dead end' in level_stats.markdown({'solve_levels': 1, 'max_nodes': 1000,
                                                          'episodes': 5, 'sets': [row]})


# The ladder's steps ----------------------------------------------------------------------------


@pytest.mark.parametrize('rung', ['7x7_2boxes', '7x7_3boxes', '10x10_3boxes', '10x10_4boxes'])
def test_each_rung_runs_both_arms_with_one_agent(rung):
  from experiments import registry
  from experiments.sokoban_ladder import LADDER_MAX_STEPS, LADDER_SCALES
  steps = registry.get('sokoban_ladder').steps(rung, 3)
  runs = [s for s in steps if s.is_training]
  assert [r.name for r in runs] == ['impala-s0', 'impala_rae-s0', 'impala-s1', 'impala_rae-s1',
                                    'impala-s2', 'impala_rae-s2']
  impala, rae = list(runs[0].flags), list(runs[1].flags)
  cut = impala.index('--mode')
  assert rae[:cut] == impala[:cut]      # the agent, rooms and levels: the same on both arms
  assert rae[cut:] == ['--mode', 'rae', '--estimator_checkpoint', '{out}/psi.ckpt', '--beta',
                       '0.9', '--lam', '0.1']
  value = lambda name: impala[impala.index(f'--{name}') + 1]
  assert value('learning_rate_decay_steps') == str(LADDER_MAX_STEPS)   # every rung alike
  assert (value('minibatches'), value('samples_per_insert')) == ('32', '4')
  levels = LADDER_SCALES[rung]['levels']
  assert f'levels={levels}' in impala and os.sep not in levels   # resumes from any checkout
  assert runs[0].max_steps <= LADDER_MAX_STEPS
  names = [s.name for s in steps]
  assert names[:2] == ['collect_random', 'train_psi']
  assert {'impala_rae-s2-eval_held_out', 'impala_rae-s2-eval_irreversible'} <= set(names)
  if rung.startswith('7x7'):
    assert all(os.path.isfile(sokoban.level_file(LADDER_SCALES[rung][key]))
               for key in ('levels', 'held_out'))


def test_the_ladder_page_reads_a_rung_with_no_runs(tmp_path):
  from experiments import sokoban_ladder_page
  text = sokoban_ladder_page.ladder_markdown({'scale': '7x7_2boxes', 'seeds': 3}, str(tmp_path))
  assert text.startswith('## The rung') and 'sokoban_7x7_2boxes_train.txt' in text
  assert 'minibatches 32' in text


def test_shipped_level_sets_load_by_name_from_any_directory(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  assert sokoban.level_file('default') == sokoban.DEFAULT_LEVELS
  by_name = sokoban.load_level_set('sokoban_7x7_2boxes_heldout')
  assert len(by_name) == 500 and by_name[0].shape == (7, 7)
  (tmp_path / 'mine.txt').write_text(OPEN_ROOM)
  assert sokoban.level_file('mine.txt') == str(tmp_path / 'mine.txt')   # a path, as before
  with pytest.raises(ValueError, match='level file not found: .*sokoban_9x9_2boxes_train'):
    sokoban.load_level_set('sokoban_9x9_2boxes_train')


@pytest.mark.slow
def test_the_tiny_rung_runs_end_to_end(tmp_path):
  """psi from the rung's random episodes, both arms, their evaluations and the page (~3 min
  on a quiet 2-core machine)."""
  from experiments import registry, runner
  exp = registry.get('sokoban_ladder')
  assert runner.run_experiment(exp, 'tiny', 1, str(tmp_path)) is True
  runner.report(exp, 'tiny', 1, str(tmp_path))
  page = (tmp_path / 'table.md').read_text()
  for part in ('## The rung', '## Milestones', '## Each RAE arm against IMPALA',
               'episodes entering a dead end', '## psi against the exact oracle'):
    assert part in page
  import json
  evaluation = json.loads((tmp_path / 'runs' / 'impala_rae-s0' / 'eval_irreversible.json')
                          .read_text())
  assert 0 <= evaluation['policies']['sampled']['dead_end_fraction'] <= 1

"""Per-kind split of the estimators' scores (estimators.kinds) and Turf's transition kinds, on
hand-made cases whose figures are worked out by hand."""
import math

import pytest

import envs
from envs import oracle, turf
from estimators import kinds


def _bit(r, c):
  return 1 << (r * turf.SIZE + c)


def test_by_kind_figures_worked_by_hand():
  # Two kinds: 'enter' (3 irreversible, 1 reversible) and 'stone' (2 reversible).
  k = ['enter', 'enter', 'enter', 'enter', 'stone', 'stone']
  irr = [True, True, True, False, False, False]
  psi = [0.9, 0.8, 0.3, 0.6, 0.1, 0.7]
  phi = [0.1, 0.35, 0.5, 0.15, 0.9, 0.25]
  split = kinds.by_kind(k, irr, psi, phi, psi_beta=0.5, phi_betas=(0.2, 0.4),
                        kinds_order=('stone', 'enter'))
  assert list(split) == ['stone', 'enter']
  enter, stone = split['enter'], split['stone']
  assert (enter['count'], enter['irreversible']) == (4, 3)
  # Within 'enter': positives 0.9, 0.8, 0.3 against the negative 0.6: 2 of 3 pairs won.
  assert enter['psi']['auroc_within'] == pytest.approx(2 / 3)
  # Against every reversible (0.6, 0.1, 0.7): 0.9 and 0.8 beat all 3, 0.3 beats 1 -> 7/9.
  assert enter['psi']['auroc_vs_reversible'] == pytest.approx(7 / 9)
  assert enter['psi']['above_beta'] == pytest.approx(3 / 4)
  at = {b['beta']: b for b in enter['phi']['at_beta']}
  # phi < 0.2 flags 0.1 (irreversible) and 0.15 (reversible): precision 1/2, recall 1/3.
  assert (at[0.2]['flagged'], at[0.2]['precision'], at[0.2]['recall']) == (2, 0.5, pytest.approx(1 / 3))
  assert at[0.2]['reversible_flagged'] == 1.0
  # phi < 0.4 flags 0.1, 0.35, 0.15: precision 2/3, recall 2/3.
  assert (at[0.4]['precision'], at[0.4]['recall']) == (pytest.approx(2 / 3), pytest.approx(2 / 3))
  # An all-reversible kind: no within-AUROC, no recall; phi < 0.4 flags one of its two.
  assert math.isnan(stone['psi']['auroc_within']) and math.isnan(stone['psi']['auroc_vs_reversible'])
  s_at = {b['beta']: b for b in stone['phi']['at_beta']}
  assert math.isnan(s_at[0.4]['recall']) and s_at[0.4]['reversible_flagged'] == 0.5
  assert s_at[0.2]['flagged'] == 0
  md = kinds.markdown(split, 'hand-made')
  assert '| enter | 4 | 3 |' in md and '0.50 / 0.33 / 1.00' in md
  # phi's regression target: a phi fitting it exactly would flag 0.05 and 0.1 at beta 0.2.
  target = [0.05, 0.1, 0.45, 0.5, 0.5, 0.3]
  split = kinds.by_kind(k, irr, psi, phi, psi_beta=0.5, phi_betas=(0.2,), phi_target=target)
  t = split['enter']['phi_target']
  assert t['mean'] == pytest.approx(0.275)
  assert (t['at_beta'][0]['recall'], t['at_beta'][0]['reversible_flagged']) == (
      pytest.approx(2 / 3), 0.0)
  assert "phi's target psi(x', x) mean" in kinds.markdown(split, 'hand-made')


def test_by_kind_refuses_mismatched_lengths():
  with pytest.raises(ValueError, match='3 kinds but 2 labels'):
    kinds.by_kind(['a', 'b', 'c'], [True, False])
  with pytest.raises(ValueError, match='1 psi scores but 2 labels'):
    kinds.by_kind(['a', 'b'], [True, False], psi=[0.5])


def test_turf_transition_kinds_on_hand_made_states():
  env = envs.make('turf')
  # The paper map: (9, 0) start (stone), (9, 1) grass, (8, 0) stone, (0, 9) goal, (1, 9) grass.
  assert env.transition_kind((9, 0, 0), (9, 0, 0)) == 'bump'
  assert env.transition_kind((9, 0, 0), (8, 0, 0)) == 'stone'
  assert env.transition_kind((9, 0, 0), (9, 1, 0)) == 'enter_fresh_grass'
  assert env.transition_kind((9, 1, 0), (9, 2, _bit(9, 1))) == 'leave_fresh_grass'
  assert env.transition_kind((9, 1, 0), (9, 0, _bit(9, 1))) == 'leave_fresh_grass'
  # Onto grass ruined before, and off it: reversible moves of their own kind.
  assert env.transition_kind((9, 0, _bit(9, 1)), (9, 1, _bit(9, 1))) == 'ruined_grass'
  assert env.transition_kind((9, 1, _bit(9, 1)), (9, 0, _bit(9, 1))) == 'ruined_grass'
  # From ruined grass onto fresh grass: entering.
  assert env.transition_kind((9, 1, _bit(9, 1)), (9, 2, _bit(9, 1))) == 'enter_fresh_grass'
  assert env.transition_kind((1, 9, 0), (0, 9, _bit(1, 9))) == 'goal'
  # The kinds agree with the oracle where the rule fixes the label.
  for state, action, kind, status in (((9, 0, 0), 3, 'enter_fresh_grass', oracle.IRREVERSIBLE),
                                      ((9, 0, 0), 0, 'stone', oracle.REVERSIBLE),
                                      ((9, 0, 0), 1, 'bump', oracle.REVERSIBLE),
                                      ((9, 1, 0), 3, 'leave_fresh_grass', oracle.IRREVERSIBLE),
                                      ((9, 1, _bit(9, 1)), 2, 'ruined_grass', oracle.REVERSIBLE)):
    env.set_state(state)
    env.step(action)
    assert env.transition_kind(state, env.get_state()) == kind
    assert oracle.check(env, state, action).status == status, (state, action)


def test_turf_clean_states_cover_the_grid_but_the_goal():
  env = envs.make('turf')
  states = env.clean_states()
  assert len(states) == 99 and (0, 9, 0) not in states and all(s[2] == 0 for s in states)
  env.set_state((9, 1, 0))
  img = env.observation()
  assert tuple(img[9, 1]) == turf.AGENT and tuple(img[9, 0]) == turf.STONE


def test_evaluate_phi_betas_are_checked():
  from estimators import evaluate
  assert evaluate.parse_betas(['0.2', '0.4']) == (0.2, 0.4)
  with pytest.raises(evaluate.EvaluateError, match="comma-separated numbers, got 'x'"):
    evaluate.parse_betas(['0.2', 'x'])
  with pytest.raises(evaluate.EvaluateError, match=r'in \[0, 1\], got 1.5'):
    evaluate.parse_betas(['1.5'])

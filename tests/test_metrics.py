"""estimators.metrics on hand-computed cases."""
import itertools
import math

import numpy as np
import pytest

from estimators import metrics


def _brute_auroc(scores, labels):
  pos = [s for s, y in zip(scores, labels) if y]
  neg = [s for s, y in zip(scores, labels) if not y]
  wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p, n in itertools.product(pos, neg))
  return wins / (len(pos) * len(neg))


def test_auroc_hand_computed():
  # Positives 0.35, 0.8 vs negatives 0.1, 0.4: 3 of 4 pairs ordered right.
  assert metrics.auroc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1]) == pytest.approx(0.75)
  assert metrics.auroc([0.1, 0.2, 0.8, 0.9], [0, 0, 1, 1]) == 1.0
  assert metrics.auroc([0.9, 0.8, 0.2, 0.1], [0, 0, 1, 1]) == 0.0


def test_auroc_ties_count_one_half():
  # pos {0.5, 0.9}, neg {0.5, 0.5}: (0.5,0.5) twice -> 1/2 each, (0.9, .) twice -> 1: 3/4.
  assert metrics.auroc([0.5, 0.5, 0.5, 0.9], [0, 1, 0, 1]) == pytest.approx(0.75)
  assert metrics.auroc([0.3] * 6, [0, 1, 0, 1, 1, 0]) == pytest.approx(0.5)


def test_auroc_matches_pairwise_count_with_many_ties():
  rng = np.random.default_rng(0)
  for _ in range(5):
    scores = rng.integers(0, 5, size=40).astype(float)
    labels = rng.integers(0, 2, size=40)
    assert metrics.auroc(scores, labels) == pytest.approx(_brute_auroc(scores, labels))


def test_auroc_single_class_is_nan_and_bad_input_raises():
  assert math.isnan(metrics.auroc([0.1, 0.2], [1, 1]))
  assert math.isnan(metrics.auroc([0.1, 0.2], [False, False]))
  with pytest.raises(ValueError):
    metrics.auroc([0.1, 0.2, 0.3], [0, 1])
  with pytest.raises(ValueError):
    metrics.auroc([0.1, 0.2], [0, 2])


def test_average_ranks():
  np.testing.assert_allclose(metrics.average_ranks([10, 20, 20, 5]), [2, 3.5, 3.5, 1])


def test_precision_recall_hand_computed():
  r = metrics.precision_recall([1, 1, 0, 0, 1], [1, 0, 1, 0, 1])
  assert (r['tp'], r['fp'], r['fn'], r['tn']) == (2, 1, 1, 1)
  assert r['precision'] == pytest.approx(2 / 3)
  assert r['recall'] == pytest.approx(2 / 3)
  assert r['f1'] == pytest.approx(2 / 3)
  scores = np.array([0.9, 0.7, 0.2, 0.6])
  r = metrics.precision_recall(scores > 0.65, [1, 0, 0, 1])
  assert (r['precision'], r['recall']) == (0.5, 0.5)


def test_precision_undefined_without_predicted_positives():
  r = metrics.precision_recall([0, 0, 0], [1, 0, 1])
  assert math.isnan(r['precision']) and r['recall'] == 0.0 and math.isnan(r['f1'])
  r = metrics.precision_recall([1, 0], [0, 0])
  assert r['precision'] == 0.0 and math.isnan(r['recall'])


def test_calibration_bins():
  cal = metrics.calibration_bins([0.05, 0.15, 0.15, 0.95, 1.0, -0.2], [0, 1, 0, 1, 1, 0], 10)
  np.testing.assert_allclose(cal['edges'], np.linspace(0, 1, 11))
  np.testing.assert_array_equal(cal['counts'], [2, 2, 0, 0, 0, 0, 0, 0, 0, 2])  # -0.2 clipped
  assert cal['fraction_positive'][0] == 0.0
  assert cal['fraction_positive'][1] == 0.5
  assert math.isnan(cal['fraction_positive'][2])
  assert cal['fraction_positive'][9] == 1.0
  assert cal['mean_score'][9] == pytest.approx(0.975)
  with pytest.raises(ValueError):
    metrics.calibration_bins([0.1], [1], 0)


def test_best_f1_threshold():
  best = metrics.best_f1_threshold([0.9, 0.8, 0.3, 0.2], [1, 1, 0, 0])
  assert best['f1'] == 1.0 and 0.3 < best['threshold'] < 0.8
  assert metrics.best_f1_threshold([0.1, 0.2], [0, 0]) is None

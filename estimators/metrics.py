"""Scoring of reversibility estimates against exact labels: small pure numpy functions.

Convention: `labels` are 1 for the positive class (here: *irreversible* transitions) and 0
otherwise; `scores` are higher for "more likely positive" (psi(x, x'), or 1 - phi(x, a)).

    auroc(scores, labels)                    # ties count one half (Mann-Whitney U)
    precision_recall(scores > beta, labels)  # dict: precision, recall, f1, tp, fp, fn, tn
    calibration_bins(scores, labels, 10)     # fraction of positives per score bin
"""
from typing import Dict, Optional

import numpy as np


def _as_binary(labels) -> np.ndarray:
  labels = np.asarray(labels)
  if labels.dtype != bool:
    if labels.size and not np.all((labels == 0) | (labels == 1)):
      raise ValueError('labels must be 0/1 or boolean')
    labels = labels.astype(bool)
  return labels.reshape(-1)


def _check_same_length(scores: np.ndarray, labels: np.ndarray) -> None:
  if scores.shape[0] != labels.shape[0]:
    raise ValueError(f'{scores.shape[0]} scores but {labels.shape[0]} labels')


def average_ranks(values) -> np.ndarray:
  """1-based ranks of `values`, tied values sharing the mean of their ranks."""
  values = np.asarray(values, dtype=np.float64).reshape(-1)
  order = np.argsort(values, kind='mergesort')
  sorted_vals = values[order]
  # Start index of each run of equal values, and its length.
  new_run = np.concatenate([[True], sorted_vals[1:] != sorted_vals[:-1]])
  run_id = np.cumsum(new_run) - 1
  run_start = np.flatnonzero(new_run)
  run_len = np.diff(np.concatenate([run_start, [len(values)]]))
  mean_rank = run_start + (run_len + 1) / 2.0  # mean of ranks start+1 .. start+len
  ranks = np.empty(len(values), dtype=np.float64)
  ranks[order] = mean_rank[run_id]
  return ranks


def auroc(scores, labels) -> float:
  """Area under the ROC curve: P(score of a random positive > score of a random negative),
  ties counting 1/2. NaN when either class is absent."""
  scores = np.asarray(scores, dtype=np.float64).reshape(-1)
  labels = _as_binary(labels)
  _check_same_length(scores, labels)
  if np.any(np.isnan(scores)):
    raise ValueError('scores contain NaN')
  n_pos = int(labels.sum())
  n_neg = int(labels.size - n_pos)
  if n_pos == 0 or n_neg == 0:
    return float('nan')
  ranks = average_ranks(scores)
  u = ranks[labels].sum() - n_pos * (n_pos + 1) / 2.0
  return float(u / (n_pos * n_neg))


def _ratio(num: int, den: int) -> float:
  return float(num) / den if den else float('nan')


def precision_recall(predicted, labels) -> Dict[str, float]:
  """Precision/recall/F1 of boolean predictions of the positive class (NaN where undefined)."""
  predicted = _as_binary(predicted)
  labels = _as_binary(labels)
  _check_same_length(predicted, labels)
  tp = int(np.sum(predicted & labels))
  fp = int(np.sum(predicted & ~labels))
  fn = int(np.sum(~predicted & labels))
  tn = int(np.sum(~predicted & ~labels))
  precision = _ratio(tp, tp + fp)
  recall = _ratio(tp, tp + fn)
  if np.isnan(precision) or np.isnan(recall) or precision + recall == 0:
    f1 = float('nan') if (np.isnan(precision) or np.isnan(recall)) else 0.0
  else:
    f1 = 2 * precision * recall / (precision + recall)
  return {'precision': precision, 'recall': recall, 'f1': f1,
          'tp': tp, 'fp': fp, 'fn': fn, 'tn': tn}


def calibration_bins(scores, labels, num_bins: int = 10, low: float = 0.0,
                     high: float = 1.0) -> Dict[str, np.ndarray]:
  """Equal-width bins of `scores` on [low, high] (the last bin includes `high`; values outside
  are clipped into the end bins). Per bin: count, fraction of positives (NaN if empty) and mean
  score (NaN if empty)."""
  if num_bins < 1:
    raise ValueError(f'num_bins must be >= 1, got {num_bins}')
  if not high > low:
    raise ValueError('calibration range needs high > low')
  scores = np.asarray(scores, dtype=np.float64).reshape(-1)
  labels = _as_binary(labels)
  _check_same_length(scores, labels)
  edges = np.linspace(low, high, num_bins + 1)
  idx = np.clip(np.floor((scores - low) / (high - low) * num_bins).astype(np.int64), 0, num_bins - 1)
  counts = np.bincount(idx, minlength=num_bins)
  positives = np.bincount(idx, weights=labels.astype(np.float64), minlength=num_bins)
  score_sum = np.bincount(idx, weights=scores, minlength=num_bins)
  with np.errstate(invalid='ignore', divide='ignore'):
    fraction = np.where(counts > 0, positives / np.maximum(counts, 1), np.nan)
    mean_score = np.where(counts > 0, score_sum / np.maximum(counts, 1), np.nan)
  return {'edges': edges, 'counts': counts, 'positives': positives.astype(np.int64),
          'fraction_positive': fraction, 'mean_score': mean_score}


def best_f1_threshold(scores, labels) -> Optional[Dict[str, float]]:
  """The threshold t maximising F1 of `scores > t` over the observed score values (None when
  there are no positives)."""
  scores = np.asarray(scores, dtype=np.float64).reshape(-1)
  labels = _as_binary(labels)
  _check_same_length(scores, labels)
  n_pos = int(labels.sum())
  if n_pos == 0 or scores.size == 0:
    return None
  order = np.argsort(-scores, kind='mergesort')
  s, y = scores[order], labels[order]
  tp = np.cumsum(y)
  fp = np.cumsum(~y)
  # Only cut between distinct values: predicting "score > t" keeps ties together.
  last_of_run = np.concatenate([s[1:] != s[:-1], [True]])
  tp, fp, s_cut = tp[last_of_run], fp[last_of_run], s[last_of_run]
  precision = tp / (tp + fp)
  recall = tp / n_pos
  f1 = np.where(precision + recall > 0, 2 * precision * recall / np.maximum(precision + recall, 1e-12), 0.0)
  k = int(np.argmax(f1))
  # Threshold just below the k-th cut value: scores >= s_cut[k] are predicted positive.
  nxt = s_cut[k + 1] if k + 1 < len(s_cut) else s_cut[k] - 1.0
  return {'threshold': float((s_cut[k] + nxt) / 2.0), 'f1': float(f1[k]),
          'precision': float(precision[k]), 'recall': float(recall[k])}

"""Scores a trained checkpoint on data it was not trained on: psi's precedence accuracy on pairs of
held-out episodes, and psi (and phi) against a user's labelled transitions. `estimators.train
--check_dataset/--check_labels` runs these right after training; `launch.gym_check` runs them
on a saved checkpoint."""
import numpy as np

from estimators import checkpoint as checkpoint_lib
from estimators import dataset, metrics


def heldout_accuracy(ckpt: checkpoint_lib.EstimatorCheckpoint, dataset_path: str, num_pairs: int,
                     seed: int) -> dict:
  """psi's precedence accuracy on `num_pairs` pairs of the episodes at `dataset_path`, drawn as
  training draws them (within the checkpoint's window, in random order): 0.5 is chance."""
  from estimators import train
  meta = dataset.read_metadata(dataset_path)
  if tuple(meta['observation_shape']) != tuple(ckpt.obs_shape):
    raise ValueError(f'held-out dataset {dataset_path} has observations '
                     f'{meta["observation_shape"]}; the checkpoint expects {list(ckpt.obs_shape)}')
  flat, _ = dataset.load_flat(dataset_path)
  window = int(ckpt.metadata.get('window') or ckpt.metadata['train_config']['window'])
  accuracy = train.eval_psi_accuracy(ckpt.estimators, ckpt.psi_params, train.flat_batch(flat),
                                     window, num_pairs, seed=seed)
  return {'dataset': dataset_path, 'episodes': int(len(flat.lengths)), 'window': window,
          'pairs': int(num_pairs), 'psi_heldout_accuracy': accuracy}


def read_labels(labels_path: str) -> dict:
  """The arrays of a labels .npz: `obs`, `next_obs` [N, ...], `irreversible` [N] (0/1) and
  optionally `actions` [N]. Raises ValueError naming what is missing or inconsistent."""
  with np.load(labels_path, allow_pickle=False) as f:
    missing = [k for k in ('obs', 'next_obs', 'irreversible') if k not in f.files]
    if missing:
      raise ValueError(f'labels {labels_path} lack {", ".join(missing)} (they have '
                       f'{", ".join(f.files) or "nothing"})')
    data = {k: f[k] for k in f.files}
  data['irreversible'] = np.asarray(data['irreversible']).astype(bool).reshape(-1)
  if len(data['irreversible']) != len(data['obs']) or len(data['obs']) != len(data['next_obs']):
    raise ValueError(f'labels {labels_path}: {len(data["obs"])} obs, {len(data["next_obs"])} '
                     f'next_obs and {len(data["irreversible"])} labels; they must match')
  return data


def label_scores(ckpt: checkpoint_lib.EstimatorCheckpoint, labels_path: str, beta: float) -> dict:
  """psi against the labels: the AUROC of psi(obs, next_obs) for irreversible transitions and
  the precision and recall of psi > beta; with actions and a phi, the AUROC of 1 - phi(obs, a)."""
  from estimators.predict import Predictor
  data = read_labels(labels_path)
  irreversible = data['irreversible']
  predictor = Predictor(ckpt)
  psi = predictor.psi(data['obs'], data['next_obs'])
  report = {'labels': labels_path, 'transitions': int(len(psi)),
            'irreversible': int(irreversible.sum()),
            'psi_auroc': metrics.auroc(psi, irreversible), 'beta': beta,
            'psi_above_beta': metrics.precision_recall(psi > beta, irreversible)}
  if 'actions' in data and ckpt.phi_params is not None:
    actions = np.asarray(data['actions']).astype(np.int64).reshape(-1)
    if len(actions) != len(psi) or actions.min(initial=0) < 0 or \
       actions.max(initial=0) >= ckpt.num_actions:
      raise ValueError(f'labels {labels_path}: actions must be {len(psi)} values in '
                       f'[0, {ckpt.num_actions})')
    phi = predictor.phi(data['obs'])[np.arange(len(actions)), actions]
    report['one_minus_phi_auroc'] = metrics.auroc(1.0 - phi, irreversible)
  return report

"""Scores a trained checkpoint on data it was not trained on: psi's precedence accuracy on pairs of
held-out episodes, and psi (and phi) against a user's labelled transitions. `estimators.train
--check_dataset/--check_labels` runs these right after training; `launch.gym_check` runs them
on a saved checkpoint."""
import numpy as np


def pair_accuracy(est, psi_params, observations, last, starts, window: int, num_pairs: int,
                  seed: int = 1, chunk: int = 4096):
  """psi's accuracy (dropout off) on `num_pairs` pairs sampled as training samples them from a
  flat dataset's arrays (`estimators.pairs`: within `window`, in random order): the share whose
  order psi tells right, 0.5 being chance. None for no pairs."""
  import jax
  import jax.numpy as jnp

  from estimators import pairs as pairs_lib
  from estimators import training
  if num_pairs <= 0:
    return None
  observations, last, starts = (jnp.asarray(a) for a in (observations, last, starts))
  p = pairs_lib.sample_pairs(jax.random.PRNGKey(seed), last, starts,
                             jnp.asarray(len(starts), jnp.int32), num_pairs, window)
  prob_fn = jax.jit(lambda params, x, y: training.psi_prob(est, params, x, y))
  correct = 0
  first, second, label = (np.asarray(a) for a in (p.first, p.second, p.label))
  for s in range(0, num_pairs, chunk):
    x = observations[jnp.asarray(first[s:s + chunk])]
    y = observations[jnp.asarray(second[s:s + chunk])]
    prob = np.asarray(prob_fn(psi_params, x, y))
    correct += int(np.sum((prob > 0.5) == (label[s:s + chunk] > 0.5)))
  return correct / num_pairs


def heldout_accuracy(ckpt, dataset_path: str, num_pairs: int,
                     seed: int) -> dict:
  """psi's precedence accuracy (`pair_accuracy`) on `num_pairs` pairs of the episodes at
  `dataset_path`, for an `estimators.checkpoint.EstimatorCheckpoint`."""
  from estimators import dataset
  meta = dataset.read_metadata(dataset_path)
  if tuple(meta['observation_shape']) != tuple(ckpt.obs_shape):
    raise ValueError(f'held-out dataset {dataset_path} has observations '
                     f'{meta["observation_shape"]}; the checkpoint expects {list(ckpt.obs_shape)}')
  flat, _ = dataset.load_flat(dataset_path)
  last = np.asarray(flat.last, np.int32)
  starts = np.flatnonzero(last > np.arange(len(last))).astype(np.int32)   # every transition
  if not len(starts):
    raise ValueError(f'held-out dataset {dataset_path} has no transitions')
  window = int(ckpt.metadata.get('window') or ckpt.metadata['train_config']['window'])
  accuracy = pair_accuracy(ckpt.estimators, ckpt.psi_params, flat.observations, last, starts,
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


def label_scores(ckpt, labels_path: str, beta: float) -> dict:
  """psi against the labels: the AUROC of psi(obs, next_obs) for irreversible transitions and
  the precision and recall of psi > beta; with actions and a phi, the AUROC of 1 - phi(obs, a)."""
  from estimators import metrics
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

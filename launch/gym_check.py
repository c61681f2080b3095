r"""Checks psi (and phi) of a checkpoint trained on a Gymnasium environment's episodes: against
the user's own labels when given, else psi's accuracy on pairs of held-out episodes.

    python -m launch.gym_check --checkpoint ckpt/frozenlake.ckpt --dataset data/frozenlake-heldout
    python -m launch.gym_check --checkpoint ckpt/frozenlake.ckpt --labels labels.npz --beta 0.7

--dataset: episodes psi was not trained on (`launch.gym_collect` writes OUT-heldout); pairs are
drawn as training draws them (within the checkpoint's window, in random order) and psi must
say which came first: the accuracy is the share it gets right (0.5 is chance).
--labels: an .npz with `obs`, `next_obs` [N, ...] and `irreversible` [N] (0/1), and optionally
`actions` [N]: the AUROC of psi(obs, next_obs) for irreversible transitions, precision and
recall of psi > beta, and with actions and a phi, the AUROC of 1 - phi(obs, action).
Prints the report as JSON (also to --out when given); errors are one line, exit 2.
"""
import dataclasses
import json
import sys
from typing import Optional

from absl import flags

from envs import cli as envs_cli
from envs.cli import field


@dataclasses.dataclass(frozen=True)
class GymCheck:
  """One flag per field (envs.cli field flags)."""
  checkpoint: Optional[str] = field(None, 'Estimator checkpoint (estimators.train --out).')
  dataset: Optional[str] = field(None, 'Held-out episode dataset (launch.gym_collect).')
  labels: Optional[str] = field(None, '.npz of obs, next_obs, irreversible (and actions).')
  pairs: int = field(20_000, 'Held-out pairs to score.')
  beta: float = field(0.7, 'psi > beta predicts an irreversible transition (labels).')
  out: Optional[str] = field(None, 'Also write the report (JSON) here.')
  seed: int = field(0, 'Seed of the pairs drawn.')


SECTIONS = (envs_cli.Section('', GymCheck),)


def define_flags(fv: flags.FlagValues) -> None:
  envs_cli.define_field_flags(fv, SECTIONS)


def heldout_accuracy(ckpt, dataset_path: str, num_pairs: int, seed: int) -> dict:
  """psi's precedence accuracy on `num_pairs` pairs of the episodes at `dataset_path`."""
  from estimators import dataset, train
  meta = dataset.read_metadata(dataset_path)
  if tuple(meta['observation_shape']) != tuple(ckpt.obs_shape):
    raise ValueError(f'--dataset {dataset_path} has observations {meta["observation_shape"]}; '
                     f'the checkpoint expects {list(ckpt.obs_shape)}')
  flat, _ = dataset.load_flat(dataset_path)
  window = int(ckpt.metadata.get('window') or ckpt.metadata['train_config']['window'])
  batch = train.flat_batch(flat)
  accuracy = train.eval_psi_accuracy(ckpt.estimators, ckpt.psi_params, batch, window, num_pairs,
                                     seed=seed)
  return {'dataset': dataset_path, 'episodes': int(len(flat.lengths)), 'window': window,
          'pairs': int(num_pairs), 'psi_heldout_accuracy': accuracy}


def label_scores(ckpt, labels_path: str, beta: float) -> dict:
  """psi (and phi) against the user's labels (module docstring)."""
  import numpy as np

  from estimators import metrics
  from estimators.predict import Predictor
  with np.load(labels_path, allow_pickle=False) as f:
    missing = [k for k in ('obs', 'next_obs', 'irreversible') if k not in f.files]
    if missing:
      raise ValueError(f'--labels {labels_path} lacks {", ".join(missing)} (has '
                       f'{", ".join(f.files) or "nothing"})')
    data = {k: f[k] for k in f.files}
  irreversible = np.asarray(data['irreversible']).astype(bool).reshape(-1)
  if len(irreversible) != len(data['obs']):
    raise ValueError(f'--labels {labels_path}: {len(data["obs"])} obs but '
                     f'{len(irreversible)} labels')
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
      raise ValueError(f'--labels {labels_path}: actions must be {len(psi)} values in '
                       f'[0, {ckpt.num_actions})')
    phi = predictor.phi(data['obs'])[np.arange(len(actions)), actions]
    report['one_minus_phi_auroc'] = metrics.auroc(1.0 - phi, irreversible)
  return report


def main(argv=None) -> int:
  args, _ = envs_cli.parse(define_flags, argv, prog='python -m launch.gym_check',
                           description=__doc__.split('\n')[0], required=('checkpoint',))
  if not args.dataset and not args.labels:
    envs_cli.fail('give --dataset (held-out episodes) or --labels (your labelled transitions)')
  if args.pairs < 1:
    envs_cli.fail(f'--pairs must be >= 1, got {args.pairs}')
  from envs import paths, quiet
  from estimators import checkpoint
  quiet.quiet_startup()
  try:
    ckpt = checkpoint.load(args.checkpoint)
    report = {'checkpoint': args.checkpoint}
    if args.labels:
      report.update(label_scores(ckpt, args.labels, args.beta))
    if args.dataset:
      report.update(heldout_accuracy(ckpt, args.dataset, args.pairs, args.seed))
  except (ValueError, OSError, KeyError) as e:
    envs_cli.fail(str(e).splitlines()[0] if str(e) else type(e).__name__)
  text = json.dumps(report, indent=1, sort_keys=True, default=float)
  print(text)
  if args.out:
    paths.write_json(args.out, report, sort_keys=True)
  return 0


if __name__ == '__main__':
  sys.exit(main())

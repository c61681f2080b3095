r"""Checks psi (and phi) of a saved checkpoint trained on a Gymnasium environment's episodes:
against the user's own labels when given, else psi's accuracy on pairs of held-out episodes
(`estimators.train --check_dataset/--check_labels` does the same right after training).

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


def main(argv=None) -> int:
  args, _ = envs_cli.parse(define_flags, argv, prog='python -m launch.gym_check',
                           description=__doc__.split('\n')[0], required=('checkpoint',))
  if not args.dataset and not args.labels:
    envs_cli.fail('give --dataset (held-out episodes) or --labels (your labelled transitions)')
  if args.pairs < 1:
    envs_cli.fail(f'--pairs must be >= 1, got {args.pairs}')
  from envs import paths, quiet
  from estimators import check, checkpoint
  quiet.quiet_startup()
  try:
    ckpt = checkpoint.load(args.checkpoint)
    report = {'checkpoint': args.checkpoint}
    if args.labels:
      report.update(check.label_scores(ckpt, args.labels, args.beta))
    if args.dataset:
      report.update(check.heldout_accuracy(ckpt, args.dataset, args.pairs, args.seed))
  except (ValueError, OSError, KeyError) as e:
    envs_cli.fail(str(e).splitlines()[0] if str(e) else type(e).__name__)
  text = json.dumps(report, indent=1, sort_keys=True, default=float)
  print(text)
  if args.out:
    paths.write_json(args.out, report, sort_keys=True)
  return 0


if __name__ == '__main__':
  sys.exit(main())

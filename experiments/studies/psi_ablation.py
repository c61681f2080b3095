r"""Which psi recipe finds irreversible Sokoban pushes? A small ablation, chosen by held-out AUROC.

Question: Which psi recipe (network, window, pairs) scores irreversible Sokoban pushes best
against the exact oracle?
Reported in RESULTS.md, "Sokoban: IMPALA vs IMPALA + RAE": psi against the exact oracle
(results/sokoban/psi_ablation/ablation.md).

    python -m experiments.studies.psi_ablation --dataset results/sokoban/data/random \
        --out results/sokoban/psi_ablation [--variants paper,same,...] [--list]

Each variant is one `estimators.train` run (flags on top of the Sokoban preset) followed by two
`estimators.evaluate` runs against the exact oracle: random transitions on Boxoban levels psi
never saw (the held-out score that picks the winner) and on the 1k training levels. The
transitions and their oracle labels are the same for every variant (`--labels_cache`), so the
variants differ only by psi. The three are an experiment's steps (`experiments.spec.Step`,
run by `experiments.runner.run_step`, output in OUT/logs/<step>.log): each writes its file
before the next starts and a step whose file exists is skipped, so rerunning the same command
resumes. Results: OUT/ablation.json and OUT/ablation.md (one row per variant, best held-out
AUROC first).
"""
import dataclasses
import json
import os
import sys
import time
from typing import Dict, List, Optional, Tuple

from absl import flags

from envs import cli
from estimators import checkpoint
from experiments import runner
from experiments.sokoban import BOXOBAN_LEVELS
from experiments.spec import Step
from launch.runtime import run_state


@dataclasses.dataclass(frozen=True)
class Variant:
  name: str
  axis: str                    # what it changes against the paper's recipe
  train_flags: Tuple[str, ...]
  dataset: str = ''            # '' = --dataset; else a dataset flag name ('dataset_large', ...)


# The paper's recipe (App. C.3, `--network_preset sokoban_paper`) is `paper`; every variant is
# that recipe with the flags shown (its axis says what they change).
VARIANTS: Dict[str, Variant] = {v.name: v for v in (
    Variant('paper', 'the paper (2 convs of 8, VALID; w 15) on 20k episodes, 5M pairs', ()),
    Variant('same', 'encoder padding SAME (5x5 maps instead of 2x2)', ('--conv_padding', 'SAME')),
    Variant('same_wide', 'SAME, convs of 32', ('--conv_padding', 'SAME', '--conv_channels', '32,32',
                                                '--conv_strides', '2,1')),
    Variant('early', 'early fusion: x and x\' stacked along channels, one encoder',
            ('--psi_fusion', 'early')),
    Variant('early_same', 'early fusion and SAME padding',
            ('--psi_fusion', 'early', '--conv_padding', 'SAME')),
    Variant('early_same_wide', 'early fusion, SAME, convs of 32',
            ('--psi_fusion', 'early', '--conv_padding', 'SAME', '--conv_channels', '32,32',
             '--conv_strides', '2,1')),
    Variant('early_same_20m', 'early fusion, SAME, 20M pairs',
            ('--psi_fusion', 'early', '--conv_padding', 'SAME', '--num_pairs', '20000000')),
    Variant('early_same_100k', 'early fusion, SAME, on 100k episodes, 20M pairs',
            ('--psi_fusion', 'early', '--conv_padding', 'SAME', '--num_pairs', '20000000'),
            dataset='dataset_large'),
    Variant('same_stride1', 'SAME, strides 1,1 (10x10 maps)',
            ('--conv_padding', 'SAME', '--conv_strides', '1,1')),
    Variant('same_w5', 'SAME, window 5', ('--conv_padding', 'SAME', '--window', '5')),
    Variant('same_w60', 'SAME, window 60', ('--conv_padding', 'SAME', '--window', '60')),
    Variant('same_start_uniform', 'SAME, pairs start-uniform',
            ('--conv_padding', 'SAME', '--pair_sampling', 'start_uniform')),
    Variant('same_20m', 'SAME, 20M pairs', ('--conv_padding', 'SAME', '--num_pairs', '20000000')),
    Variant('paper_1m', 'the paper, 1M pairs (training length)', ('--num_pairs', '1000000')),
    Variant('paper_100k', 'the paper on 100k episodes, 20M pairs (the full recipe)',
            ('--num_pairs', '20000000'), dataset='dataset_large'),
    Variant('same_100k', 'SAME on 100k episodes, 20M pairs',
            ('--conv_padding', 'SAME', '--num_pairs', '20000000'), dataset='dataset_large'),
    Variant('same_moves', 'SAME on random episodes with move-only actions too',
            ('--conv_padding', 'SAME',), dataset='dataset_moves'),
)}

def variant_steps(v: Variant, dataset: str, num_pairs: int, transitions: int,
                  train_level_transitions: int, beta: float) -> List[Step]:
  """psi of the variant (OUT/NAME/psi.ckpt), then its evaluations against the oracle on Boxoban
  levels (OUT/NAME/boxoban) and on the training levels (OUT/NAME/train_levels), all on the same
  labelled transitions (OUT/labels)."""
  pairs = () if '--num_pairs' in v.train_flags else ('--num_pairs', str(num_pairs))
  ckpt = f'{{out}}/{v.name}/psi.ckpt'
  steps = [Step(f'{v.name}-train', 'estimators.train',
                ('--dataset', dataset, '--out', ckpt, '--network_preset', 'sokoban_paper', *pairs,
                 *v.train_flags, '--noprogress'),
                done=f'{v.name}/psi.ckpt', est_seconds=num_pairs / 2_000)]
  for name, levels, n in (('boxoban', BOXOBAN_LEVELS, transitions),
                          ('train_levels', 'default', train_level_transitions)):
    steps.append(Step(f'{v.name}-{name}', 'estimators.evaluate',
                      ('--checkpoint', ckpt, '--env', 'sokoban', '--env_option', f'levels={levels}',
                       '--transitions', str(n), '--beta', str(beta), '--labels_cache',
                       '{out}/labels', '--out', f'{{out}}/{v.name}/{name}'),
                      done=f'{v.name}/{name}/report.json', est_seconds=n * 0.05))
  return steps


def _scores(report_path: str) -> Optional[dict]:
  if not os.path.isfile(report_path):
    return None
  with open(report_path) as f:
    r = json.load(f)
  psi = r['psi']
  return dict(auroc=psi['auroc'], precision=psi['precision'], recall=psi['recall'],
              best_f1=psi['best_f1'], irreversible=r['labels']['irreversible'],
              evaluated=r['evaluated'])


def run_variant(v: Variant, out: str, datasets: Dict[str, str], args) -> dict:
  """Trains and evaluates one variant (skipping the steps that are done); returns its row."""
  vdir = os.path.join(out, v.name)
  os.makedirs(vdir, exist_ok=True)
  dataset = datasets[v.dataset or 'dataset']
  if not dataset:
    raise RuntimeError(f'variant {v.name} needs --{v.dataset}')
  timing_path = os.path.join(vdir, 'train_seconds.json')
  for step in variant_steps(v, dataset, args.num_pairs, args.transitions,
                            args.train_level_transitions, args.beta):
    if runner.step_done(step, out):
      continue
    start = time.time()
    code = runner.run_step(step, out)
    if code != 0:
      raise RuntimeError(f'{step.name} failed (exit {code}); see '
                         f'{os.path.join(out, "logs", step.name + ".log")}')
    if step.module == 'estimators.train':
      run_state.write_json(timing_path, {'seconds': time.time() - start})
  metadata = checkpoint.load(os.path.join(vdir, 'psi.ckpt')).metadata
  seconds = (run_state.read_json(timing_path, {}) or {}).get('seconds')
  return dict(variant=v.name, axis=v.axis, train_flags=list(v.train_flags),
              dataset=dataset, train_seconds=seconds,
              pair_accuracy=metadata.get('psi_accuracy'),
              heldout=_scores(os.path.join(vdir, 'boxoban', 'report.json')),
              train_levels=_scores(os.path.join(vdir, 'train_levels', 'report.json')))


def box_moved_reference(levels: str, num: int, out: str) -> dict:
  """A score that is no psi at all: 1 when the transition moved a box, else 0. Its AUROC is what
  a psi reaches that knows pushes from walks and nothing more, which tells where a psi stands."""
  import numpy as np

  import envs
  from envs import oracle, sokoban
  from estimators import evaluate, metrics

  env = envs.make('sokoban', levels=levels)
  data = evaluate.collect_transitions(env, num, seed=0, with_states=True)
  status, _ = evaluate.oracle_labels('sokoban', {'levels': levels}, data, 0, 100_000,
                                     os.path.join(out, 'labels'))
  known = status != oracle.UNKNOWN
  moved = np.any(sokoban.box_cells(data['obs']) != sokoban.box_cells(data['next_obs']),
                 axis=(1, 2))
  labels = status[known] == oracle.IRREVERSIBLE
  score = moved[known].astype(np.float64)
  pr = metrics.precision_recall(score > 0.5, labels)
  return dict(auroc=metrics.auroc(score, labels), precision=pr['precision'], recall=pr['recall'],
              push_fraction=float(score.mean()), irreversible=int(labels.sum()),
              evaluated=int(known.sum()))


def _fmt(value: Optional[float]) -> str:
  return '–' if value is None else f'{value:.3f}'


def markdown(rows: List[dict], beta: float, reference: Optional[dict] = None) -> str:
  # Training seconds stay in the JSON only: the variants ran beside other jobs on 2 cores.
  lines = ['| variant | change | held-out AUROC (Boxoban) | precision / recall at beta | '
           'best F1 (threshold) | training-level AUROC | pair accuracy |',
           '|---|---|---|---|---|---|---|']
  for r in rows:
    h, t = r['heldout'] or {}, r['train_levels'] or {}
    best = h.get('best_f1') or {}
    lines.append(
        f"| {r['variant']} | {r['axis']} | {h.get('auroc', float('nan')):.3f} | "
        f"{h.get('precision', float('nan')):.2f} / {h.get('recall', float('nan')):.2f} | "
        f"{best.get('f1', float('nan')):.2f} ({best.get('threshold', float('nan')):.2f}) | "
        f"{t.get('auroc', float('nan')):.3f} | "
        f"{_fmt(r['pair_accuracy'])} |")
  n = rows[0]['heldout'] if rows and rows[0]['heldout'] else {}
  lines.append('')
  lines.append(f"Held-out: {n.get('evaluated', '?')} random transitions on Boxoban levels "
               f"({n.get('irreversible', '?')} irreversible by the oracle); beta = {beta:g}.")
  if reference:
    h, t = reference['heldout'], reference['train_levels']
    lines.append(f"Reference, no psi: scoring 1 when a box moved, else 0, gives AUROC "
                 f"{h['auroc']:.3f} held-out / {t['auroc']:.3f} on training levels (precision "
                 f"{h['precision']:.2f}, recall {h['recall']:.2f} held-out; "
                 f"{h['push_fraction']:.1%} of the random transitions move a box).")
  return '\n'.join(lines) + '\n'


def define_flags(fv: flags.FlagValues) -> None:
  flags.DEFINE_string('dataset', None, 'Random Sokoban episodes (launch.collect), 20k in the '
                      'preset.', flag_values=fv)
  flags.DEFINE_string('dataset_large', None, 'The 100k-episode dataset (variants *_100k).',
                      flag_values=fv)
  flags.DEFINE_string('dataset_moves', None, 'Episodes of a random policy that also uses the '
                      'move-only actions (variants *_moves).', flag_values=fv)
  flags.DEFINE_string('out', 'results/sokoban/psi_ablation', 'Output directory.', flag_values=fv)
  flags.DEFINE_list('variants', ['paper', 'same', 'early', 'early_same', 'same_w5',
                                 'same_start_uniform', 'paper_1m'], 'Variants to run, in order.',
                    flag_values=fv)
  flags.DEFINE_integer('num_pairs', 5_000_000, 'psi training pairs unless a variant says.',
                       flag_values=fv)
  flags.DEFINE_integer('transitions', 4000, 'Held-out (Boxoban) transitions labelled by the '
                       'oracle.', flag_values=fv)
  flags.DEFINE_integer('train_level_transitions', 2000, 'Training-level transitions labelled.',
                       flag_values=fv)
  flags.DEFINE_float('beta', 0.9, 'Threshold for precision/recall (the paper: 0.9).',
                     flag_values=fv)
  flags.DEFINE_bool('list', False, 'List the variants and exit.', flag_values=fv)


def parse_args(argv=None):
  args, _ = cli.parse(define_flags, argv, prog='python -m experiments.studies.psi_ablation',
                       description=__doc__.split('\n\n')[0])
  return args


def main(argv=None):
  args = parse_args(argv)
  if args.list:
    for v in VARIANTS.values():
      print(f'{v.name:20s} {v.axis}')
    return 0
  unknown = [n for n in args.variants if n not in VARIANTS]
  if unknown:
    print(f'error: unknown variant(s) {", ".join(unknown)}; --list shows them', file=sys.stderr)
    return 2
  if not args.dataset:
    print('error: --dataset is required', file=sys.stderr)
    return 2
  datasets = dict(dataset=args.dataset, dataset_large=args.dataset_large,
                  dataset_moves=args.dataset_moves)
  out = os.path.abspath(args.out)
  os.makedirs(out, exist_ok=True)
  rows = []
  for name in args.variants:
    print(f'[{len(rows) + 1}/{len(args.variants)}] {name}', flush=True)
    rows.append(run_variant(VARIANTS[name], out, datasets, args))
    h = rows[-1]['heldout'] or {}
    print(f"  held-out AUROC {h.get('auroc', float('nan')):.3f}", flush=True)
  rows.sort(key=lambda r: -(r['heldout'] or {}).get('auroc', 0.0))
  reference = dict(heldout=box_moved_reference(BOXOBAN_LEVELS, args.transitions, out),
                   train_levels=box_moved_reference('default', args.train_level_transitions, out))
  result = dict(beta=args.beta, rows=rows, best=rows[0]['variant'] if rows else None,
                box_moved_reference=reference)
  run_state.write_json(os.path.join(out, 'ablation.json'), result)
  with open(os.path.join(out, 'ablation.md'), 'w') as f:
    f.write(markdown(rows, args.beta, reference))
  print(markdown(rows, args.beta, reference))
  return 0


if __name__ == '__main__':
  sys.exit(main())

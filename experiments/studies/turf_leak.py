r"""The Turf goal-corner leak: why psi scores the move (1, 8) right onto the fresh grass (1, 9),
beside the goal, reversible where the exact oracle says irreversible. One probe per command.

Question: Is psi's leak at the Turf goal's corner the data (episodes end at the goal) or the
network (the encoder's VALID convolutions at the image border)?
Reported in RESULTS.md, "Turf", "RAC that keeps the grass and learns the goal" (SAME padding,
the start=stone mix), with every figure and command in results/turf/leak/README.md.

    python -m experiments.studies.turf_leak --probe data_stats \
        --dataset results/turf/learner_mask/data/random \
        --out results/turf/leak/data_stats_random.json
    python -m experiments.studies.turf_leak --probe in_data \
        --dataset results/turf/learner_mask/data/random --checkpoint CKPT \
        --out results/turf/leak/in_data_random.json     # --probe in_data_stone: in_data_stone.json
    python -m experiments.studies.turf_leak --probe lateness --checkpoint CKPT --out lateness.json
    python -m experiments.studies.turf_leak --probe corner_plus \
        --checkpoint results/turf/leak/same_s0.ckpt --out results/turf/leak/corner_same.json
    python -m experiments.studies.turf_leak --probe summarize \
        --checkpoint base_s0=results/turf/learner_mask/estimators.ckpt \
        --checkpoint goalpass_s0=results/turf/leak/goalpass_s0.ckpt \
        --out results/turf/leak/table.json

The probes: `data_stats`, how often a dataset shows each cell near the goal entered fresh and
how many observations of its episode follow (the evidence psi has that the cell came after);
`in_data`, psi(x, x') at the fresh-grass entries the dataset itself holds (its maps as the walk
ruined them); `in_data_stone`, psi at the reversible stone moves beside the goal there;
`lateness`, psi's per-image score on the clean map (the Turf preset has no head layer, so
logit psi(x, y) = A(x) + B(y) + c); `corner_plus`, psi and phi at named clean-map moves
(experiments.studies.turf_corner's scoring, more moves); `summarize`, one table of corner_*.json,
in_data_*.json and eval/NAME/report.json (estimators.evaluate) in --results_dir. --checkpoint
takes PATH or NAME=PATH (the NAME of summarize's rows and of eval/NAME). Prints the markdown;
with --out writes the JSON and the markdown beside it (.md).
"""
import dataclasses
import os
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
from absl import flags

from envs import cli
from envs.cli import field
from experiments import pages
from experiments.studies import turf_corner as tc

PROBES = ('data_stats', 'in_data', 'in_data_stone', 'lateness', 'corner_plus', 'summarize')
DATA_PROBES = ('data_stats', 'in_data', 'in_data_stone')
SIZE = 10                       # Turf's grid
WINDOW = 120                    # the Turf recipe's pair window: a pair spans at most this much
FROM = (1, 8)                   # the road's end beside the goal
STATS_CELLS = ((1, 9), (2, 8), (2, 9), (0, 7), (9, 1), (8, 2), (5, 0), (3, 8))
GRASS_MOVES = (((1, 8), (1, 9)), ((1, 8), (2, 8)), ((2, 7), (2, 8)), ((0, 8), (0, 7)),
               ((3, 9), (2, 9)), ((2, 7), (3, 7)), ((8, 1), (8, 2)), ((9, 0), (9, 1)))
STONE_MOVES = (((1, 8), (0, 8)), ((0, 8), (1, 8)), ((1, 9), (1, 8)))
CORNER_PLUS = tc.TRANSITIONS + (   # turf_corner's moves and more
    ((0, 8), tc.LEFT, 'onto (0, 7) beside the road end'),
    ((3, 9), tc.UP, 'onto (2, 9) below (1, 9)'), ((2, 7), tc.RIGHT, 'onto (2, 8)'),
    ((8, 1), tc.RIGHT, 'onto (8, 2) near the start'),
    ((0, 8), tc.DOWN, 'stone to stone'), ((2, 6), tc.UP, 'stone to stone'))
# summarize's columns: clean-map moves of corner_*.json, the data's moves of in_data_*.json.
TABLE_CORNER = (((1, 8), 'right'), ((1, 8), 'down'), ((2, 7), 'down'), ((0, 8), 'left'),
                ((2, 7), 'right'), ((9, 0), 'right'), ((1, 8), 'up'))
TABLE_IN_DATA = ('(1, 8)->(1, 9)', '(1, 8)->(2, 8)', '(2, 7)->(2, 8)', '(0, 8)->(0, 7)')


@dataclasses.dataclass(frozen=True)
class LeakProbe:
  """One flag per field (envs.cli field flags)."""
  probe: Optional[str] = field(None, 'What to measure (module docstring).', choices=PROBES)
  checkpoint: Tuple[str, ...] = field((), 'Estimator checkpoint, PATH or NAME=PATH (repeatable).',
                                      repeat=True)
  dataset: Optional[str] = field(None, 'Turf episode dataset (launch.collect) of data_stats, '
                                 'in_data and in_data_stone.')
  results_dir: str = field('results/turf/leak', 'Where summarize reads corner_*.json, '
                           'in_data_*.json and eval/NAME/report.json.')
  out: Optional[str] = field(None, 'JSON file to write, the markdown beside it (.md).')


def define_flags(fv: flags.FlagValues) -> None:
  cli.define_field_flags(fv, (cli.Section('', LeakProbe),))


def _named(item: str) -> Tuple[str, str]:
  """(NAME, PATH) of a --checkpoint value; NAME defaults to the file's name without extension."""
  name, sep, path = item.partition('=')
  return (name, path) if sep else (os.path.splitext(os.path.basename(item))[0], item)


def check_args(o: LeakProbe) -> None:
  if o.probe is None:
    cli.fail(f'--probe is required, one of {", ".join(PROBES)}')
  if (o.probe in DATA_PROBES) != bool(o.dataset):
    cli.fail(f'--probe {o.probe} ' + ('needs --dataset (Turf episodes of launch.collect)'
                                      if o.probe in DATA_PROBES else 'reads no --dataset'))
  if (o.probe == 'data_stats') == bool(o.checkpoint):
    cli.fail(f'--probe {o.probe} ' + ('reads no --checkpoint' if o.checkpoint else
                                      'needs --checkpoint (repeatable)'))
  for name, path in map(_named, o.checkpoint):
    if not name or not path:
      cli.fail(f'--checkpoint {name}={path}: expected PATH or NAME=PATH')
    if o.probe != 'summarize' and not os.path.isfile(path):
      cli.fail(f'--checkpoint {path}: no such file')
  if o.probe == 'summarize' and not os.path.isdir(o.results_dir):
    cli.fail(f'--results_dir {o.results_dir}: no such directory')
  if o.out and not o.out.endswith('.json'):
    cli.fail(f'--out {o.out}: must name a .json file (the markdown goes beside it)')


def _index(cell) -> int:   # a cell's place in an observation's [100] flattened grid
  return cell[0] * SIZE + cell[1]


def _view(path: str) -> dict:
  """The dataset's observations, read by colour: per observation the agent's cell and which
  cells show ruined and fresh grass ([N, 100] each); `same`: step k -> k+1 in one episode."""
  from envs import turf
  from estimators.rlds import flat
  data, _ = flat.load_flat(path)
  obs = data.observations
  if obs.shape[1:] != (SIZE, SIZE, 3):
    raise ValueError(f'{path} holds observations of shape {obs.shape[1:]}, not Turf images')
  def colour(rgb):
    return np.all(obs == np.array(rgb, np.uint8), axis=-1).reshape(len(obs), -1)
  agent = colour(turf.AGENT)
  return dict(obs=obs, last=data.last, episodes=len(data.lengths), agent=agent,
              pos=np.argmax(agent, axis=1), brown=colour(turf.RUINED), green=colour(turf.GRASS),
              same=data.last[:-1] == data.last[1:])


def _avg(values) -> Optional[float]:
  return float(np.mean(values)) if len(values) else None


def probe_data_stats(path: str) -> Tuple[dict, str]:
  v = _view(path)
  pos, brown, last = v['pos'], v['brown'], v['last']
  rows = []
  for cell in STATS_CELLS:
    k = _index(cell)
    at = pos == k
    # A fresh entry: the agent on k at t+1, not at t, k not ruined at t, one episode.
    idx = np.flatnonzero(at[1:] & ~at[:-1] & ~brown[:-1, k] & v['same']) + 1
    after = last[idx] - idx
    # The ruin shown: k ruined in an observation and not in the one before, one episode.
    shown = np.flatnonzero(brown[1:, k] & ~brown[:-1, k] & v['same']) + 1
    rows.append(dict(cell=list(cell), fresh_entries=len(idx),
                     entries_from_road_end=int(np.sum(pos[idx - 1] == _index(FROM))),
                     mean_obs_after_entry=_avg(after), share_near_end=_avg(after <= 2),
                     ruin_shown=len(shown), ruin_shown_not_at_end=int(np.sum(last[shown] > shown)),
                     mean_obs_after_ruin=_avg(last[shown] - shown),
                     pairs_from_entries=int(np.minimum(after, WINDOW).sum())))
  lines = [f'{path}: {len(v["obs"])} observations, {v["episodes"]} episodes',
           f'| cell | fresh entries | entries from ({FROM[0]},{FROM[1]}) | mean obs after entry '
           '| share of entries <=2 obs before end | cell seen turning brown, not at the end '
           '(also when the agent leaves it already ruined) | mean obs after that | pairs '
           f'starting at an entry (w = {WINDOW}) |', '|---' * 8 + '|']
  for r in rows:
    lines.append(f"| {tuple(r['cell'])} | {r['fresh_entries']} | {r['entries_from_road_end']} | "
                 f"{pages.fmt(r['mean_obs_after_entry'], 1)} | "
                 f"{pages.fmt(r['share_near_end'], 2)} | "
                 f"{r['ruin_shown_not_at_end']} of {r['ruin_shown']} | "
                 f"{pages.fmt(r['mean_obs_after_ruin'], 1)} | {r['pairs_from_entries']} |")
  return (dict(dataset=path, observations=len(v['obs']), episodes=v['episodes'], window=WINDOW,
               cells=rows), '\n'.join(lines) + '\n')


def probe_moves(path: str, checkpoints: Sequence[str], fresh: bool) -> Tuple[dict, str]:
  """psi(x, x') at the dataset's own moves: the fresh-grass entries (GRASS_MOVES, `fresh`) or
  the stone moves beside the goal (STONE_MOVES)."""
  from envs import turf
  from estimators import checkpoint, predict
  v = _view(path)
  pos, green, obs = v['pos'], v['green'], v['obs']
  results: Dict[str, Dict[str, dict]] = {}
  lines = []
  for ckpt in checkpoints:
    pred = predict.Predictor(checkpoint.load(ckpt), batch=256)
    results[ckpt] = {}
    lines += [ckpt] if fresh else []
    for a, b in GRASS_MOVES if fresh else STONE_MOVES:
      sel = v['same'] & (pos[:-1] == _index(a)) & (pos[1:] == _index(b))
      idx = np.flatnonzero(sel & green[:-1, _index(b)] if fresh else sel)
      if not len(idx):
        lines.append(f'  {a}->{b}: none' if fresh else f'{ckpt} {a}->{b}: none')
        continue
      p = pred.psi(obs[idx], obs[idx + 1])
      ruined = (~green[idx] & turf.GRASS_MASK.reshape(-1)[None] & ~v['agent'][idx]).sum(1)
      r = results[ckpt][f'{a}->{b}'] = dict(
          n=int(len(idx)), mean=float(p.mean()), median=float(np.median(p)),
          above_08=float(np.mean(p > 0.8)), ruined_cells_in_x=float(ruined.mean()))
      lines.append(f"  {a}->{b}: n {r['n']}, psi mean {r['mean']:.3f} median {r['median']:.3f} "
                   f"frac>0.8 {r['above_08']:.2f}; ruined cells in x: mean "
                   f"{r['ruined_cells_in_x']:.1f}" if fresh else
                   f"{ckpt} {a}->{b}: n {r['n']}, psi mean {r['mean']:.3f}, share > 0.8 "
                   f"{r['above_08']:.2f}")
  return results, '\n'.join(lines) + '\n'


def probe_lateness(checkpoints: Sequence[str]) -> Tuple[dict, str]:
  """B(y) - B(start) and -A(x) + A(start) on the clean map, the agent on each cell, read from
  logit psi(x_start, y) and logit psi(x, x_start): how late psi finds each position."""
  import envs
  from envs import turf
  from estimators import checkpoint, predict
  env = envs.make('turf')
  images = []
  for k in range(SIZE * SIZE):
    env.set_state((k // SIZE, k % SIZE, 0))
    images.append(np.asarray(env.observation()))
  images = np.stack(images)
  s = _index(turf.START)
  ref = np.repeat(images[s:s + 1], len(images), axis=0)
  logit = lambda p: np.log(p) - np.log1p(-p)  # noqa: E731
  results, lines = {}, []
  for ckpt in checkpoints:
    pred = predict.Predictor(checkpoint.load(ckpt), batch=128)
    b = logit(np.clip(pred.psi(ref, images), 1e-6, 1 - 1e-6))
    a = -logit(np.clip(pred.psi(images, ref), 1e-6, 1 - 1e-6))
    results[ckpt] = {'B': (b - b[s]).reshape(SIZE, SIZE).tolist(),
                     '-A': (a - a[s]).reshape(SIZE, SIZE).tolist()}
    lines.append(f'{ckpt} : B(y) - B(start), rows 0-9 (cols 0-9), then -A(x) + A(start)')
    for name, grid in results[ckpt].items():
      lines += [f'  {name} row {r}: ' + ' '.join(f'{x:6.2f}' for x in grid[r]) for r in range(SIZE)]
  return results, '\n'.join(lines) + '\n'


def summarize(results_dir: str, named: Sequence[Tuple[str, str]]) -> Tuple[dict, str]:
  corner, in_data = {}, {}
  for name in sorted(os.listdir(results_dir)):
    if name.endswith('.json') and name.startswith(('corner_', 'in_data_')):
      (corner if name.startswith('corner_') else in_data).update(
          pages.read_json(os.path.join(results_dir, name)) or {})
  rows, lines = [], [
      "| variant | psi(x, x'), clean map: " + ' / '.join(f'{c} {a}' for c, a in TABLE_CORNER)
      + ' | in the data, mean psi (n): ' + ' / '.join(TABLE_IN_DATA) + ' | psi AUROC | AUROC '
      'enter fresh grass | AUROC leave fresh grass | stone: mean psi, share > 0.8 | goal: mean '
      'psi |', '|' + '---|' * 8]
  for name, ckpt in named:
    moves = {(tuple(r['cell']), r['action']): r['psi_forward'] for r in corner.get(ckpt, [])}
    data = in_data.get(ckpt, {})
    report = pages.read_json(os.path.join(results_dir, 'eval', name, 'report.json'))
    kinds = (report or {}).get('by_kind', {})
    psi = lambda kind, key: (kinds.get(kind) or {}).get('psi', {}).get(key)  # noqa: E731
    ev = None if not report else dict(   # a kind the evaluation did not meet: None
        auroc=report['psi'].get('auroc'), enter=psi('enter_fresh_grass', 'auroc_vs_reversible'),
        leave=psi('leave_fresh_grass', 'auroc_vs_reversible'), stone=psi('stone', 'mean'),
        stone_above=psi('stone', 'above_beta'), goal=psi('goal', 'mean'))
    rows.append(dict(name=name, checkpoint=ckpt, eval=ev,
                     corner={f'{c} {a}': moves.get((c, a)) for c, a in TABLE_CORNER},
                     in_data={m: data.get(m) for m in TABLE_IN_DATA}))
    cells = ' / '.join(pages.fmt(x, 3) for x in rows[-1]['corner'].values())
    ind = ' / '.join('–' if d is None else f"{d['mean']:.3f} ({d['n']})"
                     for d in rows[-1]['in_data'].values())
    evs = ('– | – | – | – | –' if ev is None else
           ' | '.join(pages.fmt(ev[key], 3) for key in ('auroc', 'enter', 'leave'))
           + f" | {pages.fmt(ev['stone'], 3)}, {pages.fmt(ev['stone_above'], 3)} | "
           f"{pages.fmt(ev['goal'], 3)}")
    lines.append(f'| {name} (`{ckpt}`) | {cells} | {ind} | {evs} |')
  return dict(results_dir=results_dir, rows=rows), '\n'.join(lines) + '\n'


def run(o: LeakProbe) -> Tuple[dict, str]:
  named: List[Tuple[str, str]] = [_named(c) for c in o.checkpoint]
  paths = [path for _, path in named]   # JSON keys, as summarize looks them up
  if o.probe == 'data_stats':
    return probe_data_stats(o.dataset)
  if o.probe in ('in_data', 'in_data_stone'):
    return probe_moves(o.dataset, paths, fresh=o.probe == 'in_data')
  if o.probe == 'lateness':
    return probe_lateness(paths)
  if o.probe == 'corner_plus':
    results = {path: tc.score(path, CORNER_PLUS) for path in paths}
    return results, tc.markdown(results)
  return summarize(o.results_dir, named)


def main(argv=None) -> int:
  args, _ = cli.parse(define_flags, argv, prog='python -m experiments.studies.turf_leak',
                      description=__doc__.split('\n\n')[0])
  names = {f.name for f in dataclasses.fields(LeakProbe)}
  o = LeakProbe(**{k: tuple(v) if isinstance(v, list) else v for k, v in vars(args).items()
                   if k in names})
  check_args(o)
  from envs import quiet
  quiet.quiet_startup()
  try:
    result, text = run(o)
  except ValueError as e:   # a dataset or checkpoint that is missing, damaged or not Turf's
    cli.fail(cli.one_line(e))
  pages.show_report(o.out, result, text)
  return 0


if __name__ == '__main__':
  raise SystemExit(main())

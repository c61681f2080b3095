"""Cartpole+ (Sec. 5.4, Fig. 6, App. C.4): random policy + RAC with estimators trained offline,
against DQN and M-DQN. Step builders and page sections; registered in
`experiments.registry.EXPERIMENTS` (reward-free Cartpole: cartpole_reward_free.py).

`--seeds` is the number of seeds of each group; at the small and paper scales the random + RAC
group gets at least the paper's 10 seeds (Fig. 6a).
"""
import os
from typing import Dict, List, Optional, Sequence

from experiments import pages
from experiments.spec import Step, estimators_step, scale_settings, train_step

CARTPOLE_PLUS_CAP = 50_000       # Sec. 5.4: the episode limit of Cartpole+
CARTPOLE_PLUS_PAPER_DQN = {'DQN': 1152.0, 'M-DQN': 2801.0}  # Sec. 5.4: max evaluation scores
CARTPOLE_PLUS_SCALES = {
    'tiny': dict(episodes=50, pairs=20_000, phi_transitions=2_000, eval_transitions=500,
                 min_rac_seeds=1, rac_steps=3_000, random_steps=2_000, envs_per_actor=1,
                 rac_seconds=40, dqn_steps=3_000, dqn_seconds=40, eval_every=1_000),
    # small: random + RAC 400k steps a seed over 4 environments (up to 2 capped episodes each);
    # DQN / M-DQN 200k steps (a tenth of the paper's) with a greedy evaluation every 5,000: a
    # policy that holds the pole plays 50k steps per evaluation, so one every 1,000 steps would
    # cost more than the training.
    'small': dict(episodes=20_000, pairs=3_000_000, phi_transitions=100_000,
                  eval_transitions=20_000, min_rac_seeds=10, rac_steps=400_000,
                  random_steps=20_000, envs_per_actor=4, rac_seconds=130, dqn_steps=200_000,
                  dqn_seconds=900, eval_every=5_000),
    # paper: 100k random trajectories, 3M pairs, phi on 100k transitions (App. C.4); DQN and
    # M-DQN 2M steps (App. C.4); random + RAC 2M steps a seed (the paper gives no count).
    'paper': dict(episodes=100_000, pairs=3_000_000, phi_transitions=100_000,
                  eval_transitions=20_000, min_rac_seeds=10, rac_steps=2_000_000,
                  random_steps=100_000, envs_per_actor=4, rac_seconds=600,
                  dqn_steps=2_000_000, dqn_seconds=3600, eval_every=10_000),
}
CARTPOLE_PLUS_ENV = ('--env', 'cartpole', '--reward_free=false', '--episode_steps',
                     str(CARTPOLE_PLUS_CAP))


def cartpole_plus_steps(scale: str, seeds: int) -> List[Step]:
  s = scale_settings(CARTPOLE_PLUS_SCALES, scale, 'cartpole_plus')
  cap = f'max_steps={CARTPOLE_PLUS_CAP}'
  steps = [
      Step('collect_random', 'launch.collect',
           ('--env', 'cartpole', '--env_option', cap, '--episodes', str(s['episodes']),
            '--out', '{out}/data/random', '--resume', '--noprogress'),
           done='data/random/noturningback.json', est_seconds=s['episodes'] * 0.01),
      estimators_step('cartpole', s['pairs'], s['phi_transitions'], 30 + s['pairs'] / 100_000),
      # Fig. 6b/6c: phi(x, a) of random-policy states at the pole tip's coordinates.
      Step('eval_estimators', 'estimators.evaluate',
           ('--checkpoint', '{out}/estimators.ckpt', '--env', 'cartpole', '--env_option', cap,
            '--transitions', str(s['eval_transitions']), '--out', '{out}/estimator_eval'),
           done='estimator_eval/report.json', est_seconds=30),
  ]
  common = (*CARTPOLE_PLUS_ENV, '--agent', 'random', '--num_actors', '1', '--envs_per_actor',
            str(s['envs_per_actor']))
  for seed in range(max(seeds, s['min_rac_seeds'])):
    steps.append(train_step(f'random-s{seed}', 'random', seed, s['random_steps'], 30,
                            *common, '--mode', 'none'))
    steps.append(train_step(f'rac-s{seed}', 'random+RAC', seed, s['rac_steps'], s['rac_seconds'],
                            *common, '--mode', 'rac', '--estimator_checkpoint',
                            '{out}/estimators.ckpt'))
  for seed in range(seeds):
    for algorithm, group in (('dqn', 'DQN'), ('mdqn', 'M-DQN')):
      steps.append(train_step(f'{algorithm}-s{seed}', group, seed, s['dqn_steps'],
                              s['dqn_seconds'], '--algorithm', algorithm, '--episode_steps',
                              str(CARTPOLE_PLUS_CAP), '--eval_every', str(s['eval_every']),
                              module='launch.train_dqn'))
  return steps


def length_stats(lengths: Sequence[float], unfinished_steps: float, cap: int) -> Dict[str, float]:
  """One run's finished episodes: count, median, mean, max, how many reached the cap, and the
  env steps spent in episodes the budget cut short (not in the counts: their length is unknown,
  and an episode heading for the cap is the likeliest to be cut)."""
  import numpy as np
  x = np.asarray(lengths, float)
  if not len(x):
    return {'episodes': 0, 'median': float('nan'), 'mean': float('nan'), 'max': float('nan'),
            'capped': 0, 'unfinished_steps': float(unfinished_steps)}
  return {'episodes': int(len(x)), 'median': float(np.median(x)), 'mean': float(x.mean()),
          'max': float(x.max()), 'capped': int(np.sum(x >= cap)),
          'unfinished_steps': float(unfinished_steps)}


def length_table_markdown(stats: Dict[str, List[Dict[str, float]]], cap: int) -> str:
  """Episode lengths per group, pooled over its runs (Fig. 6a's quantity)."""
  import numpy as np
  lines = [f'## Episode lengths (cap {cap:,}; Fig. 6a)', '',
           'Finished episodes of all runs of a group, pooled; "unfinished" is the env steps of the '
           'episodes still running when the budget ended (not counted above).', '',
           '| group | runs | finished episodes | median (of the runs\' medians) | mean | max | '
           'reaching the cap | '
           'unfinished steps |', '|---|---|---|---|---|---|---|---|']
  for group, runs in stats.items():
    n = sum(r['episodes'] for r in runs)
    capped = sum(r['capped'] for r in runs)
    weights = np.array([r['episodes'] for r in runs], float)
    means = np.array([r['mean'] for r in runs], float)
    mean = float(np.sum(weights[weights > 0] * means[weights > 0]) / n) if n else None
    medians = [r['median'] for r in runs if r['episodes']]
    # The pooled median is not recoverable from per-run stats: show the median of run medians.
    median = float(np.median(medians)) if medians else None
    longest = max((r['max'] for r in runs if r['episodes']), default=None)
    share = f'{capped} ({100.0 * capped / n:.0f}%)' if n else '–'
    lines.append(f'| {group} | {len(runs)} | {n} | {pages.fmt(median, 0)} | {pages.fmt(mean, 1)} | '
                 f'{pages.fmt(longest, 0)} | {share} | '
                 f'{pages.fmt(sum(r["unfinished_steps"] for r in runs), 0)} |')
  return '\n'.join(lines) + '\n'


def dqn_eval_record(run_dir: str, every: int) -> Dict[str, Optional[float]]:
  """The run's greedy evaluation episodes (logs/evaluator/logs.csv) taken at multiples of `every`
  env steps: a run evaluated more often than its scale asks today is read on the same grid as
  the others. Empty (None) when the run logged no evaluation."""
  import csv
  path = os.path.join(run_dir, 'logs', 'evaluator', 'logs.csv')
  returns = []
  if os.path.exists(path):
    with open(path) as f:
      returns = [float(r['eval_return']) for r in csv.DictReader(f)
                 if r.get('eval_return') and int(float(r['actor_steps'])) % every == 0]
  if not returns:
    return {'max_return': None, 'mean_return': None, 'episodes': 0, 'capped': 0}
  return {'max_return': max(returns), 'mean_return': sum(returns) / len(returns),
          'episodes': len(returns), 'capped': sum(r >= CARTPOLE_PLUS_CAP for r in returns)}


def dqn_table_markdown(evals: Dict[str, List[dict]], every: int = 1_000) -> str:
  """DQN / M-DQN greedy evaluation episodes: max and mean per run, against the paper's max."""
  lines = [f'## DQN and M-DQN (App. C.4): a greedy evaluation episode every {every:,} steps', '',
           '| group | runs | max return, per seed | max, mean over seeds | mean return, mean over '
           'seeds | evaluation episodes | at the cap | paper (max) |', '|---|---|---|---|---|---|---|---|']
  for group in ('DQN', 'M-DQN'):
    runs = evals.get(group, [])
    if not runs:
      continue
    maxes = [r.get('max_return') for r in runs]
    means = [r.get('mean_return') for r in runs]
    lines.append(f'| {group} | {len(runs)} | {", ".join(pages.fmt(m, 0) for m in maxes)} | '
                 f'{pages.mean_ci_text([m for m in maxes if m is not None], 0)} | '
                 f'{pages.mean_ci_text([m for m in means if m is not None], 1)} | '
                 f'{sum(r.get("episodes") or 0 for r in runs)} | '
                 f'{sum(r.get("capped") or 0 for r in runs)} | '
                 f'{CARTPOLE_PLUS_PAPER_DQN[group]:,.0f} |')
  return '\n'.join(lines) + '\n'


def _draw_length_histogram(lengths: Dict[str, List[float]], cap: int, path: str) -> None:
  """Episode lengths per group on a log axis, the cap marked."""
  import matplotlib
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt
  import numpy as np
  fig, ax = plt.subplots(figsize=(7, 4))
  bins = np.logspace(0, np.log10(cap * 1.5), 40)
  for group, values in lengths.items():
    if values:
      ax.hist(np.clip(values, 1, None), bins=bins, histtype='step', linewidth=1.5,
              label=f'{group} ({len(values)})')
  ax.axvline(cap, color='0.4', linestyle='--', linewidth=1, label=f'cap {cap:,}')
  ax.set_xscale('log')
  ax.set_xlabel('episode length')
  ax.set_ylabel('episodes')
  ax.legend(fontsize=8)
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)


def cartpole_plus_markdown(table: dict, out: str) -> str:
  """Episode lengths with the cap count, DQN / M-DQN scores, and Fig. 6b/6c; also draws
  `episode_lengths.png` in OUT."""
  from launch.runtime import run_state
  groups = pages.runs_by_group(cartpole_plus_steps(table['scale'], table['seeds']), out)
  every = CARTPOLE_PLUS_SCALES[table['scale']]['eval_every']
  stats, lengths, evals = {}, {}, {}
  for group, run_dirs in groups.items():
    for run_dir in run_dirs:
      values = pages.episode_values(run_dir, 'episode_length')
      total = run_state.RunRecords(run_dir).saved_actor_steps()
      stats.setdefault(group, []).append(
          length_stats(values, max(0.0, total - sum(values)), CARTPOLE_PLUS_CAP))
      lengths.setdefault(group, []).extend(values)
      if group in CARTPOLE_PLUS_PAPER_DQN:
        evals.setdefault(group, []).append(dqn_eval_record(run_dir, every))
  parts = [length_table_markdown(stats, CARTPOLE_PLUS_CAP)]
  if any(lengths.values()):
    _draw_length_histogram(lengths, CARTPOLE_PLUS_CAP, os.path.join(out, 'episode_lengths.png'))
    parts.append('![episode lengths](episode_lengths.png)\n')
  if evals:
    parts.append(dqn_table_markdown(evals, every))
  report = pages.read_json(os.path.join(out, 'estimator_eval', 'report.json'))
  if report is not None:
    phi = report.get('phi') or {}
    parts.append('## Fig. 6b/6c: phi on random-policy states (pole tip relative to the cart)\n\n'
                 f"phi prefers pushing the cart towards the side the pole leans to in "
                 f"{pages.fmt(100 * phi['lean_agreement'] if phi.get('lean_agreement') is not None else None, 1)}% "
                 f"of states; psi AUROC for falling transitions "
                 f"{pages.fmt((report.get('psi') or {}).get('terminal_auroc'), 3)}.\n\n"
                 '![phi, action 0](estimator_eval/cartpole_phi_action0.png)\n'
                 '![phi, action 1](estimator_eval/cartpole_phi_action1.png)\n')
  return '\n'.join(parts)

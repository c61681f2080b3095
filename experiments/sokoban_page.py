"""The Sokoban experiment's page (Sec. 5.3, Fig. 5b/5c): milestones, each RAE arm against IMPALA
seed by seed, the groups at equal learner updates, psi against the oracle and along a solution.
Its steps: `experiments.sokoban`."""
import functools
import os

from experiments.sokoban import (
  SOKOBAN_DIAGNOSTICS,
  SOKOBAN_GIF,
  SOKOBAN_GIF_LEVEL,
  sokoban_reference_runs,
  sokoban_steps,
)
from experiments.sokoban_psi_page import sokoban_psi_markdown

# 1% and 2% tell arms apart early (at 5M env steps no arm's last 1,000 episodes had solved 5%);
# 90% is "solves the set", the paper's claim for IMPALA + RAE by 30M steps (Fig. 5b).
SOKOBAN_MILESTONES = (0.01, 0.02, 0.05, 0.10, 0.25, 0.50, 0.90)
SOKOBAN_MILESTONE_EPISODES = 1000   # the trailing training episodes a milestone is judged on
SOKOBAN_MARK_STEPS = 5_000_000      # the arms' curves compared every 5M env steps


def sokoban_milestones_markdown(table: dict, out: str, load=None, steps=None) -> str:
  """Per group: env steps at which the trailing 1,000 training episodes first solved each of
  SOKOBAN_MILESTONES (mean ± 95% t-interval over the seeds that got there, how many did), and the
  area under the solved curve up to the compared arms' (not diagnostics') common budget. `load`:
  run dir -> its logs (`aggregate.load`, or a cache of it shared by the page's sections); `steps`:
  the experiment's steps (default: this one's at the table's scale)."""
  from experiments.analysis import aggregate
  from experiments.pages import mean_ci_text, runs_by_group
  load = load or aggregate.load
  groups = runs_by_group(steps or sokoban_steps(table['scale'], table['seeds']), out)
  if not groups:
    return ''
  diagnostic = {group for _, group, _ in SOKOBAN_DIAGNOSTICS}
  budget = _common_budget([load(d) for g, ds in groups.items() if g not in diagnostic for d in ds])
  n = SOKOBAN_MILESTONE_EPISODES
  lines = ['## Milestones: env steps to a solved fraction', '',
           f'Env steps at which the last {n:,} logged training episodes first solved the given '
           f'fraction (where an export kept every k-th episode, the last {n:,} kept ones: as '
           'many samples, over k times the episodes; mean ± 95% t-interval over the seeds that '
           'reached it; in brackets: how many of the seeds did). Area: the mean of the solved '
           f'curve over the first {budget:,.0f} env steps (the budget every run of the compared '
           'arms has reached; – for a group with no run there), so larger is sooner.', '',
           '| group | ' + ' | '.join(f'{m:.0%} solved' for m in SOKOBAN_MILESTONES) +
           ' | area under the solved curve |', '|' + '---|' * (len(SOKOBAN_MILESTONES) + 2)]
  for group, run_dirs in groups.items():
    cells = [group]
    logs = [load(d) for d in run_dirs]
    for m in SOKOBAN_MILESTONES:
      steps = [_safe(aggregate.steps_to, run, 'solved', m, n) for run in logs]
      hit = [v for v in steps if v == v]
      cells.append(f'{mean_ci_text(hit, 0)} ({len(hit)}/{len(run_dirs)})')
    areas = [_safe(aggregate.mean_over_budget, run, 'solved', budget) for run in logs]
    cells.append(mean_ci_text(areas, 4))
    lines.append('| ' + ' | '.join(cells) + ' |')
  return '\n'.join(lines) + '\n'


def _common_budget(logs) -> float:
  """The env steps every run's solved curve reaches: the smallest last logged step. Not the
  runs' counts.json: a thinned log's last kept episode can end short of its run's count, and the
  area up to the count would then be NaN for that run."""
  from experiments.analysis import aggregate
  ends = [_safe(lambda run: aggregate.series(run, 'solved').xs[-1], run) for run in logs]
  return min((e for e in ends if e == e), default=0.0)


def _marks(budget: float):
  """Every SOKOBAN_MARK_STEPS env steps, where to compare the arms' curves (the paper's separate
  between 17M and 30M, Fig. 5b), up to half a mark short of the budget: a mark at the budget
  would repeat the final window, which has its own row."""
  return [m * SOKOBAN_MARK_STEPS for m in range(1, int(budget // SOKOBAN_MARK_STEPS) + 1)
          if m * SOKOBAN_MARK_STEPS <= budget - SOKOBAN_MARK_STEPS / 2]


def _value_at(s, step: float, last_n: int) -> float:
  """Mean of the last `last_n` rows of series `s` (`aggregate.series` against env steps) logged
  at or before `step`: the trailing window a milestone is judged on, read at one step."""
  return float(s.values[s.xs <= step][-last_n:].mean()) if s.xs[-1] >= step else float('nan')


def _safe_series(run, metric: str):
  """`aggregate.series(run, metric)` against env steps, None where the run logs no such metric."""
  from experiments.analysis import aggregate
  return aggregate.series(run, metric) if metric in aggregate.metric_names(run) else None


def _safe(fn, *args) -> float:
  try:
    return fn(*args)
  except ValueError:   # the run logs no such metric (yet)
    return float('nan')


# The final-policy measures of the paired comparison: (label, eval file, policy, key, digits).
SOKOBAN_PAIRED_EVALS = (
    ('solved, 1k set, sampled', 'eval_train.json', 'sampled', 'solved_fraction', 3),
    ('irreversible pushes per episode, greedy', 'eval_irreversible.json', 'greedy',
     'mean_irreversible_excl_solving', 2),
    ('irreversible pushes per episode, sampled', 'eval_irreversible.json', 'sampled',
     'mean_irreversible_excl_solving', 2),
    ('irreversible per push, greedy', 'eval_irreversible.json', 'greedy',
     'irreversible_per_push', 3),
    ('irreversible per push, sampled', 'eval_irreversible.json', 'sampled',
     'irreversible_per_push', 3),
)


def sokoban_paired_markdown(table: dict, out: str, load=None, steps=None,
                            evals=SOKOBAN_PAIRED_EVALS) -> str:
  """Each RAE arm against IMPALA of the same seed, over the completed runs: the arms share
  every setting but the RAE flags, seed included, so the per-seed difference (RAE minus IMPALA)
  takes out what a seed does to both. Negative steps to a milestone: RAE got there sooner.
  `load` and `steps` as in `sokoban_milestones_markdown`; `evals`: the final-policy measures."""
  from experiments.analysis import aggregate
  from experiments.pages import fmt, logs_dir, mean_ci_text, read_json, run_home
  load = load or aggregate.load
  steps = [st for st in steps or sokoban_steps(table['scale'], table['seeds']) if st.is_training]
  logs_of = {(st.group, st.seed): logs_dir(os.path.join(out, st.run_dir)) for st in steps}
  done = {key: d for key, d in logs_of.items()
          if d is not None and os.path.exists(os.path.join(d, 'done'))}
  seeds = sorted({seed for group, seed in done if group == 'IMPALA'})
  arms = [group for group in dict.fromkeys(st.group for st in steps if st.group != 'IMPALA')
          if group.startswith('IMPALA+RAE') and any((group, seed) in done for seed in seeds)]
  if not arms:
    return ''
  compared = {'IMPALA', *arms}
  logs = {key: load(d) for key, d in done.items() if key[0] in compared}
  budget = _common_budget(list(logs.values()))
  n = SOKOBAN_MILESTONE_EPISODES
  read = functools.lru_cache(maxsize=None)(read_json)  # IMPALA's files serve every arm

  def evaluation(file, policy, key):
    return lambda k: ((read(os.path.join(run_home(done[k]), file)) or {})
                      .get('policies', {}).get(policy, {}).get(key))
  # Each run's series read once for its milestones and marks (a 30M-step log has ~64k rows).
  series = functools.lru_cache(maxsize=None)(
    lambda k, metric: aggregate.series(logs[k], metric, 'actor_steps'))
  measures = [(f'env steps to {m:.0%} solved', 0,
               lambda k, m=m: _safe(lambda: aggregate.first_reaching(
                 series(k, 'solved').xs, series(k, 'solved').values, m, n)))
              for m in SOKOBAN_MILESTONES]
  for metric, digits in (('solved', 3), ('boxes_on_target', 2)):
    measures += [(f"{metric.replace('_', ' ')} at {mark / 1e6:g}M env steps", digits,
                  lambda k, metric=metric, mark=mark: _safe(
                    lambda: _value_at(series(k, metric), mark, n)))
                 for mark in _marks(budget)]
    measures.append((f"{metric.replace('_', ' ')}, last {n:,} episodes", digits,
                     lambda k, metric=metric: _safe(aggregate.final_value, logs[k], metric, n)))
  measures.append(('area under the solved curve', 4,
                   lambda k: _safe(aggregate.mean_over_budget, logs[k], 'solved', budget)))
  measures += [(label, digits, evaluation(file, policy, key))
               for label, file, policy, key, digits in evals]
  lines = ['## Each RAE arm against IMPALA, seed by seed', '',
           'RAE minus IMPALA on the same seed, over the completed runs (the arms share every '
           'setting but the RAE flags); last column: mean ± 95% t-interval of the differences. '
           'Negative env steps: RAE reached the milestone sooner. "RAE only" / "IMPALA only": '
           f'one of the two never got there. "At 10M env steps": the last {n:,} episodes '
           f'logged by then. Area: over the first {budget:,.0f} env steps.', '',
           '| RAE arm | measure | ' + ' | '.join(f'seed {s}' for s in seeds) +
           ' | mean difference |', '|' + '---|' * (len(seeds) + 3)]
  for group in arms:
    for label, digits, value in measures:
      cells, diffs = [], []
      for seed in seeds:
        if (group, seed) not in done:
          cells.append('–')
          continue
        rae, base = value((group, seed)), value(('IMPALA', seed))
        reached = [v is not None and v == v for v in (rae, base)]
        if all(reached):
          diffs.append(rae - base)
          cells.append(fmt(rae - base, digits))
        else:
          cells.append('RAE only' if reached[0] else 'IMPALA only' if reached[1] else '–')
      if label.startswith('env steps') and not diffs and all(c == '–' for c in cells):
        continue  # a milestone neither arm reached on any seed
      lines.append(f'| {group} | {label} | ' + ' | '.join(cells) +
                   f' | {mean_ci_text(diffs, digits)} |')
  return '\n'.join(lines) + '\n'


def sokoban_markdown(table: dict, out: str) -> str:
  from experiments.analysis import aggregate
  load = functools.lru_cache(maxsize=None)(aggregate.load)  # each run's logs read once
  return '\n'.join(part for part in (sokoban_milestones_markdown(table, out, load),
                                      sokoban_paired_markdown(table, out, load),
                                      sokoban_updates_markdown(table, out, load),
                                      sokoban_watch_markdown(table, out),
                                      sokoban_psi_markdown(table, out)) if part)


# Learner updates at which the groups are compared: a recipe's batch and sequence reuse set how
# many env steps one update costs (batch 256 once: 5,120; batch 16 four times: 80).
SOKOBAN_UPDATE_MARKS = (1_000, 2_000, 4_000, 10_000, 20_000, 50_000, 100_000, 300_000)
SOKOBAN_LEARNER_ROWS = 20   # learner log rows a policy entropy at one update is the mean of


def _env_steps_at_update(learner_steps, update: int) -> float:
  """Env steps by the learner's `update`-th update (its `learner_steps` series; NaN before)."""
  import numpy as np
  i = int(np.searchsorted(learner_steps.values, update))
  return float(learner_steps.xs[i]) if i < len(learner_steps.values) else float('nan')


# The measures at an update: (label, metric, trailing rows read, digits).
_AT_UPDATE = (('boxes on target', 'boxes_on_target', SOKOBAN_MILESTONE_EPISODES, 2),
              ('solved', 'solved', SOKOBAN_MILESTONE_EPISODES, 3),
              ('policy entropy', 'policy_entropy', SOKOBAN_LEARNER_ROWS, 2))


def sokoban_updates_markdown(table: dict, out: str, load=None) -> str:
  """Every group, the reference runs of another recipe included, at equal learner updates
  rather than equal env steps: the env steps each cost, and boxes on target, solved and policy
  entropy there (means ± 95% t-interval over the runs; a mark only where every run of the group
  has reached it). `load` as in `sokoban_milestones_markdown`."""
  from experiments.analysis import aggregate
  from experiments.pages import mean_ci_text, runs_by_group
  load = load or aggregate.load
  groups = {**runs_by_group(sokoban_steps(table['scale'], table['seeds']), out),
            **sokoban_reference_runs(table['scale'])}
  cells = {}   # (group, mark, label) -> text
  for group, run_dirs in groups.items():
    # Each run's series read once for every mark: {name: series or None where not logged}.
    runs = [{name: _safe_series(load(d), name)
             for name in ('learner_steps', *(metric for _, metric, _, _ in _AT_UPDATE))}
            for d in run_dirs]
    for mark in SOKOBAN_UPDATE_MARKS:
      env = [float('nan') if run['learner_steps'] is None else
             _env_steps_at_update(run['learner_steps'], mark) for run in runs]
      if any(e != e for e in env):
        continue   # some run of the group has not made that many updates
      cells[group, mark, 'env steps'] = mean_ci_text(env, 0)
      for label, metric, rows, digits in _AT_UPDATE:
        values = [float('nan') if run[metric] is None else _value_at(run[metric], e, rows)
                  for run, e in zip(runs, env)]
        cells[group, mark, label] = mean_ci_text(values, digits)
  marks = [m for m in SOKOBAN_UPDATE_MARKS if any(key[1] == m for key in cells)]
  if not marks:
    return ''
  lines = ['## At equal learner updates', '',
           'Each group where its learner had made as many updates (every run of it; mean ± 95% '
           't-interval over the runs): the env steps counted by then, and boxes on target and '
           f'solved over the last {SOKOBAN_MILESTONE_EPISODES:,} training episodes and policy '
           f'entropy over the last {SOKOBAN_LEARNER_ROWS} learner log rows up to there. One '
           'update of batch 256, each sequence once, costs 5,120 env steps; one of batch 16, '
           'each sequence four times, 80.', '',
           '| group | measure | ' + ' | '.join(f'{m:,} updates' for m in marks) + ' |',
           '|' + '---|' * (len(marks) + 2)]
  for group in groups:
    for label in ('env steps', *(label for label, _, _, _ in _AT_UPDATE)):
      lines.append(f'| {group} | {label} | ' +
                   ' | '.join(cells.get((group, m, label), '–') for m in marks) + ' |')
  return '\n'.join(lines) + '\n'


def sokoban_watch_markdown(table: dict, out: str) -> str:
  """Seed 0 of each arm, its final greedy policy on one Boxoban level none of them trained on
  (`experiments.evaluate_policy --gif`), psi per step beside the room for RAE."""
  shown = [(st.group, os.path.join(st.run_dir, SOKOBAN_GIF))
           for st in sokoban_steps(table['scale'], table['seeds'])
           if st.is_training and st.seed == 0 and os.path.exists(os.path.join(out, st.run_dir, SOKOBAN_GIF))]
  if not shown:
    return ''
  lines = ['## The final policies, watched', '',
           f'Seed 0 of each arm, greedy, on Boxoban level {SOKOBAN_GIF_LEVEL} (never trained on); '
           'for RAE, psi of each step beside the room, with beta.', '']
  for group, path in shown:
    lines += [f'{group}:', '', f'![{group} on Boxoban level {SOKOBAN_GIF_LEVEL}]({path})', '']
  return '\n'.join(lines)

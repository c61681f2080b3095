"""The Sokoban recipe comparison's page: each arm at equal env steps (solved, boxes on target,
return, policy entropy), the wall-hours it took to get there on this machine and the solved
fraction per wall-hour, and its final policy on training and held-out levels. Its steps:
`experiments.sokoban_recipe`."""
import functools
import os

from experiments.sokoban_recipe import RECIPE_SCALES, recipe_steps

EPISODES = 1000      # the trailing training episodes a value at a mark is the mean of
LEARNER_ROWS = 20    # the trailing learner log rows a policy entropy at a mark is the mean of
SPEED_FILE = 'speed.json'   # each arm's env steps/s on a quiet machine (bench.recipe_speed)


def recipe_markdown(table: dict, out: str) -> str:
  from experiments.analysis import aggregate
  from experiments.pages import fmt, logs_dir, read_json, run_home
  s = RECIPE_SCALES[table['scale']]
  load = functools.lru_cache(maxsize=None)(aggregate.load)
  lines = ['## Each arm at equal env steps', '',
           f'Solved, boxes on target and return: the last {EPISODES:,} training episodes logged '
           f'by the mark. The field\'s arms draw each training episode\'s limit from [30, 120] '
           'steps, the preset\'s plays 120: their training figures favour the preset (more time '
           'to solve, and a return with more step penalties), the final policies below are '
           'played alike. Policy '
           f'entropy: the last {LEARNER_ROWS} learner log rows (uniform over 4 actions: 1.39). '
           'Hours: the mark over the arm\'s env steps per second measured on this machine with '
           f'nothing else running ({SPEED_FILE}, `bench.recipe_speed`; env steps/s in the first '
           'row of each run); where it has not been measured, the wall-clock hours of the '
           'run\'s own launches, marked *, which other work on the machine lengthened. Solved '
           'per hour: the solved fraction at the mark over those hours.', '',
           '| run | env steps | solved | boxes on target | return | policy entropy | hours | '
           'solved per hour |', '|' + '---|' * 8]
  speed = (read_json(os.path.join(out, SPEED_FILE)) or {}).get('arms', {})
  evals = ['## Final policies', '',
           'Every level played once from its start to the 120-step limit (experiments.evaluate_policy), '
           'greedy and sampled: the training levels and levels none of the runs trained on.', '',
           '| run | checkpoint (learner calls) | training levels, greedy | sampled | '
           'held-out levels, greedy | sampled |', '|' + '---|' * 6]
  if s.get('reference'):
    lines.extend(_reference_rows(s, load, speed.get('preset', {}).get('env_steps_per_s')))
  for step in recipe_steps(table['scale'], table['seeds']):
    if not step.is_training:
      continue
    logs = logs_dir(os.path.join(out, step.run_dir))
    if logs is None:
      continue
    run = load(logs)
    rate = speed.get(step.name.rsplit('-s', 1)[0], {}).get('env_steps_per_s')
    label = f'{step.name} ({step.group}' + (f', {rate:,.0f} env steps/s)' if rate else ')')
    for mark in s['marks']:
      cells = [_at(run, metric, mark, EPISODES) for metric in
               ('solved', 'boxes_on_target', 'episode_return')]
      cells.append(_at(run, 'policy_entropy', mark, LEARNER_ROWS))
      if all(c != c for c in cells):
        continue   # the run has not reached this mark
      if rate:
        hours, hours_text = mark / rate / 3600, fmt(mark / rate / 3600, 2)
      else:
        hours = _or_nan(lambda: float(aggregate.wall_time_at(run, [mark])[0]) / 3600)
        hours_text = fmt(hours, 2) + '*'
      per_hour = cells[0] / hours if hours == hours and hours > 0 else float('nan')
      lines.append(f'| {label} | {mark / 1e6:g}M | {fmt(cells[0], 3)} | '
                   f'{fmt(cells[1], 2)} | {fmt(cells[2], 2)} | {fmt(cells[3], 2)} | '
                   f'{hours_text} | {fmt(per_hour, 3)} |')
      label = ''
    home = run_home(logs)
    result = lambda name, policy: ((read_json(os.path.join(home, f'{name}.json')) or {})
                                   .get('policies', {}).get(policy, {}).get('solved_fraction'))
    steps = (read_json(os.path.join(home, 'eval_train.json')) or {}).get('checkpoint_steps')
    if steps is not None:
      evals.append(f'| {step.name} | {steps:,} | ' + ' | '.join(
          fmt(result(name, policy), 3) for name in ('eval_train', 'eval_held_out')
          for policy in ('greedy', 'sampled')) + ' |')
  return '\n'.join(lines + [''] + evals) + '\n'


def _reference_rows(s: dict, load, rate) -> list:
  """The reference agent's band at each mark (mean ± 95% t-interval over its seeds): committed
  runs of another experiment, found from the checkout's root; its hours at the preset arm's
  quiet `rate` (the same agent), when measured."""
  from experiments.analysis import aggregate
  from experiments.pages import fmt, logs_dir
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  ref = s['reference']
  runs = [load(d) for d in (logs_dir(os.path.join(root, r)) for r in ref['runs']) if d]
  rows, label = [], f"reference ({ref['label']})"
  for mark in s['marks'] if runs else ():
    cells, means = [], []
    for metric in ('solved', 'boxes_on_target', 'episode_return'):
      mean, half = aggregate.mean_ci([_at(run, metric, mark, EPISODES) for run in runs])
      cells.append(f'{fmt(mean, 3)} ± {fmt(half, 3)}')
      means.append(mean)
    entropy, _ = aggregate.mean_ci([_at(run, 'policy_entropy', mark, LEARNER_ROWS)
                                    for run in runs])
    hours = mark / rate / 3600 if rate else float('nan')
    rows.append(f'| {label} | {mark / 1e6:g}M | ' + ' | '.join(cells) +
                f' | {fmt(entropy, 2)} | {fmt(hours, 2)} | {fmt(means[0] / hours, 3)} |')
    label = ''
  return rows


def _at(run, metric: str, step: float, last_n: int) -> float:
  """Mean of the last `last_n` values of `metric` logged by env step `step`; NaN before the
  run's episodes reach it (the learner's last rows may be logged a little short of the run's
  last step) or where it logs no such metric."""
  from experiments.analysis import aggregate

  def value():
    if aggregate.series(run, 'solved').xs[-1] < step:
      return float('nan')
    s = aggregate.series(run, metric)
    return float(s.values[s.xs <= step][-last_n:].mean())
  return _or_nan(value)


def _or_nan(fn) -> float:
  try:
    return fn()
  except (ValueError, IndexError):   # no such metric logged, or nothing logged yet
    return float('nan')

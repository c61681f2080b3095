r"""Where random Turf episodes (the offline estimators' data) stand before any grass is ruined:
the states RAC must judge when it has ruined nothing yet, which phi only sees if random walks
reach them with the map still clean.

Question: Do random Turf episodes show phi the states RAC must judge with the map still clean?
Reported in RESULTS.md, "Turf", "With the paper's offline estimators" (coverage.md) and "The same
psi, phi retrained" (coverage_stone*.md).

    python -m experiments.studies.turf_coverage --episodes 10000 \
        --out results/turf/paper_estimators/coverage.json
    python -m experiments.studies.turf_coverage --env_option start=stone --episodes 2000 \
        --out stone.json

Counts, per cell, the steps of uniformly random episodes (the real env, the collection's policy)
taken with the agent on that cell and no grass ruined, scaled to --per_episodes (100k: the
paper-scale dataset), and the mean number of such steps per episode. Writes JSON and a markdown
grid beside it (.md).
"""

import numpy as np
from absl import flags

from envs import cli
from experiments import pages


def clean_visits(episodes: int, seed: int = 1, env_options=None):
  """(counts [10, 10] of steps taken from a cell with no ruined grass, clean steps per episode)."""
  import envs
  from envs import turf
  env = envs.make('turf', seed=seed, **dict(env_options or {}))
  rng = np.random.default_rng(seed)
  counts = np.zeros((turf.SIZE, turf.SIZE), np.int64)
  per_episode = []
  for _ in range(episodes):
    env.reset()
    clean_steps = 0
    while True:
      r, c, ruined = env.get_state()
      if ruined == 0:
        counts[r, c] += 1
        clean_steps += 1
      if env.step(int(rng.integers(env.num_actions))).last():
        break
    per_episode.append(clean_steps)
  return counts, np.asarray(per_episode)


def markdown(scaled: np.ndarray, per: int, mean_clean: float, env_options=None) -> str:
  from envs import turf
  layout = turf.LAYOUTS[turf.DEFAULT_LAYOUT]
  options = ', '.join(f'{k}={v}' for k, v in sorted(dict(env_options or {}).items()))
  lines = [f'# Random Turf episodes{f" ({options})" if options else ""}: steps taken from each '
           f'cell with no grass ruined, per {per:,} episodes', '',
           f'Mean clean steps per episode: {mean_clean:.2f}. Cell: count '
           '(`#` stone, `.` grass, `A` start, `*` goal).', '',
           '| row | ' + ' | '.join(str(c) for c in range(turf.SIZE)) + ' |',
           '|---|' + '---|' * turf.SIZE]
  for r in range(turf.SIZE):
    lines.append(f'| {r} | ' + ' | '.join(f'{layout[r][c]} {scaled[r, c]:,}'
                                          for c in range(turf.SIZE)) + ' |')
  return '\n'.join(lines) + '\n'


def define_flags(fv: flags.FlagValues) -> None:
  flags.DEFINE_integer('episodes', 10_000, 'Random episodes to walk.', flag_values=fv)
  flags.DEFINE_integer('per_episodes', 100_000, 'Scale the counts to this many episodes.',
                       flag_values=fv)
  flags.DEFINE_integer('seed', 1, 'Policy seed.', flag_values=fv)
  flags.DEFINE_multi_string('env_option', [], 'Turf option key=value (repeatable), e.g. '
                            'start=stone: the episodes a --env_option '
                            'start=stone collection holds.', flag_values=fv)
  flags.DEFINE_string('out', None, 'JSON file to write.', flag_values=fv)


def parse_args(argv=None):
  args, _ = cli.parse(define_flags, argv, prog='python -m experiments.studies.turf_coverage',
                       description=__doc__.split('\n\n')[0])
  if not args.out:
    cli.fail('--out is required')
  if args.episodes < 1 or args.per_episodes < 1:
    cli.fail('--episodes and --per_episodes must be >= 1')
  return args


def main(argv=None):
  args = parse_args(argv)
  import envs
  try:
    options = envs.parse_options(args.env_option)
    counts, per_episode = clean_visits(args.episodes, args.seed, options)
  except envs.EnvError as e:
    raise SystemExit(f'error: bad --env_option: {e}') from e
  scaled = np.rint(counts * args.per_episodes / args.episodes).astype(np.int64)
  pages.write_report(args.out, {'episodes': args.episodes, 'env_options': options,
                                 'per_episodes': args.per_episodes,
                                 'clean_steps_per_cell': scaled.tolist(),
                                 'mean_clean_steps_per_episode': float(per_episode.mean())},
                     markdown(scaled, args.per_episodes, float(per_episode.mean()), options))


if __name__ == '__main__':
  main()

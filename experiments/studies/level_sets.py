r"""How hard a Sokoban level set is, measured two ways, for comparing the 1k training set with
levels made elsewhere: the move-optimal solutions (envs.sokoban_solver) and uniform random play.

Question: Is our 1k set (gym-sokoban's generator at its defaults, as App. C cites) harder than a
standard set? The authors' own set is not public; DeepMind's Boxoban (unfiltered) is the
standard one at this size. Item 4 of the authors'-recipe benchmark names the level set among
what may differ from the authors' system; reported in BUILD_NOTES.md, "The authors' recipe at
equal learner updates".

    python -m experiments.studies.level_sets --out results/sokoban_authors/level_sets.json
    python -m experiments.studies.level_sets --levels envs/data/sokoban_7x7_2boxes_train.txt \
        --levels envs/data/sokoban_7x7_2boxes_heldout.txt --out envs/data/sokoban_ladder_levels.json

Per set: the first `--solve_levels` levels solved move-optimally within the episode's 120 moves
(moves and pushes of the solution; levels with none within the search budget counted apart), and
`--episodes` episodes of uniform random play over the whole set (levels drawn as training draws
them): solved fraction with a 95% Wilson interval, boxes on target at the end, return, and the
fraction of episodes that entered a dead end (a state from which the level can no longer be
solved: `envs.sokoban_solver.solvable`, asked after each push until the first dead end; searches
past --dead_end_nodes counted apart). Writes JSON and a markdown table beside it (same name, .md)
after each set. Rerun with the same --out and settings, it keeps the sets already measured whose
level file is unchanged (its sha256) and measures the rest: a stopped run resumes.
"""
import hashlib
import time
from typing import Any, Dict, List, Sequence, Tuple

from absl import flags

from envs import cli
from envs.level_stats import markdown, measure
from experiments import pages
from experiments.sokoban import BOXOBAN_LEVELS

LEVEL_SETS = (('our 1k set', 'default'), ('Boxoban unfiltered test 000', BOXOBAN_LEVELS))


def level_file_digest(path: str) -> str:
  """sha256 of the level file that `path` names ('default', a shipped set's name or a path)."""
  from envs import sokoban
  with open(sokoban.level_file(path), 'rb') as f:
    return hashlib.sha256(f.read()).hexdigest()


def measured_before(out: str, settings: Dict[str, Any]) -> Dict[Tuple[str, str, str], Dict]:
  """The sets that `out` already holds, measured with these settings, by (name, path, digest)."""
  previous = pages.read_json(out) if out else None
  if not previous or any(previous.get(k) != v for k, v in settings.items()):
    return {}
  return {(s['name'], s['path'], s.get('sha256')): s for s in previous.get('sets', [])}


def run(solve_levels: int, max_nodes: int, episodes: int, seed: int, out: str = None,
        level_sets: Sequence[Tuple[str, str]] = LEVEL_SETS,
        dead_end_nodes: int = 20_000) -> Dict[str, Any]:
  settings = {'solve_levels': solve_levels, 'max_nodes': max_nodes, 'episodes': episodes,
              'seed': seed, 'dead_end_nodes': dead_end_nodes}
  done = measured_before(out, settings)
  sets: List[Dict[str, Any]] = []
  report = dict(settings, sets=sets)
  for name, path in level_sets:
    digest = level_file_digest(path)
    if (name, path, digest) in done:
      sets.append(done[(name, path, digest)])
      continue
    start = time.time()
    sets.append(dict(measure(name, path, solve_levels, max_nodes, episodes, seed, dead_end_nodes),
                     sha256=digest, seconds=round(time.time() - start, 1)))
    if out:   # after each set: a stopped run keeps what it measured
      pages.write_report(out, report, markdown(report))
  pages.show_report(out, report, markdown(report))
  return report


def define_flags(fv):
  flags.DEFINE_integer('solve_levels', 200, "Levels of each set (its first ones) solved "
                       'move-optimally.', flag_values=fv)
  flags.DEFINE_integer('max_nodes', 200_000, "The solver's budget of expanded states per level.",
                       flag_values=fv)
  flags.DEFINE_integer('episodes', 10_000, 'Episodes of uniform random play per set.',
                       flag_values=fv)
  flags.DEFINE_integer('seed', 0, 'Seed of the random play (the level draws and the actions).',
                       flag_values=fv)
  flags.DEFINE_integer('dead_end_nodes', 20_000, 'Search budget of each dead-end question (push '
                       'states expanded).', flag_values=fv)
  flags.DEFINE_multi_string('levels', None, 'Level files to measure (repeatable), each named by '
                            'its file; default: our 1k set and Boxoban unfiltered test 000.',
                            flag_values=fv)
  flags.DEFINE_string('out', None, 'JSON file to write (and .md beside it).', flag_values=fv)


def main(argv=None) -> int:
  args, _ = cli.parse(define_flags, argv, prog='python -m experiments.studies.level_sets',
                      description=__doc__.split('\n\n')[0])
  for name in ('solve_levels', 'max_nodes', 'episodes', 'dead_end_nodes'):
    if getattr(args, name) < 1:
      raise SystemExit(f'error: --{name} must be >= 1')
  from envs import quiet
  quiet.quiet_startup()
  import os
  level_sets = LEVEL_SETS
  if args.levels:
    missing = [p for p in args.levels if not os.path.isfile(p)]
    if missing:
      raise SystemExit(f'error: --levels {missing[0]}: no such file')
    level_sets = tuple((os.path.basename(p), p) for p in args.levels)
  run(args.solve_levels, args.max_nodes, args.episodes, args.seed, args.out, level_sets,
      args.dead_end_nodes)
  return 0


if __name__ == '__main__':
  raise SystemExit(main())

r"""What a Sokoban user waits for: env steps per second of the Sokoban comparison's exact runs
(`python -m experiments sokoban`: IMPALA, and IMPALA + RAE with a frozen psi), this checkout against
another version of the code, in one invocation, and the wall time each needs to reach a learning
milestone on the 1k set.

    git worktree add --detach /tmp/before BASELINE_COMMIT   # the version to compare with
    python -m bench.sokoban_speed --baseline_tree /tmp/before --max_steps 1000000 \
        --learning_runs 'before=results/sokoban/runs/impala-s0,results/sokoban/runs/impala-s1' \
        --learning_runs 'after=runs/impala-c15-s0' --out results/bench/sokoban_speed.json

Each code version runs its *own* comparison configuration: the flags of its experiment's
'impala-s0' and 'impala_rae-s0' steps at `--scale` (so a version whose comparison uses other
settings is measured with those), read by asking that tree's `experiments.sokoban`. RAE's
psi is an untrained checkpoint of the Sokoban preset network (its cost does not depend on its
values). Runs alternate between the versions (before/none, after/none, before/rae, after/rae,
and again with --repeats), each a full `launch.train` program under PYTHONPATH=<tree>, so every
node imports that tree's code. Env steps/s are taken from the actors' episode logs between the
first episode ending after --warmup_steps and the last.

Milestones: for each --learning_runs group (runs of the 1k set trained with that version), the
env steps at which the trailing 1,000 training episodes first reached each milestone (mean over
the runs), and that divided by the version's measured IMPALA env steps/s: the wall time of a
run on a quiet machine like this one.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
from absl import flags

from bench import common
from envs import cli

MILESTONES = (('boxes_on_target', 1.0), ('solved', 0.01))
MILESTONE_EPISODES = 1000
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tree_flags(tree: str, scale: str) -> dict:
  """{step name: launch.train flags} of `tree`'s Sokoban comparison at `scale`."""
  code = ('import json; from experiments import sokoban as s; '
          f'print(json.dumps({{x.name: list(x.flags) for x in s.sokoban_steps({scale!r}, 1) '
          "if hasattr(x, 'flags')}))")
  out = subprocess.run([sys.executable, '-c', code], cwd=tree, env=_env(tree), check=True,
                       capture_output=True, text=True).stdout
  return json.loads(out.strip().splitlines()[-1])


def _env(tree: str) -> dict:
  # PYTHONPATH comes before site-packages (where the editable install points at this checkout),
  # so every process of the run, Launchpad's node processes included, imports `tree`'s code.
  return dict(os.environ, PYTHONPATH=tree)


def _with(flags, name, value):
  """`flags` with --name set to value (replaced if present)."""
  out, skip = [], False
  for f in flags:
    if skip:
      skip = False
      continue
    if f == f'--{name}':
      skip = True
      continue
    if not f.startswith(f'--{name}='):
      out.append(f)
  return out + [f'--{name}', str(value)]


def untrained_psi(path: str) -> str:
  """An untrained psi/phi checkpoint of the Sokoban preset network."""
  from acme import specs, wrappers

  import envs
  spec = specs.make_environment_spec(wrappers.SinglePrecisionWrapper(envs.make('sokoban', seed=0)))
  return common.untrained_estimators(path, 'sokoban', spec)


def run_once(tree: str, flags, run_dir: str, max_steps: int, warmup: int) -> dict:
  from bench import throughput
  flags = _with(_with(_with(flags, 'max_steps', max_steps), 'run_dir', run_dir), 'seed', 0)
  start = time.time()
  with open(run_dir + '.log', 'w') as log:
    subprocess.run([sys.executable, '-m', 'launch.train', *flags], cwd=tree, env=_env(tree),
                   stdout=log, stderr=subprocess.STDOUT, check=True)
  out = throughput.steps_per_second(throughput.timed_episodes(run_dir), warmup)
  out['total_wall_s'] = time.time() - start
  out['actor_breakdown'] = throughput.actor_breakdown(run_dir)
  from launch.runtime import summary
  rows = summary.read_log(run_dir, 'learner')
  if rows and rows[-1].get('learner_time_elapsed'):
    last = rows[-1]
    out['learner_updates'] = last['learner_steps']
    out['learner_update_s_mean'] = last['learner_time_elapsed'] / last['learner_steps']
  out['flags'] = flags
  return out


def milestones(groups) -> dict:
  from experiments.analysis import aggregate
  out = {}
  for spec in groups:
    name, dirs = spec.split('=', 1)
    runs = [d for d in dirs.split(',') if d]
    per = {}
    for metric, target in MILESTONES:
      steps = [aggregate.steps_to(aggregate.load(d), metric, target, MILESTONE_EPISODES)
               for d in runs]
      reached = [s for s in steps if s == s]
      per[f'{metric}>={target:g}'] = {
          'env_steps_per_run': steps,
          'env_steps_mean': float(np.mean(reached)) if reached else None,
          'runs_reaching': len(reached), 'runs': len(runs)}
    out[name] = per
  return out


def define_flags(fv: flags.FlagValues) -> None:
  flags.DEFINE_string('baseline_tree', None, 'A checkout of the code to compare against (e.g. a '
                      'git worktree).', flag_values=fv)
  flags.DEFINE_string('scale', 'small', "The comparison's scale whose runs are timed.",
                      flag_values=fv)
  flags.DEFINE_integer('max_steps', 1_000_000, 'Env steps per run.', flag_values=fv)
  flags.DEFINE_integer('warmup_steps', 50_000, 'Env steps excluded from the measurement '
                       '(start-up, compiling).', flag_values=fv)
  flags.DEFINE_string('modes', 'none,rae', "Arms: 'none' (IMPALA), 'rae'.", flag_values=fv)
  flags.DEFINE_integer('repeats', 1, 'Rounds of all runs.', flag_values=fv)
  flags.DEFINE_multi_string('learning_runs', [], "'before=DIR,DIR' / 'after=DIR': 1k-set runs of "
                            'each version, for the milestones (repeatable).', flag_values=fv)
  flags.DEFINE_string('out', 'results/bench/sokoban_speed.json', 'JSON output.', flag_values=fv)
  flags.DEFINE_string('workdir', None, 'Where runs go (default: a temp dir).', flag_values=fv)


def main(argv=None):
  args, _ = cli.parse(define_flags, argv, prog='python -m bench.sokoban_speed',
                      description=__doc__.split('\n\n')[0], required=('baseline_tree',))
  workdir = args.workdir or tempfile.mkdtemp(prefix='bench-sokoban-speed-')
  os.makedirs(workdir, exist_ok=True)
  ckpt = untrained_psi(os.path.join(workdir, 'untrained_psi.ckpt'))
  trees = {'before': os.path.abspath(args.baseline_tree), 'after': HERE}
  steps = {'none': 'impala-s0', 'rae': 'impala_rae-s0'}
  flags = {}
  for version, tree in trees.items():
    all_flags = tree_flags(tree, args.scale)
    flags[version] = {}
    for mode in args.modes.split(','):
      f = [x.replace('{out}/psi.ckpt', ckpt) for x in all_flags[steps[mode]]]
      flags[version][mode] = f
  result = {'scale': args.scale, 'max_steps': args.max_steps, 'warmup_steps': args.warmup_steps,
            'trees': trees, 'runs': {}, 'env_steps_per_s': {}, 'ratios': {}}
  for r in range(args.repeats):
    for mode in args.modes.split(','):
      for version, tree in trees.items():
        name = f'{version}/{mode}/{r}'
        print(f'--- {name}', flush=True)
        run_dir = os.path.join(workdir, name.replace('/', '-'))
        result['runs'][name] = run_once(tree, flags[version][mode], run_dir, args.max_steps,
                                        args.warmup_steps)
        print(f"    {result['runs'][name]['env_steps_per_s']:,.0f} env steps/s", flush=True)
        common.write_json(args.out, result)   # partial results survive an interruption
  for version in trees:
    for mode in args.modes.split(','):
      rates = [v['env_steps_per_s'] for k, v in result['runs'].items()
               if k.startswith(f'{version}/{mode}/')]
      result['env_steps_per_s'][f'{version}/{mode}'] = float(np.mean(rates))
  rate = result['env_steps_per_s']
  # What a user waits for: a run of the comparison's length at each measured speed.
  result['hours_for_50m_env_steps'] = {k: 50e6 / v / 3600 for k, v in rate.items()}
  for mode in args.modes.split(','):
    result['ratios'][f'after/before, {mode}'] = rate[f'after/{mode}'] / rate[f'before/{mode}']
  for version in trees:
    if 'rae' in args.modes and 'none' in args.modes:
      result['ratios'][f'{version}: rae/none'] = rate[f'{version}/rae'] / rate[f'{version}/none']
  if args.learning_runs:
    result['milestones'] = milestones(args.learning_runs)
    for version, per in result['milestones'].items():
      speed = rate.get(f'{version}/none')
      for m in per.values():
        m['wall_s_at_measured_speed'] = (m['env_steps_mean'] / speed
                                         if speed and m['env_steps_mean'] else None)
  common.write_json(args.out, result)
  print(json.dumps({k: result[k] for k in ('env_steps_per_s', 'ratios', 'hours_for_50m_env_steps')},
                   indent=2))


if __name__ == '__main__':
  main()

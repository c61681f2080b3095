r"""Env steps per second of each arm of the Sokoban recipe comparison (`experiments
sokoban_recipe`), measured on a quiet machine: the arm's own command line, run for a warmup
and then a window (`bench.program_profile`), one arm after another in one invocation. The
comparison's page divides its env-step marks by these rates for the wall-hours each arm needs
on this machine (its runs share the cores with other work, so their own clocks do not say).

    python -m bench.recipe_speed --scale small_rooms \
        --out results/sokoban_recipe_small_rooms/speed.json
"""
import os
import tempfile

from absl import flags

from bench import common, program_profile
from envs import cli


def define_flags(fv: flags.FlagValues) -> None:
  from experiments.sokoban_recipe import RECIPE_SCALES
  flags.DEFINE_enum('scale', 'small_rooms', list(RECIPE_SCALES), 'The comparison\'s scale.',
                    flag_values=fv)
  flags.DEFINE_list('arms', [], 'Arms measured (default: every arm of the scale).', flag_values=fv)
  flags.DEFINE_string('out', None, 'JSON output (required).', flag_values=fv)
  flags.DEFINE_integer('warmup_steps', 150_000, 'Env steps of each run before its window '
                       '(start-up, compiling, the queue filling).', flag_values=fv)
  flags.DEFINE_float('window_s', 45.0, 'Seconds of each run measured.', flag_values=fv)


def arm_flags(scale: str):
  """{arm: launch.train flags} of the scale's seed-0 runs, without --run_dir/--seed/--max_steps
  (the profile sets its own)."""
  from experiments import sokoban_recipe
  s = sokoban_recipe.RECIPE_SCALES[scale]
  return {name: ['--env', 'sokoban', '--env_option', f"levels={s['levels']}", *flags_,
                 '--mode', 'none']
          for name, _, flags_ in sokoban_recipe.recipe_arms(s)}


def main(argv=None):
  args, _ = cli.parse(define_flags, argv, prog='python -m bench.recipe_speed',
                      description=__doc__.split('\n\n')[0])
  if not args.out:
    cli.fail('--out is required (the JSON the page reads)')
  every = arm_flags(args.scale)
  unknown = sorted(set(args.arms) - set(every))
  if unknown:
    cli.fail(f'unknown arm(s) {unknown}; the {args.scale} scale has {sorted(every)}')
  result = {'scale': args.scale, 'warmup_steps': args.warmup_steps, 'window_s': args.window_s,
            'cpus': os.cpu_count(), 'arms': {}}
  for arm in args.arms or list(every):
    with tempfile.TemporaryDirectory(prefix=f'recipe-speed-{arm}-') as workdir:
      print(f'--- {arm}', flush=True)
      profile = program_profile.profile(every[arm], args.warmup_steps, args.window_s, workdir)
    result['arms'][arm] = {'env_steps_per_s': profile['env_steps_per_s'],
                           'cpu_us_per_env_step': profile['cpu_us_per_env_step'],
                           'learner': profile.get('learner', {}), 'flags': every[arm]}
    common.write_json(args.out, result)   # each arm as soon as it is measured
    print(f"{arm}: {profile['env_steps_per_s']:,.0f} env steps/s", flush=True)


if __name__ == '__main__':
  main()

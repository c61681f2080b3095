r"""Collects episodes of any Gymnasium environment into an episode dataset for psi and phi
(`estimators.gym_episodes`), with a held-out part to check psi on (`launch.gym_check`).

    python -m launch.gym_collect --env FrozenLake-v1 --env_option is_slippery=false \
        --episodes 3000 --out data/frozenlake
    python -m estimators.train --dataset data/frozenlake --network_preset cartpole \
        --window 100 --num_pairs 300000 --phi --out ckpt/frozenlake.ckpt
    python -m launch.gym_check --checkpoint ckpt/frozenlake.ckpt --dataset data/frozenlake-heldout

--env is a Gymnasium id (`module:Id` imports the module first, as `gymnasium.make` does; our
environments: `envs.gym_adapter:noturningback/Turf-v0`); --env_option key=value are its
`gymnasium.make` options. --policy: 'random' (uniform actions) or 'package.module:function', a
function (observation, action_space, rng) -> action. --heldout_episodes more episodes (other
seeds) go to OUT-heldout. Prints one line per dataset written.
"""
import dataclasses
import importlib
import sys
from typing import Optional, Tuple

from absl import flags

from envs import cli as envs_cli
from envs.cli import field


@dataclasses.dataclass(frozen=True)
class GymCollection:
  """One flag per field (envs.cli field flags)."""
  env: Optional[str] = field(None, 'Gymnasium id, e.g. FrozenLake-v1.')
  env_option: Tuple[str, ...] = field((), 'gymnasium.make option key=value (repeatable).',
                                      repeat=True)
  policy: str = field('random', "'random' or 'package.module:function' (observation, "
                      'action_space, rng) -> action.')
  episodes: int = field(1000, 'Episodes of the training dataset.')
  heldout_episodes: int = field(200, 'Episodes of the held-out dataset OUT-heldout (0: none).')
  max_episode_steps: int = field(0, 'Cut episodes at this many steps (0: the environment\'s own '
                                 'limit).')
  out: Optional[str] = field(None, 'Output dataset directory.')
  seed: int = field(0, 'Seed of the episodes (episode k resets with seed + k).')
  overwrite: bool = field(False, 'Replace existing datasets.')


SECTIONS = (envs_cli.Section('', GymCollection),)


def define_flags(fv: flags.FlagValues) -> None:
  envs_cli.define_field_flags(fv, SECTIONS)


def policy_from_spec(spec: str):
  """None for 'random'; else the function named 'package.module:function'."""
  if spec == 'random':
    return None
  module, sep, name = spec.partition(':')
  if not sep or not module or not name:
    raise ValueError(f"--policy expects 'random' or 'package.module:function', got {spec!r}")
  try:
    fn = getattr(importlib.import_module(module), name)
  except (ImportError, AttributeError) as e:
    raise ValueError(f'--policy {spec}: {e}') from None
  if not callable(fn):
    raise ValueError(f'--policy {spec} is not a function')
  return fn


def main(argv=None) -> int:
  args, _ = envs_cli.parse(define_flags, argv, prog='python -m launch.gym_collect',
                           description=__doc__.split('\n')[0], required=('env', 'out'))
  from envs import parse_options, quiet
  from estimators import gym_episodes
  quiet.quiet_startup()
  if args.episodes < 1 or args.heldout_episodes < 0 or args.max_episode_steps < 0:
    envs_cli.fail('--episodes must be >= 1, --heldout_episodes and --max_episode_steps >= 0')
  try:
    options = parse_options(args.env_option)
    policy = policy_from_spec(args.policy)
    parts = [(args.out, args.episodes, args.seed)]
    if args.heldout_episodes:
      # Seeds past the training episodes' own: no held-out episode repeats a training one's reset.
      parts.append((f'{args.out.rstrip("/")}-heldout', args.heldout_episodes,
                    args.seed + args.episodes))
    for out, count, seed in parts:
      meta = gym_episodes.collect(args.env, count, out, policy=policy, seed=seed,
                                  env_kwargs=options,
                                  max_episode_steps=args.max_episode_steps or None,
                                  overwrite=args.overwrite)
      print(f"wrote {out}: {meta['num_episodes']:,} episodes, {meta['num_transitions']:,} "
            f"transitions of {meta['env']} ({meta['num_actions']} actions, observations "
            f"{meta['observation_shape']} {meta['observation_dtype']}"
            f"{', flattened' if meta['observations_flattened'] else ''})", flush=True)
  except ValueError as e:   # the dataset's errors too (estimators.dataset.DatasetError)
    envs_cli.fail(str(e).splitlines()[0])
  return 0


if __name__ == '__main__':
  sys.exit(main())

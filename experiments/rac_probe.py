r"""A uniformly random policy shielded by a checkpoint's phi, acted by the real actor
(`agents.acting.BatchedActor` with no policy network and mode rac: the actor of a random agent
with `--mode rac`, whose shield IMPALA's actors also use, and the paper's offline RAC), run in
one process on K environments with one fused call per step: no Launchpad, Reverb or learner, so
a grid of thresholds and checkpoints costs seconds per cell.

    python -m experiments.rac_probe \
        --checkpoint results/turf/paper_estimators/estimators.ckpt --betas 0.2,0.3,0.4 \
        --episodes 1000 --out results/turf/paper_estimators/rac_probe.json
    python -m experiments.rac_probe --env cliff --env_option wind=0.2 \
        --checkpoint ckpt/p0.2.ckpt --betas 0,0.1,0.2,0.3,0.4 --episodes 300 --out probe_cliff.json

Each of the K environments plays ceil(episodes / K) whole episodes (so short episodes are not
over-counted). Per beta: episodes, mean return and length, the fraction of steps whose proposed
action was rejected and of steps forced by the fallback (no action reached beta: argmax phi is
taken). Turf (an env with transition kinds) adds which steps let grass through: how many episodes
ruined grass and reached the goal; per kind (envs.turf.TRANSITION_KINDS: entering fresh grass is
where a clean run first goes wrong) the steps taken, how many the fallback forced and the mean
phi of the action taken; and the cells (and actions) from which fresh grass was entered, most
frequent first, with phi of every action there on the clean map and the target phi was trained
to (psi(x', x) of the checkpoint's psi, estimators.train). Writes JSON (and a markdown table
beside it, same name with .md).
"""
import collections
import dataclasses
import os
import sys
import time
from typing import Any, Dict, Sequence

import numpy as np
from absl import flags

from envs import cli
from experiments import pages


@dataclasses.dataclass
class _Tally:
  """What the probe counts over its episodes (the module docstring); the per-kind figures only
  for an environment with transition kinds."""
  steps: int = 0
  rejected: int = 0
  forced: int = 0
  done: int = 0
  ruined_episodes: int = 0
  goal_episodes: int = 0
  ruined_total: int = 0
  returns: list = dataclasses.field(default_factory=list)
  lengths: list = dataclasses.field(default_factory=list)
  taken: collections.Counter = dataclasses.field(default_factory=collections.Counter)
  fallback: collections.Counter = dataclasses.field(default_factory=collections.Counter)
  phi_sum: Dict[str, float] = dataclasses.field(
      default_factory=lambda: collections.defaultdict(float))
  entered_from: collections.Counter = dataclasses.field(default_factory=collections.Counter)


def probe(ckpt, beta: float, episodes: int, num_envs: int = 64, mode: str = 'rejection',
          seed: int = 0, env_options=None, env_name: str = 'turf') -> Dict[str, Any]:
  """Runs `episodes` shielded random episodes with `ckpt`'s phi (an estimators.checkpoint);
  see the module docstring for what is counted."""
  import envs
  from agents import acting
  from estimators import predict

  env_options = dict(env_options or {})
  seeds = [seed * 100_003 + i for i in range(num_envs)]
  pool = [envs.make(env_name, seed=s, **env_options) for s in seeds]
  num_actions = int(pool[0].action_spec().num_values)
  with_kinds = callable(getattr(pool[0], 'transition_kind', None))
  kind_names = getattr(sys.modules[type(pool[0]).__module__], 'TRANSITION_KINDS', ())
  actor = acting.BatchedActor(
      num_actions, acting.ReversibilityConfig(mode='rac', beta=beta, shield_mode=mode), seeds,
      estimators=ckpt.estimators, estimator_source=acting.FixedParams((ckpt.psi_params,
                                                                       ckpt.phi_params)))
  # phi of the actions taken (Turf's per-kind figures) and of the clean map's cells.
  predictor = predict.Predictor(ckpt, batch=max(num_envs, 256)) if with_kinds else None
  # Each environment plays the same number of whole episodes: stopping at the first `episodes`
  # to end, whichever env they come from, would over-count short episodes.
  t = _play(actor, pool, predictor, quota=-(-episodes // num_envs))
  result = {
      'env': env_name, 'env_options': env_options, 'beta': beta, 'mode': mode, 'episodes': t.done,
      'mean_return': float(np.mean(t.returns)), 'mean_length': float(np.mean(t.lengths)),
      'return_se': float(np.std(t.returns) / np.sqrt(len(t.returns))),
      'steps': t.steps, 'rejected_fraction': t.rejected / t.steps,
      'fallback_fraction': t.forced / t.steps,
  }
  if not with_kinds:
    return result
  kinds = [k for k in kind_names if t.taken[k]] + [k for k in t.taken if k not in kind_names]
  cells = _entered_cells(envs.make(env_name, **env_options), predictor, num_actions,
                         t.entered_from)
  result.update({
      'episodes_with_ruin': int(t.ruined_episodes),
      'ruined_grass_total': int(t.ruined_total), 'episodes_reaching_goal': int(t.goal_episodes),
      'by_kind': {k: {'taken': t.taken[k], 'fallback': t.fallback[k],
                      'mean_phi_taken': t.phi_sum[k] / t.taken[k]} for k in kinds},
      'fresh_grass_entered_from': cells, 'phi_target': predictor.phi_target_name,
  })
  return result


def _play(actor, pool, predictor, quota: int) -> _Tally:
  """Steps every environment of `pool` with the shielded actor (one fused call per step) until
  each has played `quota` whole episodes; `predictor` (None: no transition kinds) gives phi of
  the actions taken."""
  num_envs = len(pool)
  t = _Tally()
  obs = np.stack([np.asarray(e.reset().observation) for e in pool])
  ep_return = np.zeros(num_envs)
  ep_length = np.zeros(num_envs, np.int64)
  finished = np.zeros(num_envs, np.int64)
  while finished.min() < quota:
    out = actor.step(obs, obs)
    phi = predictor.phi(obs) if predictor is not None else None
    for i, env in enumerate(pool):
      if finished[i] >= quota:
        continue
      a = int(out.action[i])
      t.steps += 1
      t.rejected += bool(out.rejected[i])
      t.forced += bool(out.fallback[i])
      before = env.get_state() if predictor is not None else None
      ts = env.step(a)
      ep_return[i] += float(ts.reward or 0.0)
      ep_length[i] += 1
      if predictor is not None:
        kind = env.transition_kind(before, env.get_state())
        t.taken[kind] += 1
        t.fallback[kind] += bool(out.fallback[i])
        t.phi_sum[kind] += float(phi[i, a])
        if kind == 'enter_fresh_grass':
          t.entered_from[(before[0], before[1], a, before[2] == 0)] += 1
      if ts.last():
        finished[i] += 1
        _end_episode(t, env, ts, ep_return[i], ep_length[i])
        ep_return[i], ep_length[i] = 0.0, 0
        ts = env.reset()
      obs[i] = np.asarray(ts.observation)
  return t


def _end_episode(t: _Tally, env, ts, ep_return: float, ep_length: int) -> None:
  t.done += 1
  t.returns.append(ep_return)
  t.lengths.append(ep_length)
  info = env.episode_info() if callable(getattr(env, 'episode_info', None)) else {}
  ruined = int(info.get('ruined_grass', 0))
  t.ruined_total += ruined
  t.ruined_episodes += ruined > 0
  t.goal_episodes += float(ts.reward) > 0


def _entered_cells(clean_env, predictor, num_actions: int,
                   entered_from: collections.Counter) -> list:
  """The 12 (cell, action) pairs that entered fresh grass most often, with phi of every action
  there on the clean map and the target phi was trained to."""
  cells = []
  for (r, c, a, clean), n in entered_from.most_common(12):
    clean_env.set_state((r, c, 0))
    here = np.asarray(clean_env.observation())
    phi_here = predictor.phi(here[None])[0]
    after = []
    for action in range(num_actions):
      clean_env.set_state((r, c, 0))
      after.append(np.asarray(clean_env.step(action).observation))
    # phi's regression target as its training computed it, x' the image after the action.
    target = predictor.phi_target(np.repeat(here[None], num_actions, axis=0), np.stack(after))
    cells.append({'cell': [r, c], 'action': a, 'map_clean_before': bool(clean), 'count': n,
                  'phi_clean_map': [float(v) for v in phi_here],
                  'target_clean_map': [float(v) for v in target]})
  return cells


def markdown(results: Sequence[Dict[str, Any]], checkpoint: str) -> str:
  from estimators import predict
  title = f'# RAC probe: a uniformly random policy shielded by `{checkpoint}`'
  if not all('by_kind' in r for r in results):
    lines = [title, '', '| beta | episodes | mean return (± s.e.) | mean length | rejected steps '
             '| fallback steps |', '|---|---|---|---|---|---|']
    for r in results:
      lines.append(f"| {r['beta']:g} | {r['episodes']:,} | {r['mean_return']:.1f} ± "
                   f"{r['return_se']:.1f} | {r['mean_length']:.1f} | "
                   f"{r['rejected_fraction']:.3f} | {r['fallback_fraction']:.3f} |")
    return '\n'.join(lines) + '\n'
  lines = [title, '',
           '| beta | episodes | episodes with ruined grass | ruined grass, total | reached goal | '
           'fresh grass entered (fallback) | fresh grass left (fallback) | stone moves (fallback) '
           '| bumps (fallback) |', '|---|---|---|---|---|---|---|---|---|']
  for r in results:
    k = r['by_kind']
    cell = lambda name: (f"{k[name]['taken']:,} ({k[name]['fallback']:,})"  # noqa: E731
                         if name in k else '0')
    lines.append(f"| {r['beta']:g} | {r['episodes']:,} | {r['episodes_with_ruin']:,} | "
                 f"{r['ruined_grass_total']:,} | {r['episodes_reaching_goal']:,} | "
                 f"{cell('enter_fresh_grass')} | {cell('leave_fresh_grass')} | {cell('stone')} | "
                 f"{cell('bump')} |")
  for r in results:
    if not r['fresh_grass_entered_from']:
      continue
    lines += ['', f"beta {r['beta']:g}: where fresh grass was entered (cell, action 0 up 1 down "
              "2 left 3 right), and phi of each action there on the clean map (with phi's "
              f"target {predict.PHI_TARGET_TEXT[r.get('phi_target', 'reverse')]})):", '',
              '| cell | action | map clean before | times | phi up, down, left, right (clean map) |',
              '|---|---|---|---|---|']
    for c in r['fresh_grass_entered_from']:
      target = c.get('target_clean_map') or [None] * len(c['phi_clean_map'])
      phi = ', '.join(f'{v:.2f}' + ('' if t is None else f' ({t:.2f})')
                      for v, t in zip(c['phi_clean_map'], target))
      lines.append(f"| {tuple(c['cell'])} | {c['action']} | {c['map_clean_before']} | "
                   f"{c['count']:,} | {phi} |")
  return '\n'.join(lines) + '\n'


def define_flags(fv: flags.FlagValues) -> None:
  flags.DEFINE_string('env', 'turf', 'Environment (envs.make).', flag_values=fv)
  flags.DEFINE_string('checkpoint', None, 'Estimator checkpoint with phi (estimators.train '
                      '--phi).', flag_values=fv)
  flags.DEFINE_list('betas', ['0.2'], 'RAC thresholds to probe.', flag_values=fv)
  flags.DEFINE_integer('episodes', 1000, 'Episodes per threshold.', flag_values=fv)
  flags.DEFINE_integer('num_envs', 64, 'Environments stepped together (one fused call per '
                       'step).', flag_values=fv)
  flags.DEFINE_enum('mode', 'rejection', ['rejection', 'replace'], 'Shield mode (agents.shield).',
                    flag_values=fv)
  flags.DEFINE_integer('seed', 0, 'Seed of the policy.', flag_values=fv)
  flags.DEFINE_multi_string('env_option', [], 'Environment option key=value (repeatable).',
                            flag_values=fv)
  flags.DEFINE_string('out', None, 'JSON file to write.', flag_values=fv)


def parse_args(argv=None):
  args, _ = cli.parse(define_flags, argv, prog='python -m experiments.rac_probe',
                       description=__doc__.split('\n\n')[0])
  if not args.checkpoint or not args.out:
    cli.fail('--checkpoint and --out are required')
  if args.episodes < 1 or args.num_envs < 1:
    cli.fail('--episodes and --num_envs must be >= 1')
  try:
    args.betas = [float(b) for b in args.betas]
  except ValueError:
    cli.fail(f'--betas must be numbers, got {args.betas}')
  return args


def main(argv=None):
  args = parse_args(argv)
  import envs
  from estimators import checkpoint
  ckpt = checkpoint.load(args.checkpoint)
  if ckpt.phi_params is None:
    sys.exit(f'error: {args.checkpoint} has no phi (train with --phi)')
  options = envs.parse_options(args.env_option)
  results = []
  for beta in args.betas:
    t0 = time.time()
    r = probe(ckpt, beta, args.episodes, args.num_envs, args.mode, args.seed, options, args.env)
    r['seconds'] = time.time() - t0
    results.append(r)
    line = (f"beta {beta:g}: mean return {r['mean_return']:.2f} over {r['episodes']} episodes, "
            f"fallback on {r['fallback_fraction']:.3f} of steps")
    if 'by_kind' in r:
      line += (f"; {r['episodes_with_ruin']} episodes ruined grass ({r['ruined_grass_total']} "
               f"cells), {r['episodes_reaching_goal']} reached the goal")
    print(f'{line}; {time.time() - t0:.0f}s', flush=True)
  pages.write_report(args.out, {'checkpoint': os.path.abspath(args.checkpoint),
                                 'results': results}, markdown(results, args.checkpoint))


if __name__ == '__main__':
  main()

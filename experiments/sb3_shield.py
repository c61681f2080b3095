r"""An SB3 agent behind our RAC shield: SB3-contrib's MaskablePPO on a Gymnasium environment whose
vector environment is wrapped in `agents.sb3_wrappers.shield_vec_env` (phi >= beta per action,
argmax phi alone where none passes). Needs the optional extra: `make setup-sb3`.

    python -m experiments.sb3_shield --checkpoint results/turf_gym/same_mix/estimators.ckpt \
        --beta 0.2 --steps 500000 --seed 0 --out results/turf_gym/sb3_rac/s0

The estimators for Turf (the `same_mix` recipe; ~15 minutes here):

    python -m experiments turf --scale same_mix --only 'collect_*,train_*' \
        --out results/turf_gym/same_mix

Every --progress_every seconds one line: env steps, env steps/s, and over the last 100 episodes
the mean return (on Turf: the goal rate, the return being 1 at the goal and 0 otherwise) and the
ruined grass, with the grass ruined over the whole of training so far (the count of Turf's pages:
each episode's `ruined_grass` at its end, summed, plus the episodes still running at the end).
At the end OUT/summary.json (also printed) and OUT/episodes.csv (one row per episode). The model
is saved to OUT/model.zip every --save_every env steps and at the end; the same command run
again after a stop continues from it (the episodes cut by the stop are not counted).
"""
import csv
import dataclasses
import json
import os
import sys
import time
from typing import Optional, Tuple

from absl import flags

from envs import cli as envs_cli
from envs.cli import field

EPISODE_COLUMNS = ('env_step', 'episode_return', 'episode_length', 'ruined_grass')
LAST = 100   # episodes the summary's rates are over


@dataclasses.dataclass(frozen=True)
class Sb3ShieldOptions:
  """One flag per field (envs.cli field flags)."""
  env: str = field('noturningback/Turf-v0', 'Gymnasium id (noturningback/... ids are ours).')
  env_option: Tuple[str, ...] = field((), 'Environment option key=value (repeatable).',
                                      repeat=True)
  checkpoint: Optional[str] = field(None, 'Estimator checkpoint with phi (estimators.train '
                                    '--phi).')
  beta: float = field(0.2, 'RAC threshold: actions with phi < beta are masked.')
  step_mode: str = field('mask', "'mask': MaskablePPO samples from its masked policy; "
                         "'replace': also replace a masked action by argmax phi at step.",
                         choices=('mask', 'replace'))
  steps: int = field(500_000, 'Env steps to train for (over all sub-environments).')
  n_envs: int = field(8, 'Sub-environments of the vector environment.')
  seed: int = field(0, 'Seed of the agent and the environments.')
  out: Optional[str] = field(None, 'Output directory (summary.json, episodes.csv, model.zip).')
  n_steps: int = field(256, 'PPO rollout length per sub-environment.')
  batch_size: int = field(256, 'PPO minibatch size.')
  n_epochs: int = field(4, 'PPO epochs per rollout.')
  learning_rate: float = field(3e-4, 'Adam learning rate.')
  ent_coef: float = field(0.01, 'Entropy bonus.')
  gamma: float = field(0.99, 'Discount.')
  torch_threads: int = field(1, 'torch CPU threads.')
  save_every: int = field(100_000, 'Env steps between model saves (a rerun resumes there).')
  progress_every: float = field(30.0, 'Seconds between progress lines (0: none).')


SECTIONS = (envs_cli.Section('', Sb3ShieldOptions),)


def define_flags(fv: flags.FlagValues) -> None:
  envs_cli.define_field_flags(fv, SECTIONS)


def check_args(o: Sb3ShieldOptions) -> None:
  if not o.checkpoint or not os.path.isfile(o.checkpoint):
    envs_cli.fail(f'--checkpoint {o.checkpoint} is not a file (make the Turf estimators with: '
                  "python -m experiments turf --scale same_mix --only 'collect_*,train_*' "
                  '--out results/turf_gym/same_mix)')
  if not o.out:
    envs_cli.fail('--out is required')
  for name in ('steps', 'n_envs', 'n_steps', 'batch_size', 'n_epochs', 'torch_threads',
               'save_every'):
    if getattr(o, name) < 1:
      envs_cli.fail(f'--{name} must be >= 1, got {getattr(o, name)}')
  if not 0.0 <= o.beta <= 1.0:
    envs_cli.fail(f'--beta must be in [0, 1], got {o.beta}')


class EpisodeLog:
  """Every finished episode (appended to a CSV as it ends) and the running totals."""

  def __init__(self, path: str):
    self.path, self.rows = path, []
    if os.path.isfile(path):
      with open(path) as f:
        self.rows = [{k: float(v) for k, v in row.items()} for row in csv.DictReader(f)]
    self._file = open(path, 'a', newline='')
    self._writer = csv.DictWriter(self._file, EPISODE_COLUMNS)
    if not self.rows:
      self._writer.writeheader()

  def add(self, env_step: int, info: dict) -> None:
    row = {'env_step': env_step, 'episode_return': float(info['episode']['r']),
           'episode_length': float(info['episode']['l']),
           'ruined_grass': float(info.get('ruined_grass', 0))}
    self.rows.append(row)
    self._writer.writerow(row)
    self._file.flush()

  def last(self, column: str, n: int = LAST) -> Optional[float]:
    values = [r[column] for r in self.rows[-n:]]
    return sum(values) / len(values) if values else None

  def total(self, column: str) -> float:
    return sum(r[column] for r in self.rows)

  def close(self) -> None:
    self._file.close()


def _figure(value: Optional[float], digits: int = 2) -> str:
  return 'n/a' if value is None else f'{value:.{digits}f}'


def _callback(log: EpisodeLog, o: Sb3ShieldOptions, model_path: str):
  from stable_baselines3.common.callbacks import BaseCallback

  class Recorder(BaseCallback):
    """Logs finished episodes; prints progress; saves the model every --save_every steps."""

    def _on_training_start(self) -> None:
      self.t0 = self.t_last = time.time()
      self.steps0 = self.next_save = self.num_timesteps
      self.next_save += o.save_every

    def _on_step(self) -> bool:
      for info, done in zip(self.locals['infos'], self.locals['dones']):
        if done and 'episode' in info:
          log.add(self.num_timesteps, info)
      now = time.time()
      if o.progress_every and now - self.t_last >= o.progress_every:
        self.t_last = now
        rate = (self.num_timesteps - self.steps0) / max(now - self.t0, 1e-9)
        print(f'[{now - self.t0:7.0f}s] env steps {self.num_timesteps:,}/{o.steps:,}  '
              f'{rate:,.0f}/s  |  last {LAST} episodes: return {_figure(log.last("episode_return"))}'
              f'  ruined grass {_figure(log.last("ruined_grass"))}  |  ruined grass over training '
              f'{log.total("ruined_grass"):,.0f} in {len(log.rows):,} episodes', flush=True)
      if self.num_timesteps >= self.next_save:
        self.next_save += o.save_every
        self.model.save(model_path)
      return True

  return Recorder()


def _running_grass(venv) -> int:
  """Grass ruined in the episodes still running (Turf's adapter; 0 for other environments)."""
  total = 0
  for env in venv.get_attr('unwrapped'):
    info = getattr(getattr(env, 'dm_env', None), 'episode_info', lambda: {})()
    total += int(info.get('ruined_grass', 0))
  return total


def run(o: Sb3ShieldOptions) -> dict:
  import torch
  from sb3_contrib import MaskablePPO
  from stable_baselines3.common.env_util import make_vec_env

  import envs
  import envs.gym_adapter  # noqa: F401  (registers the noturningback/... ids)
  from agents import sb3_wrappers

  torch.set_num_threads(o.torch_threads)
  os.makedirs(o.out, exist_ok=True)
  model_path = os.path.join(o.out, 'model.zip')
  options = envs.parse_options(o.env_option)
  venv = make_vec_env(o.env, n_envs=o.n_envs, seed=o.seed, env_kwargs=options)
  venv = sb3_wrappers.shield_vec_env(venv, o.checkpoint, o.beta,
                                     None if o.step_mode == 'mask' else o.step_mode)
  log = EpisodeLog(os.path.join(o.out, 'episodes.csv'))
  if os.path.isfile(model_path):
    model = MaskablePPO.load(model_path, env=venv, device='cpu')
    print(f'resuming {model_path} at env step {model.num_timesteps:,} '
          f'({len(log.rows):,} episodes logged)', flush=True)
  else:
    model = MaskablePPO('MlpPolicy', venv, n_steps=o.n_steps, batch_size=o.batch_size,
                        n_epochs=o.n_epochs, learning_rate=o.learning_rate, ent_coef=o.ent_coef,
                        gamma=o.gamma, seed=o.seed, device='cpu', verbose=0)
  t0 = time.time()
  left = o.steps - model.num_timesteps
  if left > 0:
    model.learn(left, callback=_callback(log, o, model_path), reset_num_timesteps=False)
  model.save(model_path)
  running = _running_grass(venv)
  log.close()
  goals = [r['episode_return'] > 0 for r in log.rows[-LAST:]]
  summary = {
      'env': o.env, 'env_options': options, 'checkpoint': os.path.abspath(o.checkpoint),
      'beta': o.beta, 'step_mode': o.step_mode, 'seed': o.seed, 'n_envs': o.n_envs,
      'env_steps': int(model.num_timesteps), 'episodes': len(log.rows),
      f'mean_return_last_{LAST}': log.last('episode_return'),
      f'goal_rate_last_{LAST}': sum(goals) / len(goals) if goals else None,
      'ruined_grass_over_training': int(log.total('ruined_grass')) + running,
      'ruined_grass_running_episodes': running,
      'episodes_with_ruined_grass': sum(r['ruined_grass'] > 0 for r in log.rows),
      'first_goal_env_step': next((int(r['env_step']) for r in log.rows
                                   if r['episode_return'] > 0), None),
      'wall_s_this_launch': round(time.time() - t0, 1),
      'ppo': {k: getattr(o, k) for k in ('n_steps', 'batch_size', 'n_epochs', 'learning_rate',
                                         'ent_coef', 'gamma')},
  }
  with open(os.path.join(o.out, 'summary.json'), 'w') as f:
    json.dump(summary, f, indent=1, sort_keys=True)
  return summary


def main(argv=None) -> int:
  args, _ = envs_cli.parse(define_flags, argv, prog='python -m experiments.sb3_shield',
                           description=__doc__.split('\n')[0])
  o = Sb3ShieldOptions(**{k: tuple(v) if isinstance(v, list) else v
                          for k, v in vars(args).items()
                          if k in {f.name for f in dataclasses.fields(Sb3ShieldOptions)}})
  check_args(o)
  from envs import quiet
  quiet.quiet_startup()
  try:
    import sb3_contrib  # noqa: F401
  except ImportError:
    envs_cli.fail('SB3-contrib is not installed: make setup-sb3 (or pip install -e .[sb3])')
  import gymnasium
  try:
    summary = run(o)
  except (ValueError, gymnasium.error.Error) as e:   # bad id, options, checkpoint
    envs_cli.fail(envs_cli.one_line(e))
  print(json.dumps(summary, indent=1, sort_keys=True))
  print(f'{o.env} behind the shield (beta {o.beta:g}): {summary["env_steps"]:,} env steps, '
        f'{summary["episodes"]:,} episodes; goal (return > 0) in '
        f'{_figure(summary[f"goal_rate_last_{LAST}"])} of the last {LAST}; ruined grass over '
        f'training {summary["ruined_grass_over_training"]:,}', flush=True)
  return 0


if __name__ == '__main__':
  sys.exit(main())

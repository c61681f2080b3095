r"""Writes the psi (and phi) that a run's online precedence learner reached as an estimator
checkpoint, so the offline tools (`estimators.evaluate`, `estimators.predict`) can read it.

    python -m launch.export_estimators --run_dir runs/cartpole-rae --out psi_online.ckpt

The paper freezes the online classifier of reward-free Cartpole and draws its predictions
(Fig. 3b/3c); this takes the learner's last checkpoint (RUN_DIR/checkpoints/precedence_learner).
"""
import dataclasses
import os
import sys

from absl import flags

from envs import cli


class ExportError(ValueError):
  """A one-line reason the export cannot be made."""


def export(run_dir: str, out: str) -> dict:
  import numpy as np

  import envs
  from estimators import checkpoint as est_checkpoint
  from estimators import networks as est_nets
  from estimators import training
  from launch.program import checkpointing
  from launch.runtime import run_config

  try:
    cfg = run_config.load(run_dir)
  except run_config.ConfigError as e:
    raise ExportError(str(e)) from None
  if cfg.estimator_checkpoint or cfg.reversibility.mode == 'none':
    raise ExportError(f'{run_dir} trained no estimator online (mode none, or a frozen checkpoint)')
  ckpt_dir = os.path.join(run_dir, 'checkpoints', 'precedence_learner')
  network, train_config = cfg.estimator_network, cfg.estimator_train
  try:
    env = envs.make(cfg.env, seed=0, **cfg.env_options)
  except (KeyError, TypeError, ValueError) as e:
    raise ExportError(f'{run_dir}/config.json is not a usable run configuration ({e})') from None
  spec = env.observation_spec()
  num_actions = int(env.action_spec().num_values)
  estimators = est_nets.make_estimators(network, num_actions)
  # The template fixes the state's structure and shapes; the checkpoint supplies the values.
  template = training.init_state(estimators, train_config, np.zeros(spec.shape, spec.dtype))
  try:
    loaded = checkpointing.load_state(ckpt_dir, template)
  except checkpointing.CheckpointError as e:
    raise ExportError(str(e)) from None
  if loaded is None:
    raise ExportError(f'no precedence learner checkpoint in {ckpt_dir}')
  state, steps = loaded
  est_checkpoint.save(out, network, num_actions, spec.shape, spec.dtype, state.psi_params,
                      state.phi_params if train_config.train_phi else None,
                      metadata={'env_name': cfg.env, 'env_options': cfg.env_options,
                                'window': train_config.window, 'source_run': os.path.abspath(run_dir),
                                'precedence_steps': int(steps), 'online': True,
                                'train_config': dataclasses.asdict(train_config)})
  return {'out': os.path.abspath(out), 'precedence_steps': int(steps),
          'has_phi': bool(train_config.train_phi)}


def define_flags(fv: flags.FlagValues) -> None:
  flags.DEFINE_string('run_dir', None, 'a launch.train run with online estimators', flag_values=fv)
  flags.DEFINE_string('out', None, 'estimator checkpoint file to write', flag_values=fv)


def main(argv=None):
  from envs import quiet
  quiet.quiet_startup()
  args, _ = cli.parse(define_flags, argv, prog='python -m launch.export_estimators',
                      description=__doc__.splitlines()[0], required=('run_dir', 'out'))
  out_dir = os.path.dirname(os.path.abspath(args.out))
  try:
    if not os.path.isdir(out_dir):
      raise ExportError(f'--out {args.out}: directory {out_dir} does not exist')
    result = export(args.run_dir, args.out)
  except ExportError as e:
    print(f'error: {e}', file=sys.stderr)
    sys.exit(2)
  print(f"wrote {result['out']} (psi{' and phi' if result['has_phi'] else ''} after "
        f"{result['precedence_steps']:,} precedence updates)")


if __name__ == '__main__':
  main()

r"""Trains an agent on the distributed actor-learner program.

    python -m launch.train                       # reward-free Cartpole, IMPALA + RAE, 2 actors
    python -m launch.train --env cartpole --reward_free --mode rae --num_actors 2 \
        --max_steps 100000 --run_dir runs/rae
    python -m launch.train --env cliff --env_option wind=0.2 --agent random --mode rac --beta 0.4

Every node writes CSV logs under RUN_DIR/logs/<node>/logs.csv; learner checkpoints go to
RUN_DIR/checkpoints. The run stops by itself after --max_steps actor steps and prints a summary
(also saved as RUN_DIR/summary.json); the main job (the first command above) already stops when
its point is made, the last 100 episodes averaging 195 steps (--goal_mean_length; 0: train on). Ctrl-C (or SIGTERM/SIGHUP) ends it early, after the
learners save their final checkpoints. A RUN_DIR that holds a run is refused unless --resume:

    python -m launch.train --run_dir runs/rae --resume                     # continue where it stopped
    python -m launch.train --run_dir runs/rae --resume --max_steps 2000000 # ... and go further
"""
import dataclasses
import errno
import json
import os
import sys
import time

from absl import app, flags

from envs import quiet

# Before the configs below import gym and start jax: not for the terminal.
quiet.quiet_startup()
from launch.program import run_flags  # noqa: E402  pylint: disable=g-import-not-at-top
from launch.runtime import termination  # noqa: E402

FLAGS = flags.FLAGS
MAIN_JOB_GOAL = 195.0   # `make run`: the pole is kept up (the cap is 200), the point is made
# The run's configuration: one flag per config field (launch.program.run_flags), defaults from
# the environment's preset.
run_flags.define_flags(FLAGS)
# How the environment is made and how the run is driven (not config fields).
flags.DEFINE_bool('reward_free', True, 'Cartpole only: remove the extrinsic reward.')
flags.DEFINE_integer('episode_steps', None, "Environment time limit (its 'max_steps' option), "
                     'e.g. 50000 for Cartpole+.')
flags.DEFINE_multi_string('env_option', [], 'Extra environment option key=value (repeatable).')
flags.DEFINE_float('goal_mean_length', None, 'End the run early, with final checkpoints, once the '
                   'mean episode length of the last 100 episodes reaches this; 0: never. Default: '
                   f'{MAIN_JOB_GOAL:g} for the main job (reward-free Cartpole, whose cap is 200) '
                   'when --max_steps is not given, else 0.')
flags.DEFINE_bool('progress', True, 'Print a progress line every 10 s: env steps, speed, time '
                  "left, the environment's own measures over the last 100 episodes "
                  '(--noprogress: only the start and the summary).')
flags.DEFINE_bool('resume', False, 'Continue the run in --run_dir from its checkpoints and counters '
                  '(its saved flags are the defaults; only --max_steps, --num_actors, --actor_threads, '
                  '--envs_per_actor, --vectorised_env, --launch_type and the checkpoint periods may '
                  'change).')
flags.DEFINE_string('cluster_description', None, '--launch_type cluster: the JSON (or YAML) file '
                    'naming the hosts and which node groups run where (launch.cluster.description).')
flags.DEFINE_bool('cluster_start', False, '--launch_type cluster: also start every host (through '
                  'its "start" prefix, else ssh HOST) and wait for the run, as a local launch; '
                  'without it the run is only packaged and the per-host, Slurm and Kubernetes '
                  'commands are printed.')
flags.DEFINE_string('vertex_requirements', None, '--launch_type vertex_ai: the pip requirements '
                    'file the Docker image installs.')
flags.DEFINE_bool('policy_centre_on_agent', None, "Image policies whose preset centres the room on "
                  "the agent (sokoban): --nopolicy_centre_on_agent feeds the room as drawn, as App. C.3's "
                  "network takes it. Default: the preset.")
flags.DEFINE_string('policy_preset', None, 'A named policy network instead of the environment\'s '
                    '(envs.presets.POLICY_NETWORKS, e.g. sokoban_resnet); the --policy_* flags '
                    'change it as they change the preset one. Default: the environment\'s.')
flags.DEFINE_bool('show_config', False, 'Print the resolved configuration (flags + presets) as '
                  'JSON and exit without launching.')


def _section(name, build):
  """`build()`, its ValueError naming the section, the field and the field's flag."""
  try:
    return build()
  except ValueError as e:
    raise ValueError(run_flags.naming_fields(name, e)) from None


def _policy_network(env_name: str, image: bool, given: dict):
  """The preset's policy network with the run's changes: the canvas, the centring
  (--policy_centre_on_agent), the initialisation and the pixels' scale."""
  from agents import policy_net
  net = (policy_net.named_policy_config(FLAGS.policy_preset, env_name, image)
         if FLAGS.policy_preset else policy_net.default_policy_config(env_name, image))
  preset_centres = bool(net.centre_on)
  if FLAGS.policy_centre_on_agent is not None and not preset_centres:
    raise ValueError(f'--policy_centre_on_agent applies where the preset centres the room on the agent '
                     f'(sokoban), not to {env_name}')
  centred = preset_centres and FLAGS.policy_centre_on_agent is not False
  canvas_size = given.get('canvas_size')
  if canvas_size and not centred:
    raise ValueError('--policy_canvas_size applies where the policy centres the room on the '
                     f"agent (sokoban's preset, without --nopolicy_centre_on_agent); {env_name}'s "
                     'does not here')
  if 'pixel_scale' in given and given['pixel_scale'] != net.pixel_scale and not image:
    raise ValueError(f'--policy_pixel_scale applies to image observations, not to {env_name}')
  changes = {k: given[k] for k in ('init', 'pixel_scale') if k in given}
  if not centred:
    changes.update(centre_on=(), canvas_size=0)
  elif canvas_size is not None:
    changes['canvas_size'] = canvas_size
  return dataclasses.replace(net, **changes)


def config_from_flags(saved=None):
  """Parses flags once into a typed RunConfig: the env's preset (envs.presets) with the fields
  given laid over it, or for a resumed run its `saved` config (what its first launch resolved,
  whatever the preset says now); raises ValueError with a one-line message."""
  import envs
  from envs import presets as env_presets
  from launch.program import config as cfg_lib
  from launch.program import presets

  given = run_flags.given(FLAGS)
  run, env_name, mode = given[''], given['']['env'], given['reversibility']['mode']
  saved = saved if saved and saved.env == env_name else None   # another env: refused on resume
  preset = env_presets.PRESETS.get(env_name)   # an unknown name: envs.make's one line below
  options = {**(saved.env_options if saved else preset.train_env_options if preset else {}),
             **envs.parse_options(FLAGS.env_option)}
  if env_name == 'cartpole':
    options.setdefault('reward_free', FLAGS.reward_free)
  if FLAGS.episode_steps is not None:
    options['max_steps'] = FLAGS.episode_steps
  env = envs.make(env_name, seed=0, **options)  # validates name and options early, in the launcher
  episode_limit = options.get('max_steps', _default_option(env_name, 'max_steps')) or 200

  from estimators import networks as est_nets
  estimator_network = est_nets.default_estimator_config(env_name)
  checkpoint = run.get('estimator_checkpoint')
  if checkpoint:
    # Validate here, in the launcher, so a bad checkpoint is one line and not a dead node.
    from estimators import checkpoint as est_checkpoint
    ckpt = est_checkpoint.load(checkpoint)
    est_checkpoint.check_compatible(ckpt, env.observation_spec().shape,
                                    env.observation_spec().dtype, env.action_spec().num_values,
                                    env_name)
    if mode == 'rac' and ckpt.phi_params is None:
      raise ValueError(f'{checkpoint} holds no phi (train it with --phi) and --mode rac needs phi')
    estimator_network = ckpt.network
  policy_network = _section('policy_network', lambda: _policy_network(
      env_name, len(env.observation_spec().shape) == 3, given['policy_network']))
  run_dir = run.get('run_dir') or os.path.join(
      'runs', f'{env_name}-{run["agent"]}-{mode}-{time.strftime("%Y%m%d-%H%M%S")}')
  from_preset = dict(
      reversibility=lambda: presets.reversibility(env_name, mode, given['reversibility']),
      impala=lambda: presets.impala(env_name, given['impala'], run['max_steps']),
      precedence=lambda: presets.precedence(env_name, given['precedence']),
      estimator_train=lambda: presets.estimator_train(
          env_name, mode, episode_limit, {'seed': run['seed'], **given['estimator_train']}))
  sections = {name: _section(name, (lambda n=name: presets.kept(getattr(saved, n), n, given[n]))
                             if saved else build) for name, build in from_preset.items()}
  return _section('', lambda: cfg_lib.RunConfig(
      **{**run, 'env_options': options, 'run_dir': os.path.abspath(run_dir)}, **sections,
      estimator_network=estimator_network, policy_network=policy_network))


def check_launch_type_flags() -> None:
  """The flags a cluster or Vertex AI launch needs; raises ValueError (one line)."""
  if FLAGS.launch_type == 'cluster':
    if not FLAGS.cluster_description:
      raise ValueError('--launch_type cluster needs --cluster_description FILE (hosts and node '
                       'groups; see docs/cluster.md)')
    from launch.cluster import description as cluster_spec
    cluster_spec.load_description(FLAGS.cluster_description)
  elif FLAGS.cluster_description or FLAGS.cluster_start:
    raise ValueError('--cluster_description and --cluster_start need --launch_type cluster')
  if FLAGS.launch_type == 'vertex_ai':
    from launch.cluster import vertex_ai
    try:
      import xmanager  # noqa: F401  pylint: disable=unused-import
    except ImportError:
      raise ValueError(vertex_ai.VERTEX_AI_NEEDS) from None
    if not FLAGS.vertex_requirements or not os.path.exists(FLAGS.vertex_requirements):
      raise ValueError('--launch_type vertex_ai needs --vertex_requirements FILE (pip requirements '
                       'of the Docker image)')


def _default_option(env_name, option):
  import inspect

  import envs
  p = inspect.signature(envs.env_class(env_name).__init__).parameters.get(option)
  return None if p is None else p.default


def goal_mean_length() -> float:
  """--goal_mean_length, or its default: the main job ends when it has made its point."""
  if FLAGS.goal_mean_length is not None:
    return FLAGS.goal_mean_length
  main_job = FLAGS.env == 'cartpole' and FLAGS.reward_free and FLAGS.agent == 'impala'
  return MAIN_JOB_GOAL if main_job and not FLAGS['max_steps'].present else 0.0


def main(argv):
  del argv
  termination.stop_like_ctrl_c_on_termination()
  from launch.program import devices
  devices.keep_launcher_on_cpu()
  from launch.runtime import lifecycle, run_state
  cfg, records, placement = _checked_config()
  if FLAGS.show_config:
    print(json.dumps({**lifecycle.jsonable(cfg), 'placement': placement}, indent=2))
    return
  from launch.runtime import disk, run_lock
  if FLAGS.resume:
    nothing_to_do = lifecycle.already_done(cfg, records)
    if nothing_to_do:
      lifecycle.rebuild_lost_summary(records)
      print(nothing_to_do)
      return
  try:
    run_lock.acquire(cfg.run_dir)   # held until this process ends: one launch per run directory
  except run_lock.RunDirInUse as e:
    print(f'error: {e}', file=sys.stderr)
    sys.exit(2)
  low_space = disk.low_space_warning(cfg.run_dir, cfg.max_steps)
  if low_space:
    print(low_space, file=sys.stderr, flush=True)
  if not FLAGS.resume:
    records.write(run_state.FLAGS_FILE, {f.name: f.value for f in   # this module's: for --resume
                                         FLAGS.get_flags_for_module(sys.modules[__name__])})
  summary = _launch(cfg, records)
  if summary is not None and summary.get('status') == run_state.STOPPED:
    print(f'stopped; continue with: python -m launch.train --run_dir {cfg.run_dir} --resume')
    sys.exit(130)


def _checked_config():
  """(the run's config, its records, where its nodes run) from the flags (a resumed run's saved
  ones under those given), checked before anything starts: a bad request exits 2 with one line."""
  from launch.program import devices, replay
  from launch.runtime import lifecycle, run_config, run_state
  try:
    if not FLAGS.show_config:   # printing the configuration touches no run
      run_state.check_run_dir_use(FLAGS.run_dir, FLAGS.resume)
    elif FLAGS.resume and not FLAGS.run_dir:
      raise ValueError('--resume needs --run_dir (the run to continue)')
    records = None     # built once: a resumed run's hold its saved flags, so before the config
    if FLAGS.resume:   # (whose run_dir is the given --run_dir, absolute)
      records = run_state.RunRecords(os.path.abspath(FLAGS.run_dir))
      lifecycle.apply_saved_flags(FLAGS, records, keep=('resume', 'show_config', 'progress'))
      saved = run_config.load(FLAGS.run_dir)   # one written by an earlier version: one line
    cfg = config_from_flags(saved if FLAGS.resume else None)
    records = records or run_state.RunRecords(cfg.run_dir)
    check_launch_type_flags()
    if cfg.launch_type == 'cluster':
      from launch.cluster import description, package
      desc = description.load_description(FLAGS.cluster_description)
      package.check_placement(cfg, desc)
      placement = package.node_placement(cfg, desc)
    else:
      placement = devices.plan(cfg, devices.probe_host())   # a request it cannot meet: one line
    if FLAGS.resume:
      lifecycle.check_resume(cfg, saved)
      replay.check_layout(records)
    elif not FLAGS.show_config:
      run_state.check_writable(cfg.run_dir)
  except ValueError as e:
    print(f'error: {e}', file=sys.stderr)
    sys.exit(2)
  except KeyboardInterrupt:
    print('interrupted before launch; nothing was started', file=sys.stderr)
    sys.exit(130)
  return cfg, records, placement


def _launch(cfg, records):
  """Runs the program where --launch_type says and returns the run's summary (None for Vertex
  AI, which runs it elsewhere); a failed run exits 1, a description that does not fit the
  program 2, Ctrl-C 130."""
  from launch.runtime import disk, lifecycle
  from launch.runtime.processes import RunFailed
  try:
    if cfg.launch_type == 'cluster':
      from launch.cluster import start
      return start.run(cfg, records, FLAGS.cluster_description, FLAGS.cluster_start, resume=FLAGS.resume,
                       goal_mean_length=goal_mean_length(), show_progress=FLAGS.progress)
    if cfg.launch_type == 'vertex_ai':
      from launch.cluster import vertex_ai
      vertex_ai.launch_vertex_ai(cfg, FLAGS.vertex_requirements)
      return None
    return lifecycle.run_local(cfg, records, resume=FLAGS.resume,
                               goal_mean_length=goal_mean_length(), show_progress=FLAGS.progress)
  except ValueError as e:   # a description that does not fit the program (placement, ports)
    print(f'error: {e}', file=sys.stderr)
    sys.exit(2)
  except RunFailed as e:
    print(f'error: run failed: {e}', file=sys.stderr)
    sys.exit(1)
  except OSError as e:
    if e.errno != errno.ENOSPC:
      raise
    # The launcher's own records (run_state.json, summary.json) hit the full disk; what was
    # written before is whole (atomic writes), and --resume rebuilds what is missing.
    print(f'error: run failed: {disk.disk_full_reason(cfg.run_dir, "launcher")}', file=sys.stderr)
    sys.exit(1)
  except KeyboardInterrupt:
    sys.exit(130)

if __name__ == '__main__':
  app.run(main)

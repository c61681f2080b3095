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
import json
import os
import sys
import time

from absl import app, flags, logging

from envs import quiet
from launch.runtime import termination

FLAGS = flags.FLAGS
MAIN_JOB_GOAL = 195.0   # `make run`: the pole is kept up (the cap is 200), the point is made
flags.DEFINE_string('env', 'cartpole', 'Environment name (envs.make).')
flags.DEFINE_bool('reward_free', True, 'Cartpole only: remove the extrinsic reward.')
flags.DEFINE_integer('episode_steps', None, "Environment time limit (its 'max_steps' option), "
                     'e.g. 50000 for Cartpole+.')
flags.DEFINE_multi_string('env_option', [], 'Extra environment option key=value (repeatable).')
flags.DEFINE_enum('agent', 'impala', ['impala', 'random'], 'Policy: IMPALA or uniform random.')
flags.DEFINE_enum('mode', 'rae', ['none', 'rae', 'rac'], 'Reversibility use: none, RAE or RAC.')
flags.DEFINE_integer('num_actors', 2, 'Number of actor nodes.')
flags.DEFINE_integer('envs_per_actor', 1, 'Environments each actor steps together, with one '
                     'batched inference call per step.')
flags.DEFINE_bool('vectorised_env', True, "Step each actor's environments with the environment's "
                  'vectorised batch where it has one (sokoban: numpy over the K rooms, the same '
                  'episodes as K single environments); --novectorised_env steps them one by one.')
flags.DEFINE_integer('actor_threads', 0, "XLA threads per actor process (local launches): 1, or "
                     "0 for XLA's default, one per core.")
flags.DEFINE_integer('max_steps', 1_200_000, 'Total actor (environment) steps; the run stops there.')
flags.DEFINE_float('goal_mean_length', None, 'End the run early, with final checkpoints, once the '
                   'mean episode length of the last 100 episodes reaches this; 0: never. Default: '
                   f'{MAIN_JOB_GOAL:g} for the main job (reward-free Cartpole, whose cap is 200) '
                   'when --max_steps is not given, else 0.')
flags.DEFINE_string('run_dir', None, 'Output directory (default: runs/<env>-<mode>-<time>).')
flags.DEFINE_float('checkpoint_every_s', 300.0, 'Seconds between learner checkpoints (they also '
                   'save when the run ends or is stopped).')
flags.DEFINE_float('replay_checkpoint_every_s', 120.0, 'Seconds between checkpoints of the '
                   "replay's tables (RUN_DIR/checkpoints/replay; also written when the run ends or "
                   'is stopped): what a --resume or a restarted replay node starts from.')
flags.DEFINE_integer('max_node_failures', 3, 'A node process that dies is restarted; '
                     'this many deaths of one node within 60 s stop the run.')
flags.DEFINE_bool('resume', False, 'Continue the run in --run_dir from its checkpoints and counters '
                  '(its saved flags are the defaults; only --max_steps, --num_actors, --actor_threads, '
                  '--envs_per_actor, --vectorised_env, --launch_type and the checkpoint periods may '
                  'change).')
flags.DEFINE_enum('launch_type', 'local_mp', ['local_mp', 'local_mt', 'cluster', 'vertex_ai'],
                  "Launchpad launch type. 'cluster': the hosts of --cluster_description through "
                  "Launchpad's CLUSTER_SPEC runtime (launch.cluster); 'vertex_ai': Launchpad's own "
                  'Vertex AI launcher (needs xmanager, Docker, a GCP project).')
flags.DEFINE_string('cluster_description', None, '--launch_type cluster: the JSON (or YAML) file '
                    'naming the hosts and which node groups run where (launch.cluster.description).')
flags.DEFINE_bool('cluster_start', False, '--launch_type cluster: also start every host (through '
                  'its "start" prefix, else ssh HOST) and wait for the run, as a local launch; '
                  'without it the run is only packaged and the per-host, Slurm and Kubernetes '
                  'commands are printed.')
flags.DEFINE_string('vertex_requirements', None, '--launch_type vertex_ai: the pip requirements '
                    'file the Docker image installs.')
flags.DEFINE_integer('seed', 0, 'Random seed.')
# Reversibility.
flags.DEFINE_float('beta', None, 'Threshold (default: per (env, mode) preset, launch.program.presets).')
flags.DEFINE_float('lam', None, 'RAE penalty weight lambda (default: per (env, mode) preset).')
flags.DEFINE_enum('reward_form', None, ['paper', 'hinge'],
                  "RAE reward: 'paper' -lam*1[psi>beta]*psi, 'hinge' -lam*max(psi-beta,0) "
                  '(default: per (env, mode) preset).')
flags.DEFINE_enum('shield', 'rejection', ['rejection', 'replace'],
                  "RAC: 'rejection' (paper) or 'replace' with the most reversible action (authors' code).")
flags.DEFINE_string('estimator_checkpoint', None, 'Frozen psi/phi checkpoint (offline RAE/RAC).')
flags.DEFINE_integer('window', None, 'Precedence window w (default: the env recipe, '
                     'estimators.recipes, at most the time limit).')
flags.DEFINE_float('psi_learning_rate', None, 'Adam learning rate of psi and phi (default: the env recipe).')
flags.DEFINE_float('psi_weight_decay', None, 'AdamW weight decay of psi and phi (default: the env recipe).')
flags.DEFINE_integer('psi_batch_size', 128, 'Pairs per psi update.')
flags.DEFINE_enum('pair_sampling', None, ['uniform', 'start_uniform'],
                  "psi pairs: 'uniform' over the valid pairs (paper) or 'start_uniform' (start "
                  'uniform, then gap uniform) (default: the env recipe).')
flags.DEFINE_integer('env_steps_per_psi_update', None, 'Throttle of the precedence learner (default: preset).')
flags.DEFINE_integer('psi_windows_per_sample', None, 'Windows the precedence learner samples '
                     'from Reverb at once (default: launch.program.config.PrecedenceConfig).')
flags.DEFINE_integer('psi_min_windows', None, 'Windows the precedence table must hold before '
                     'psi trains (default: launch.program.config.PrecedenceConfig).')
flags.DEFINE_integer('psi_updates_per_sample', None, 'psi (and phi) updates made on each sample '
                     'of windows, each with its own pairs; 1: a fresh sample per update.')
flags.DEFINE_enum('phi_loss', 'l2', ['l2', 'bce'], 'phi regression loss.')
# IMPALA.
flags.DEFINE_float('learning_rate', None, 'IMPALA Adam learning rate (default: preset).')
flags.DEFINE_float('adam_b1', None, 'IMPALA Adam first-moment decay (default: preset; sokoban 0).')
flags.DEFINE_float('adam_b2', None, 'IMPALA Adam second-moment decay (default: preset; sokoban 0.99).')
flags.DEFINE_float('entropy_cost', None, 'IMPALA entropy cost (default: preset).')
flags.DEFINE_float('discount', None, 'IMPALA discount (default: preset).')
flags.DEFINE_integer('batch_size', None, 'IMPALA batch size in sequences (default: preset; sokoban '
                     "16 with replay x4; the paper's is 256).")
flags.DEFINE_integer('sequence_length', None, 'IMPALA unroll length (default: preset, 20).')
flags.DEFINE_float('max_gradient_norm', None, 'IMPALA global gradient-norm clip (default: preset).')
flags.DEFINE_float('samples_per_insert', None, 'IMPALA sequence reuse: 0 = a queue (each sequence '
                   'trained on once); > 0 = a replay where each sequence is sampled this many '
                   'times on average (default: preset).')
flags.DEFINE_integer('replay_size', None, 'IMPALA replay size in sequences when '
                     'samples_per_insert > 0 (default: preset).')
flags.DEFINE_integer('self_imitation_updates', None, 'IMPALA + self-imitation (Oh et al. 2018): '
                     'updates on the best terminated episodes after each V-trace update; 0 = '
                     'none (default: preset).')
flags.DEFINE_integer('canvas_size', None, "Image envs whose policy centres the room on the agent "
                     "(sokoban): the canvas's side, odd; 0: 2H-1 (19x19, the canvas before 15x15) "
                     '(default: preset, 15).')
flags.DEFINE_integer('self_imitation_batch', None, 'Steps per self-imitation update (default: 256).')
flags.DEFINE_integer('self_imitation_episodes', None, 'Best episodes each actor forwards to the '
                     'self-imitation table (default: 64).')
flags.DEFINE_integer('self_imitation_steps', None, 'Steps the self-imitation table keeps '
                     '(default: 8192).')
flags.DEFINE_bool('show_config', False, 'Print the resolved configuration (flags + presets) as '
                  'JSON and exit without launching.')


def _given(*names_to_fields):
  """{config field: value} of the flags the user gave (flag name -> field name pairs)."""
  return {field: getattr(FLAGS, flag) for flag, field in names_to_fields
          if getattr(FLAGS, flag) is not None}


def config_from_flags():
  """Parses flags once into a typed RunConfig: the env's preset (envs.presets) with the flags
  given laid over it; raises ValueError with a one-line message."""
  import envs
  from launch.program import config as cfg_lib
  from launch.program import presets

  options = envs.parse_options(FLAGS.env_option)
  if FLAGS.env == 'cartpole':
    options.setdefault('reward_free', FLAGS.reward_free)
  if FLAGS.episode_steps is not None:
    options['max_steps'] = FLAGS.episode_steps
  env = envs.make(FLAGS.env, seed=0, **options)  # validates name and options early, in the launcher
  episode_limit = options.get('max_steps', _default_option(FLAGS.env, 'max_steps')) or 200

  mode = FLAGS.mode
  from estimators import networks as est_nets
  network = est_nets.default_config(FLAGS.env)
  if FLAGS.estimator_checkpoint:
    # Validate here, in the launcher, so a bad checkpoint is one line and not a dead node.
    from estimators import checkpoint as est_checkpoint
    ckpt = est_checkpoint.load(FLAGS.estimator_checkpoint)
    est_checkpoint.check_compatible(ckpt, env.observation_spec().shape,
                                    env.observation_spec().dtype, env.action_spec().num_values,
                                    FLAGS.env)
    if mode == 'rac' and ckpt.phi_params is None:
      raise ValueError(f'{FLAGS.estimator_checkpoint} holds no phi (train it with --phi) '
                       'and --mode rac needs phi')
    network = ckpt.network
  from agents import networks as agent_networks
  policy_network = agent_networks.default_policy_config(
      FLAGS.env, len(env.observation_spec().shape) == 3)
  if FLAGS.canvas_size and not policy_network.centre_on:
    raise ValueError(f'--canvas_size applies where the policy centres the room on the agent '
                     f'(sokoban), not to {FLAGS.env}')
  if FLAGS.canvas_size is not None and policy_network.centre_on:
    policy_network = dataclasses.replace(policy_network, canvas_size=FLAGS.canvas_size)
  run_dir = FLAGS.run_dir or os.path.join('runs', f'{FLAGS.env}-{FLAGS.agent}-{mode}-{time.strftime("%Y%m%d-%H%M%S")}')
  return cfg_lib.RunConfig(
      env=FLAGS.env, env_options=options, agent=FLAGS.agent, num_actors=FLAGS.num_actors,
      envs_per_actor=FLAGS.envs_per_actor, vectorised_env=FLAGS.vectorised_env,
      max_steps=FLAGS.max_steps, seed=FLAGS.seed, run_dir=os.path.abspath(run_dir),
      launch_type=FLAGS.launch_type,
      reversibility=presets.reversibility(FLAGS.env, mode, dict(
          shield_mode=FLAGS.shield, **_given(('beta', 'beta'), ('lam', 'lam'),
                                             ('reward_form', 'reward_form')))),
      impala=presets.impala(FLAGS.env, _given(*((f, f) for f in (
          'batch_size', 'sequence_length', 'learning_rate', 'adam_b1', 'adam_b2', 'discount',
          'entropy_cost', 'max_gradient_norm', 'samples_per_insert', 'replay_size',
          'self_imitation_updates', 'self_imitation_batch', 'self_imitation_episodes',
          'self_imitation_steps')))),
      precedence=presets.precedence(FLAGS.env, _given(
          ('env_steps_per_psi_update', 'env_steps_per_update'),
          ('psi_windows_per_sample', 'window_batch'), ('psi_updates_per_sample', 'updates_per_sample'),
          ('psi_min_windows', 'min_windows'))),
      estimator_train=presets.estimator_train(FLAGS.env, mode, episode_limit, dict(
          batch_size=FLAGS.psi_batch_size, phi_loss=FLAGS.phi_loss, seed=FLAGS.seed,
          **_given(('window', 'window'), ('psi_learning_rate', 'learning_rate'),
                   ('psi_weight_decay', 'weight_decay'), ('pair_sampling', 'pair_sampling')))),
      network=network, policy_network=policy_network,
      estimator_checkpoint=FLAGS.estimator_checkpoint,
      actor_threads=FLAGS.actor_threads,
      checkpoint_period_s=FLAGS.checkpoint_every_s, max_node_failures=FLAGS.max_node_failures,
      replay_checkpoint_period_s=FLAGS.replay_checkpoint_every_s)


def check_launch_type_flags() -> None:
  """The flags a cluster or Vertex AI launch needs; raises ValueError (one line)."""
  if FLAGS.launch_type == 'cluster':
    if not FLAGS.cluster_description:
      raise ValueError('--launch_type cluster needs --cluster_description FILE (hosts and node '
                       'groups; see README "Running on a cluster")')
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


# Flags added after runs were saved, with the value that reproduces such a run on --resume (a
# Sokoban run saved before self-imitation existed resumes without it, not with today's preset).
# Likewise a Sokoban run saved before the 15x15 canvas resumes on its 19x19 one (0: 2H-1).
FLAGS_ADDED_LATER = {'self_imitation_updates': 0, 'canvas_size': 0}


def _train_flags():
  """This module's flags and their values (saved for --resume)."""
  return {f.name: f.value for f in FLAGS.get_flags_for_module(sys.modules[__name__])}


def main(argv):
  del argv
  quiet.quiet_startup()   # gym's notice, jax's backend probing: not for the terminal
  termination.stop_like_ctrl_c_on_termination()
  from launch.runtime import lifecycle
  from launch.runtime import run_state
  from launch.runtime.processes import RunFailed
  try:
    if not FLAGS.show_config:   # printing the configuration touches no run
      run_state.check_run_dir_use(FLAGS.run_dir, FLAGS.resume)
    elif FLAGS.resume and not FLAGS.run_dir:
      raise ValueError('--resume needs --run_dir (the run to continue)')
    if FLAGS.resume:
      lifecycle.apply_saved_flags(FLAGS, FLAGS.run_dir, keep=('resume', 'show_config'),
                                  added_later=FLAGS_ADDED_LATER)
    cfg = config_from_flags()
    check_launch_type_flags()
    if cfg.launch_type == 'cluster':
      from launch.cluster import description, package
      package.check_placement(cfg, description.load_description(FLAGS.cluster_description))
    if FLAGS.resume:
      lifecycle.check_resume(cfg)
    elif not FLAGS.show_config:
      run_state.check_writable(cfg.run_dir)
  except ValueError as e:
    print(f'error: {e}', file=sys.stderr)
    sys.exit(2)
  except KeyboardInterrupt:
    print('interrupted before launch; nothing was started', file=sys.stderr)
    sys.exit(130)
  if FLAGS.show_config:
    print(json.dumps(lifecycle.jsonable(cfg), indent=2))
    return
  if FLAGS.resume:
    nothing_to_do = lifecycle.already_done(cfg)
    if nothing_to_do:
      lifecycle.rebuild_lost_summary(cfg.run_dir)
      print(nothing_to_do)
      return
  else:
    run_state.write_json(os.path.join(cfg.run_dir, run_state.FLAGS_FILE), _train_flags())
  try:
    if cfg.launch_type == 'cluster':
      from launch.cluster import start
      summary = start.run(cfg, FLAGS.cluster_description, FLAGS.cluster_start, resume=FLAGS.resume,
                          goal_mean_length=goal_mean_length())
    elif cfg.launch_type == 'vertex_ai':
      from launch.cluster import vertex_ai
      vertex_ai.launch_vertex_ai(cfg, FLAGS.vertex_requirements)
      return
    else:
      summary = lifecycle.run_local(cfg, resume=FLAGS.resume, goal_mean_length=goal_mean_length())
  except ValueError as e:   # a description that does not fit the program (placement, ports)
    print(f'error: {e}', file=sys.stderr)
    sys.exit(2)
  except RunFailed as e:
    print(f'error: run failed: {e}', file=sys.stderr)
    sys.exit(1)
  except KeyboardInterrupt:
    sys.exit(130)
  if summary.get('status') == run_state.STOPPED:
    print(f'stopped; continue with: python -m launch.train --run_dir {cfg.run_dir} --resume')
    sys.exit(130)


if __name__ == '__main__':
  app.run(main)

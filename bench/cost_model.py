r"""The cost model of a Sokoban run at the authors' agent recipe (`python -m experiments sokoban
--scale authors`: 2 actors x 32 rooms, batch 256 x 20, each sequence trained on once) or at the
field's (`--scale field`: the same rooms and batch, in 8 minibatches of 32), with the preset's
policy network or a named one, IMPALA and IMPALA + RAE (frozen psi): where each env step's CPU
goes, and how far each part is from what this CPU can do.

    python -m bench.cost_model --out results/bench/cost_model_authors.json
    python -m bench.cost_model --recipe field --policy_preset sokoban_resnet --arms impala \
        --out results/bench/cost_model_field_resnet.json

Two kinds of measurement, in one invocation, on a machine with nothing else running:
- **The whole program** (`bench.program_profile`, per arm): a real `launch.train` run with the
  comparison's exact flags; every process read from /proc over a window: each node's CPU
  microseconds per env step and its share of the cores, env steps/s, the learner's updates.
- **The parts, one core each** (a child process with XLA and BLAS on one thread; CPU time): the
  vectorised Sokoban step of 32 rooms, the actor's fused jitted call (policy, and psi for RAE)
  for 32 rooms (with the networks folded, as the actors run them, and layered, for reference), the learner's jitted V-trace update (forward, backward, optimiser) at batch
  256 x 20; the FLOPs of each XLA computation from XLA's own cost analysis; and this CPU's peak,
  the best of a one-thread BLAS and XLA matrix product, with its memory copy bandwidth.

Per env step, the model is: environment, policy inference, psi inference (their one-core costs),
the rest of the actor nodes (Reverb writes, the loop's Python, logging: the actor nodes' measured
CPU less the three), the learner's update (its one-core cost per frame x frames trained per env
step), the rest of the learner node (sampling, unpacking, parameter serving), and the replay,
counter, coordinator and launcher. Each part's floor: its FLOPs at the CPU's peak; for the parts
that do no arithmetic (environment, writes), the bytes they move at the copy bandwidth. A part's
`x_floor` is its measured cost over its floor.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

from absl import flags

from bench import common, program_profile
from envs import cli

ROOMS = 32                  # rooms per actor at the authors' and the field's scales
UNROLL = 20                 # steps per sequence
RECIPES = ('authors', 'field')   # scales of `python -m experiments sokoban`
ONE_THREAD = {'XLA_FLAGS': '--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1',
              'OMP_NUM_THREADS': '1', 'OPENBLAS_NUM_THREADS': '1', 'MKL_NUM_THREADS': '1'}
ARMS = {'impala': 'impala-s0', 'rae': 'impala_rae-s0'}


def _cpu_per_call(fn, *args, min_s: float = 2.0):
  """CPU seconds per call of `fn(*args)` (results waited for), after one call that compiles."""
  import jax
  jax.block_until_ready(fn(*args))
  calls, start = 0, time.process_time()
  while time.process_time() - start < min_s or calls < 3:
    jax.block_until_ready(fn(*args))
    calls += 1
  return (time.process_time() - start) / calls


def _flops(fn, *args) -> float:
  """FLOPs of one call of the jitted `fn`, from XLA's cost analysis of the compiled program."""
  import jax
  cost = jax.jit(fn).lower(*args).compile().cost_analysis()
  cost = cost[0] if isinstance(cost, list) else cost
  return float(cost.get('flops', float('nan')))


def measure_peak() -> dict:
  """This CPU's arithmetic peak on one core (f32 matrix products: BLAS through numpy, and XLA's
  dot) and its memory copy bandwidth."""
  import jax
  import numpy as np
  n = 2048
  a = np.random.default_rng(0).standard_normal((n, n), dtype=np.float32)
  blas = 2 * n ** 3 / _cpu_per_call(np.matmul, a, a)
  xla = 2 * n ** 3 / _cpu_per_call(jax.jit(lambda x, y: x @ y), a, a)
  src = np.ones(64 * 2 ** 20, np.float32)        # 256 MB, far beyond the caches
  dst = np.empty_like(src)
  copy = 2 * src.nbytes / _cpu_per_call(np.copyto, dst, src)   # read + write
  return {'blas_matmul_gflop_s': blas / 1e9, 'xla_matmul_gflop_s': xla / 1e9,
          'peak_gflop_s': max(blas, xla) / 1e9, 'copy_gbyte_s': copy / 1e9}


def _agent(recipe: str) -> dict:
  """The recipe's IMPALA settings (the batch-16 agent + the scale's changes), as its runs get
  them."""
  from experiments import sokoban
  return {**sokoban.BATCH16_AGENT, **sokoban.SOKOBAN_SCALES[recipe]['agent']}


def _impala(recipe: str):
  from launch.program import config
  return config.ImpalaConfig(**{k: v for k, v in _agent(recipe).items()
                                if k in config.ImpalaConfig.__dataclass_fields__})


def measured_policy_config(policy_preset: str):
  """The policy network measured: the named preset, or ('') the environment's."""
  from agents import policy_net
  if policy_preset:
    return policy_net.named_policy_config(policy_preset, 'sokoban', True)
  return policy_net.default_policy_config('sokoban', True)


def measure_parts(recipe: str, policy_preset: str) -> dict:
  """The one-core cost and FLOPs of each part (run in a child with one XLA and BLAS thread)."""
  import numpy as np
  from acme import specs, wrappers

  import envs
  spec = specs.make_environment_spec(wrappers.SinglePrecisionWrapper(envs.make('sokoban', seed=0)))
  rng = np.random.default_rng(0)
  impala = _impala(recipe)
  net = measured_policy_config(policy_preset)
  out = {'peak': measure_peak(), 'rooms': ROOMS, 'batch': impala.batch_size,
         'minibatch': impala.minibatch_size, 'unroll': UNROLL,
         'environment': _measure_environment(spec, rng)}
  out.update(_measure_actor(spec, rng, net))
  out.update(_measure_learner(spec, rng, impala, net))
  return out


def _measure_environment(spec, rng) -> dict:
  """The vectorised step of 32 rooms, random actions: CPU per room step."""
  import numpy as np

  import envs
  batch_env = envs.make_batch('sokoban', list(range(ROOMS)))
  batch_env.reset()
  actions = [rng.integers(0, spec.actions.num_values, ROOMS).astype(np.int32) for _ in range(64)]
  steps, start = 0, time.process_time()
  while time.process_time() - start < 2.0:
    batch_env.step(actions[steps % len(actions)])
    steps += 1
  return {'cpu_us_per_step': 1e6 * (time.process_time() - start) / (steps * ROOMS),
          'bytes_per_step': int(np.prod(spec.observations.shape)) * spec.observations.dtype.itemsize}


def _policy(spec, net):
  import jax

  from agents import networks as agent_networks
  nets = agent_networks.make_networks(spec, net)
  return nets, nets.unroll_init_fn(jax.random.PRNGKey(0), agent_networks.DUMMY_CORE_STATE)


def _measure_actor(spec, rng, net) -> dict:
  """The actor's fused call for 32 rooms, policy only and policy + psi (untrained values: the
  cost does not depend on them), with the networks folded (as the actors run them) and layered;
  per env step, policy_inference is the first, psi_inference the difference. A policy with
  nothing to fold (a ResNet) runs layered in both forms, as its actors run it."""
  from agents import acting, policy_inference
  from agents import networks as agent_networks
  from bench import common as bench_common
  from estimators import checkpoint as est_checkpoint
  from estimators import folding
  from estimators import networks as est_nets
  num_actions = spec.actions.num_values
  nets, policy = _policy(spec, net)
  with tempfile.TemporaryDirectory() as d:
    ckpt = est_checkpoint.load(bench_common.untrained_estimators(
        os.path.join(d, 'psi.ckpt'), 'sokoban', spec))
  est = est_nets.make_estimators(ckpt.network, num_actions)
  obs = rng.integers(0, 256, (ROOMS,) + spec.observations.shape, dtype='uint8')
  folded = {'policy_inference': policy_inference.policy_inference(net, spec.observations.shape),
            'psi_inference': folding.psi_inference(ckpt.network, spec.observations.shape)}
  calls = {}
  for form in ('layered', 'folded'):
    for mode in ('none', 'rae'):
      actor = acting.BatchedActor(
          num_actions, acting.ReversibilityConfig(mode=mode, beta=0.9, lam=0.1),
          list(range(ROOMS)), policy_forward=nets.forward_fn,
          policy_source=acting.FixedParams(policy), estimators=est,
          estimator_source=acting.FixedParams((ckpt.psi_params, ckpt.phi_params)),
          **(folded if form == 'folded' else {}))
      calls[form, mode] = 1e6 * _cpu_per_call(actor.step, obs, obs) / ROOMS
  pol, psi = folded['policy_inference'], folded['psi_inference']
  layered_policy = _flops(lambda p, o: nets.unroll_fn(p, o, agent_networks.DUMMY_CORE_STATE),
                          policy, obs)
  flops = {
      ('layered', 'policy'): layered_policy,
      ('folded', 'policy'): (layered_policy if pol is None else
                             _flops(pol.forward, pol.fold(policy), obs)),
      ('layered', 'psi'): _flops(lambda p, x, y: est.psi_apply(p, None, x, y, False),
                                 ckpt.psi_params, obs, obs),
      ('folded', 'psi'): _flops(psi.logits, psi.fold(ckpt.psi_params), obs, obs)}
  out = {}
  for form, suffix in (('folded', ''), ('layered', '_layered')):
    out['policy_inference' + suffix] = {'cpu_us_per_step': calls[form, 'none'],
                                        'flops_per_step': flops[form, 'policy'] / ROOMS}
    out['psi_inference' + suffix] = {'cpu_us_per_step': calls[form, 'rae'] - calls[form, 'none'],
                                     'flops_per_step': flops[form, 'psi'] / ROOMS}
  return out


def _measure_learner(spec, rng, impala, net) -> dict:
  """The learner's update, one Adam step on one minibatch (the whole batch where there is one),
  forward, backward, optimiser, as it runs (the gradient in chunks) and in one call, per frame;
  FLOPs from the one-call form."""
  from agents import impala_step
  from launch.program import builder, config
  nets, policy = _policy(spec, net)
  loss = impala_step.LossConfig(discount=impala.discount, entropy_cost=impala.entropy_cost,
                                baseline_cost=impala.baseline_cost,
                                vtrace_lambda=impala.vtrace_lambda,
                                logit_l2_cost=impala.logit_l2_cost,
                                weight_l2_cost=impala.weight_l2_cost)
  data = _sequences(spec, rng, impala.minibatch_size)
  frames = impala.minibatch_size * UNROLL
  sgd = impala_step.sgd_step_fn(nets.unroll_fn, builder.make_optimizer(impala), loss)
  whole = impala_step.Update(nets.unroll_fn, builder.make_optimizer(impala), loss)
  flops = _flops(sgd, whole.init(policy), data) / frames
  out = {}
  chunk = config.RunConfig.__dataclass_fields__['learner_chunk_sequences'].default
  for name, chunk_sequences in (('learner_update', chunk), ('learner_update_whole_batch', 0)):
    update = impala_step.Update(nets.unroll_fn, builder.make_optimizer(impala), loss,
                                chunk_sequences=chunk_sequences)
    seconds = _cpu_per_call(update.sgd, update.init(policy), data, min_s=5.0)
    out[name] = {'cpu_us_per_frame': 1e6 * seconds / frames, 'flops_per_frame': flops,
                 'chunk_sequences': chunk_sequences}
  return out


def _sequences(spec, rng, size: int):
  """A batch of `size` sequences of UNROLL steps with random contents, as the learner reads one."""
  import numpy as np

  from agents import impala_step
  a = spec.actions.num_values
  shape = (size, UNROLL)
  return impala_step.Sequences(
      observation=rng.integers(0, 256, shape + spec.observations.shape, dtype=np.uint8),
      action=rng.integers(0, a, shape).astype(np.int32),
      reward=rng.standard_normal(shape).astype(np.float32),
      discount=np.full(shape, 0.99, np.float32),
      start_of_episode=np.zeros(shape, bool),
      extras={'logits': rng.standard_normal(shape + (a,)).astype(np.float32),
              'core_state': np.zeros(shape, np.float32)})


def _arm_flags(mode: str, ckpt: str, recipe: str, policy_preset: str):
  from experiments import sokoban
  steps = {s.name: list(s.flags) for s in sokoban.sokoban_steps(recipe, 1) if hasattr(s, 'flags')}
  flags_ = [f.replace('{out}/psi.ckpt', ckpt) for f in steps[ARMS[mode]]]
  if policy_preset:
    flags_ += ['--policy_preset', policy_preset]
  # The profile sets --run_dir and --max_steps itself.
  out, skip = [], False
  for f in flags_:
    if skip:
      skip = False
    elif f in ('--run_dir', '--max_steps'):
      skip = True
    else:
      out.append(f)
  return out


def model(parts: dict, profile: dict, mode: str) -> dict:
  """CPU microseconds per env step of each part of one arm's run, with floors and node shares."""
  peak = parts['peak']['peak_gflop_s'] * 1e3        # FLOPs per microsecond
  copy = parts['peak']['copy_gbyte_s'] * 1e3         # bytes per microsecond
  nodes = profile['nodes']
  actors = sum(v['cpu_us_per_env_step'] for k, v in nodes.items() if k.startswith('actor'))
  learner = nodes.get('learner', {}).get('cpu_us_per_env_step', 0.0)
  learner_info = profile.get('learner', {})
  frames_per_step = learner_info.get('updates_per_env_step', 0.0) * parts['minibatch'] * UNROLL
  rows = {}

  def row(name, us, floor_us, basis):
    rows[name] = {'cpu_us_per_env_step': us, 'floor_us': floor_us, 'floor_basis': basis,
                  'x_floor': us / floor_us if floor_us else None}

  env = parts['environment']
  row('environment', env['cpu_us_per_step'], 2 * env['bytes_per_step'] / copy,
      'the observation written and read once at the copy bandwidth')
  pol = parts['policy_inference']
  row('policy_inference', pol['cpu_us_per_step'], pol['flops_per_step'] / peak, 'FLOPs at peak')
  psi_us = 0.0
  if mode == 'rae':
    psi = parts['psi_inference']
    psi_us = psi['cpu_us_per_step']
    row('psi_inference', psi_us, psi['flops_per_step'] / peak, 'FLOPs at peak')
  # A step's row goes to Reverb once: its observation, the packed step fields and the logits.
  row_bytes = env['bytes_per_step'] + 4 * (8 + 8)
  row('actor_writes_and_loop', actors - env['cpu_us_per_step'] - pol['cpu_us_per_step'] - psi_us,
      2 * row_bytes / copy, 'one row copied into Reverb at the copy bandwidth')
  upd = parts['learner_update']
  row('learner_update', upd['cpu_us_per_frame'] * frames_per_step,
      upd['flops_per_frame'] * frames_per_step / peak, 'FLOPs at peak')
  row('learner_other', learner - rows['learner_update']['cpu_us_per_env_step'],
      row_bytes * frames_per_step / copy, 'each frame sampled once at the copy bandwidth')
  rest = sum(v['cpu_us_per_env_step'] for k, v in nodes.items()
             if not k.startswith('actor') and k != 'learner')
  row('replay_counter_coordinator_launcher', rest, None, 'no arithmetic: bookkeeping and RPCs')
  total = profile['cpu_us_per_env_step']
  return {'env_steps_per_s': profile['env_steps_per_s'], 'cores_used': profile['cores_used'],
          'projection': actor_side_projection(rows),
          'cpu_us_per_env_step': total, 'frames_trained_per_env_step': frames_per_step,
          'parts': rows,
          'node_cores': {k: round(v['cores'], 3) for k, v in nodes.items()},
          'node_share_of_cpu': {k: round(v['cpu_us_per_env_step'] / total, 3)
                                for k, v in nodes.items()}}


PROJECTED_CORES = 16   # a user's host with a GPU learner


def actor_side_projection(parts: dict, cores: int = PROJECTED_CORES) -> dict:
  """Env steps/s the actors alone would make on a host of `cores` whose learner is a GPU: the
  cores left to actors (all but the launcher's and the services', host_preset.SERVICE_CORES + 1)
  over the measured CPU microseconds of the actors' parts per env step (environment, policy and
  psi inference, writes and loop). A bound: it assumes the GPU learner keeps up and the actors'
  costs stay per env step as measured here."""
  from launch.runtime import host_preset
  names = ('environment', 'policy_inference', 'psi_inference', 'actor_writes_and_loop')
  actor_us = sum(parts[n]['cpu_us_per_env_step'] for n in names if n in parts)
  actor_cores = cores - 1 - host_preset.SERVICE_CORES
  return {'cores': cores, 'actor_cores': actor_cores, 'actor_us_per_env_step': actor_us,
          'env_steps_per_s': actor_cores * 1e6 / actor_us,
          'how': f'{actor_cores} actor cores x 1e6 / the actors\' CPU us per env step '
                 f'({" + ".join(n for n in names if n in parts)})'}


def define_flags(fv: flags.FlagValues) -> None:
  flags.DEFINE_string('out', 'results/bench/cost_model_authors.json', 'JSON output.',
                      flag_values=fv)
  flags.DEFINE_list('arms', list(ARMS), 'Arms profiled: impala, rae.', flag_values=fv)
  flags.DEFINE_integer('warmup_steps', 300_000, 'Env steps of each run before its window '
                       '(start-up, compiling, the queue filling).', flag_values=fv)
  flags.DEFINE_float('window_s', 60.0, 'Seconds of each run measured.', flag_values=fv)
  flags.DEFINE_string('workdir', None, 'Where the runs go (default: a temp dir).', flag_values=fv)
  flags.DEFINE_enum('recipe', 'authors', RECIPES, 'The agent recipe: a scale of '
                    '`python -m experiments sokoban`.', flag_values=fv)
  flags.DEFINE_string('policy_preset', '', 'A named policy network (envs.presets.POLICY_NETWORKS); '
                      "empty: the Sokoban preset's.", flag_values=fv)
  flags.DEFINE_string('parts_json', None, 'Internal: measure the parts in this process (one '
                      'thread) and write them here.', flag_values=fv)


def main(argv=None):
  args, _ = cli.parse(define_flags, argv, prog='python -m bench.cost_model',
                      description=__doc__.split('\n\n')[0])
  if args.parts_json:
    common.write_json(args.parts_json, measure_parts(args.recipe, args.policy_preset))
    return
  unknown = set(args.arms) - set(ARMS)
  if unknown:
    cli.fail(f'unknown arm(s) {sorted(unknown)}; expected some of {list(ARMS)}')
  workdir = args.workdir or tempfile.mkdtemp(prefix='bench-cost-model-')
  os.makedirs(workdir, exist_ok=True)
  parts_path = os.path.join(workdir, 'parts.json')
  subprocess.run([sys.executable, '-m', 'bench.cost_model', '--parts_json', parts_path,
                  '--recipe', args.recipe, '--policy_preset', args.policy_preset],
                 env=dict(os.environ, **ONE_THREAD), check=True)
  with open(parts_path) as f:
    parts = json.load(f)
  result = {'recipe': f'python -m experiments sokoban --scale {args.recipe}',
            'policy_network': args.policy_preset or 'sokoban (the preset)',
            'parts_one_core': parts, 'arms': {}}
  from bench import sokoban_speed
  ckpt = sokoban_speed.untrained_psi(os.path.join(workdir, 'untrained_psi.ckpt'))
  for mode in args.arms:
    print(f'--- profiling {mode}', flush=True)
    arm_dir = os.path.join(workdir, mode)
    os.makedirs(arm_dir, exist_ok=True)
    profile = program_profile.profile(_arm_flags(mode, ckpt, args.recipe, args.policy_preset),
                                      args.warmup_steps, args.window_s, arm_dir)
    result['arms'][mode] = {'model': model(parts, profile, mode), 'profile': profile}
    common.write_json(args.out, result)
  arms = result['arms']
  if 'impala' in arms and 'rae' in arms:
    result['rae_over_impala_env_steps_per_s'] = (arms['rae']['model']['env_steps_per_s'] /
                                                 arms['impala']['model']['env_steps_per_s'])
  common.write_json(args.out, result)
  print(json.dumps({m: {k: round(v['cpu_us_per_env_step'], 1) for k, v in a['model']['parts'].items()}
                    for m, a in arms.items()}, indent=2))


if __name__ == '__main__':
  main()

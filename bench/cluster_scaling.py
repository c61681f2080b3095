r"""Scaling of the cluster launch: the same reward-free Cartpole RAE job with 1, 2, 4 and 8 actor
processes, each run across network namespaces (bench.netns_hosts: replay, counter and
coordinator on one host, the two learners on another, the actors spread over four more), started
by `launch.train --launch_type cluster --cluster_start`. Needs root.

    python -m bench.cluster_scaling --actors 1,2,4,8 --out results/cluster_scaling.json

Per run: env steps/s, learner and precedence-learner steps/s (least squares over the counter
node's counts, sampled from counts.json during a fixed window after warm-up), the actors' loop
breakdown (us per step in env / inference / Reverb writes), and CPU seconds of the replay and
learner processes per item and per step. Then, one process on loopback, the per-item and
per-fetch costs a 64-actor estimate needs: the Reverb server's insert cost through the real
writer (one per actor, one row per actor step for its K rooms), and a parameter fetch (policy;
psi + phi) from a Courier server like the learners'. `--actors=` (no runs) measures only these
two, and needs no namespaces.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np
import psutil
from absl import flags

from bench import common, netns_hosts
from envs import cli
from launch.program.config import RunConfig


def define_flags(fv: flags.FlagValues) -> None:
  """This bench's own knobs (the job it runs is fixed: JOB)."""
  flags.DEFINE_list('actors', ['1', '2', '4', '8'], 'Actor counts to run.', flag_values=fv)
  flags.DEFINE_integer('actor_hosts', 4, 'Namespaces the actors are spread over (round-robin).',
                       flag_values=fv)
  flags.DEFINE_float('warmup_s', 20.0, 'Seconds after the first actor steps left out.',
                     flag_values=fv)
  flags.DEFINE_float('window_s', 90.0, 'Seconds measured per run.', flag_values=fv)
  flags.DEFINE_float('start_timeout_s', 1200.0, 'Longest wait for the first actor steps.',
                     flag_values=fv)
  flags.DEFINE_integer('fetches', 300, 'Parameter fetches timed per payload.', flag_values=fv)
  flags.DEFINE_integer('insert_steps', 20_000,
                       'Environment steps written in the insert measurement.', flag_values=fv)
  flags.DEFINE_integer('insert_rooms', RunConfig().envs_per_actor,
                       "Rooms of the actor's writer in the insert measurement (default: the "
                       "job's, RunConfig's envs_per_actor).", flag_values=fv)
  flags.DEFINE_string('workdir', None, 'Where runs go (default: a temp dir).', flag_values=fv)
  flags.DEFINE_string('out', 'results/cluster_scaling.json', 'JSON output.', flag_values=fv)


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JOB = ['--env', 'cartpole', '--reward_free', '--mode', 'rae',
       '--precedence_env_steps_per_update', '100', '--max_steps', '100000000']


def _rate(samples, key):
  """Slope (per second) of counts[key] over (time, counts) samples, by least squares."""
  t = np.array([s[0] for s in samples])
  y = np.array([s[1].get(key, 0.0) for s in samples])
  if len(t) < 3 or t[-1] - t[0] <= 0:
    return None
  return float(np.polyfit(t - t[0], y, 1)[0])


def _pid(run_dir, node):
  try:
    with open(os.path.join(run_dir, 'pids', f'{node}.pid')) as f:
      return psutil.Process(int(f.read()))
  except (OSError, ValueError, psutil.Error):
    return None


def _cpu(proc):
  try:
    t = proc.cpu_times()
    return t.user + t.system
  except (psutil.Error, AttributeError):
    return None


def _distinct_snapshots(samples):
  """The counter snapshots with distinct times only (counts.json is rewritten every 2 s)."""
  seen, uniq = set(), []
  for t, c in samples:
    if t not in seen:
      seen.add(t)
      uniq.append((t, c))
  return uniq


def run_one(num_actors: int, workdir: str, args) -> dict:
  """The job with `num_actors` actors across namespaces, measured as `args` (the parsed flags:
  actor_hosts, start_timeout_s, warmup_s, window_s) say."""
  actor_hosts = [f'c{i}' for i in range(min(args.actor_hosts, num_actors))]
  with netns_hosts.NetnsHosts(['a', 'b'] + actor_hosts, subnet=num_actors % 250) as hosts:
    run_dir = os.path.join(workdir, f'actors-{num_actors}')
    desc_path = os.path.join(workdir, f'cluster-{num_actors}.json')
    with open(desc_path, 'w') as f:
      json.dump({'name': f'scale{num_actors}',
                 'hosts': {h: {'address': hosts.address(h), 'start': hosts.start_prefix(h)}
                           for h in ['a', 'b'] + actor_hosts},
                 'groups': {'replay': 'a', 'counter': 'a', 'coordinator': 'a', 'learner': 'b',
                            'precedence_learner': 'b', 'actor': {'hosts': actor_hosts}}}, f)
    cmd = [sys.executable, '-m', 'launch.train', *JOB, '--num_actors', str(num_actors),
           '--run_dir', run_dir, '--launch_type', 'cluster', '--cluster_start',
           '--cluster_description', desc_path]
    log = open(os.path.join(workdir, f'actors-{num_actors}.log'), 'w')
    proc = subprocess.Popen(cmd, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=log,
                            stderr=subprocess.STDOUT)
    counts_path = os.path.join(run_dir, 'counts.json')
    start, first = time.time(), None
    samples, cpu = [], {}
    try:
      while proc.poll() is None:
        now = time.time()
        try:
          with open(counts_path) as f:
            counts = json.load(f)
        except (OSError, ValueError):
          counts = {}
        if first is None and counts.get('actor_steps', 0) > 0:
          first = now
        if first is None and now - start > args.start_timeout_s:
          raise RuntimeError(f'{num_actors} actors: no actor step within {args.start_timeout_s} s')
        if first is not None and now - first >= args.warmup_s:
          samples.append((os.path.getmtime(counts_path), counts))
          for node in ('replay', 'learner', 'precedence_learner'):
            p = _pid(run_dir, node)
            c = _cpu(p) if p else None
            if c is not None:
              cpu.setdefault(node, []).append((now, c, counts))
          if now - first >= args.warmup_s + args.window_s:
            break
        time.sleep(2.0)
    finally:
      if proc.poll() is None:
        # SIGTERM: the CLI's graceful stop. Not SIGINT: a bench started in the background by a
        # non-interactive shell passes SIGINT on ignored, and the run would never stop.
        proc.send_signal(signal.SIGTERM)
        try:
          proc.wait(timeout=300)
        except subprocess.TimeoutExpired:
          proc.kill()
      log.close()
    uniq = _distinct_snapshots(samples)
    out = {'num_actors': num_actors, 'actor_hosts': len(actor_hosts),
           'startup_s': (first - start) if first else None,
           'measured_s': (uniq[-1][0] - uniq[0][0]) if len(uniq) > 1 else 0.0,
           'env_steps_per_s': _rate(uniq, 'actor_steps'),
           'learner_steps_per_s': _rate(uniq, 'learner_steps'),
           'precedence_steps_per_s': _rate(uniq, 'precedence_steps'),
           'actor_breakdown_us_per_step': common.actor_loop_us(run_dir)}
    if out['env_steps_per_s'] and out['learner_steps_per_s']:
      out['learner_frames_per_env_step'] = 320 * out['learner_steps_per_s'] / out['env_steps_per_s']
    for node, series in cpu.items():
      if len(series) < 2:
        continue
      (t0, c0, n0), (t1, c1, n1) = series[0], series[-1]
      out[f'{node}_cpu_fraction'] = (c1 - c0) / (t1 - t0)
      steps = n1.get('actor_steps', 0) - n0.get('actor_steps', 0)
      if steps > 0:
        out[f'{node}_cpu_us_per_env_step'] = 1e6 * (c1 - c0) / steps
    out['status'] = (json.load(open(os.path.join(run_dir, 'summary.json'))).get('status')
                     if os.path.exists(os.path.join(run_dir, 'summary.json')) else None)
  out['namespaces_left'] = hosts.exists()   # after the with block: all should be gone
  return out


def random_rows(num_steps: int, rooms: int):
  """(spec, observations [R, K, ...], steps [R, K, F]): the rows one actor of K = `rooms`
  random-policy Cartpole rooms (extrinsic reward) writes in R = ceil(num_steps / K) actor steps,
  as the actor's loop builds them (agents.loop: each row the observation acted on, the action
  and its outcome; a room reset by that step gets its episode's filler row), recorded beforehand
  so that only the writes are timed."""
  from acme import specs, wrappers

  import envs
  from agents import adders
  from envs import batch as batch_lib
  batch = batch_lib.EnvironmentList([
      wrappers.SinglePrecisionWrapper(envs.make('cartpole', seed=k, reward_free=False))
      for k in range(rooms)])
  spec = specs.make_environment_spec(batch.environments[0])
  rng = np.random.default_rng(0)
  observation = batch.reset()
  starts = np.ones(rooms, bool)   # observation[k] is the first of an episode
  observations, steps = [], []
  for _ in range(-(-num_steps // rooms)):
    actions = rng.integers(spec.actions.num_values, size=rooms).astype(np.int32)
    step = batch.step(actions)
    taken = step.step_type != batch_lib.FIRST   # the rooms reset by this step took no action
    observations.append(observation)
    steps.append(adders.step_rows(starts, actions, step.reward, step.discount, ~taken, 0.0))
    observation, starts = step.observation, ~taken
  return spec, np.stack(observations), np.stack(steps)


def insert_cost(num_steps: int, rooms: int = RunConfig().envs_per_actor) -> dict:
  """Reverb server + writer cost per environment step and per item, through the real writer
  (agents.adders.ActorWriter: one per actor, one row per actor step for its K = `rooms` rooms;
  items of the run's rooms_per_item rooms: IMPALA unrolls of 20 and precedence windows of 2w,
  w = 200), one process on loopback. env_steps counts rows x K (a room's filler row after each
  episode included). Process CPU counts the server's start and stop too."""
  import reverb

  from agents import adders
  from launch.program import builder
  spec, observations, steps = random_rows(num_steps, rooms)
  group = builder.rooms_per_item(RunConfig(envs_per_actor=rooms))
  logits = np.zeros((rooms, spec.actions.num_values), np.float32)
  n_rows = len(steps)
  n_steps = n_rows * rooms
  # The process's CPU clock (all threads, the server's included) to the nanosecond: psutil's
  # times tick at 10 ms, which a short measurement can fall inside.
  c0 = time.process_time()
  server = reverb.Server([
      reverb.Table(name, reverb.selectors.Uniform(), reverb.selectors.Fifo(), 1_000_000,
                   reverb.rate_limiters.MinSize(1), signature=signature)
      for name, signature in ((adders.IMPALA_TABLE, adders.impala_signature(spec, 20, group)),
                              (adders.PRECEDENCE_TABLE,
                               adders.precedence_signature(spec, 200, group)))])
  try:
    client = reverb.Client(f'localhost:{server.port}')
    writer = adders.ActorWriter(client, rooms, impala_sequence=20, window=200,
                                rooms_per_item=group)
    t0 = time.perf_counter()
    for observation, row in zip(observations, steps):
      writer.append(observation, row, logits)
    writer.flush()
    wall = time.perf_counter() - t0
    writer.close()
    items = {table: info.current_size for table, info in client.server_info().items()}
  finally:
    server.stop()
  c1 = time.process_time()
  n_items = sum(items.values())
  return {'env_steps': n_steps, 'rows': n_rows, 'rooms': rooms, 'rooms_per_item': group,
          'items': items, 'wall_us_per_env_step': 1e6 * wall / n_steps,
          'wall_us_per_item': 1e6 * wall / n_items, 'cpu_us_per_item': 1e6 * (c1 - c0) / n_items}


def fetch_cost(fetches: int) -> dict:
  """A parameter fetch as actors make it (`get_variables` over Courier, as a VariableClient
  calls the learners), from a Courier server in this process, for the IMPALA policy and for
  psi + phi of Cartpole."""
  import courier
  import jax
  from launchpad.nodes.courier import courier_utils

  from agents import networks as agent_networks
  from estimators import networks as est_nets
  from estimators import training
  from launch.program import builder as program
  from launch.program.config import RunConfig
  spec = program.environment_spec(RunConfig(env='cartpole', env_options={'reward_free': True}))
  nets = agent_networks.make_networks(spec, agent_networks.default_policy_config('cartpole', False))
  key_state, key_params = jax.random.split(jax.random.PRNGKey(0))
  policy = nets.unroll_init_fn(key_params, nets.initial_state_fn(nets.initial_state_init_fn(key_state)))
  est = est_nets.make_estimators(est_nets.default_estimator_config('cartpole'), spec.actions.num_values)
  obs = np.zeros(spec.observations.shape, spec.observations.dtype)
  state = training.init_state(est, training.TrainConfig(train_phi=True), obs)
  payloads = {'policy': policy, 'psi': state.psi_params, 'phi': state.phi_params}

  class Source:
    def get_variables(self, names):
      return [payloads[n] for n in names]

  server = courier_utils.make_courier_server(Source())
  server.Start()
  out = {}
  try:
    client = courier.Client(server.address)
    for label, names in (('policy', ['policy']), ('psi_phi', ['psi', 'phi'])):
      nbytes = sum(np.asarray(x).nbytes for n in names for x in jax.tree_util.tree_leaves(payloads[n]))
      client.get_variables(names)   # warm-up (connection)
      t0, c0 = time.perf_counter(), time.process_time()
      for _ in range(fetches):
        client.get_variables(names)
      dt = (time.perf_counter() - t0) / fetches
      dc = (time.process_time() - c0) / fetches
      out[label] = {'bytes': int(nbytes), 'us_per_fetch': 1e6 * dt,
                    'cpu_us_per_fetch_client_and_server': 1e6 * dc}
  finally:
    server.Stop()
  return out


def main(argv=None) -> int:
  args, _ = cli.parse(define_flags, argv, prog='python -m bench.cluster_scaling',
                      description=__doc__.split('\n\n')[0])
  actor_counts = cli.int_list(args.actors, 'actors')
  workdir = args.workdir or tempfile.mkdtemp(prefix='bench-cluster-')
  why = netns_hosts.unavailable_reason() if actor_counts else None
  if why:
    sys.exit(f'error: {why}')
  results = {'job': ' '.join(JOB), 'cores': os.cpu_count(),
             'load_average_at_start': os.getloadavg(), 'runs': []}
  for n in actor_counts:
    print(f'--- {n} actor(s)', flush=True)
    r = run_one(n, workdir, args)
    r['load_average_after'] = os.getloadavg()
    print(json.dumps(r, indent=2), flush=True)
    results['runs'].append(r)
    common.write_json(args.out, results)
  results['insert_cost'] = insert_cost(args.insert_steps, args.insert_rooms)
  results['fetch_cost'] = fetch_cost(args.fetches)
  common.write_json(args.out, results)
  print(json.dumps({k: results[k] for k in ('insert_cost', 'fetch_cost')}, indent=2))
  return 0


if __name__ == '__main__':
  sys.exit(main())

r"""Where the CPU goes in the whole running program: per node (Launchpad process) and per thread
kind inside it, in cores and in CPU microseconds per env step, measured over a window of a real
`launch.train` run (nothing mocked, nothing in-process).

    python -m bench.program_profile --out results/bench/profile_sokoban.json -- \
        --env sokoban --mode none --num_actors 2 --envs_per_actor 16 --batch_size 16 \
        --samples_per_insert 4 --max_gradient_norm 1 --self_imitation_updates 0 --minibatches 1

Everything after `--` goes to `launch.train` unchanged (its --max_steps is set from the window).
The run starts in a temp directory; after `--warmup_steps` env steps, every process of the run
(the nodes named by RUN_DIR/pids, the launcher and anything else in its process tree) is read
from /proc twice, `--window_s` apart: per process its CPU seconds over the window, and those of
its busiest threads (Python's main thread, then the pools': XLA's Eigen threads, TensorFlow's,
gRPC's). Beside it, from the nodes' own logs over the same run: the learner's
seconds per update (its jitted step only) and the actors' loop timers (environment, inference,
writes). Then the run is stopped.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import psutil
from absl import flags

from bench import common
from envs import cli
from launch.runtime import run_state, summary
from launch.runtime.launcher import node_names


def _thread_label(pid: int, tid: int) -> str:
  """'main' for the process's first thread, else its name (most threads keep the process's
  name: XLA's and TensorFlow's pools do not rename theirs) and id."""
  if tid == pid:
    return 'main'
  try:
    with open(f'/proc/{pid}/task/{tid}/comm') as f:
      return f'{f.read().strip()}/{tid}'
  except OSError:
    return f'?/{tid}'


def process_tree(root: int):
  try:
    p = psutil.Process(root)
    return [p] + p.children(recursive=True)
  except psutil.NoSuchProcess:
    return []


def snapshot(procs, names, xla_flags=None):
  """{pid: (node name, process CPU s, {thread: CPU s}, thread count)}; `xla_flags`, if given,
  gets each process's XLA_FLAGS."""
  out = {}
  xla_flags = {} if xla_flags is None else xla_flags
  for p in procs:
    try:
      cpu = p.cpu_times()
      threads = {}
      for t in p.threads():
        threads[_thread_label(p.pid, t.id)] = t.user_time + t.system_time
      out[p.pid] = (names.get(p.pid) or ' '.join(p.cmdline()[:3])[-60:],
                    cpu.user + cpu.system, threads, p.num_threads())
      xla_flags[p.pid] = p.environ().get('XLA_FLAGS', '')
    except psutil.NoSuchProcess:
      pass
  return out


def env_steps(run_dir: str) -> int:
  return int(run_state.RunRecords(run_dir).saved_actor_steps())


def learner_update_seconds(run_dir: str, start_steps: int, end_steps: int) -> dict:
  """Mean seconds of the learner's jitted update over the rows logged between two env-step
  counts (its `learner_time_elapsed` is the update's own time, data wait excluded)."""
  rows = [r for r in summary.read_log(run_dir, 'learner')
          if start_steps <= r.get('actor_steps', -1) <= end_steps]
  if len(rows) < 2:
    return {}
  updates = rows[-1]['learner_steps'] - rows[0]['learner_steps']
  seconds = rows[-1]['learner_time_elapsed'] - rows[0]['learner_time_elapsed']
  return {'updates': updates, 'update_s_mean': seconds / max(updates, 1),
          'updates_per_env_step': updates / max(end_steps - start_steps, 1)}


def profile(train_args, warmup_steps: int, window_s: float, workdir: str,
            tree: str = None) -> dict:
  run_dir = os.path.join(workdir, 'run')
  # Enough steps that the run outlasts the window at any speed this machine reaches.
  cmd = [sys.executable, '-m', 'launch.train', *train_args, '--run_dir', run_dir,
         '--max_steps', str(warmup_steps + int(window_s * 20_000) + 100_000)]
  # Another version of the code (a checkout at `tree`): PYTHONPATH comes before site-packages,
  # so the launcher and every node process import that tree's modules.
  env = dict(os.environ, PYTHONPATH=tree) if tree else None
  proc = subprocess.Popen(cmd, stdout=open(os.path.join(workdir, 'train.log'), 'w'),
                          stderr=subprocess.STDOUT, start_new_session=True, cwd=tree, env=env)
  try:
    while env_steps(run_dir) < warmup_steps:
      if proc.poll() is not None:
        raise RuntimeError(f'the run ended before {warmup_steps} steps: see {workdir}/train.log')
      time.sleep(1.0)
    names = node_names(run_dir)
    procs = process_tree(proc.pid)
    s0, t0, before = env_steps(run_dir), time.time(), snapshot(procs, names)
    time.sleep(window_s)
    xla_flags = {}
    s1, t1, after = env_steps(run_dir), time.time(), snapshot(procs, names, xla_flags)
  finally:
    run_state.RunRecords(run_dir).request_stop()
    try:
      proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
      os.killpg(proc.pid, signal.SIGKILL)
  wall, steps = t1 - t0, s1 - s0
  nodes = {}
  for pid, (name, cpu1, threads1, nthreads) in after.items():
    if pid not in before:
      continue
    _, cpu0, threads0, _ = before[pid]
    if cpu1 - cpu0 <= 0:   # idle helpers (Launchpad's output decorators, its entry shells)
      continue
    threads = {k: v - threads0.get(k, 0.0) for k, v in threads1.items()}
    nodes[name] = {
        'cores': (cpu1 - cpu0) / wall,
        'cpu_us_per_env_step': 1e6 * (cpu1 - cpu0) / max(steps, 1),
        'threads': nthreads, 'xla_flags': xla_flags.get(pid, ''),
        # The busiest threads: how a node's work spreads over its pools.
        'cpu_us_per_env_step_by_thread': {k: round(1e6 * v / max(steps, 1), 1) for k, v in
                                          sorted(threads.items(), key=lambda kv: -kv[1])[:6]
                                          if v > 0}}
  total = sum(n['cores'] for n in nodes.values())
  return {'train_args': train_args, 'tree': tree or os.getcwd(), 'window_s': wall, 'env_steps': steps,
          'env_steps_per_s': steps / wall, 'cores_used': total,
          'cpu_us_per_env_step': 1e6 * total * wall / max(steps, 1),
          'processes': len(after), 'busy_processes': len(nodes),
          'threads': sum(t for _, _, _, t in after.values()),
          'nodes': dict(sorted(nodes.items(), key=lambda kv: -kv[1]['cores'])),
          'learner': learner_update_seconds(run_dir, s0, s1),
          'actor_loop_wall_us_per_env_step': common.actor_loop_us(run_dir)}


def define_flags(fv: flags.FlagValues) -> None:
  flags.DEFINE_integer('warmup_steps', 100_000, 'Env steps before the window opens (start-up and '
                       'compiling excluded).', flag_values=fv)
  flags.DEFINE_float('window_s', 60.0, 'Seconds measured.', flag_values=fv)
  flags.DEFINE_string('out', 'results/bench/program_profile.json', 'JSON output.', flag_values=fv)
  flags.DEFINE_string('workdir', None, 'Where the run goes (default: a temp dir).', flag_values=fv)
  flags.DEFINE_string('tree', None, 'Profile the code of this checkout (e.g. a git worktree of an '
                      'earlier commit) instead of this one.', flag_values=fv)


def main(argv=None):
  argv = list(sys.argv[1:] if argv is None else argv)
  train_args = []
  if '--' in argv:
    i = argv.index('--')
    argv, train_args = argv[:i], argv[i + 1:]
  args, _ = cli.parse(define_flags, argv, prog='python -m bench.program_profile',
                      description=__doc__.split('\n\n')[0])
  workdir = args.workdir or tempfile.mkdtemp(prefix='bench-profile-')
  os.makedirs(workdir, exist_ok=True)
  result = profile(train_args, args.warmup_steps, args.window_s, workdir,
                   args.tree and os.path.abspath(args.tree))
  common.write_json(args.out, result)
  print(json.dumps(result, indent=2))


if __name__ == '__main__':
  main()

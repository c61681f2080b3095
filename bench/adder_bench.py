r"""Cost of writing one environment's steps to Reverb: Acme's two SequenceAdders (one writer per
table, each sending every observation, one column per field) against `agents.adders.TrajectoryAdder`
(one writer, both tables' items referring to the same columns, rows of three columns), same
steps, a local Reverb server each, one invocation.

    python -m bench.adder_bench --env sokoban --steps 20000 --out results/adder_bench.json

Reports microseconds per step spent in the adders: wall; CPU time of the calling thread (the
machine may be busy, and CPU time does not count waiting for a core); and CPU time of the whole
process, which adds the writers' worker threads and the Reverb server (here in-process; on a
run it is another process on the same cores). Also the uncompressed bytes per step handed to
Reverb writers (sum over columns appended, from the step's arrays).
"""
import json
import time
from typing import Dict, NamedTuple

import numpy as np
import reverb
import tree
from absl import app, flags
from acme import specs, wrappers
from acme.adders import reverb as reverb_adders

from agents import adders
from bench import common

FLAGS = flags.FLAGS


def define_flags():
  """Only when run as a script (tests import `AcmeAdders` beside other modules' flags)."""
  flags.DEFINE_string('env', 'sokoban', 'Environment.')
  flags.DEFINE_integer('steps', 20_000, 'Environment steps per measurement.')
  flags.DEFINE_integer('sequence_length', 20, 'IMPALA unroll.')
  flags.DEFINE_integer('window', 15, 'Precedence window w.')
  flags.DEFINE_integer('repeats', 2, 'Measurements per adder (best kept).')
  flags.DEFINE_string('out', 'results/adder_bench.json', 'JSON output.')


class AcmeAdders:
  """What the actors used before: one Acme SequenceAdder (and writer) per table."""

  def __init__(self, client, sequence_length, window):
    self._impala = reverb_adders.SequenceAdder(
        client=client, priority_fns={adders.IMPALA_TABLE: None}, period=sequence_length - 1,
        sequence_length=sequence_length, end_of_episode_behavior=reverb_adders.EndBehavior.CONTINUE)
    self._windows = reverb_adders.SequenceAdder(
        client=client, priority_fns={adders.PRECEDENCE_TABLE: None}, period=window,
        sequence_length=2 * window, end_of_episode_behavior=reverb_adders.EndBehavior.TRUNCATE)

  @staticmethod
  def signatures(spec, sequence_length):
    """Their tables' signatures: Acme's items, one column per field and extra."""
    extras = {'core_state': np.zeros((), np.float32),
              'logits': np.ones((spec.actions.num_values,), np.float32),
              'policy_version': np.zeros((), np.float32)}
    return {adders.IMPALA_TABLE: reverb_adders.SequenceAdder.signature(spec, extras, sequence_length),
            adders.PRECEDENCE_TABLE: reverb_adders.SequenceAdder.signature(
                spec, {'valid': np.ones((), np.float32)}, sequence_length=None)}

  def add_first(self, ts):
    self._impala.add_first(ts)
    self._windows.add_first(ts)

  def add(self, action, ts, extras):
    self._impala.add(action, ts, extras)
    self._windows.add(action, ts, {'valid': np.float32(1.0)})


def _steps(env_name, n):
  """Pre-recorded random-policy timesteps, so only the adders are timed."""
  import envs
  options = {'reward_free': False} if env_name == 'cartpole' else {}
  env = wrappers.SinglePrecisionWrapper(envs.make(env_name, seed=0, **options))
  rng = np.random.default_rng(0)
  num_actions = env.action_spec().num_values
  out, ts = [], env.reset()
  out.append(('first', ts, None))
  while len(out) < n:
    a = np.int32(rng.integers(num_actions))
    ts = env.step(a)
    out.append(('add', ts, a))
    if ts.last():
      ts = env.reset()
      out.append(('first', ts, None))
  return env, out


class Measurement(NamedTuple):
  wall_s: float
  thread_cpu_s: float    # the thread calling the adder
  process_cpu_s: float   # every thread of the process, the Reverb server's included
  items: Dict[str, int]  # table -> items written


def measure(make_adder, spec, steps, num_actions, sequence_length, signatures=None) -> Measurement:
  """signatures: {table: signature} of what the adder writes; default `agents.adders`' rows."""
  if signatures is None:
    signatures = {adders.IMPALA_TABLE: adders.impala_signature(spec, sequence_length),
                  adders.PRECEDENCE_TABLE: adders.precedence_signature(spec)}
  server = reverb.Server([
      reverb.Table(name, reverb.selectors.Uniform(), reverb.selectors.Fifo(), 1_000_000,
                   reverb.rate_limiters.MinSize(1), signature=signature)
      for name, signature in signatures.items()])
  try:
    adder = make_adder(reverb.Client(f'localhost:{server.port}'))
    extras = {'logits': np.zeros(num_actions, np.float32), 'core_state': np.float32(0.0),
              'policy_version': np.float32(0.0)}
    start = (time.perf_counter(), time.thread_time(), time.process_time())
    for kind, ts, a in steps:
      if kind == 'first':
        adder.add_first(ts)
      else:
        adder.add(a, ts, extras)
    if hasattr(adder, 'flush'):
      adder.flush()
    end = (time.perf_counter(), time.thread_time(), time.process_time())
    del adder
    info = reverb.Client(f'localhost:{server.port}').server_info()
    return Measurement(*(b - a for a, b in zip(start, end)),
                       items={t: i.current_size for t, i in info.items()})
  finally:
    server.stop()


def main(argv):
  del argv
  env, steps = _steps(FLAGS.env, FLAGS.steps)
  spec = specs.make_environment_spec(env)
  num_actions = spec.actions.num_values
  n_add = sum(1 for k, _, _ in steps if k == 'add')
  obs_bytes = int(np.prod(spec.observations.shape)) * np.dtype(spec.observations.dtype).itemsize
  # Columns per step: observation, start flag, action, reward, discount; extras: core_state,
  # logits, policy_version (IMPALA) and valid (precedence).
  other = 1 + 4 + 4 + 4
  results = {'env': FLAGS.env, 'steps': n_add, 'observation_bytes': obs_bytes}
  makers = {
      'acme_two_adders': lambda c: AcmeAdders(c, FLAGS.sequence_length, FLAGS.window),
      'trajectory_adder': lambda c: adders.TrajectoryAdder(c, FLAGS.sequence_length, FLAGS.window)}
  signatures = {'acme_two_adders': AcmeAdders.signatures(spec, FLAGS.sequence_length),
                'trajectory_adder': None}
  # Rows of TrajectoryAdder: observation, the float32 'steps' vector, logits.
  payload = {'acme_two_adders': 2 * (obs_bytes + other) + 4 * num_actions + 3 * 4,
             'trajectory_adder': obs_bytes + 4 * len(adders.STEP_FIELDS) + 4 * num_actions}
  runs = {n: [] for n in makers}
  for _ in range(FLAGS.repeats):   # interleaved, so a busy spell of the machine hits both
    for name, make in makers.items():
      runs[name].append(measure(make, spec, steps, num_actions, FLAGS.sequence_length,
                                signatures[name]))
  for name, measured in runs.items():
    best = lambda field: 1e6 * min(getattr(m, field) for m in measured) / n_add
    results[name] = {'us_per_step': best('wall_s'), 'cpu_us_per_step': best('thread_cpu_s'),
                     'process_cpu_us_per_step': best('process_cpu_s'),
                     'items': measured[-1].items, 'bytes_per_step_to_writers': payload[name]}
  for key, ratio in (('us_per_step', 'speedup'), ('cpu_us_per_step', 'cpu_speedup'),
                     ('process_cpu_us_per_step', 'process_cpu_speedup')):
    results[ratio] = results['acme_two_adders'][key] / results['trajectory_adder'][key]
  common.write_json(FLAGS.out, results)
  print(json.dumps(results, indent=2))


if __name__ == '__main__':
  define_flags()
  app.run(main)

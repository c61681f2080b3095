"""bench.learner_bench times the real learner's V-trace update and, on request, one
self-imitation update, and reports the learner's work with both against V-trace alone; its
flags of the run configuration's fields are generated from them."""
import dataclasses

from absl import flags

from bench import learner_bench


def test_learner_bench_times_a_self_imitation_update_beside_the_vtrace_one():
  out = learner_bench.measure('cliff', 2, 4, 1, self_imitation_batch=8)
  assert out['seconds_per_update'] > 0 and out['frames_per_s'] > 0
  assert out['self_imitation_batch'] == 8 and out['seconds_per_self_imitation_update'] > 0
  assert out['learner_work_with_self_imitation'] == (
      (out['seconds_per_update'] + out['seconds_per_self_imitation_update'])
      / out['seconds_per_update'])
  assert 'self_imitation_batch' not in learner_bench.measure('cliff', 2, 4, 1)


def test_learner_bench_generates_its_config_flags_from_the_run_configuration():
  from envs import cli
  from launch.program.config import ImpalaConfig
  args, _ = cli.parse(learner_bench.define_flags, ['--batch_size', '16', '--canvas_sizes', '0,15'],
                      prog='learner_bench')
  assert (args.env, args.batch_size, args.sequence_length, args.self_imitation_batch) == (
      'sokoban', 16, 20, 0)
  assert args.canvas_sizes == ['0', '15']
  fv = flags.FlagValues()
  learner_bench.define_flags(fv)
  for name in ('batch_size', 'sequence_length', 'self_imitation_batch'):
    doc = {f.name: f.metadata['help'] for f in dataclasses.fields(ImpalaConfig)}[name]
    assert fv[name].help.startswith(doc)

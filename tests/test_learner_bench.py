"""bench.learner_bench times the real learner's V-trace update and, on request, one
self-imitation update, and reports the learner's work with both against V-trace alone."""
from bench import learner_bench


def test_learner_bench_times_a_self_imitation_update_beside_the_vtrace_one():
  out = learner_bench.measure('cliff', 2, 4, 1, self_imitation_batch=8)
  assert out['seconds_per_update'] > 0 and out['frames_per_s'] > 0
  assert out['self_imitation_batch'] == 8 and out['seconds_per_self_imitation_update'] > 0
  assert out['learner_work_with_self_imitation'] == (
      (out['seconds_per_update'] + out['seconds_per_self_imitation_update'])
      / out['seconds_per_update'])
  assert 'self_imitation_batch' not in learner_bench.measure('cliff', 2, 4, 1)

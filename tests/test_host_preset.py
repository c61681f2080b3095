"""launch.runtime.host_preset: the host-sized Sokoban run (actors = the cores the learner and
the service nodes leave, 16 rooms each, the learner's cores dividing its batch), the projection
of a host's env steps/s, and the experiment scale built from it."""
from launch.program import devices
from launch.runtime import host_preset


def test_a_cpu_host_splits_its_cores_between_learner_and_actors():
  for cores in (2, 4, 8, 16, 32, 64):
    s = host_preset.size(cores, gpu=False)
    assert s.learner_device == 'cpu' and s.envs_per_actor == 16 and s.batch_size == 16
    assert s.batch_size % s.learner_host_devices == 0 and s.num_actors >= 1
    if cores >= 4:   # cores are not shared: learner + actors + the service core
      assert s.learner_host_devices + s.num_actors + host_preset.SERVICE_CORES == cores
  # The batch of 16 caps the learner at 16 devices; more cores go to actors.
  assert host_preset.size(64, gpu=False).learner_host_devices == 16
  assert host_preset.size(16, gpu=False).learner_host_devices == 8


def test_a_gpu_host_gives_the_learner_the_gpu_and_the_actors_the_cores():
  s = host_preset.size(16, gpu=True)
  assert (s.learner_device, s.learner_host_devices, s.num_actors) == ('gpu', 0, 14)
  assert s.updates_per_call == 4 and host_preset.size(16, gpu=False).updates_per_call == 1
  assert host_preset.this_host(devices.Host(1, True, 16)) == s
  assert host_preset.this_host(devices.Host(1, False, 16)).learner_device == 'cpu'


def test_the_projection_is_the_smaller_of_learner_and_actors():
  from bench import gpu_learner_check
  p = gpu_learner_check.projected_env_steps_per_s(200_000, cores=16, actor_env_steps_per_core=1000)
  assert p['learner_env_steps_per_s'] == 50_000 and p['actor_env_steps_per_s'] == 14_000
  assert p['env_steps_per_s'] == 14_000 and p['bound_by'] == 'actors'


def test_the_host_scale_runs_the_long_comparison_at_this_hosts_sizes():
  from experiments import sokoban
  steps = [s for s in sokoban.sokoban_steps('host', 1) if s.is_training]
  sizes = host_preset.this_host()
  args = steps[0].args
  assert args[args.index('--num_actors') + 1] == str(sizes.num_actors)
  assert args[args.index('--learner_host_devices') + 1] == str(sizes.learner_host_devices)
  assert args[args.index('--learner_device') + 1] == sizes.learner_device
  assert args[args.index('--updates_per_call') + 1] == str(sizes.updates_per_call)

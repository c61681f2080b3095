"""Checks shared by the tests that run the whole program on several hosts made of network
namespaces: test_cluster (the project's own host launcher) and test_slurm (the generated Slurm
job under a real Slurm). Reward-free Cartpole RAE, replay + counter + coordinator on host a, the
two learners on b, two actors on c."""
import json
import time
from typing import Callable, Dict, Iterable, List

from bench import netns_hosts
from launch.program import checkpointing
from launch.runtime import summary

HOSTS = ('a', 'b', 'c')
GROUPS = {'replay': 'a', 'counter': 'a', 'coordinator': 'a', 'learner': 'b',
          'precedence_learner': 'b', 'actor': {'hosts': ['c']}}
PLACED = {'replay-0': 'a', 'counter-0': 'a', 'coordinator-0': 'a', 'learner-0': 'b',
          'precedence_learner-0': 'b', 'actor-0': 'c', 'actor-1': 'c'}
NODES_PER_HOST = {'a': 3, 'b': 2, 'c': 2}


def train_args(run_dir, max_steps: int) -> List[str]:
  """launch.train flags of the short run both tests make."""
  return ['--env', 'cartpole', '--reward_free', '--mode', 'rae', '--num_actors', '2',
          '--max_steps', str(max_steps), '--run_dir', str(run_dir),
          '--precedence_env_steps_per_update', '10']


def actors_stepped(run_dir) -> bool:
  counts = run_dir / 'counts.json'
  try:
    return json.loads(counts.read_text()).get('actor_steps', 0) > 0
  except (OSError, ValueError):
    return False


def sample_listeners(hosts: netns_hosts.NetnsHosts, run_dir,
                     running: Callable[[], bool]) -> Dict[str, List[netns_hosts.Listener]]:
  """Once the actors step (every node is then up), the listening sockets of each host; {} when
  the run ended first. No deadline of its own: on a loaded machine start-up alone has taken over
  20 minutes, and the run bounds this loop (it ends by itself, or fails)."""
  while running():
    if actors_stepped(run_dir):
      time.sleep(2.0)  # the counter syncs its counts once actors step
      return {h: hosts.listening(h) for h in HOSTS}
    time.sleep(1.0)
  return {}


def check_own_addresses(hosts: netns_hosts.NetnsHosts, listening, ignore: Iterable[str] = ()):
  """Each node listened on its own host's address only: replay, counter, coordinator on a;
  learner and precedence learner on b; the actors on c. `ignore`: names of processes that are
  not the program's (the Slurm daemons of a host)."""
  assert listening, 'the run ended before its listening sockets were sampled'
  for host, nodes in NODES_PER_HOST.items():
    program = [l for l in listening[host] if l.command not in set(ignore)]
    own = {hosts.address(host), f'::ffff:{hosts.address(host)}'}
    assert len({l.pid for l in program}) == nodes, (host, listening[host])
    assert {l.ip for l in program} <= own, (host, program)


def check_placement(run_dir) -> None:
  launch = json.loads((run_dir / 'cluster' / 'launch.json').read_text())
  assert {r['task']: r['host'] for r in launch['replicas']} == PLACED


def check_learned(run_dir, status: str, min_steps: int, psi_changed: bool = True) -> dict:
  """The run ended with `status` after at least `min_steps` actor steps: both tables received
  items, both learners stepped and their final checkpoints hold their last step, and (unless
  `psi_changed` is False: a run stopped early) every actor's psi changed. Returns
  final_state.json."""
  final = json.loads((run_dir / 'final_state.json').read_text())
  assert final['status'] == status, final
  assert final['counts']['actor_steps'] >= min_steps, final['counts']
  assert final['tables']['impala']['num_inserts'] > 0, final['tables']
  assert final['tables']['precedence']['num_inserts'] > 0, final['tables']
  s = json.loads((run_dir / 'summary.json').read_text())
  assert s['learner_steps'] > 0 and s['precedence_steps'] > 0, s
  assert s['status'] == status, s
  for name, count in (('learner', 'learner_steps'), ('precedence_learner', 'precedence_steps')):
    header = checkpointing.read_header(str(run_dir / 'checkpoints' / name))
    assert header['steps'] == final['checkpoints'][name]['steps'] == final['counts'][count]
  for actor in ('actor_0', 'actor_1') if psi_changed else ():
    rows = summary.read_log(str(run_dir), actor)
    assert rows, f'{actor} logged no episode'
    assert max(r.get('psi_change', 0.0) for r in rows) > 0.0, actor
  return final

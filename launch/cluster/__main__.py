"""`python -m launch.cluster node --run_dir R` (one replica, from CLUSTER_SPEC) and
`python -m launch.cluster host --run_dir R --host H` (every replica of host H): the commands the
packaged task and host scripts run (launch.cluster.replica). `python -m launch.cluster stop
--run_dir R` asks a running cluster launch for a graceful stop (what Ctrl-C is to a local run;
the Slurm job's batch shell runs it on SIGTERM)."""
import argparse
import os
import sys

from launch.cluster.description import ClusterSpecError
from launch.cluster.package import read_launch
from launch.cluster.replica import host_main, node_main
from launch.runtime import processes, run_state


def stop_main(run_dir: str) -> int:
  """Asks the coordinator to end the run (learners save their last step); returns at once."""
  launch = read_launch(run_dir)
  if os.path.exists(launch['stop_file']):
    print(f'launch {launch["launch_id"]} of {run_dir} has already stopped', flush=True)
    return 0
  run_state.request_stop(run_dir)
  print(f'asked launch {launch["launch_id"]} of {run_dir} to stop: the coordinator ends the run '
        'with final checkpoints', flush=True)
  return 0


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(
      prog='python -m launch.cluster',
      description='Cluster replicas of a packaged run (see launch.train --launch_type cluster).')
  sub = parser.add_subparsers(dest='command', required=True)
  node = sub.add_parser('node', help='run the replica named by CLUSTER_SPEC')
  node.add_argument('--run_dir', required=True)
  node.add_argument('--grace_s', type=float, default=processes.GRACEFUL_STOP_S,
                    help='after SIGTERM: seconds to wait for a graceful program stop')
  host = sub.add_parser('host', help="run every replica of one host and wait for them")
  host.add_argument('--run_dir', required=True)
  host.add_argument('--host', required=True)
  stop = sub.add_parser('stop', help='ask the running launch for a graceful stop')
  stop.add_argument('--run_dir', required=True)
  args = parser.parse_args(argv)
  run_dir = os.path.abspath(args.run_dir)
  try:
    if args.command == 'node':
      return node_main(run_dir, args.grace_s)
    if args.command == 'stop':
      return stop_main(run_dir)
    return host_main(run_dir, args.host)
  except ClusterSpecError as e:
    print(f'error: {e}', file=sys.stderr, flush=True)
    return 2


if __name__ == '__main__':
  sys.exit(main())

"""`python -m launch.cluster node --run_dir R` (one replica, from CLUSTER_SPEC) and
`python -m launch.cluster host --run_dir R --host H` (every replica of host H): the commands the
packaged task and host scripts run (launch.cluster.replica)."""
import argparse
import os
import sys

from launch.cluster.description import ClusterSpecError
from launch.cluster.replica import host_main, node_main
from launch.runtime import processes


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
  args = parser.parse_args(argv)
  run_dir = os.path.abspath(args.run_dir)
  try:
    if args.command == 'node':
      return node_main(run_dir, args.grace_s)
    return host_main(run_dir, args.host)
  except ClusterSpecError as e:
    print(f'error: {e}', file=sys.stderr, flush=True)
    return 2


if __name__ == '__main__':
  sys.exit(main())

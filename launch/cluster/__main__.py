"""`python -m launch.cluster node --run_dir R` (one replica, from CLUSTER_SPEC) and
`python -m launch.cluster host --run_dir R --host H` (every replica of host H): the commands the
packaged task and host scripts run (launch.cluster.replica). `python -m launch.cluster stop
--run_dir R` asks a running cluster launch for a graceful stop (what Ctrl-C is to a local run;
the Slurm job's batch shell runs it on SIGTERM)."""
import os
import sys

from absl import flags

from envs import cli
from launch.cluster.description import ClusterSpecError
from launch.cluster.package import read_launch
from launch.cluster.replica import host_main, job_key, node_main
from launch.runtime import processes, run_lock, run_state


def _held_by_another_job(run_dir: str) -> bool:
  """Whether this Slurm job's batch shell would stop a run that is not its own: a live lock
  whose record names another job (this job's coordinator was refused, launch.cluster.replica)."""
  job = job_key()
  if job is None or (run_lock.holder(run_dir) or {}).get('job') == job:
    return False
  try:
    run_lock.check_free(run_dir)
    return False    # nothing live holds it: a stop request waits for this job's coordinator
  except run_lock.RunDirInUse:
    return True


def stop_main(run_dir: str) -> int:
  """Asks the coordinator to end the run (learners save their last step); returns at once."""
  launch = read_launch(run_dir)
  if _held_by_another_job(run_dir):
    who = run_lock.holder(run_dir) or {}
    print(f'{run_dir} is held by job {who.get("job")} (pid {who.get("pid")} on {who.get("host")}),'
          ' not by this one: nothing of this job to stop', flush=True)
    return 0
  if os.path.exists(launch['stop_file']):
    print(f'launch {launch["launch_id"]} of {run_dir} has already stopped', flush=True)
    return 0
  run_state.RunRecords(run_dir).request_stop()
  print(f'asked launch {launch["launch_id"]} of {run_dir} to stop: the coordinator ends the run '
        'with final checkpoints', flush=True)
  return 0


COMMANDS = {'node': 'run the replica named by CLUSTER_SPEC',
            'host': 'run every replica of one host and wait for them',
            'stop': 'ask the running launch for a graceful stop'}


def define_flags(fv: flags.FlagValues) -> None:
  flags.DEFINE_string('run_dir', None, 'the packaged run (every command)', flag_values=fv)
  flags.DEFINE_float('grace_s', None, 'node: after SIGTERM, seconds to wait for a graceful '
                     f'program stop (default: {processes.GRACEFUL_STOP_S:g})', flag_values=fv)
  flags.DEFINE_string('host', None, 'host: the host whose replicas to run', flag_values=fv)
  flags.DEFINE_string('job', None, 'node, host: the token of the launcher that started this job '
                      '(launch.train --cluster_start holds the run directory for it)',
                      flag_values=fv)


def main(argv=None) -> int:
  usage = 'COMMAND, one of: ' + '; '.join(f'{c} ({h})' for c, h in COMMANDS.items())
  args, command = cli.parse(define_flags, argv, prog='python -m launch.cluster', positional=usage,
                            description='Cluster replicas of a packaged run (see launch.train '
                            '--launch_type cluster).', required=('run_dir',))
  if len(command) != 1 or command[0] not in COMMANDS:
    cli.fail(f'expected one command of {", ".join(COMMANDS)}, got {" ".join(command) or "none"}')
  args.command = command[0]
  if args.command == 'host' and args.host is None:
    cli.fail('--host is required by the host command')
  for name, only in (('host', 'host'), ('grace_s', 'node')):
    if getattr(args, name) is not None and args.command != only:
      cli.fail(f'--{name} is for the {only} command only')
  if args.job is not None and args.command == 'stop':
    cli.fail('--job is for the node and host commands only')
  if args.grace_s is None:
    args.grace_s = processes.GRACEFUL_STOP_S
  run_dir = os.path.abspath(args.run_dir)
  try:
    if args.command == 'node':
      return node_main(run_dir, args.grace_s, args.job)
    if args.command == 'stop':
      return stop_main(run_dir)
    return host_main(run_dir, args.host, args.job)
  except (ClusterSpecError, run_lock.RunDirInUse) as e:
    print(f'error: {e}', file=sys.stderr, flush=True)
    return 2


if __name__ == '__main__':
  sys.exit(main())

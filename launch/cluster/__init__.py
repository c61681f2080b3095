r"""Cluster launch: the program on many hosts through Launchpad's own CLUSTER_SPEC runtime.

`python -m launch.train --launch_type cluster --cluster_description hosts.json --run_dir R`
packages the run into R/cluster/ (R must be readable and writable from every host):

  program/<group>.pkl   the group's nodes, pickled by Launchpad's serializer; entry i is replica i
  launch.json           this launch: id, replicas (group, index, host, endpoint), code dir, python
  tasks/<task>.sh       one script per replica: sets CLUSTER_SPEC, runs `launch.cluster node`
  hosts/<host>.sh       one script per host: runs `launch.cluster host` (all its replicas)
  slurm/                job.sbatch, multi_prog.conf, hostfile (`sbatch R/cluster/slurm/job.sbatch`)
  kubernetes.yaml       headless Service + an Indexed Job per group (`kubectl apply -f`)
  commands.txt          the per-host commands
  logs/                 each replica's node output (<task>.log), host launchers' output

and prints the per-host commands; with `--cluster_start` it also runs them (through each host's
"start" prefix: ssh, `ip netns exec`, ...) and supervises the run to its end like a local run.

Every replica is `python -m launch.cluster node --run_dir R` with CLUSTER_SPEC in its
environment. That process is a small wrapper around Launchpad's own entry point
(`launchpad/nodes/python/process_entry.py --data_file R/cluster/program/<group>.pkl`, which picks
its entry from CLUSTER_SPEC's task index; every address resolves through Launchpad's
`VertextAiAddressBuilder` from CLUSTER_SPEC). The wrapper adds what a scheduler does not give:
  - the node binds only its own host's address (the bind shim of launch.runtime.loopback, aimed at the
    address CLUSTER_SPEC gives this task), and a bad address or a taken port is one line;
  - program stop: `lp.stop()` in any node (the coordinator at the end, a supervisor giving up)
    writes R/cluster/stopped-<launch>.json; every wrapper watches it and stops its node;
  - SIGTERM (scancel, pod deletion, Ctrl-C of a host launcher) asks the coordinator for a
    graceful stop (final checkpoints) and waits for it before stopping the node;
  - a node process that dies without a program stop records R/failure.json and stops the run
    (learners and actors are restarted by their supervisors first, as locally);
  - the coordinator's wrapper keeps the run record (run_state.json segment, summary.json).

`python -m launch.cluster host --run_dir R --host H` starts every replica of host H (their
task scripts) and waits for them.

Modules: description (the hosts file and CLUSTER_SPEC), placement (replicas onto hosts and
ports), files (task/host scripts, Slurm, Kubernetes), package (RUN_DIR/cluster/ and the program
stopper), replica (the per-replica and per-host wrappers; `python -m launch.cluster`), start
(the CLI's part), vertex_ai, netns_hosts (network-namespace hosts for tests and benchmarks).
"""

r"""Cluster launch: the program on many hosts through Launchpad's own CLUSTER_SPEC runtime.

`python -m launch.train --launch_type cluster --cluster_description hosts.json --run_dir R`
packages the run into R/cluster/ (R must be readable and writable from every host) and prints
the per-host commands; with `--cluster_start` it also runs them and supervises the run to its
end like a local run (`start`).

Modules: description (the hosts file and CLUSTER_SPEC), placement (replicas onto hosts and
ports), files (task/host scripts, Slurm, Kubernetes), package (RUN_DIR/cluster/ and the program
stopper), replica (the per-replica and per-host wrappers; `python -m launch.cluster`), start
(the CLI's part), vertex_ai. The hosts the tests and the cluster benchmark run on are
bench/netns_hosts.py (network namespaces) and tests/slurm_local.py (a throwaway Slurm cluster).
"""

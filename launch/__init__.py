"""The distributed system: the Launchpad program (Reverb tables, learners, actors), the run's
life, the cluster path and the command-line entry points that start runs. The experiments about
it live in the top-level package `experiments`."""

"""The Launchpad program (Reverb tables, learners, actors) and the command-line entry points."""

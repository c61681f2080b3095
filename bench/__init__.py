"""Benchmarks only: each module times the real code (the program, the actor, the learner, the
environments, psi training, Reverb tables) and writes its JSON through bench.common.write_json.
netns_hosts gives the cluster benchmark (and the cluster tests) hosts on one machine.
Experiments are experiments/ modules; test fixtures live in tests/."""

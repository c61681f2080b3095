"""Benchmarks only: each module times the real code (the program, the actor, the learner, the
environments, psi training, Reverb tables) and writes its JSON through bench.common.write_json.
Experiments are launch/experiments/ modules; test fixtures live in tests/."""

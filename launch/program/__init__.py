"""The Launchpad program: its typed configuration and per-environment presets, the factories of
its nodes (Reverb tables, adders, IMPALA and precedence learners, actors, counter, coordinator)
and the layout that wires them (`build.build_program`), learner checkpoints, the node loggers,
and the single-process DQN baseline."""

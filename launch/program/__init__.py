"""The Launchpad program: its typed configuration and per-environment presets, the builder (what
the agent is: environments, networks, optimiser, tables, adders, learners, actor), the layout
(how it is distributed: the nodes and the program that wires them, `layout.build_program`),
the coordinator node, the replay node, the precedence learner node, learner checkpoints, the node
loggers, where each node runs (devices) and the command line generated from the config."""

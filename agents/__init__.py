"""Agents, one role per module: networks (IMPALA's feed-forward policy/value networks), losses (V-trace
with the episode-boundary filler masked), learning (the IMPALA learner), acting (the batched actor:
IMPALA or random policy for K environments, with RAE rewards and the RAC shield), rewards (RAE's
r_beta(psi)), shield (RAC), adders (IMPALA unrolls and precedence windows into Reverb), loop (the
actor node's loop), dqn and dqn_config (the DQN / M-DQN baselines). The builder that makes the
tables, adders, learners and actors from a run's configuration is launch/program/builder.py
(functions, not an Acme builder class), since the configuration is launch's."""

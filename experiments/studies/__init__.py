"""Studies: one-off questions asked on the way to the paper's experiments, each a command of its
own (`python -m experiments.studies.NAME`, flags parsed by `envs.cli`) whose output RESULTS.md cites.
A study may hand its runs to the experiment runner as steps (experiments.runner); no
registered experiment runs or imports a study (tests/test_layering.py checks it).

- sokoban_gate: can the agent learn single Sokoban levels? (RESULTS.md "Sokoban", the gate)
- sokoban_reuse: replay x R against the plain queue on one level? (RESULTS.md "Sokoban", queue against replay)
- single_process: algorithm or plumbing, IMPALA in one process? (RESULTS.md "Sokoban", agents that learn)
- psi_ablation: which psi recipe finds irreversible pushes? (RESULTS.md "Sokoban", psi against the oracle)
- cliff_spread: how much Table 2 moves between estimator trainings? (RESULTS.md "Windy cliff-walk")
- turf_coverage: do random walks reach the clean map's states? (RESULTS.md "Turf", paper's estimators)
- turf_corner: psi and phi at the goal's corner? (RESULTS.md "Turf", the authors' recipe as released)
- turf_leak: why psi scores the grass move beside the goal reversible, the data or the network?
  (RESULTS.md "Turf", RAC that keeps the grass; results/turf/leak/README.md)
- turf_rac_same_mix: RAC behind the leak study's estimators, with and without the learner's mask,
  and the beta sweep? (RESULTS.md "Turf", RAC that keeps the grass and learns the goal)
- first_policy: how far from uniform is the Sokoban network's first policy, per initialisation and
  pixel scale? (BUILD_NOTES.md "The authors' recipe at equal learner updates")
"""

"""The paper's experiments: typed steps (spec), one module per experiment (sokoban, cliff,
cartpole_plus, cartpole_reward_free, turf), their registry, the runner that runs them
resumably, and their pages. Beside them, stand-alone experiments with their own command
(`python -m launch.experiments.NAME`, flags parsed by `cli`): the Sokoban single-level gate
(sokoban_gate) and sequence reuse (sokoban_reuse), IMPALA in one process (single_process), the
Sokoban psi ablation (psi_ablation), a random policy under RAC's shield (rac_probe), Table 2
over the cliff's estimator trainings (cliff_spread) and Turf's clean-map coverage
(turf_coverage); those that train or evaluate hand their runs to the runner as steps."""

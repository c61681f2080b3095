"""The paper's experiments, the studies and the analysis about the system in launch/: each
experiment is run end to end by `python -m experiments NAME` (this package's __main__).

The machinery: spec (typed steps, an experiment's fields), registry (the named experiments),
runner (runs the steps resumably and writes the page), pages (helpers the pages share) and
reference/ (the paper's curves read off its figures).

One module per registered experiment, owning its scales and steps: sokoban (page: sokoban_page),
cliff, cartpole_plus, cartpole_reward_free and turf (page: turf_page; estimator steps of its
larger scales: turf_estimators), sokoban_recipe and sokoban_ladder. Some modules are also
commands of their own (`python -m experiments.NAME`): rac_probe (a random policy under RAC's
shield, one of Turf's steps and used by the cliff spread study), turf_leaks (where Turf runs
ruined grass, a section of Turf's page), plot (curves of any runs), evaluate_policy (a run's
policy on levels) and sb3_shield (SB3-contrib's MaskablePPO behind our RAC shield).

analysis/ reads finished runs (curves, statistics, plots, policy evaluation); studies/ holds
the one-off studies RESULTS.md cites. Nothing in launch/ or below imports this package.
"""

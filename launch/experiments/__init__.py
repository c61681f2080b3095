"""The paper's experiments, each run end to end by `python -m launch.experiment NAME`.

The machinery: spec (typed steps, an experiment's fields), registry (the named experiments),
runner (runs the steps resumably and writes the page), pages (helpers the pages share) and
reference/ (the paper's curves read off its figures).

One module per registered experiment, owning its scales and steps: sokoban (page: sokoban_page),
cliff, cartpole_plus, cartpole_reward_free and turf (page: turf_page; estimator steps of its
larger scales: turf_estimators). Two modules are also commands of their own
(`python -m launch.experiments.NAME`): rac_probe (a random policy under RAC's shield, one of
Turf's steps and used by the cliff spread study) and turf_leaks (where Turf runs ruined grass,
a section of Turf's page).

One-off studies that RESULTS.md cites live in launch/studies/.
"""

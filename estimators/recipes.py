"""How psi/phi are trained for an environment: its preset's recipe (envs.presets, Appendix C, D)
as a typed `EstimatorRecipe`, used by offline training (`estimators.train`) and by the online
precedence learner.

Window w is the paper's; where the paper trains offline with a pair budget, `num_pairs` and
`phi_transitions` are that budget (the online learner trains for as long as the run lasts).
"""
import dataclasses

from envs import presets


@dataclasses.dataclass(frozen=True)
class EstimatorRecipe:
  window: int               # w: pairs at most w steps apart
  learning_rate: float      # Adam (AdamW when weight_decay > 0), psi and phi
  weight_decay: float
  num_pairs: int            # offline psi budget (batches of 128 pairs)
  phi_transitions: int      # offline phi budget (transitions)
  source: str               # where the numbers come from
  pair_sampling: str = 'uniform'   # estimators.pairs.SAMPLINGS; 'uniform' is the paper's


def recipe(name: str) -> EstimatorRecipe:
  """The recipe of environment `name` (or of its network preset, 'sokoban_paper': the
  environment's); envs.presets.PresetError (one line) for one without a preset."""
  preset = presets.get(presets.network_env(name))
  return EstimatorRecipe(**preset.estimator_recipe, source=preset.sources['estimator_recipe'])

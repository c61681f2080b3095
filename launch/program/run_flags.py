"""launch.train's command line, generated from the run configuration's dataclasses by envs.cli's
field flags: one flag per config field, its help the field's documentation (`metadata['help']`),
its type the field's.

A flag of a field the environment's preset sets (envs.presets, through launch.program.presets)
defaults to None, "not given": the run takes the preset's value. Any other flag defaults to the
main job's value (`MAIN_JOB`), else the config class's default. A flag is named after its field;
the fields of `precedence` (the online psi/phi learner node) and `estimator_train` (psi/phi
optimisation) carry the prefixes `precedence_` and `estimator_`, as their names repeat IMPALA's
(batch_size, learning_rate). A field takes its flag's value: the one the command line gave, else
a resumed run's saved one (RUN_DIR/flags.json), else the flag's default; a resumed run's preset
fields keep what its first launch resolved (RUN_DIR/config.json), whatever the preset says now.
"""
import re
from typing import Any, Dict, List, Tuple

from absl import flags

from agents.acting import ReversibilityConfig
from agents.policy_net import PolicyNetConfig
from envs import cli, presets
from estimators.training import TrainConfig
from launch.program.config import ImpalaConfig, PrecedenceConfig, RunConfig

Section = cli.Section
FieldFlag = cli.FieldFlag

# The flags define_flags makes belong to its caller (absl skips this module when it looks for
# the module defining a flag).
flags.disclaim_key_flags()

SECTIONS = (
    Section('', RunConfig, exclude=('env_options', 'reversibility', 'impala', 'precedence',
                                    'estimator_train', 'estimator_network', 'policy_network')),
    Section('reversibility', ReversibilityConfig),
    Section('impala', ImpalaConfig),
    Section('precedence', PrecedenceConfig, prefix='precedence_'),
    # train_phi follows --mode (RAC), seed is the run's.
    Section('estimator_train', TrainConfig, prefix='estimator_',
            exclude=('train_psi', 'train_phi', 'seed')),
    # The network comes from the preset; a run may change the canvas, the initialisation and
    # the pixels' scale (--nopolicy_centre_on_agent, a flag of launch.train, drops the centring).
    Section('policy_network', PolicyNetConfig, prefix='policy_',
            only=('canvas_size', 'init', 'pixel_scale')),
)

# `python -m launch.train` with no flags is the main job: reward-free Cartpole, IMPALA + RAE,
# until the pole is kept up (launch.train's docstring).
MAIN_JOB = {'mode': 'rae', 'max_steps': 1_200_000}


def field_flags() -> List[FieldFlag]:
  """Every flag a config field gets, in the order of the sections and their fields."""
  return cli.field_flags(SECTIONS)


def preset_fields(section: str) -> Tuple[str, ...]:
  """The fields of `section` whose default is the environment's preset (envs.presets)."""
  keys = set()
  for preset in presets.PRESETS.values():
    keys |= {'impala': set(preset.impala), 'precedence': set(preset.precedence),
             'reversibility': {k for t in preset.thresholds.values() for k in t},
             # phi's learning rate follows psi's (launch.program.presets.estimator_train).
             'estimator_train': set(preset.estimator_recipe) | {'phi_learning_rate'},
             'policy_network': set(preset.policy_network)}.get(section, set())
  return tuple(sorted(keys))


def default(ff: FieldFlag) -> Any:
  """The flag's default: None where the environment's preset decides (and for run_dir, named
  after the run), else the main job's, else the config class's."""
  if ff.field in preset_fields(ff.section) or (ff.section, ff.field) == ('', 'run_dir'):
    return None
  if not ff.section and ff.field in MAIN_JOB or ff.field == 'mode':
    return MAIN_JOB[ff.field]
  return ff.default


def _note(ff: FieldFlag) -> str:
  if default(ff) is not None:   # absl shows a default that is not None itself
    return ''
  return (' (default: runs/<env>-<agent>-<mode>-<time>)' if ff.field == 'run_dir' else
          " (default: the environment's preset, envs.presets)")


def define_flags(flag_values) -> None:
  """Defines one flag per config field on `flag_values`, as flags of the module calling this
  (the entry module: its flags are what --help lists and flags.json saves)."""
  cli.define_field_flags(flag_values, SECTIONS, default, _note)


def given(flag_values) -> Dict[str, Dict[str, Any]]:
  """{section: {field: value}} of every field whose flag has a value (given, a resumed run's or
  its default); a field whose value is None is left to the environment's preset."""
  return {name: {k: v for k, v in values.items() if v is not None}
          for name, values in cli.field_values(flag_values, SECTIONS).items()}


def naming_fields(section: str, error: Exception) -> str:
  """A config's error message with the section and the flags of the fields it names:
  'precedence: min_windows must lie in ... (precedence.min_windows: --precedence_min_windows)'."""
  text = str(error)
  words = set(re.findall(r'[A-Za-z_]+', text))
  named = [ff for ff in field_flags() if ff.section == section and ff.field in words]
  where = '; '.join(f'{section + "." if section else ""}{ff.field}: --{ff.flag}' for ff in named)
  return f'{section + ": " if section else ""}{text}' + (f' ({where})' if where else '')

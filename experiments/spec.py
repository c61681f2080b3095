"""What an experiment is: typed steps (commands with a `done` file) and how its page is made.

Two kinds of step: a `Step` runs a command once (collection, offline estimators, evaluations)
and is done when its `done` file exists; a `TrainStep` is a training run (launch.train or
launch.train_dqn) with its group, seed, budget and run directory as fields, whose command line
is built from them (`argv`), so a budget override is a new step (`with_max_steps`), not an
edit of an argv list. The experiment modules build their steps from these types.
"""
import dataclasses
import os
from typing import Callable, ClassVar, Dict, List, Optional, Tuple, Union

# Modules whose steps are training runs: they take --run_dir/--seed/--max_steps and --resume,
# and write RUN_DIR/summary.json (status), counts.json, run_state.json and logs/<node>/logs.csv.
TRAINING_MODULES = ('launch.train', 'launch.train_dqn')
OUT = '{out}'   # in a step's arguments: the experiment's output directory


def scale_settings(scales: dict, scale: str, experiment: str) -> dict:
  """The settings of `scale` in an experiment's table of scales; a ValueError (one line) names
  the scales it has when it lacks this one."""
  if scale not in scales:
    raise ValueError(f'experiment {experiment!r} has no scale {scale!r} (it has: '
                     f'{", ".join(scales)})')
  settings = scales[scale]
  return settings() if callable(settings) else settings   # a scale sized where it runs ('host')


@dataclasses.dataclass(frozen=True)
class Step:
  """A command run once: `python -m MODULE ARGS`, done when `done` exists."""
  name: str                      # unique within the experiment; also its log file name
  module: str                    # python -m MODULE
  args: Tuple[str, ...]          # its flags; '{out}' is replaced by the experiment directory
  done: str                      # file (relative to the experiment dir) whose presence means done
  est_seconds: float             # for the ETA before any step has been timed
  # A command belongs to no curve group and has no run directory.
  is_training: ClassVar[bool] = False
  group: ClassVar[str] = ''
  seed: ClassVar[Optional[int]] = None
  run_dir: ClassVar[str] = ''

  def __post_init__(self):
    if self.module in TRAINING_MODULES:
      raise ValueError(f'{self.module} runs are TrainSteps (train_step), not Steps')

  def argv(self, out: str) -> List[str]:
    """The step's command line (after `python`), with '{out}' filled in."""
    return ['-m', self.module] + [a.replace(OUT, out) for a in self.args]


@dataclasses.dataclass(frozen=True)
class TrainStep:
  """A training run: `python -m MODULE --run_dir OUT/runs/NAME --seed S --max_steps N FLAGS`,
  continued with --resume when its run directory holds a run; done when OUT/runs/NAME/done
  exists (the runner writes it when the run completed). `run_path` puts the run elsewhere
  under OUT (the Sokoban gate's OUT/level_<i>)."""
  name: str
  group: str                     # the curve/table group ('IMPALA', 'IMPALA+RAE')
  seed: int
  max_steps: int
  est_seconds: float             # for all of max_steps; the ETA takes the share still to run
  flags: Tuple[str, ...] = ()    # the run's other flags; '{out}' as in Step.args
  module: str = 'launch.train'
  run_path: str = ''             # the run directory, relative to the experiment's ('': runs/NAME)
  is_training: ClassVar[bool] = True

  def __post_init__(self):
    if self.module not in TRAINING_MODULES:
      raise ValueError(f'{self.module} is not a training module ({", ".join(TRAINING_MODULES)})')
    if self.max_steps < 1:
      raise ValueError(f'{self.name}: max_steps must be >= 1, got {self.max_steps}')

  @property
  def run_dir(self) -> str:
    """Relative to the experiment directory."""
    return self.run_path or os.path.join('runs', self.name)

  @property
  def done(self) -> str:
    return os.path.join(self.run_dir, 'done')

  @property
  def args(self) -> Tuple[str, ...]:
    return ('--run_dir', os.path.join(OUT, self.run_dir), '--seed', str(self.seed),
            '--max_steps', str(self.max_steps), *self.flags)

  def with_max_steps(self, max_steps: Optional[int]) -> 'TrainStep':
    """The same run with another budget (None: this one)."""
    return self if max_steps is None else dataclasses.replace(self, max_steps=max_steps)

  def argv(self, out: str, resume: bool = False) -> List[str]:
    return (['-m', self.module] + [a.replace(OUT, out) for a in self.args]
            + (['--resume'] if resume else []))


AnyStep = Union[Step, TrainStep]


REFERENCE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'reference')


@dataclasses.dataclass(frozen=True)
class Experiment:
  name: str
  description: str
  paper: str                                        # what the paper reports, for the page
  steps: Callable[[str, int], List[AnyStep]]        # (scale, seeds) -> steps
  metrics: Tuple[str, ...]                          # curves to draw, actor episode metrics
  table_metrics: Tuple[str, ...]                    # final values in the table (last 100 episodes)
  # Table columns read from each run's evaluation JSON (experiments.evaluate_policy):
  # (column, file in the run dir, policy, key of that policy's summary).
  evaluations: Tuple[Tuple[str, str, str, str], ...] = ()
  table_last_n: int = 100             # training episodes per run in the table (fixed policies: all)
  # More of the page from the table and the experiment directory (e.g. the paper's grid layout).
  extra_markdown: Optional[Callable[[dict, str], str]] = None
  # The paper's own curves, read off its figure, drawn beside ours: files in REFERENCE_DIR
  # (experiments.analysis.reference_curves).
  references: Tuple[str, ...] = ()
  # Earlier committed runs drawn on the curves beside this experiment's own, as a reference
  # (not in the table): scale -> {line label: run directories}, {} where the scale has none.
  reference_runs: Optional[Callable[[str], Dict[str, List[str]]]] = None
  # The scale names `steps` takes, the keys of the experiment module's own table of scales
  # (experiments's --scale is checked against them; a new scale is one entry there).
  scales: Tuple[str, ...] = ()

  def reference_figures(self):
    from experiments.analysis import reference_curves
    return [reference_curves.load(os.path.join(REFERENCE_DIR, name)) for name in self.references]


def train_step(name: str, group: str, seed: int, max_steps: int, est_seconds: float,
               *flags: str, module: str = 'launch.train') -> TrainStep:
  return TrainStep(name=name, group=group, seed=seed, max_steps=max_steps,
                   est_seconds=est_seconds, flags=tuple(flags), module=module)


def estimators_step(preset: str, pairs: int, phi_transitions: int, est_seconds: float) -> Step:
  """psi and phi trained offline on the experiment's random episodes (data/random) into
  estimators.ckpt: the first step after collection of every offline-RAC experiment."""
  return Step('train_estimators', 'estimators.train',
              ('--dataset', '{out}/data/random', '--out', '{out}/estimators.ckpt',
               '--network_preset', preset, '--num_pairs', str(pairs), '--phi',
               '--phi_transitions', str(phi_transitions), '--noprogress'),
              done='estimators.ckpt', est_seconds=est_seconds)

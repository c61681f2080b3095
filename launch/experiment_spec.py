"""What an experiment is: its steps (commands with a `done` file) and how its page is made.

Each experiment module (`launch.experiments` and the per-paper-section modules beside it) builds
its steps from these types; the registry (`launch.experiments.EXPERIMENTS`) names them and the
runner (`launch.experiment`) runs them.
"""
import dataclasses
import os
from typing import Callable, List, Optional, Tuple

SCALES = ('tiny', 'small', 'paper')   # tiny: a smoke test of every step (tests, a first try)
# Modules whose steps are training runs: they take --run_dir/--seed/--max_steps and --resume,
# and write RUN_DIR/summary.json (status), counts.json, run_state.json and logs/<node>/logs.csv.
TRAINING_MODULES = ('launch.train', 'launch.train_dqn')


@dataclasses.dataclass(frozen=True)
class Step:
  name: str                      # unique within the experiment; also its log file name
  module: str                    # python -m MODULE
  args: Tuple[str, ...]          # its flags; '{out}' is replaced by the experiment directory
  done: str                      # file (relative to the experiment dir) whose presence means done
  est_seconds: float             # for the ETA before any step has been timed
  group: str = ''                # training runs: the curve/table group ('IMPALA', 'IMPALA+RAE')
  seed: Optional[int] = None
  run_dir: str = ''              # training runs: their run directory (relative)

  @property
  def is_training(self) -> bool:
    return self.module in TRAINING_MODULES


@dataclasses.dataclass(frozen=True)
class Experiment:
  name: str
  description: str
  paper: str                                        # what the paper reports, for the page
  steps: Callable[[str, int], List[Step]]           # (scale, seeds) -> steps
  metrics: Tuple[str, ...]                          # curves to draw, actor episode metrics
  table_metrics: Tuple[str, ...]                    # final values in the table (last 100 episodes)
  # Table columns read from each run's evaluation JSON (launch.evaluate_policy):
  # (column, file in the run dir, policy, key of that policy's summary).
  evaluations: Tuple[Tuple[str, str, str, str], ...] = ()
  table_last_n: int = 100             # training episodes per run in the table (fixed policies: all)
  # More of the page from the table and the experiment directory (e.g. the paper's grid layout).
  extra_markdown: Optional[Callable[[dict, str], str]] = None


def train_step(name: str, group: str, seed: int, max_steps: int, est_seconds: float,
           *flags: str, module: str = 'launch.train') -> Step:
  if module not in TRAINING_MODULES:
    raise ValueError(f'{module} is not a training module ({", ".join(TRAINING_MODULES)})')
  run_dir = os.path.join('runs', name)
  return Step(name=name, module=module,
              args=('--run_dir', os.path.join('{out}', run_dir), '--seed', str(seed),
                    '--max_steps', str(max_steps), *flags),
              done=os.path.join(run_dir, 'done'), est_seconds=est_seconds, group=group, seed=seed,
              run_dir=run_dir)


def estimators_step(preset: str, pairs: int, phi_transitions: int, est_seconds: float) -> Step:
  """psi and phi trained offline on the experiment's random episodes (data/random) into
  estimators.ckpt: the first step after collection of every offline-RAC experiment."""
  return Step('train_estimators', 'estimators.train',
              ('--dataset', '{out}/data/random', '--out', '{out}/estimators.ckpt',
               '--network_preset', preset, '--num_pairs', str(pairs), '--phi',
               '--phi_transitions', str(phi_transitions), '--noprogress'),
              done='estimators.ckpt', est_seconds=est_seconds)


def resolve(step: Step, out: str) -> List[str]:
  """The step's command line (python -m MODULE ARGS), with '{out}' filled in."""
  return ['-m', step.module] + [a.replace('{out}', out) for a in step.args]

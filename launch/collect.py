r"""Collects episodes of a policy into an RLDS dataset (see estimators/rlds/).

    python -m launch.collect --env cartpole --env_option max_steps=50000 --policy random \
        --episodes 100000 --out data/cartpole_plus
    python -m launch.collect --env turf --episodes 1000 --out data/turf --num_actors 2
    python -m launch.collect --env turf --episodes 2000 --out data/turf --resume   # add 1000

With --num_actors 1 (default) episodes are collected in this process. With --num_actors K > 1
a Launchpad program (local_mp) runs a Reverb node with one queue table, K actor nodes that
each step their own environment and insert batches of whole episodes into the queue, and one
writer node that drains the queue into the dataset and stops the program once --episodes are
written. Episodes then appear in arrival order, so the dataset depends on timing, not only on
--seed (the in-process path is fully determined by --seed).

An existing --out is refused (exit code 2) unless --overwrite (replace it) or --resume (add
episodes until it holds --episodes; environment and options must match). --resume first reads
the whole dataset (estimators.dataset.verify_dataset) and refuses a damaged one, naming the
file to restore. Writes go to a temporary directory renamed into place at the end: an
interrupted run (Ctrl-C, SIGTERM: one line, exit code 130/143) leaves --out as it was. An
--out that cannot be created is refused before any work.
True environment states (for the exact reversibility oracle) are stored by default for the
discrete environments (turf, cliff, sokoban), see --store_states.
"""
import dataclasses
import signal
import sys
from typing import Optional, Tuple

from absl import app, flags

from envs import cli as envs_cli
from envs.cli import field
from launch.runtime.collection import (
  CollectError,
  CollectInterrupted,
  parse_env_options,
  run,
)

FLAGS = flags.FLAGS


@dataclasses.dataclass(frozen=True)
class Collection:
  """What to collect and where: one flag per field (envs.cli field flags)."""
  env: Optional[str] = field(None, 'Environment name (envs.make).')
  env_option: Tuple[str, ...] = field((), 'Environment option key=value (repeatable), e.g. '
                                      'max_steps=50000.', repeat=True)
  policy: str = field('random', 'Behaviour policy: uniformly random actions.',
                      choices=('random',))
  episodes: Optional[int] = field(None, 'Number of episodes the dataset must hold at the end.')
  out: Optional[str] = field(None, 'Output dataset directory.')
  num_actors: int = field(1, '1: collect in this process; K > 1: K Launchpad actor nodes '
                          'feeding a Reverb queue.')
  seed: int = field(0, 'Random seed (environments and policy).')
  overwrite: bool = field(False, 'Replace an existing dataset at --out.')
  resume: bool = field(False, 'Add episodes to an existing dataset at --out until it holds '
                       '--episodes.')
  store_states: Optional[bool] = field(None, 'Store true env states per step (default: yes for '
                                       'turf, cliff and sokoban, no for cartpole).')
  progress: bool = field(True, 'Show a progress bar / progress lines.')


SECTIONS = (envs_cli.Section('', Collection),)


def define_flags():
  """Defines the CLI flags; only when run as a program, so that importing this module next
  to launch.train (which defines --env, --seed, ...) does not clash."""
  envs_cli.define_field_flags(FLAGS, SECTIONS)


_STOPPED_BY = []   # the signal that stopped the run, for the one-line message


def _terminate_gracefully(signum, frame):
  # SIGTERM stops a run like Ctrl-C: nodes stopped, temporary files removed, --out untouched.
  # A second SIGTERM is ignored so that it cannot cut that cleanup short (SIGKILL still works).
  signal.signal(signal.SIGTERM, signal.SIG_IGN)
  _STOPPED_BY.append('SIGTERM')
  raise KeyboardInterrupt


def _stopped(e: KeyboardInterrupt) -> int:
  by = _STOPPED_BY[0] if _STOPPED_BY else 'SIGINT'
  left = e.left if isinstance(e, CollectInterrupted) else 'nothing was written'
  print(f'error: collection stopped by {by}; {left}', file=sys.stderr, flush=True)
  return 128 + (signal.SIGTERM if _STOPPED_BY else signal.SIGINT)


def main(argv):
  signal.signal(signal.SIGTERM, _terminate_gracefully)
  from estimators import cli, dataset
  cli.quiet_logs(FLAGS)   # TFDS's INFO lines (e.g. "Load dataset info") would bury the one-line errors
  if len(argv) > 1:
    print(f'error: unexpected arguments {argv[1:]}', file=sys.stderr)
    sys.exit(2)
  try:
    c = Collection(**envs_cli.field_values(FLAGS, SECTIONS)[''])
    run(c.env, c.episodes, c.out, parse_env_options(c.env_option), c.seed, c.num_actors,
        c.overwrite, c.resume, c.store_states, c.progress)
  except KeyboardInterrupt as e:
    sys.exit(_stopped(e))
  except (CollectError, dataset.DatasetError) as e:
    print(f'error: {e}', file=sys.stderr)
    sys.exit(2)
  except (RuntimeError, OSError) as e:
    print(f'error: collection failed: {str(e).splitlines()[0] if str(e) else type(e).__name__}',
          file=sys.stderr)
    sys.exit(1)


if __name__ == '__main__':
  define_flags()
  app.run(main)

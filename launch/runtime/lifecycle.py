"""A training run's life around its launch: whether it may resume and whether anything is left
to do, the run record before it (config.json, a fresh segment, the last launch's end files
removed), progress lines while it runs, and the record and summary after it, whatever ended it.
Shared by the local launch (`launch.train`), the cluster launch (`launch.cluster`, whose
coordinator wrapper closes the record) and the DQN baseline's resume, each of which hands it the
run's records (run_state.RunRecords, built once at its start). It calls down into run_state and
summary; neither calls back."""
import dataclasses
import json
from typing import Any, Callable, Dict, Iterable, Optional

from envs import presets
from launch.runtime import progress as progress_lib
from launch.runtime import run_config, run_state
from launch.runtime import summary as summary_lib
from launch.runtime.processes import RunFailed


def jsonable(obj):
  """A (nested) dataclass config as the plain dict written to config.json."""
  if dataclasses.is_dataclass(obj):
    return json.loads(json.dumps(dataclasses.asdict(obj)))
  return obj


def write_config(records: run_state.RunRecords, cfg) -> None:
  records.write(run_state.CONFIG, jsonable(cfg))


def saved_flags(records: run_state.RunRecords) -> Dict[str, Any]:
  """--resume: the flags of the run's first launch; ValueError when there is nothing to resume."""
  saved = records.read(run_state.FLAGS_FILE)
  if not run_state.holds_run(records.run_dir) or saved is None:
    raise ValueError(f'nothing to resume in {records.run_dir}: it holds no run '
                     '(no config.json/flags.json)')
  return saved


def apply_saved_flags(flag_values, records: run_state.RunRecords,
                      keep: Iterable[str] = ('resume',)) -> None:
  """--resume: the saved run's flags become the defaults of `flag_values` (the entry module's
  FlagValues); flags given on this command line, and those in `keep`, win. A saved flag this
  version does not define, set to a value, is ValueError (one line): the run was saved by an
  earlier version."""
  saved = saved_flags(records)
  unknown = [f'--{n}={v}' for n, v in saved.items() if n not in flag_values and v is not None]
  if unknown:
    raise ValueError(run_config.earlier_format(
        f'{records.path(run_state.FLAGS_FILE)} sets {", ".join(unknown)}, which this '
        'version does not define'))
  for name, value in saved.items():
    if name in flag_values and not flag_values[name].present and name not in keep:
      flag_values[name].value = value


def check_resume(cfg, saved, allowed: str = None) -> None:
  """Refuses a resume whose configuration changes what is learned (ValueError, one line).
  `saved`: the run's configuration, as its loader reads it (launch.runtime.run_config: a field
  config.json lacks at its default) or as config.json holds it."""
  diff = run_state.config_differences(jsonable(saved), jsonable(cfg))
  if diff:
    allowed = allowed or ', '.join(run_state.RESUMABLE_CHANGES[:-1])
    raise ValueError(f'cannot resume {cfg.run_dir}: the configuration differs in {", ".join(diff)} '
                     f'(only {allowed} may change)')


def prepare_launch(cfg, records: run_state.RunRecords, resume: bool) -> None:
  """The run directory before a launch: writable, holding the run's config.json (written by its
  first launch), and without the previous launch's end files. The launch's segment is begun by
  whoever starts the program (the local launch here, a cluster's coordinator wrapper)."""
  run_state.check_writable(records.run_dir)
  if not resume:
    write_config(records, cfg)
  records.clear_launch_end()


def record_end(records: run_state.RunRecords, status: str = None) -> dict:
  """Closes the run's current segment and writes summary.json (status: the given one, else as
  RunRecords.end_status reads it from the run directory); returns the summary."""
  status = records.end_segment(status)
  return summary_lib.write_summary(records, status)


def rebuild_lost_summary(records: run_state.RunRecords) -> None:
  """A run the coordinator recorded as completed but whose launcher died before writing
  summary.json (an experiment marks a run done only from its summary) gets it back; any other
  run is left untouched."""
  if records.end_status() == run_state.COMPLETED and not records.exists(run_state.SUMMARY):
    summary_lib.write_summary(records, run_state.COMPLETED)


GOAL_EPISODES = 100   # a length goal is judged on the mean of the last this many episodes


def goal_reached(records: run_state.RunRecords, goal_mean_length: float) -> Optional[str]:
  """Why the run has made its point (the mean length of its last GOAL_EPISODES episodes
  reached `goal_mean_length`), else None; a goal of 0 is never reached."""
  if not goal_mean_length:
    return None
  s = summary_lib.summarize(records, last_n=GOAL_EPISODES)
  mean = s.get('mean_episode_length_last')
  if s['episodes'] >= GOAL_EPISODES and mean is not None and mean >= goal_mean_length:
    return (f'goal reached: mean episode length {mean:.1f} >= {goal_mean_length:g} over the last '
            f'{GOAL_EPISODES} episodes')
  return None


class ProgressReporter:
  """Called every interval while a launch runs: prints its progress line
  (launch.runtime.progress; `show_progress` False: none) and writes its figures to TensorBoard;
  with a goal, asks the program to end (as Ctrl-C does, with final checkpoints; the reason
  becomes the run's status) once it is reached. `close()` writes the launch's last figures."""

  def __init__(self, cfg, records: run_state.RunRecords, goal_mean_length: float = 0.0,
               show_progress: bool = True):
    self._records, self._goal, self._show = records, goal_mean_length, show_progress
    self._monitor = progress_lib.Progress(records, cfg.max_steps,
                                          presets.watched(cfg.env, cfg.reversibility.mode))
    self._board = progress_lib.TensorBoard(records.run_dir)
    self._asked = False

  def _record(self) -> dict:
    figures = self._monitor.figures()
    if self._monitor.started(figures):
      self._board.write(figures)
    return figures

  def __call__(self) -> None:
    line = self._monitor.line(self._record())
    if line and self._show:
      print(line, flush=True)
    reason = None if self._asked else goal_reached(self._records, self._goal)
    if reason:
      self._asked = True
      print(f'{reason}: ending the run (final checkpoints); --goal_mean_length 0 trains on to '
            f'--max_steps', flush=True)
      self._records.request_stop(reason)

  def close(self) -> None:
    self._record()
    self._board.close()


def supervise_and_record(cfg, records: run_state.RunRecords,
                         supervise: Callable[[Callable[[], None]], Any],
                         goal_mean_length: float = 0.0, show_progress: bool = True) -> dict:
  """Runs `supervise(progress)` (a local or a cluster launch, to the run's end) and always
  closes the run's segment and summary, whatever ended it; returns the summary."""
  status = None
  reporter = ProgressReporter(cfg, records, goal_mean_length, show_progress)
  try:
    supervise(reporter)
  except RunFailed as e:
    status = f'failed: {e}'
    raise
  finally:
    reporter.close()
    summary = record_end(records, status)
    print(summary_lib.format_summary(summary))
  return summary


def run_local(cfg, records: run_state.RunRecords, resume: bool = False,
              goal_mean_length: float = 0.0, show_progress: bool = True) -> dict:
  """Launches the program on this machine (or continues it: `resume`), waits for it to end
  (at cfg.max_steps, or earlier at a goal, see goal_reached), returns the summary. Raises
  RunFailed."""
  from launch.runtime import launcher  # pylint: disable=g-import-not-at-top
  prepare_launch(cfg, records, resume)
  start_steps = records.saved_actor_steps()
  records.begin_segment(start_steps)
  verb = 'resuming' if resume else 'run directory'
  print(f'{verb}: {cfg.run_dir} (node output: launchpad.log, node_logs/)'
        + (f' from {start_steps:,.0f} actor steps' if resume else ''), flush=True)
  return supervise_and_record(cfg, records, lambda progress: launcher.launch_and_supervise(
      cfg, records, progress=progress), goal_mean_length, show_progress)


def already_done(cfg, records: run_state.RunRecords) -> Optional[str]:
  """On --resume: why there is nothing to do (the run reached cfg.max_steps), else None."""
  done = records.saved_actor_steps()
  if done >= cfg.max_steps:
    return (f'nothing to do: {cfg.run_dir} already reached {done:,.0f}/{cfg.max_steps:,} actor '
            'steps (pass a larger --max_steps to go on)')
  return None

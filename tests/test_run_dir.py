"""Run directories: explicit --resume, what it may change, and learner checkpoint files (no
launch here; tests/test_faults.py resumes real runs)."""
import csv
import json
import os
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from launch.program import checkpointing
from launch.runtime import run_state, supervisor

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))


def _train(*args):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3')
  return subprocess.run([sys.executable, '-m', 'launch.train', *args], cwd=ROOT, env=env,
                        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)


def _saved_run(tmp_path, *flags):
  """A run directory as a first launch leaves it before any step: config.json (the resolved
  config of these flags, via --show_config) and flags.json."""
  run_dir = tmp_path / 'run'
  run_dir.mkdir()
  shown = _train('--run_dir', str(run_dir), '--show_config', *flags)
  assert shown.returncode == 0, shown.stderr[-2000:]
  config = json.loads(shown.stdout[shown.stdout.index('{'):])
  config.pop('placement')   # where the nodes run: shown beside the config, not saved in it
  (run_dir / 'config.json').write_text(json.dumps(config))
  saved = {'run_dir': str(run_dir)}
  for name, value in zip(flags[::2], flags[1::2]):
    saved[name.lstrip('-')] = int(value) if value.isdigit() else value
  (run_dir / 'flags.json').write_text(json.dumps(saved))
  return run_dir


def _snapshot(d):
  return {p: (os.path.getmtime(os.path.join(d, p)), open(os.path.join(d, p), 'rb').read())
          for p in sorted(os.listdir(d))}


def test_a_run_dir_that_holds_a_run_is_refused_without_resume(tmp_path):
  run_dir = _saved_run(tmp_path, '--max_steps', '5000')
  before = _snapshot(run_dir)
  r = _train('--run_dir', str(run_dir), '--max_steps', '5000')
  assert r.returncode == 2
  assert r.stderr.strip().splitlines()[-1] == (
      f'error: {run_dir} already holds a run; pass --resume to continue it, or choose another --run_dir')
  assert _snapshot(run_dir) == before


def test_resume_refuses_a_change_of_what_is_learned(tmp_path):
  run_dir = _saved_run(tmp_path, '--max_steps', '5000')
  before = _snapshot(run_dir)
  r = _train('--run_dir', str(run_dir), '--resume', '--env', 'turf')
  assert r.returncode == 2
  last = r.stderr.strip().splitlines()[-1]
  assert last.startswith(f'error: cannot resume {run_dir}: the configuration differs in env,'), last
  assert 'only max_steps, num_actors' in last
  r = _train('--run_dir', str(run_dir), '--resume', '--learning_rate', '0.5')
  assert r.returncode == 2 and 'impala.learning_rate' in r.stderr.strip().splitlines()[-1]
  assert _snapshot(run_dir) == before


def test_resume_of_a_finished_run_does_nothing(tmp_path):
  run_dir = _saved_run(tmp_path, '--max_steps', '5000')
  run_state.RunRecords(str(run_dir)).save_counts({'actor_steps': 5012, 'learner_steps': 20})
  before = _snapshot(run_dir)
  r = _train('--run_dir', str(run_dir), '--resume')
  assert r.returncode == 0, r.stderr[-2000:]
  assert 'nothing to do' in r.stdout and '5,012/5,000' in r.stdout
  assert _snapshot(run_dir) == before


def test_resume_needs_a_run(tmp_path):
  r = _train('--run_dir', str(tmp_path / 'empty'), '--resume')
  assert r.returncode == 2
  assert 'nothing to resume' in r.stderr.strip().splitlines()[-1]
  r = _train('--resume')
  assert r.returncode == 2 and '--resume needs --run_dir' in r.stderr


def test_unwritable_run_dir_is_one_line(tmp_path):
  blocker = tmp_path / 'file'
  blocker.write_text('x')
  r = _train('--run_dir', str(blocker / 'run'))
  assert r.returncode == 2
  assert 'Traceback' not in r.stderr
  assert r.stderr.strip().splitlines()[-1].startswith(f'error: run directory {blocker / "run"} is not writable')


def test_config_differences_ignore_what_resume_may_change():
  saved = {'env': 'cartpole', 'max_steps': 10, 'num_actors': 2, 'impala': {'batch_size': 16},
           'network': {'mlp_sizes': [64, 64]}}
  same = {'env': 'cartpole', 'max_steps': 99, 'num_actors': 4, 'impala': {'batch_size': 16},
          'network': {'mlp_sizes': (64, 64)}}
  assert run_state.config_differences(saved, same) == []
  other = dict(same, env='turf', impala={'batch_size': 32})
  assert run_state.config_differences(saved, other) == ['env', 'impala.batch_size']


def _adam_state(seed):
  params = {'linear': {'w': jnp.full((3, 2), float(seed)), 'b': jnp.zeros(2)}}
  return params, optax.adam(1e-3).init(params)


def test_learner_state_round_trips_without_pickle(tmp_path):
  state = _adam_state(3)
  checkpointing.save_state(str(tmp_path), state, steps=17)
  restored, steps = checkpointing.load_state(str(tmp_path), _adam_state(0))
  assert steps == 17
  for a, b in zip(jax.tree_util.tree_leaves(state), jax.tree_util.tree_leaves(restored)):
    np.testing.assert_array_equal(a, b)
  (path,) = checkpointing.checkpoint_files(str(tmp_path))
  with np.load(path, allow_pickle=False) as z:
    assert all(z[k].dtype != object for k in z.files)
  assert checkpointing.load_state(str(tmp_path / 'none'), state) is None


def test_learner_checkpoint_of_another_network_or_corrupt_is_refused(tmp_path):
  checkpointing.save_state(str(tmp_path), _adam_state(1), steps=5)
  other = ({'linear': {'w': jnp.zeros((4, 2)), 'b': jnp.zeros(2)}},)
  with pytest.raises(checkpointing.CheckpointError, match='does not fit this learner'):
    checkpointing.load_state(str(tmp_path), other)
  (path,) = checkpointing.checkpoint_files(str(tmp_path))
  with open(path, 'rb') as f:
    data = f.read()
  with open(path, 'wb') as f:
    f.write(data[:100])
  with pytest.raises(checkpointing.CheckpointError, match='no valid learner checkpoint.*corrupt'):
    checkpointing.load_state(str(tmp_path), _adam_state(0))


def _corrupt(path, how):
  with open(path, 'rb') as f:
    data = bytearray(f.read())
  if how == 'truncate':
    data = data[:len(data) // 2]
  else:   # flip one bit inside the first leaf's bytes
    header_at = data.find(b'leaf_0.npy')
    data[header_at + 200] ^= 0x10
  with open(path, 'wb') as f:
    f.write(bytes(data))


def test_the_last_k_checkpoints_are_kept(tmp_path):
  for steps in (5, 10, 15, 20):
    checkpointing.save_state(str(tmp_path), _adam_state(steps), steps, keep=3)
  assert [os.path.basename(p) for p in checkpointing.checkpoint_files(str(tmp_path))] == [
      'state-000000000020.npz', 'state-000000000015.npz', 'state-000000000010.npz']
  assert checkpointing.read_header(str(tmp_path))['steps'] == 20


@pytest.mark.parametrize('how', ['truncate', 'bitflip'])
def test_a_corrupt_newest_checkpoint_falls_back_to_the_one_before(tmp_path, how, caplog):
  for steps in (5, 10):
    checkpointing.save_state(str(tmp_path), _adam_state(steps), steps)
  newest = checkpointing.checkpoint_files(str(tmp_path))[0]
  _corrupt(newest, how)
  state, steps = checkpointing.load_state(str(tmp_path), _adam_state(0))
  assert steps == 5 and float(state[0]['linear']['w'][0, 0]) == 5.0
  assert any('skipped' in r.getMessage() and newest in r.getMessage() for r in caplog.records)
  assert os.path.exists(newest)   # a reader leaves the directory as it was
  # The learner's own restore sets the corrupt file aside (kept, no longer counted).
  checkpointing.load_state(str(tmp_path), _adam_state(0), set_aside_corrupt=True)
  assert os.path.exists(newest + '.corrupt') and not os.path.exists(newest)
  assert checkpointing.read_header(str(tmp_path))['steps'] == 5


def test_a_checkpoint_of_an_earlier_version_is_one_line_naming_the_last_commit_that_reads_it(
    tmp_path):
  # The earlier layout: one DIR/state.npz, format /1, no checksum.
  checkpointing.save_state(str(tmp_path), _adam_state(7), 70)
  (path,) = checkpointing.checkpoint_files(str(tmp_path))
  with np.load(path) as z:
    arrays = {k: z[k] for k in z.files}
  header = json.loads(bytes(arrays['__header__']).decode())
  header['format'] = 'noturningback-learner-state/1'
  del header['sha256']
  arrays['__header__'] = np.frombuffer(json.dumps(header).encode(), np.uint8)
  os.remove(path)
  np.savez(tmp_path / 'state.npz', **arrays)
  with pytest.raises(checkpointing.CheckpointError) as e:
    checkpointing.load_state(str(tmp_path), _adam_state(0))
  assert '\n' not in str(e.value) and 'holds only state.npz' in str(e.value)
  assert f'commit {checkpointing.EARLIER_FORMAT_READER} is the last that reads it' in str(e.value)
  # The same file under today's name is not of today's format.
  os.rename(tmp_path / 'state.npz', path)
  with pytest.raises(checkpointing.CheckpointError, match='not a learner checkpoint of format'):
    checkpointing.load_state(str(tmp_path), _adam_state(0))


def test_a_learner_never_checkpoints_a_non_finite_state(tmp_path):
  class Learner:
    state = _adam_state(1)

    def save(self):
      return self.state

    def restore(self, state):
      self.state = state

  learner = Learner()
  worker = checkpointing.CheckpointedLearner(learner, str(tmp_path), period_s=1e9)
  assert worker.save() == 0
  learner.state = ({'linear': {'w': jnp.full((3, 2), jnp.nan), 'b': jnp.zeros(2)}},
                   learner.state[1])
  assert worker.save() == 0   # refused: the finite checkpoint stays the newest
  assert len(checkpointing.checkpoint_files(str(tmp_path))) == 1
  restored, _ = checkpointing.load_state(str(tmp_path), _adam_state(0))
  assert checkpointing.all_finite(restored)


def test_supervisor_reports_the_last_error_line(tmp_path):
  log = tmp_path / 'node.log'
  log.write_text('I1126 starting\nTraceback (most recent call last):\n  File "x.py"\n'
                 'ValueError: learner diverged\nI1126 shutting down\n')
  assert supervisor.last_error_line(str(log)) == 'ValueError: learner diverged'
  records = run_state.RunRecords(str(tmp_path))
  supervisor.append_event(records, {'node': 'actor_0', 'event': 'failure', 'exit_code': -9})
  with open(tmp_path / supervisor.SUPERVISOR_LOG, 'a') as f:
    f.write('{"cut by a cra')  # a torn last line is skipped
  events = supervisor.read_events(records)
  assert [e['node'] for e in events] == ['actor_0']


def test_restarts_count_every_failure_but_the_one_a_node_gave_up_on(tmp_path):
  from launch.runtime import summary
  # Two launches: in the first, actor_0 fails twice (restarted both times) while the learner
  # fails once and is restarted; in the second, actor_0 fails once more and the run gives up
  # on it. Events of different nodes interleave, as the supervisors' threads write them.
  events = [('actor_0', 'start'), ('learner', 'start'), ('actor_0', 'failure'),
            ('actor_0', 'start'), ('learner', 'failure'), ('actor_0', 'failure'),
            ('learner', 'start'), ('actor_0', 'start'),
            ('actor_0', 'start'), ('learner', 'start'), ('learner', 'failure'),
            ('learner', 'start'), ('actor_0', 'failure'), ('actor_0', 'gave_up')]
  records = run_state.RunRecords(str(tmp_path))
  for node, event in events:
    supervisor.append_event(records, {'node': node, 'event': event})
  assert summary.restarts(records) == {'restarts': 4, 'restarts_actor_0': 2,
                                       'restarts_learner': 2}
  assert summary.restarts(run_state.RunRecords(str(tmp_path / 'none'))) == {}
  # A hung node is killed and restarted: a restart too, unless it is the hang given up on.
  for node, event in [('replay', 'start'), ('replay', 'hung'), ('replay', 'start'),
                      ('replay', 'hung'), ('replay', 'gave_up')]:
    supervisor.append_event(records, {'node': node, 'event': event})
  assert summary.restarts(records) == {'restarts': 5, 'restarts_actor_0': 2,
                                       'restarts_learner': 2, 'restarts_replay': 1}


def test_last_error_line_prefers_the_traceback_then_an_error_then_the_last_line(tmp_path):
  # One helper for the launcher's launchpad.log, a node's log and a cluster replica's output.
  from launch.runtime import processes
  log = tmp_path / 'node.log'
  cases = [
      # A traceback's last line beats a later C++ error line and a dotted exception name counts.
      ('Traceback (most recent call last):\n  File "x.py"\nreverb.errors.DeadlineExceededError: '
       'no reply\nE1126 12:00:00.000 42 server.cc:9] stream closed\nI1126 bye\n',
       'reverb.errors.DeadlineExceededError: no reply'),
      # No traceback: the last line naming an error, or a C++ error line.
      ('I1126 up\nE1126 12:00:00.000 42 server.cc:9] Check failed\nI1126 bye\n',
       'E1126 12:00:00.000 42 server.cc:9] Check failed'),
      ('starting\nwrite failed: No space left on device (OSError)\nEpoch 3 done\n',
       'write failed: No space left on device (OSError)'),
      # Nothing that looks like an error: the last line.
      ('starting\n\nkilled\n\n', 'killed'),
      ('', ''),
  ]
  for text, want in cases:
    log.write_text(text)
    assert processes.last_error_line(str(log)) == want, text
  assert processes.last_error_line(str(tmp_path / 'missing.log')) == ''


def test_estimator_checkpoint_of_another_env_is_refused_before_launch(
    tmp_path, untrained_estimator_checkpoint):
  path = untrained_estimator_checkpoint('turf', (10, 10, 3), np.uint8)
  r = _train('--env', 'cartpole', '--mode', 'rac', '--estimator_checkpoint', path,
             '--run_dir', str(tmp_path / 'run'))
  assert r.returncode == 2
  last = r.stderr.strip().splitlines()[-1]
  assert last.startswith('error: estimator checkpoint') and '(10, 10, 3) uint8 with 4 actions' in last
  assert 'cartpole has (4,) float32 with 2 actions' in last, last
  assert not (tmp_path / 'run').exists()


def test_a_restarted_node_appends_rows_under_the_existing_header(tmp_path):
  from launch.program import loggers
  from launch.program.config import RunConfig
  cfg = RunConfig(run_dir=str(tmp_path))
  first = loggers.make_logger(cfg, 'actor_0')
  first.write({'actor_steps': 10, 'episode_length': 10})
  # The restarted process's first row has more keys (counters that appeared meanwhile), in
  # another order: its values must still land under the file's own columns.
  again = loggers.make_logger(cfg, 'actor_0')
  again.write({'learner_steps': 3, 'episode_length': 12, 'actor_steps': 22})
  from launch.runtime import summary
  rows = summary.read_log(str(tmp_path), 'actor_0')
  assert rows == [{'actor_steps': 10.0, 'episode_length': 10.0},
                  {'actor_steps': 22.0, 'episode_length': 12.0}]


def test_a_row_left_unfinished_is_cut_when_the_node_writes_again(tmp_path):
  """A node killed (or out of disk) in the middle of a row: its next process starts a line of
  its own, rather than appending to the broken one."""
  from launch.program import loggers
  from launch.program.config import RunConfig
  from launch.runtime import summary
  cfg = RunConfig(run_dir=str(tmp_path))
  loggers.make_logger(cfg, 'actor_0').write({'actor_steps': 10, 'episode_length': 10})
  with open(tmp_path / 'logs' / 'actor_0' / 'logs.csv', 'a') as f:
    f.write('20,1')   # the row cut short
  loggers.make_logger(cfg, 'actor_0').write({'actor_steps': 22, 'episode_length': 12})
  assert summary.read_log(str(tmp_path), 'actor_0') == [
      {'actor_steps': 10.0, 'episode_length': 10.0}, {'actor_steps': 22.0, 'episode_length': 12.0}]


def test_a_text_value_goes_to_the_csv_and_not_to_tensorboard(tmp_path):
  """Turf's episode_info holds text (its ruined cells): TensorBoard's scalars cannot take it."""
  from launch.program import loggers
  from launch.program.config import RunConfig
  logger = loggers.make_logger(RunConfig(run_dir=str(tmp_path)), 'actor_0')
  logger.write({'actor_steps': 10, 'ruined_grass': 2, 'ruined_cells': '91 81'})
  logger.write({'actor_steps': 20, 'ruined_grass': 0, 'ruined_cells': ''})
  with open(tmp_path / 'logs' / 'actor_0' / 'logs.csv') as f:
    rows = list(csv.DictReader(f))
  assert [r['ruined_cells'] for r in rows] == ['91 81', '']


def _resumed_config(run_dir) -> dict:
  """The configuration a --resume of run_dir would run (--show_config)."""
  shown = _train('--run_dir', str(run_dir), '--resume', '--show_config')
  assert shown.returncode == 0, shown.stderr[-2000:]
  return json.loads(shown.stdout[shown.stdout.index('{'):])


def _refused_resume(run_dir, *flags) -> str:
  """The one-line error of a --resume of run_dir with `flags` (which must be refused)."""
  r = _train('--run_dir', str(run_dir), '--resume', *flags)
  assert r.returncode == 2
  return r.stderr.strip().splitlines()[-1]


def test_a_resumed_run_keeps_what_its_first_launch_resolved(tmp_path):
  """A preset field keeps its saved value on --resume, whatever the preset says now (here the
  Sokoban preset as an earlier one resolved it), and a learning rate decaying over the run's
  budget keeps its first launch's horizon when --max_steps grows."""
  run_dir = _saved_run(tmp_path, '--env', 'sokoban', '--mode', 'none', '--max_steps', '5000')
  config = json.loads((run_dir / 'config.json').read_text())
  assert config['impala']['learning_rate_decay_steps'] == 5000
  assert config['env_options'] == {'max_steps_min': 30}
  config['impala'].update(batch_size=16, minibatches=1, learning_rate=5e-4)
  config['env_options'] = {}
  (run_dir / 'config.json').write_text(json.dumps(config))
  resumed = _resumed_config(run_dir)
  assert (resumed['impala']['batch_size'], resumed['impala']['minibatches'],
          resumed['impala']['learning_rate'], resumed['env_options']) == (16, 1, 5e-4, {})
  shown = _train('--run_dir', str(run_dir), '--resume', '--show_config', '--max_steps', '9000')
  assert shown.returncode == 0, shown.stderr[-2000:]
  further = json.loads(shown.stdout[shown.stdout.index('{'):])
  assert (further['max_steps'], further['impala']['learning_rate_decay_steps']) == (9000, 5000)
  assert 'impala.minibatches' in _refused_resume(run_dir, '--minibatches', '2')


def test_a_run_saved_by_an_earlier_version_is_refused_in_one_line(tmp_path):
  """A run whose config.json lacks a network, or whose flags.json sets a flag this version does
  not define, is not resumed: one line names what it lacks or sets and the last commit that
  reads it. A flag it saved unset (null) is no obstacle."""
  from launch.runtime import run_config
  run_dir = _saved_run(tmp_path, '--max_steps', '5000')
  good = (run_dir / 'config.json').read_text()
  config = json.loads(good)
  config['network'] = config.pop('estimator_network')
  (run_dir / 'config.json').write_text(json.dumps(config))
  line = _refused_resume(run_dir, '--show_config')
  assert line.startswith('error: ') and 'config.json lacks estimator_network: ' in line, line
  assert f'commit {run_config.EARLIER_FORMAT_READER} is the last' in line
  (run_dir / 'config.json').write_text(good)
  flags = json.loads((run_dir / 'flags.json').read_text())
  (run_dir / 'flags.json').write_text(json.dumps({**flags, 'window': None}))
  assert _resumed_config(run_dir)['max_steps'] == 5000
  (run_dir / 'flags.json').write_text(json.dumps({**flags, 'window': 30}))
  line = _refused_resume(run_dir, '--show_config')
  assert 'flags.json sets --window=30, which this version does not define' in line, line
  assert f'commit {run_config.EARLIER_FORMAT_READER} is the last' in line


def test_a_finished_run_that_lost_its_summary_gets_it_back_on_resume(tmp_path):
  """A launcher killed after its run completed (its segment closed, summary.json not written)
  leaves a run that an experiment never marks done: --resume, with nothing left to train,
  rebuilds the summary from the run's records."""
  run_dir = _saved_run(tmp_path, '--max_steps', '5000')
  records = run_state.RunRecords(str(run_dir))
  records.save_counts({'actor_steps': 5003})
  records.write(run_state.FINAL_STATE, {'status': run_state.COMPLETED})
  r = _train('--run_dir', str(run_dir), '--resume')
  assert r.returncode == 0, r.stderr[-2000:]
  assert 'nothing to do' in r.stdout
  summary = json.loads((run_dir / 'summary.json').read_text())
  assert summary['status'] == run_state.COMPLETED


def test_a_launch_left_open_ends_at_its_last_sign_of_life():
  """A segment with no end (its launcher was killed) must not count as running ever after."""
  segs = [{'start': 100.0, 'end': None}, {'start': 500.0, 'end': 600.0},
          {'start': 900.0, 'end': None}, {'start': 1000.0, 'end': None}]
  seen = [150.0, 180.0, 550.0, 950.0, 1020.0]
  assert run_state.segment_spans(segs, seen) == [(100.0, 180.0), (500.0, 600.0), (900.0, 950.0),
                                                 (1000.0, 1020.0)]
  assert run_state.segment_spans(segs[:1], []) == [(100.0, 100.0)]   # no evidence: no time


def test_a_new_launch_closes_the_killed_one_where_counts_were_last_saved(tmp_path):
  records = run_state.RunRecords(str(tmp_path))
  start = time.time() - 1000
  records.write(run_state.RUN_STATE, {'segments': [
      {'start': start, 'end': None, 'status': 'running', 'resumed_from_steps': 0}]})
  records.save_counts({'actor_steps': 1234})
  os.utime(records.path(run_state.COUNTS), (start + 60, start + 60))
  records.begin_segment(1234)   # the first launch was killed: nothing closed it
  first, second = records.segments()
  assert (first['end'], first['status'], first['actor_steps']) == (
      start + 60, run_state.UNRECORDED_END, 1234)
  assert second['end'] is None and second['resumed_from_steps'] == 1234
  assert records.total_wall_time([second['start'] + 5]) == pytest.approx(65)


def test_a_launch_s_end_is_read_from_the_run_directory(tmp_path):
  from launch.runtime import lifecycle
  records = run_state.RunRecords(str(tmp_path))
  records.begin_segment(0)
  records.save_counts({'actor_steps': 500})
  assert records.end_status() == run_state.STOPPED   # nothing recorded how it ended
  records.write(run_state.FAILURE, {'reason': 'actor_0 died'})
  assert records.end_status() == 'failed: actor_0 died'
  records.write(run_state.FINAL_STATE, {'status': 'completed'})
  assert records.end_status() == run_state.COMPLETED
  assert records.end_status('failed: launcher') == 'failed: launcher'
  summary = lifecycle.record_end(records)
  (segment,) = records.segments()
  assert (segment['status'], segment['actor_steps']) == (run_state.COMPLETED, 500)
  assert summary['status'] == run_state.COMPLETED and summary['launches'] == 1
  assert json.loads((tmp_path / run_state.SUMMARY).read_text()) == summary
  records.request_stop()
  records.clear_launch_end()   # the next launch's end is its own to record
  assert not [f for f in (run_state.STOP_REQUEST, run_state.FINAL_STATE, run_state.FAILURE)
              if (tmp_path / f).exists()]


def test_a_run_s_records_are_its_files_read_and_written_through_one_object(tmp_path):
  """RunRecords on a hand-built run directory: event records appended and read back (a line cut
  by a kill skipped), counts saved and loaded, a stop request seen and cleared, segments begun
  and ended and their wall time summed; every one the file and format the run directory had."""
  records = run_state.RunRecords(str(tmp_path))
  assert records.read_records(run_state.SUPERVISOR_LOG) == [] and records.segments() == []
  records.append_record(run_state.SUPERVISOR_LOG, {'node': 'learner', 'event': 'start'})
  with open(tmp_path / run_state.SUPERVISOR_LOG, 'a') as f:
    f.write('{"node": "act')   # cut by a kill
  (event,) = records.read_records(run_state.SUPERVISOR_LOG)
  assert (event['node'], event['event']) == ('learner', 'start') and event['time'] > 0
  assert records.load_counts() == {} and records.saved_actor_steps() == 0
  records.save_counts({'actor_steps': 700, 'learner_steps': 3})
  assert json.loads((tmp_path / run_state.COUNTS).read_text()) == {'actor_steps': 700,
                                                                  'learner_steps': 3}
  assert records.load_counts()['learner_steps'] == 3 and records.saved_actor_steps() == 700
  assert records.stop_requested() is None
  records.request_stop('goal reached')
  assert json.loads((tmp_path / run_state.STOP_REQUEST).read_text())['reason'] == 'goal reached'
  assert records.stop_requested() == 'goal reached'
  records.clear_stop_request()
  records.clear_stop_request()   # none: nothing to do
  assert records.stop_requested() is None and not (tmp_path / run_state.STOP_REQUEST).exists()
  records.begin_segment(0)
  assert records.end_segment() == run_state.STOPPED   # nothing recorded how it ended
  records.begin_segment(700)
  assert records.end_segment(run_state.COMPLETED, 900) == run_state.COMPLETED
  first, second = json.loads((tmp_path / run_state.RUN_STATE).read_text())['segments']
  assert (first['status'], first['actor_steps']) == (run_state.STOPPED, 700)
  assert (second['resumed_from_steps'], second['actor_steps']) == (700, 900)
  # The wall time sums the launches, leaving out the gap between them.
  records.write(run_state.RUN_STATE, {'segments': [
      dict(first, start=100.0, end=160.0), dict(second, start=1000.0, end=1040.0)]})
  assert records.total_wall_time() == 100.0


@pytest.mark.parametrize('args, words', [
    (('--env', 'cartpole', '--policy_canvas_size', '15'),
     '--policy_canvas_size applies where the policy centres'),
    (('--env', 'sokoban', '--policy_canvas_size', '14'), 'canvas_size must be odd'),
    (('--env', 'sokoban', '--nopolicy_centre_on_agent', '--policy_canvas_size', '15'),
     '--policy_canvas_size applies where the policy centres'),
    (('--env', 'cartpole', '--nopolicy_centre_on_agent'),
     '--policy_centre_on_agent applies where the preset'),
    (('--env', 'cartpole', '--policy_pixel_scale', '1'), 'applies to image observations'),
    (('--env', 'sokoban', '--policy_pixel_scale', '0'), 'pixel_scale must be > 0'),
])
def test_a_policy_network_that_cannot_be_is_one_line(tmp_path, args, words):
  r = _train(*args, '--run_dir', str(tmp_path / 'run'))
  assert r.returncode == 2
  assert words in r.stderr.strip().splitlines()[-1]
  assert not (tmp_path / 'run').exists()


def test_the_policy_network_as_app_c3_draws_it_is_three_flags(tmp_path):
  r = _train('--env', 'sokoban', '--policy_init', 'lecun', '--policy_pixel_scale', '1',
             '--nopolicy_centre_on_agent', '--run_dir', str(tmp_path / 'run'), '--show_config')
  assert r.returncode == 0, r.stderr[-2000:]
  net = json.loads(r.stdout[r.stdout.index('{'):])['policy_network']
  assert (net['init'], net['pixel_scale'], net['centre_on'], net['canvas_size']) == (
      'lecun', 1.0, [], 0)
  r = _train('--env', 'sokoban', '--run_dir', str(tmp_path / 'run'), '--show_config')
  net = json.loads(r.stdout[r.stdout.index('{'):])['policy_network']   # the preset's
  assert (net['init'], net['pixel_scale'], net['canvas_size']) == ('orthogonal', 1 / 255, 15)

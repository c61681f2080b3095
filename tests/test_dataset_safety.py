"""No data loss in episode datasets: `launch.collect --resume` refuses a damaged dataset and
never modifies it, writes stay atomic, SIGTERM leaves --out as it was, and an unwritable --out
is refused before any work. Datasets are tiny ones written by the real collect code."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from estimators import dataset
from estimators.rlds import writer as rlds_writer
from launch.runtime import collection as collect

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))
SHARD = f'{dataset.DATASET_NAME}-{dataset.SPLIT}.tfrecord-00000'


@pytest.fixture(scope='module')
def cliff_dataset(tmp_path_factory):
  """4 cliff episodes written by the in-process collect path (the one --resume extends)."""
  out = str(tmp_path_factory.mktemp('safety') / 'cliff')
  collect.run('cliff', 4, out, progress=False)
  return out


@pytest.fixture
def dataset_copy(cliff_dataset, tmp_path):
  out = tmp_path / 'ds'
  shutil.copytree(cliff_dataset, out)
  return out


def _snapshot(root):
  """Every entry under `root` with its bytes and mtime: equal snapshots mean nothing changed,
  and no temporary directory was left beside the dataset."""
  out = {}
  for dirpath, dirnames, filenames in os.walk(root):
    for name in dirnames + filenames:
      path = os.path.join(dirpath, name)
      st = os.lstat(path)
      data = None
      if os.path.isfile(path):
        with open(path, 'rb') as f:
          data = f.read()
      out[os.path.relpath(path, root)] = (st.st_mtime_ns, st.st_size, data)
  return out


def _env():
  return dict(os.environ, JAX_PLATFORMS='cpu', TF_CPP_MIN_LOG_LEVEL='3')


def _collect_cmd(out, episodes, *flags):
  return [sys.executable, '-m', 'launch.collect', '--env', 'cliff', '--episodes', str(episodes),
          '--out', str(out), '--noprogress', *flags]


def _one_line_error(returncode, stderr, *words, code=2):
  assert returncode == code, stderr
  assert 'Traceback' not in stderr, stderr
  lines = [line for line in stderr.splitlines() if line.strip()]
  assert len(lines) == 1, stderr
  assert lines[0].startswith('error: '), lines[0]
  for word in words:
    assert word in lines[0], lines[0]
  return lines[0]




# --------------------------------------------------------------------------------------------- #
# --resume onto a damaged dataset
# --------------------------------------------------------------------------------------------- #

def _truncate_half(path):
  with open(path, 'r+b') as f:
    f.truncate(os.path.getsize(path) // 2)


def _edit_json(path, edit):
  with open(path) as f:
    doc = json.load(f)
  edit(doc)
  with open(path, 'w') as f:
    json.dump(doc, f)


def _shard_lengths(doc, lengths):
  doc['splits'][0]['shardLengths'] = lengths


DAMAGE = {   # name -> (damage(dataset dir), the file the refusal must name)
    'dataset_info.json cut short': (lambda d: _truncate_half(d / 'dataset_info.json'),
                                    'dataset_info.json'),
    'dataset_info.json not JSON': (lambda d: (d / 'dataset_info.json').write_text('<html>'),
                                   'dataset_info.json'),
    'dataset_info.json lists fewer episodes': (
        lambda d: _edit_json(d / 'dataset_info.json', lambda doc: _shard_lengths(doc, ['2'])),
        'dataset_info.json'),
    'dataset_info.json lists no shards': (
        lambda d: _edit_json(d / 'dataset_info.json', lambda doc: _shard_lengths(doc, [])),
        'dataset_info.json'),
    'dataset_info.json names another dataset': (
        lambda d: _edit_json(d / 'dataset_info.json', lambda doc: doc.update(name='other')),
        'dataset_info.json'),
    'features.json cut short': (lambda d: _truncate_half(d / 'features.json'), 'features.json'),
    'noturningback.json cut short': (lambda d: _truncate_half(d / dataset.METADATA_FILE),
                                     dataset.METADATA_FILE),
    'noturningback.json wrong count': (
        lambda d: _edit_json(d / dataset.METADATA_FILE, lambda doc: doc.update(num_episodes=200)),
        dataset.METADATA_FILE),
    'noturningback.json wrong type': (
        lambda d: _edit_json(d / dataset.METADATA_FILE,
                             lambda doc: doc.update(num_transitions='many')),
        dataset.METADATA_FILE),
    'shard cut short': (lambda d: _truncate_half(d / SHARD), SHARD),
    'shard missing': (lambda d: os.remove(d / SHARD), SHARD),
    'unlisted shard': (lambda d: shutil.copy(d / SHARD, d / SHARD.replace('00000', '00001')),
                       'dataset_info.json'),
}


@pytest.mark.parametrize('damage', sorted(DAMAGE))
def test_resume_refuses_a_damaged_dataset_and_leaves_it_untouched(dataset_copy, damage):
  hurt, names = DAMAGE[damage]
  hurt(dataset_copy)
  before = _snapshot(dataset_copy.parent)
  with pytest.raises(collect.CollectError) as err:
    collect.run('cliff', 6, str(dataset_copy), resume=True, progress=False)
  message = str(err.value)
  assert '\n' not in message
  assert f'restore {dataset_copy / names} or pass --overwrite to start over' in message, message
  assert _snapshot(dataset_copy.parent) == before


@pytest.mark.parametrize('damage', ['dataset_info.json cut short', 'shard cut short'])
def test_resume_cli_exits_2_with_one_line_for_a_damaged_dataset(dataset_copy, damage):
  hurt, names = DAMAGE[damage]
  hurt(dataset_copy)
  before = _snapshot(dataset_copy.parent)
  proc = subprocess.run(_collect_cmd(dataset_copy, 200, '--resume'), cwd=REPO, env=_env(),
                        capture_output=True, text=True, timeout=120)
  _one_line_error(proc.returncode, proc.stderr, 'cannot resume', str(dataset_copy / names),
                  '--overwrite')
  assert _snapshot(dataset_copy.parent) == before


def test_overwrite_replaces_a_damaged_dataset(dataset_copy):
  """The way out the refusal names works."""
  _truncate_half(dataset_copy / 'dataset_info.json')
  meta = collect.run('cliff', 2, str(dataset_copy), overwrite=True, progress=False)
  assert meta['num_episodes'] == 2
  assert dataset.verify_dataset(str(dataset_copy))['num_episodes'] == 2


def test_resume_extends_a_whole_dataset(cliff_dataset, dataset_copy):
  """The checks let a sound dataset through, also one with several shards (appended)."""
  old, _ = dataset.load_episodes(cliff_dataset)
  meta = collect.run('cliff', 6, str(dataset_copy), resume=True, progress=False)
  assert meta['num_episodes'] == 6 and meta['collected_episodes'] == 2
  meta = collect.run('cliff', 7, str(dataset_copy), resume=True, progress=False)
  assert meta['num_episodes'] == 7
  verified = dataset.verify_dataset(str(dataset_copy))
  assert verified['num_episodes'] == 7
  assert len([f for f in os.listdir(dataset_copy) if '.tfrecord-' in f]) == 3
  episodes, _ = dataset.load_episodes(str(dataset_copy))
  assert verified['num_transitions'] == sum(len(e.actions) for e in episodes)
  stored = {e.actions.tobytes() for e in episodes}
  assert all(e.actions.tobytes() in stored for e in old)


def test_an_interrupted_append_leaves_the_old_dataset_intact(cliff_dataset, dataset_copy):
  """New data is written beside the dataset (a copy plus new shards) and swapped in only when
  complete."""
  old, meta = dataset.load_episodes(cliff_dataset)
  before = _snapshot(dataset_copy.parent)

  def interrupted():
    yield old[0]
    raise KeyboardInterrupt

  with pytest.raises(KeyboardInterrupt):
    dataset.write_episodes(str(dataset_copy), interrupted(), 'cliff', {}, meta['num_actions'],
                           {'shape': meta['observation_shape'],
                            'dtype': meta['observation_dtype']}, append=True)
  assert _snapshot(dataset_copy.parent) == before


# --------------------------------------------------------------------------------------------- #
# SIGTERM
# --------------------------------------------------------------------------------------------- #

def _terminate_while_writing(cmd, parent, out_name):
  """Starts `cmd`, sends SIGTERM once its temporary output directory exists (collection is
  under way), returns (exit code, stderr)."""
  proc = subprocess.Popen(cmd, cwd=REPO, env=_env(), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
  try:
    deadline = time.time() + 90
    while not any(n.startswith(f'.{out_name}.writing-') for n in os.listdir(parent)):
      assert proc.poll() is None and time.time() < deadline, proc.communicate()[1]
      time.sleep(0.1)
    time.sleep(0.3)   # well inside the write
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
  finally:
    if proc.poll() is None:
      proc.kill()
  return proc.returncode, stderr


def test_sigterm_during_resume_keeps_the_old_dataset(dataset_copy):
  before = _snapshot(dataset_copy.parent)
  code, stderr = _terminate_while_writing(_collect_cmd(dataset_copy, 100_000, '--resume'),
                                          dataset_copy.parent, 'ds')
  _one_line_error(code, stderr, 'SIGTERM', f'{dataset_copy} was left as it was (4 episodes)',
                  code=128 + signal.SIGTERM)
  assert _snapshot(dataset_copy.parent) == before


def test_sigterm_during_a_new_collection_leaves_nothing(tmp_path):
  out = tmp_path / 'new'
  code, stderr = _terminate_while_writing(_collect_cmd(out, 100_000), tmp_path, 'new')
  _one_line_error(code, stderr, 'SIGTERM', f'nothing was written to {out}',
                  code=128 + signal.SIGTERM)
  assert os.listdir(tmp_path) == []


# --------------------------------------------------------------------------------------------- #
# Unwritable --out
# --------------------------------------------------------------------------------------------- #

def test_collect_refuses_an_out_under_a_regular_file(tmp_path):
  (tmp_path / 'a_file').write_text('keep me')
  before = _snapshot(tmp_path)
  proc = subprocess.run(_collect_cmd(tmp_path / 'a_file' / 'sub' / 'ds', 3), cwd=REPO,
                        env=_env(), capture_output=True, text=True, timeout=120)
  _one_line_error(proc.returncode, proc.stderr, 'cannot write --out',
                  f'{tmp_path / "a_file"} is a file, not a directory')
  assert _snapshot(tmp_path) == before


def test_collect_refuses_an_out_in_a_read_only_directory(read_only_dir):
  proc = subprocess.run(_collect_cmd(read_only_dir / 'ds', 3), cwd=REPO, env=_env(),
                        capture_output=True, text=True, timeout=120)
  _one_line_error(proc.returncode, proc.stderr, 'cannot write --out',
                  f'cannot create anything in {read_only_dir}')
  assert os.listdir(read_only_dir) == []


@pytest.mark.parametrize('kwargs,words', [
    (dict(episodes=-3), '--episodes must be a positive integer'),
    (dict(episodes=0), '--episodes must be a positive integer'),
    (dict(num_actors=0), '--num_actors must be >= 1'),
    (dict(seed=-1), '--seed must be >= 0, got -1'),
])
def test_collect_refuses_impossible_numbers(tmp_path, kwargs, words):
  args = dict(env='cliff', episodes=3, out=str(tmp_path / 'ds'), progress=False)
  args.update(kwargs)
  with pytest.raises(collect.CollectError, match=words):
    collect.run(**args)
  assert os.listdir(tmp_path) == []


def test_verify_dataset_reads_every_record(dataset_copy):
  """A shard damaged in its middle (not only cut short) is found: every record is read."""
  data = bytearray((dataset_copy / SHARD).read_bytes())
  middle = len(data) // 2
  data[middle:middle + 8] = bytes(255 - b for b in data[middle:middle + 8])
  (dataset_copy / SHARD).write_bytes(bytes(data))
  with pytest.raises(dataset.DamagedDatasetError) as err:
    dataset.verify_dataset(str(dataset_copy))
  assert err.value.file == str(dataset_copy / SHARD)
  assert 'corrupt' in str(err.value) and '\n' not in str(err.value)


def test_signals_wait_until_the_swap_into_place_is_done():
  """Between moving the old dataset aside and the new one in, --out does not exist: a SIGINT
  or SIGTERM there is held until both renames are done."""
  done = []
  # Python's own SIGINT handler (a module imported earlier in the session may have replaced it).
  previous = signal.signal(signal.SIGINT, signal.default_int_handler)
  try:
    with pytest.raises(KeyboardInterrupt):
      with rlds_writer._signals_deferred():   # pylint: disable=protected-access
        signal.raise_signal(signal.SIGINT)
        done.append('both renames')
  finally:
    signal.signal(signal.SIGINT, previous)
  assert done == ['both renames']

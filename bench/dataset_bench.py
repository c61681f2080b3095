"""Offline data path: loading a stored RLDS episode dataset into the flat training layout.

    python -m bench.dataset_bench --episodes 20000 [--workdir /tmp/dataset_bench] \
        [--out results/dataset_bench.json] [--new_repeats 2]

Collects (or reuses, under --workdir) a random-policy Sokoban dataset of --episodes episodes
with `launch.collect`, then times, each in a fresh Python process so that peak RSS
(resource.getrusage ru_maxrss) belongs to one loader only:
  old: estimators.dataset.flatten(load_episodes(path)[0])   (what estimators.train used)
  new: estimators.dataset.load_flat(path)
and checks that both give identical arrays (sha256, shape and dtype of observations, actions,
last, lengths). The shard files are read once beforehand so both loaders find them in the
page cache. Writes JSON (bench.common.write_json): dataset size, seconds, observations/s, peak
RSS and RSS after imports per loader, the speed-up and whether the arrays are identical.
"""
import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))
_MARK = 'DATASET_BENCH_RESULT '


def _rss_mib() -> float:
  """Current resident set size (MiB)."""
  with open('/proc/self/statm') as f:
    pages = int(f.read().split()[1])
  return pages * os.sysconf('SC_PAGE_SIZE') / 2**20


def _peak_rss_mib() -> float:
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024   # KiB on Linux


def _cpu_s() -> float:
  usage = resource.getrusage(resource.RUSAGE_SELF)
  return usage.ru_utime + usage.ru_stime


def child(loader: str, path: str) -> dict:
  """Runs one loader in this (fresh) process and describes what it returned."""
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  import numpy as np
  import tensorflow as tf  # pylint: disable=unused-import
  import tensorflow_datasets  # pylint: disable=unused-import
  from estimators import dataset
  imports_rss, imports_peak = _rss_mib(), _peak_rss_mib()
  cpu0 = _cpu_s()
  t0 = time.perf_counter()
  if loader == 'old':
    episodes, _ = dataset.load_episodes(path)
    flat = dataset.flatten(episodes)
    del episodes
  else:
    flat, _ = dataset.load_flat(path)
  seconds = time.perf_counter() - t0
  cpu = _cpu_s() - cpu0
  peak = _peak_rss_mib()
  arrays = {}
  for name, arr in zip(flat._fields, flat):
    arr = np.ascontiguousarray(arr)
    arrays[name] = {'shape': list(arr.shape), 'dtype': arr.dtype.name,
                    'sha256': hashlib.sha256(memoryview(arr).cast('B')).hexdigest()}
  n = int(len(flat.observations))
  return {'loader': loader, 'seconds': seconds, 'cpu_seconds': cpu, 'observations': n,
          'episodes': int(len(flat.lengths)), 'observations_per_s': n / seconds,
          'peak_rss_mib': peak, 'rss_after_imports_mib': imports_rss,
          'peak_rss_after_imports_mib': imports_peak,
          'peak_rss_above_imports_mib': peak - imports_peak,
          'result_mib': sum(a.nbytes for a in flat) / 2**20, 'arrays': arrays}


def run_child(loader: str, path: str) -> dict:
  proc = subprocess.run([sys.executable, '-m', 'bench.dataset_bench', '--child', loader,
                         '--dataset', path], cwd=REPO, capture_output=True, text=True)
  lines = [l for l in proc.stdout.splitlines() if l.startswith(_MARK)]
  if proc.returncode != 0 or not lines:
    raise RuntimeError(f'{loader} loader failed (exit {proc.returncode}): '
                       f'{proc.stderr.strip()[-2000:]}')
  return json.loads(lines[-1][len(_MARK):])


def ensure_dataset(workdir: str, episodes: int, seed: int) -> str:
  """A random-policy Sokoban dataset of `episodes` episodes under `workdir` (collected with
  launch.collect unless already there; an interrupted one is resumed)."""
  sys.path.insert(0, REPO)
  from estimators import dataset
  path = os.path.join(workdir, f'sokoban_random_{episodes}_seed{seed}')
  if dataset.dataset_exists(path) and dataset.read_metadata(path)['num_episodes'] == episodes:
    print(f'reusing {path}', file=sys.stderr, flush=True)
    return path
  os.makedirs(workdir, exist_ok=True)
  log = os.path.join(workdir, f'collect_{episodes}_seed{seed}.log')
  cmd = [sys.executable, '-m', 'launch.collect', '--env', 'sokoban', '--policy', 'random',
         '--episodes', str(episodes), '--out', path, '--seed', str(seed), '--noprogress']
  if dataset.dataset_exists(path):
    cmd.append('--resume')
  print(f'collecting {episodes} episodes into {path} (log: {log})', file=sys.stderr, flush=True)
  t0 = time.time()
  with open(log, 'ab') as f:
    rc = subprocess.call(cmd, cwd=REPO, stdout=f, stderr=subprocess.STDOUT)
  if rc != 0:
    raise RuntimeError(f'launch.collect failed (exit {rc}); see {log}')
  print(f'collected in {time.time() - t0:.0f}s', file=sys.stderr, flush=True)
  return path


def warm_page_cache(path: str) -> int:
  total = 0
  for name in sorted(os.listdir(path)):
    with open(os.path.join(path, name), 'rb') as f:
      while True:
        chunk = f.read(1 << 24)
        if not chunk:
          break
        total += len(chunk)
  return total


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--episodes', type=int, default=20000)
  parser.add_argument('--seed', type=int, default=0)
  parser.add_argument('--workdir', default='/tmp/dataset_bench')
  parser.add_argument('--out', default=os.path.join(REPO, 'results', 'dataset_bench.json'))
  parser.add_argument('--new_repeats', type=int, default=2,
                      help='fresh-process runs of the new loader (the best is reported)')
  parser.add_argument('--skip_old', action='store_true', help='time the new loader only')
  parser.add_argument('--child', choices=['old', 'new'], help=argparse.SUPPRESS)
  parser.add_argument('--dataset', help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.child:
    print(_MARK + json.dumps(child(args.child, args.dataset)), flush=True)
    return 0

  sys.path.insert(0, REPO)
  from bench import common
  from estimators import dataset
  path = ensure_dataset(args.workdir, args.episodes, args.seed)
  meta = dataset.read_metadata(path)
  disk = warm_page_cache(path)
  shards = sorted(f for f in os.listdir(path) if '.tfrecord-' in f)
  info = {'path': path, 'env': meta['env'], 'episodes': meta['num_episodes'],
          'transitions': meta['num_transitions'],
          'observations': meta['num_transitions'] + meta['num_episodes'],
          'observation_shape': meta['observation_shape'],
          'observation_dtype': meta['observation_dtype'], 'has_states': meta['has_states'],
          'shards': len(shards), 'bytes_on_disk': disk}
  print(f'dataset: {info["episodes"]:,} episodes, {info["observations"]:,} observations '
        f'{tuple(info["observation_shape"])} {info["observation_dtype"]}, {len(shards)} shards, '
        f'{disk / 2**20:.0f} MiB', file=sys.stderr, flush=True)

  runs = []
  for i in range(max(1, args.new_repeats)):
    runs.append(run_child('new', path))
    print(f'new #{i + 1}: {runs[-1]["seconds"]:.2f}s (cpu {runs[-1]["cpu_seconds"]:.2f}s), '
          f'{runs[-1]["observations_per_s"]:,.0f} obs/s, '
          f'peak RSS {runs[-1]["peak_rss_mib"]:.0f} MiB', file=sys.stderr, flush=True)
  new = min(runs, key=lambda r: r['seconds'])
  results = {'dataset': info, 'cpu_count': os.cpu_count(),
             'loadavg_at_start': list(os.getloadavg()), 'new': new,
             'new_all_seconds': [r['seconds'] for r in runs]}
  if not args.skip_old:
    old = run_child('old', path)
    print(f'old: {old["seconds"]:.2f}s (cpu {old["cpu_seconds"]:.2f}s), '
          f'{old["observations_per_s"]:,.0f} obs/s, '
          f'peak RSS {old["peak_rss_mib"]:.0f} MiB', file=sys.stderr, flush=True)
    identical = all(r['arrays'] == old['arrays'] for r in runs)
    results.update(old=old, identical=identical,
                   speedup=old['seconds'] / new['seconds'],
                   cpu_ratio=old['cpu_seconds'] / new['cpu_seconds'],
                   peak_rss_ratio=old['peak_rss_mib'] / new['peak_rss_mib'])
    print(f'speed-up {results["speedup"]:.1f}x, identical arrays: {identical}',
          file=sys.stderr, flush=True)
  results['loadavg_at_end'] = list(os.getloadavg())
  common.write_json(args.out, results)
  print(f'wrote {args.out}', file=sys.stderr)
  return 0 if results.get('identical', True) else 1


if __name__ == '__main__':
  sys.exit(main())

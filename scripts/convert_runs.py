"""Rewrites the config.json of runs saved by launch.train before it recorded both networks into
the format it writes today, so that launch.runtime.run_config reads them:

- the estimator network, saved as `network`, becomes `estimator_network`;
- `policy_network` is added: for Sokoban the network those runs were made with (today's
  preset's layers on the 19x19 canvas, canvas_size 0), for any other environment null (its
  preset's network, which has not changed).

Every other key stays as it was (a field a config.json lacks takes its default when loaded).
A config.json already in today's format is left untouched, so running this again changes
nothing. Run directories that live runs write (--skip) are never touched.

    .venv/bin/python scripts/convert_runs.py            # every run under results/
    .venv/bin/python scripts/convert_runs.py --dry_run  # list what it would convert
    .venv/bin/python scripts/convert_runs.py DIR ...    # the runs under DIR ...
"""
import json
import os
import sys

from absl import flags

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from envs import cli  # noqa: E402  pylint: disable=g-import-not-at-top

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKIP = ('results/sokoban_authors', 'results/turf/learner_mask')

SOKOBAN_19X19 = {
    'torso': 'conv', 'conv_channels': [8, 16, 16], 'conv_strides': [2, 1, 1],
    'conv_paddings': ['SAME', 'SAME', 'SAME'], 'relu_after_last_conv': False,
    'shared_hidden': [64, 64], 'head_hidden': [64], 'init': 'orthogonal',
    'centre_on': [[160, 212, 56], [219, 212, 56]], 'canvas_size': 0,
}


def converted(raw: dict) -> dict:
  """`raw` in today's format (the same dict when it already is)."""
  if 'estimator_network' in raw and 'policy_network' in raw:
    return raw
  out = {}
  for key, value in raw.items():
    out['estimator_network' if key == 'network' else key] = value
  if 'policy_network' not in out:
    policy = SOKOBAN_19X19 if out.get('env') == 'sokoban' else None
    # Where launch.train writes it: right after the estimator network.
    items = list(out.items())
    at = next((i + 1 for i, (k, _) in enumerate(items) if k == 'estimator_network'), len(items))
    out = dict(items[:at] + [('policy_network', policy)] + items[at:])
  return out


def config_files(top: str):
  for dirpath, dirnames, filenames in os.walk(top):
    rel = os.path.relpath(dirpath, ROOT)
    if any(rel == s or rel.startswith(s + os.sep) for s in SKIP):
      dirnames[:] = []
      continue
    if 'config.json' in filenames:
      yield os.path.join(dirpath, 'config.json')


def define_flags(fv: flags.FlagValues) -> None:
  flags.DEFINE_bool('dry_run', False, 'List what would be converted; write nothing.',
                    flag_values=fv)


def main(argv=None) -> int:
  args, roots = cli.parse(define_flags, argv, prog='scripts/convert_runs.py',
                          description=__doc__.splitlines()[0], positional='[DIR ...]')
  count = 0
  for top in roots or [os.path.join(ROOT, 'results')]:
    for path in config_files(top):
      with open(path) as f:
        raw = json.load(f)
      if not isinstance(raw, dict) or not isinstance(raw.get('env'), str):
        continue   # not a run's configuration
      new = converted(raw)
      if new is raw:
        continue
      count += 1
      print(f'{"would convert" if args.dry_run else "converted"} {os.path.relpath(path, ROOT)}')
      if not args.dry_run:
        with open(path + '.part', 'w') as f:
          json.dump(new, f, indent=2)
        os.replace(path + '.part', path)
  print(f'{count} run(s) {"to convert" if args.dry_run else "converted"}', file=sys.stderr)
  return 0


if __name__ == '__main__':
  sys.exit(main())

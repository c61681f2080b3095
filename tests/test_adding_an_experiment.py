"""docs/experiments.md, "Adding an experiment", followed for a toy: one module (its own scales,
its steps) and one registry entry; `experiments` then runs it through the runner into a
directory, checks --scale against the toy's own scales, and skips the step once it is done."""
import importlib.util
import os

import pytest

import experiments.__main__ as experiment
from experiments import registry, spec

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))

# The experiment module. Its one step runs the module itself (`python -m toy_experiment`), which
# writes the scale's words into a file: the step's `done` file.
TOY_MODULE = '''
"""A toy experiment: one step that writes a greeting, its words set by the scale."""
import sys

from experiments.spec import Step, scale_settings

TOY_SCALES = {'quiet': dict(words='hello'), 'loud': dict(words='HELLO')}


def toy_steps(scale, seeds):
  s = scale_settings(TOY_SCALES, scale, 'toy')
  return [Step('greet', 'toy_experiment', ('{out}/greeting.txt', s['words']),
               done='greeting.txt', est_seconds=1)]


if __name__ == '__main__':
  with open(sys.argv[1], 'w') as f:
    f.write(sys.argv[2])
'''


@pytest.fixture
def toy(tmp_path, monkeypatch):
  path = tmp_path / 'toy_experiment.py'
  path.write_text(TOY_MODULE)
  # The runner starts each step as `python -m MODULE`: the toy's directory on its path.
  monkeypatch.setenv('PYTHONPATH', os.pathsep.join(
      [str(tmp_path), ROOT] + [p for p in [os.environ.get('PYTHONPATH')] if p]))
  loader = importlib.util.spec_from_file_location('toy_experiment', path)
  module = importlib.util.module_from_spec(loader)
  loader.loader.exec_module(module)
  # The registry entry.
  monkeypatch.setitem(registry.EXPERIMENTS, 'toy', spec.Experiment(
      name='toy', description='a greeting', paper='none', steps=module.toy_steps,
      scales=tuple(module.TOY_SCALES), metrics=(), table_metrics=()))
  return tmp_path / 'out'


def _main(*argv) -> int:
  with pytest.raises(SystemExit) as e:
    experiment.main(list(argv))
  return e.value.code


def test_a_toy_experiment_runs_at_a_scale_of_its_own(toy, capsys):
  assert _main('toy', '--scale', 'loud', '--seeds', '1', '--out', str(toy)) == 0
  assert (toy / 'greeting.txt').read_text() == 'HELLO'
  assert (toy / 'table.md').read_text().startswith('# toy: a greeting')
  assert (toy / 'logs' / 'greet.log').exists()
  # Run again: the step is done, nothing runs.
  (toy / 'greeting.txt').write_text('kept')
  capsys.readouterr()
  assert _main('toy', '--scale', 'loud', '--seeds', '1', '--out', str(toy)) == 0
  assert '1/1 steps done' in capsys.readouterr().out
  assert (toy / 'greeting.txt').read_text() == 'kept'


def test_a_scale_the_toy_lacks_is_one_line(toy, capsys):
  assert _main('toy', '--scale', 'small', '--out', str(toy), '--list') == 2
  assert capsys.readouterr().err.strip() == (
      "error: experiment 'toy' has no scale 'small' (it has: quiet, loud)")
  assert not toy.exists()

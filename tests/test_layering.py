"""The project's import graph: no cycle, no import up the layers, flags only in entry modules;
one CLI style (absl flags); each knob of a run one home.

Layers, bottom to top: envs/ -> estimators/ -> agents/ -> launch/ -> experiments/ -> bench/ (a
module may import its own layer and those below). launch/ is the system: the program, the run's
life, the cluster path and the commands that start runs; experiments/ holds what is about it
(the paper's experiments, the studies, the analysis of runs). Inside launch/, the sub-packages
(program/, runtime/, cluster/) never import an entry module of launch/ (train, collect, ...):
an entry module defines its absl flags at import time, and a replica that imported one would
carry them (and a cycle cluster <-> train would follow). A run's life calls down one way:
lifecycle -> summary -> run_state. The studies (experiments/studies/) sit above the experiments:
a study may use the experiments' runner and steps, but no other module imports a study and no
registered experiment runs one as a step (what an experiment needs is part of experiments/).
The builder (what the agent is) knows nothing of Launchpad or the run directory; the layout (how
it is distributed) builds the agent's parts only through it. Every import counts, also those
inside functions. The per-environment presets (envs.presets) sit at the bottom, in envs/, as
plain values: every layer reads them (the offline estimator CLI, the policy network,
launch.train), so they may import nothing above envs/. Every command parses absl flags, and
every setting of a run is one field of one config dataclass under RunConfig with one generated
flag. No code lives under results/: what made a result is a module here.
"""
import ast
import dataclasses
import os
import subprocess
import sys
import typing
from typing import Dict, List, Set

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))
LAYERS = {'envs': 0, 'estimators': 1, 'agents': 2, 'launch': 3, 'experiments': 4, 'bench': 5}


def _modules() -> Dict[str, str]:
  """module name -> file, for every .py file of the layered packages."""
  out = {}
  for top in LAYERS:
    for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, top)):
      dirnames[:] = [d for d in dirnames if not d.startswith(('.', '__'))]
      for name in filenames:
        if not name.endswith('.py'):
          continue
        rel = os.path.relpath(os.path.join(dirpath, name), ROOT)[:-3].split(os.sep)
        if rel[-1] == '__init__':
          rel = rel[:-1]
        out['.'.join(rel)] = os.path.join(dirpath, name)
  return out


MODULES = _modules()


def _ancestors(module: str) -> List[str]:
  parts = module.split('.')
  return ['.'.join(parts[:i]) for i in range(1, len(parts))]


def _imports(module: str, path: str) -> Set[str]:
  """Project modules `module` imports anywhere in its file (each with the packages above it)."""
  with open(path) as f:
    tree = ast.parse(f.read(), path)
  package = module if path.endswith('__init__.py') else module.rpartition('.')[0]
  found = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ''
      if node.level:
        parent = package.split('.')[:len(package.split('.')) - node.level + 1]
        base = '.'.join(parent + ([base] if base else []))
      names = [base] + [f'{base}.{a.name}' for a in node.names]
    else:
      continue
    for name in names:
      while name and name not in MODULES:
        name = name.rpartition('.')[0]
      if name and name != module:
        found.add(name)
        found.update(a for a in _ancestors(name) if a in MODULES and a != module)
  return found


GRAPH = {m: _imports(m, p) for m, p in MODULES.items()}


def _is_entry(path: str) -> bool:
  with open(path) as f:
    return "if __name__ == '__main__':" in f.read()


def _launch_entry_modules() -> Set[str]:
  return {m for m in MODULES if m.count('.') == 1 and m.startswith('launch.')
          and not os.path.basename(MODULES[m]) == '__init__.py'}


def test_the_graph_sees_the_project():
  # A walker that found nothing would pass everything below.
  assert {'launch.train', 'launch.runtime.lifecycle', 'agents.learning', 'envs.sokoban'} <= set(MODULES)
  assert 'launch.runtime.run_state' in GRAPH['launch.runtime.lifecycle']
  assert 'estimators.networks' in GRAPH['agents.acting']


def _cycles(graph: Dict[str, Set[str]]) -> List[List[str]]:
  """Strongly connected components with more than one module (Tarjan, iterative)."""
  index, low, on_stack, stack, out = {}, {}, set(), [], []
  counter = [0]
  for root in sorted(graph):
    if root in index:
      continue
    work = [(root, iter(sorted(graph[root])))]
    index[root] = low[root] = counter[0]
    counter[0] += 1
    stack.append(root)
    on_stack.add(root)
    while work:
      node, children = work[-1]
      advanced = False
      for child in children:
        if child not in index:
          index[child] = low[child] = counter[0]
          counter[0] += 1
          stack.append(child)
          on_stack.add(child)
          work.append((child, iter(sorted(graph.get(child, ())))))
          advanced = True
          break
        if child in on_stack:
          low[node] = min(low[node], index[child])
      if advanced:
        continue
      work.pop()
      if work:
        low[work[-1][0]] = min(low[work[-1][0]], low[node])
      if low[node] == index[node]:
        component = []
        while True:
          m = stack.pop()
          on_stack.discard(m)
          component.append(m)
          if m == node:
            break
        if len(component) > 1:
          out.append(sorted(component))
  return out


def test_cycle_finder_finds_a_cycle():
  assert _cycles({'a': {'b'}, 'b': {'c'}, 'c': {'a'}, 'd': {'a'}}) == [['a', 'b', 'c']]
  assert _cycles({'a': {'b'}, 'b': set()}) == []


def test_no_import_cycle():
  assert _cycles(GRAPH) == []


def test_the_presets_import_only_environments():
  assert 'envs.presets' in MODULES
  assert {m.split('.')[0] for m in GRAPH['envs.presets']} <= {'envs'}
  readers = {m for m, targets in GRAPH.items() if 'envs.presets' in targets}
  assert {'estimators.recipes', 'estimators.networks', 'agents.policy_net',
          'launch.program.presets'} <= readers


def test_no_import_runs_up_the_layers():
  bad = [f'{m} imports {t}' for m, targets in GRAPH.items() for t in targets
         if LAYERS[t.split('.')[0]] > LAYERS[m.split('.')[0]]]
  assert bad == []


def _reachable(module: str) -> Set[str]:
  """Project modules `module` imports, directly or through others."""
  seen, todo = set(), [module]
  while todo:
    for t in GRAPH.get(todo.pop(), ()):
      if t not in seen:
        seen.add(t)
        todo.append(t)
  return seen


def _external_imports(path: str) -> Set[str]:
  """Top-level packages from outside the project that a file imports anywhere."""
  with open(path) as f:
    tree = ast.parse(f.read(), path)
  names = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      names.update(a.name.split('.')[0] for a in node.names)
    elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
      names.add(node.module.split('.')[0])
  return {n for n in names if n not in LAYERS}


# A run's life, top to bottom: the launch's life (resume checks, the run record around a launch),
# the summary, the run directory's files.
RUN_LIFE = ['launch.runtime.lifecycle', 'launch.runtime.summary', 'launch.runtime.run_state']


def test_a_run_s_life_calls_down_only():
  # Each concern of a run's life has one module, which calls down into those below it and is
  # never called back: a change to a file of the run directory, to the summary or to the launch
  # is made in one place.
  assert 'launch.runtime.summary' in GRAPH['launch.runtime.lifecycle']
  assert 'launch.runtime.run_state' in GRAPH['launch.runtime.summary']
  up = [f'{m} reaches {t}' for i, m in enumerate(RUN_LIFE) for t in RUN_LIFE[:i]
        if t in _reachable(m)]
  assert up == []
  # The run directory's files lean on nothing of launch/ (any module may read a run).
  assert [t for t in _reachable('launch.runtime.run_state') if t.startswith('launch')] == []


def test_the_builder_knows_nothing_of_nodes():
  # What the agent is (launch.program.builder) is the same wherever it runs: Launchpad, the
  # supervisor and the run directory's files belong to the layout.
  builder = 'launch.program.builder'
  assert 'launchpad' not in _external_imports(MODULES[builder])
  assert [t for t in _reachable(builder) if t.startswith('launch.runtime')] == []
  assert not {'launch.program.layout', 'launch.program.coordinator'} & _reachable(builder)


def test_the_layout_builds_the_agent_through_the_builder():
  # The layout places the builder's parts on nodes; it constructs no network, estimator,
  # optimiser or learner itself.
  layout = 'launch.program.layout'
  assert 'launch.program.builder' in GRAPH[layout]
  assert [t for t in GRAPH[layout] if t.split('.')[0] in ('agents', 'estimators')] == []
  assert not {'optax', 'haiku'} & _external_imports(MODULES[layout])


def test_launch_subpackages_do_not_import_entry_modules():
  entries = _launch_entry_modules()
  assert {'launch.train', 'launch.collect', 'launch.gym_collect'} <= entries
  # The experiments run launch's commands as processes (their steps), never by importing them.
  bad = [f'{m} imports {t}' for m, targets in GRAPH.items()
         if (m.count('.') >= 2 and m.startswith('launch.')) or m.split('.')[0] == 'experiments'
         for t in targets if t in entries]
  assert bad == []


def test_studies_sit_above_the_experiments():
  studies = {m for m in MODULES if m.startswith('experiments.studies.')}
  assert {'experiments.studies.sokoban_gate', 'experiments.studies.psi_ablation'} <= studies
  bad = [f'{m} imports {t}' for m, targets in GRAPH.items() if not m.startswith('experiments.studies')
         for t in targets if t.startswith('experiments.studies')]
  assert bad == []
  # A study run as an experiment's step would be part of that experiment.
  from experiments import registry
  run = [f'{name} ({scale}): {step.name} runs {step.module}'
         for name, exp in registry.EXPERIMENTS.items() for scale in exp.scales
         for step in exp.steps(scale, 1) if step.module.startswith('experiments.studies')]
  assert run == []


def _defines_flags_at_import(path: str) -> bool:
  """A module-level call of flags.DEFINE_* (absl): it runs when the module is imported."""
  with open(path) as f:
    tree = ast.parse(f.read(), path)
  for node in tree.body:
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
      func = node.value.func
      if isinstance(func, ast.Attribute) and func.attr.startswith('DEFINE'):
        return True
  return False


def _reads_global_flags(path: str) -> bool:
  with open(path) as f:
    tree = ast.parse(f.read(), path)
  return any(isinstance(n, ast.Name) and n.id == 'FLAGS' for n in ast.walk(tree)) or any(
      isinstance(n, ast.Attribute) and n.attr == 'FLAGS' for n in ast.walk(tree))


def test_flags_live_in_entry_modules_only():
  # Flags defined when a library module is imported clash (DuplicateFlagError) as soon as two
  # importers define the same name in one process; a module that reads FLAGS has its config
  # outside its arguments.
  libraries = [m for m, p in MODULES.items() if not _is_entry(p)]
  assert 'launch.runtime.lifecycle' in libraries and 'launch.train' not in libraries
  assert [m for m in libraries if _defines_flags_at_import(MODULES[m])] == []
  assert [m for m in libraries if _reads_global_flags(MODULES[m])] == []
  below_entries = [m for m in MODULES if m.startswith('launch.') and m.count('.') >= 2]
  assert [m for m in below_entries if _reads_global_flags(MODULES[m])] == []


def _defines_flags_anywhere(path: str) -> bool:
  """flags.DEFINE_* named anywhere in the file (also inside a define_flags function)."""
  with open(path) as f:
    tree = ast.parse(f.read(), path)
  return any(isinstance(n, ast.Attribute) and n.attr.startswith('DEFINE') for n in ast.walk(tree))


def test_flags_are_defined_by_entry_modules_and_the_run_schema_only():
  # A command's flags are written beside its main, or generated from config dataclasses by
  # envs.cli's field flags: a reader finds every flag of a command in the module they run or in
  # the fields of the configs it names.
  definers = {m for m, p in MODULES.items() if _defines_flags_anywhere(p)}
  assert {'launch.train', 'experiments.__main__', 'experiments.plot', 'envs.render'} <= definers
  assert [m for m in definers if not _is_entry(MODULES[m])] == ['envs.cli']


def test_one_cli_style():
  # Every command line is absl flags (Launchpad's own): --name=value or --name value, --noname,
  # comma-separated lists, --flagfile. argparse spells booleans and lists differently, so a tool
  # written with it would parse the same command line otherwise.
  scripts = {f'scripts.{n[:-3]}': os.path.join(ROOT, 'scripts', n)
             for n in os.listdir(os.path.join(ROOT, 'scripts')) if n.endswith('.py')}
  tests = {f'tests.{n[:-3]}': os.path.join(ROOT, 'tests', n)
           for n in os.listdir(os.path.join(ROOT, 'tests')) if n.endswith('.py')}
  everything = {**MODULES, **scripts, **tests}
  assert [m for m, p in everything.items() if {'argparse', 'optparse', 'getopt', 'click'}
          & _external_imports(p)] == []


def test_every_library_module_imports():
  """Each module that defines no flags at import, imported in one fresh interpreter (a moved
  module whose importers were not updated fails here, not in a node's log)."""
  names = sorted(m for m, p in MODULES.items() if not _defines_flags_at_import(p))
  code = ('import importlib, sys\nbad = []\nfor name in sys.argv[1:]:\n'
          '  try:\n    importlib.import_module(name)\n'
          '  except Exception as e:  # noqa: BLE001\n    bad.append(f"{name}: {e!r}")\n'
          'print("\\n".join(bad)); sys.exit(1 if bad else 0)\n')
  env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get('PYTHONPATH', ''))
  r = subprocess.run([sys.executable, '-c', code, *names], cwd=ROOT, env=env,
                     capture_output=True, text=True, timeout=600)
  assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]


def test_system_and_experiment_files_are_small_or_say_why():
  """~300 lines at most below launch/'s command modules and in experiments/, unless the module's
  docstring says why ('Over 300 lines ...')."""
  big = []
  for m, path in MODULES.items():
    if (m.startswith('launch.') and m.count('.') >= 2) or m.startswith('experiments.'):
      with open(path) as f:
        text = f.read()
      doc = ast.get_docstring(ast.parse(text)) or ''
      if len(text.splitlines()) > 300 and 'Over 300 lines' not in doc:
        big.append(f'{m}: {len(text.splitlines())} lines')
  assert big == []


def test_no_function_reaches_80_lines():
  """A function that long does several jobs: split it (nested functions count on their own)."""
  long = []
  for m, path in MODULES.items():
    with open(path) as f:
      tree_ = ast.parse(f.read())
    for node in ast.walk(tree_):
      if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        lines = node.end_lineno - node.lineno + 1
        if lines >= 80:
          long.append(f'{m}.{node.name}: {lines} lines')
  assert long == []


def test_the_system_stays_within_7000_lines():
  """launch/ is the distributed system only (the program, the run's life, the cluster path and
  the entry commands); what is about the system lives in experiments/ and bench/."""
  lines = sum(len(open(path).read().splitlines()) for m, path in MODULES.items()
              if m == 'launch' or m.startswith('launch.'))
  assert lines <= 7000, lines


def test_no_code_under_results():
  # results/ holds pages, figures and run exports; the code that made them is a module of
  # experiments/ (a study or an experiment), where the layering and the tests see it.
  tracked = subprocess.run(['git', 'ls-files', 'results'], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.split()
  assert tracked, 'git ls-files found no results: the check would pass on anything'
  assert [p for p in tracked if p.endswith(('.py', '.sh'))] == []


# Names a module gives its part in a role every command, benchmark or study has, read through
# the module (`launch.train.main`, `bench.actor_bench.measure`, `experiments.studies.X.markdown`).
ROLE_NAMES = {
    'main', 'define_flags', 'parse_args', 'config_from_flags',   # a command's entry and flags
    'check_flags', 'check_args', 'check_out',                    # its checks of them
    'run', 'run_one', 'measure', 'markdown', 'summarize',        # its one job and its report
    '_child_main',                                               # a supervised child's entry
}
# Different functions that share a name, each read through its module.
SHARED_NAMES = {
    'load': 'a checkpoint (estimators), a run\'s config.json (runtime.run_config), a run\'s '
            'logs (analysis.aggregate), the paper\'s curves (analysis.reference_curves)',
    'get': 'an environment\'s preset (envs.presets), a named experiment (experiments.registry)',
    'names': 'the environments (envs) and the environments with a preset (envs.presets)',
    'train': 'psi/phi offline (estimators.train), the one-process DQN (launch.train_dqn)',
    'score': 'metrics of estimator scores (estimators.evaluate), psi/phi at named Turf moves '
             '(studies.turf_corner)',
    'replay': 'a solution for psi\'s trace (estimators.psi_trace), a recorded episode for a GIF '
              '(analysis.policy_gif)',
    'write_gif': 'frames of envs.render, episodes with captions and psi (analysis.policy_gif)',
    'build_program': 'the training program (program.layout), the offline collection\'s '
                     '(runtime.collection)',
    'all_finite': 'traced, inside a jitted update (estimators.updates); on host arrays before a '
                  'checkpoint is written (program.checkpointing)',
    'wall_time': 'one run\'s total (runtime.summary), elapsed at each time of a series '
                 '(analysis.aggregate)',
    '_write_atomically': 'bytes of a figure (estimators.psi_trace), an npz archive '
                         '(estimators.checkpoint)',
}


def _module_aliases(tree: ast.AST, modules: Dict[str, str]) -> Dict[str, str]:
  """Local name -> module of `modules`, for every `import a`, `import a.b as c` and
  `from a import b` (b a module) anywhere in a file."""
  aliases = {}
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      for a in node.names:
        local, target = (a.asname, a.name) if a.asname else (a.name.split('.')[0],) * 2
        if target in modules:
          aliases[local] = target
    elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
      for a in node.names:
        if f'{node.module}.{a.name}' in modules:
          aliases[a.asname or a.name] = f'{node.module}.{a.name}'
  return aliases


def _functions_defined_twice(modules: Dict[str, str] = MODULES) -> Dict[str, List[str]]:
  """Top-level function name -> the modules of `modules` (name -> file) that define it, for
  names defined in more than one module. A function that calls its namesake in another module
  (`def solve(...): ... sokoban_solver.solve(...)`: the same job with this module's errors or
  defaults) wraps it and is not a second definition."""
  defs: Dict[str, List[tuple]] = {}
  for module, path in modules.items():
    with open(path) as f:
      tree = ast.parse(f.read(), path)
    aliases = _module_aliases(tree, modules)
    for node in tree.body:
      if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        callees = {aliases[n.value.id] for n in ast.walk(node) if isinstance(n, ast.Attribute)
                   and n.attr == node.name and isinstance(n.value, ast.Name)
                   and n.value.id in aliases}
        defs.setdefault(node.name, []).append((module, callees))
  top_level = {name: {m for m, _ in found} for name, found in defs.items()}
  twice = {}
  for name, found in defs.items():
    own = [m for m, callees in found if not callees & top_level[name] - {m}]
    if len(own) > 1:
      twice[name] = sorted(own)
  return twice


def test_a_helper_is_defined_once():
  """A helper two modules need lives in one and the other imports it: a function name defined
  at the top of two modules is a copy, unless it is a role every command has or a documented
  shared name."""
  twice = _functions_defined_twice()
  assert 'node_names' not in twice and 'make_environments' not in twice   # merged, wrapped
  unexplained = {name: modules for name, modules in twice.items()
                 if name not in ROLE_NAMES | set(SHARED_NAMES)}
  assert unexplained == {}
  # Every documented shared name still names two definitions: an entry outlives no rename.
  assert sorted(set(SHARED_NAMES) - set(twice)) == []


def test_the_copy_finder_tells_a_wrapper_from_a_copy(tmp_path):
  sources = {'a': 'def helper():\n  return 1\n',
             'b': 'def helper():\n  return 2\n',                     # a copy of a's
             'c': 'import a\n\ndef helper():\n  return a.helper() + 1\n'}   # a wrapper of it
  for name, text in sources.items():
    (tmp_path / f'{name}.py').write_text(text)
  assert _functions_defined_twice({n: str(tmp_path / f'{n}.py') for n in sources}) == {
      'helper': ['a', 'b']}
  # psi_trace.solve calls envs.sokoban_solver.solve: a wrapper, not a copy.
  twice = _functions_defined_twice()
  assert 'solve' not in twice and 'parse_options' not in twice


def _top_level_names(path: str) -> Set[str]:
  with open(path) as f:
    tree = ast.parse(f.read(), path)
  names = set()
  for node in tree.body:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
      names.add(node.name)
    elif isinstance(node, (ast.Assign, ast.AnnAssign)):
      targets = node.targets if isinstance(node, ast.Assign) else [node.target]
      for t in targets:
        names.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
      names.update((a.asname or a.name).split('.')[0] for a in node.names)
    elif isinstance(node, (ast.If, ast.Try)):
      for sub in ast.walk(node):
        if isinstance(sub, (ast.Import, ast.ImportFrom)):
          names.update((a.asname or a.name).split('.')[0] for a in sub.names)
  return names


def test_every_project_import_resolves():
  """Also the imports inside functions, which importing a module does not run: a module or a
  name a moved module no longer has fails here rather than in a node's log."""
  tests = {f'tests.{n[:-3]}': os.path.join(ROOT, 'tests', n)
           for n in os.listdir(os.path.join(ROOT, 'tests')) if n.endswith('.py')}
  bad = []
  for module, path in {**MODULES, **tests}.items():
    with open(path) as f:
      tree = ast.parse(f.read(), path)
    for node in ast.walk(tree):
      if isinstance(node, ast.Import):
        for a in node.names:
          if a.name.split('.')[0] in LAYERS and a.name not in MODULES:
            bad.append(f'{module}: import {a.name}')
      elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
        if node.module.split('.')[0] not in LAYERS:
          continue
        if node.module not in MODULES:
          bad.append(f'{module}: from {node.module} import ...')
          continue
        names = _top_level_names(MODULES[node.module])
        for a in node.names:
          if a.name != '*' and f'{node.module}.{a.name}' not in MODULES and a.name not in names:
            bad.append(f'{module}: from {node.module} import {a.name}')
  assert bad == []


def _config_classes(cls, path=''):
  """(path, class) of every config dataclass nested in `cls` (its fields typed as one, Optional
  ones included), depth first."""
  hints = typing.get_type_hints(cls)
  for f in dataclasses.fields(cls):
    kind = hints[f.name]
    if typing.get_origin(kind) is typing.Union:
      kind = next(a for a in typing.get_args(kind) if a is not type(None))
    if dataclasses.is_dataclass(kind):
      yield path + f.name, kind
      yield from _config_classes(kind, path + f.name + '.')


def test_each_knob_has_one_home():
  """A run's every setting is one field of one config dataclass under RunConfig, and the
  command line sets it through one generated flag. tests/test_config_schema.py checks the
  flags' help and that the per-environment values live in envs.presets only."""
  from launch.program import run_flags
  from launch.program.config import RunConfig
  nested = list(_config_classes(RunConfig))
  # Each config class has one place in the run's config: a knob is never set in two.
  classes = [cls for _, cls in nested]
  assert len(classes) == len(set(classes)), nested
  homes = {'': RunConfig, **dict(nested)}
  # Each section of the command line is one of those places.
  assert all(homes.get(s.name) is s.cls for s in run_flags.SECTIONS), run_flags.SECTIONS
  # Every field of a section has its one flag, or the section says who sets it instead.
  flag_of = {(ff.section, ff.field): ff.flag for ff in run_flags.field_flags()}
  assert len(flag_of) == len(run_flags.field_flags())
  for s in run_flags.SECTIONS:
    for f in dataclasses.fields(s.cls):
      generated = (s.name, f.name) in flag_of
      left_out = f.name in s.exclude or bool(s.only) and f.name not in s.only
      assert generated != left_out, f'{s.name or "run"}.{f.name}'
    # A nested config is set through its own section, never by a flag of its parent's.
    assert not [f.name for f in dataclasses.fields(s.cls)
                if (s.name, f.name) in flag_of and f'{s.name}.{f.name}'.lstrip('.') in homes]
  # No flag name twice across the sections (a field name the sections share carries its
  # section's prefix).
  names = list(flag_of.values())
  assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)

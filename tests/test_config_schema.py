"""launch.train's command line is generated from the config schema: one flag per config field,
its help the field's documentation; each knob has one home (the per-environment numbers live in
envs.presets only)."""
import ast
import dataclasses
import json
import os
import subprocess
import sys

from absl import flags

from launch.program import run_flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _flag_values():
  fv = flags.FlagValues()
  run_flags.define_flags(fv)
  fv(['train'])
  return fv


def test_every_flag_feeds_exactly_one_config_field():
  fv = _flag_values()
  field_flags = run_flags.field_flags()
  names = [ff.flag for ff in field_flags]
  assert len(names) == len(set(names))
  assert len({(ff.section, ff.field) for ff in field_flags}) == len(field_flags)
  assert set(fv) == set(names)
  for ff in field_flags:
    section = next(s for s in run_flags.SECTIONS if s.name == ff.section)
    field = next(f for f in dataclasses.fields(section.cls) if f.name == ff.field)
    assert field.metadata['help'] in fv[ff.flag].help   # after an enum's <choices>


def test_the_generated_flags_belong_to_the_module_asking_for_them():
  """launch.train saves its own module's flags (flags.json): the generated ones are among them."""
  fv = flags.FlagValues()
  run_flags.define_flags(fv)
  mine = {f.name for f in fv.get_flags_for_module(sys.modules[__name__])}
  assert mine == {ff.flag for ff in run_flags.field_flags()}


def test_launch_train_defines_the_generated_flags_and_only_run_controls_besides():
  """Every flag launch.train writes by hand is one that is no config field."""
  with open(os.path.join(ROOT, 'launch', 'train.py')) as f:
    tree = ast.parse(f.read())
  hand_written = {node.value.args[0].value for node in tree.body
                  if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
                  and getattr(node.value.func, 'attr', '').startswith('DEFINE')}
  generated = {ff.flag for ff in run_flags.field_flags()}
  assert hand_written and not hand_written & generated
  # policy_centre_on_agent: a switch over the preset's centre_on (a tuple of the agent's colours);
  # policy_preset: a named network replacing the preset's whole (envs.presets.POLICY_NETWORKS).
  assert hand_written == {'reward_free', 'episode_steps', 'env_option', 'goal_mean_length',
                          'resume', 'cluster_description', 'cluster_start',
                          'vertex_requirements', 'show_config', 'progress', 'policy_centre_on_agent',
                          'policy_preset'}


def _show_config(*args):
  out = subprocess.run([sys.executable, '-m', 'launch.train', '--show_config',
                        '--run_dir=/tmp/schema-test-run', *args], cwd=ROOT, capture_output=True,
                       text=True, timeout=300)
  return out


def test_the_field_flags_give_the_config():
  out = _show_config('--env=turf', '--mode=rac', '--shield_mode=replace', '--estimator_window=30',
                     '--estimator_learning_rate=0.003', '--precedence_window_batch=8',
                     '--precedence_env_steps_per_update=7', '--checkpoint_period_s=10')
  assert out.returncode == 0, out.stderr[-2000:]
  cfg = json.loads(out.stdout[out.stdout.index('{'):])
  assert cfg['reversibility']['shield_mode'] == 'replace' and cfg['estimator_train']['window'] == 30
  assert cfg['precedence']['window_batch'] == 8 and cfg['checkpoint_period_s'] == 10
  assert cfg['estimator_train']['phi_learning_rate'] == 0.003   # phi's follows psi's
  assert cfg['impala']['max_queue_size'] == 160                 # derived in ImpalaConfig


def test_an_error_names_the_field_and_its_flag():
  out = _show_config('--precedence_min_windows=0')
  assert out.returncode == 2
  line = [l for l in out.stderr.splitlines() if l.startswith('error:')][0]
  assert line.startswith('error: precedence: min_windows must lie in [1, 20000]')
  assert line.endswith('(precedence.min_windows: --precedence_min_windows)')


def _preset_field_names():
  from envs import presets
  names = set()
  for p in presets.PRESETS.values():
    for section in (p.impala, p.precedence, p.estimator_recipe, p.estimator_network,
                    p.policy_network, *p.thresholds.values()):
      names |= set(section)
  return names


def _sets_preset_fields(value, fields) -> bool:
  """A number, or a call/dict that sets one of the presets' fields."""
  if isinstance(value, ast.Constant):
    return isinstance(value.value, (int, float)) and not isinstance(value.value, bool)
  return any((isinstance(n, ast.keyword) and n.arg in fields)
             or (isinstance(n, ast.Dict) and any(isinstance(k, ast.Constant) and k.value in fields
                                                 for k in n.keys))
             for n in ast.walk(value))


def test_per_environment_settings_live_in_the_presets_only():
  """No module but envs.presets holds a table keyed by environment names whose entries are
  numbers or set a preset's fields (experiment scales are an experiment's settings, and say
  what they change of the preset)."""
  import envs
  env_names, fields = set(envs.names()), _preset_field_names()
  offenders = []
  for top in ('envs', 'estimators', 'agents', 'launch', 'bench'):
    for dirpath, _, filenames in os.walk(os.path.join(ROOT, top)):
      for name in filenames:
        path = os.path.join(dirpath, name)
        rel = os.path.relpath(path, ROOT)
        if not name.endswith('.py') or rel == os.path.join('envs', 'presets.py'):
          continue
        with open(path) as f:
          text = f.read()
        for node in ast.walk(ast.parse(text, path)):
          if isinstance(node, ast.Dict) and any(
              isinstance(k, ast.Constant) and k.value in env_names and _sets_preset_fields(v, fields)
              for k, v in zip(node.keys, node.values)):
            offenders.append(f'{rel}:{node.lineno}')
  assert not offenders, offenders

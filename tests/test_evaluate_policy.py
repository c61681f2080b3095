"""experiments.evaluate_policy on real learner checkpoints.

A training run is too slow here, so each run directory is made the way launch.train leaves it:
config.json written with the launch's own `lifecycle.jsonable(cfg)`, and a checkpoint of a real
IMPALALearner's state (networks and optimiser built as `launch.program.builder.make_learner`
builds them) saved with `checkpointing.save_state`. One run keeps the random initial parameters; the
other has its policy head zeroed except a large bias on 'right', so it always pushes right.
"""
import dataclasses
import json
import os
import subprocess
import sys

import jax
import numpy as np
import optax
import pytest
from acme.utils import loggers

from agents import impala_step, learning
from agents import networks as agent_networks
from agents.acting import ReversibilityConfig
from envs import oracle, sokoban
from experiments.analysis import policy_evaluation as ev
from experiments.analysis import policy_gif
from launch.program import builder, checkpointing
from launch.program import config as cfg_lib
from launch.runtime import lifecycle, run_state

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))
RIGHT = sokoban.ACTION_NAMES.index('right')
MAX_STEPS = 20  # the runs' time limit (env option), short to keep episodes fast
STEPS = 7       # learner steps recorded in the checkpoints

# Solved by one push right.
ONE_PUSH = """\
#####
#@$.#
#####
"""
# Solvable (walk up, push down), but 'right' pushes the box into the corner (2, 3): no way back.
CORNER = """\
#####
#  ##
#@$ #
# . #
#####
"""

# Pushed right three times: twice reversibly, the third time against the wall, for good.
RUNWAY = """\
#######
#     #
#@$   #
#    .#
#######
"""


def _config(run_dir, env='sokoban', options=None):
  return cfg_lib.RunConfig(env=env, env_options=dict(options or {}), run_dir=str(run_dir),
                           impala=cfg_lib.ImpalaConfig(adam_b1=0.0, adam_b2=0.99))


def _learner_state(cfg):
  """A freshly built learner's state, as make_learner builds the learner."""
  spec = builder.environment_spec(cfg)
  networks = agent_networks.make_networks(spec, agent_networks.default_policy_config(
      cfg.env, agent_networks.is_image_spec(spec)))
  optimizer = optax.chain(optax.clip_by_global_norm(cfg.impala.max_gradient_norm),
                          optax.adam(cfg.impala.learning_rate, b1=cfg.impala.adam_b1,
                                     b2=cfg.impala.adam_b2))
  learner = learning.IMPALALearner(networks, iter(()), optimizer, jax.random.PRNGKey(1),
                                   logger=loggers.NoOpLogger())
  return learner.save()


def _always(state, action, bias=50.0):
  """`state` with a policy head whose logits are a constant spike on `action`."""
  params = jax.tree_util.tree_map(np.array, state.params)
  head = dict(params['policy_value/policy'])
  head['w'] = np.zeros_like(head['w'])
  head['b'] = np.zeros_like(head['b'])
  head['b'][action] = bias
  params['policy_value/policy'] = head
  return impala_step.TrainingState(params, state.opt_state)


def _write_run(run_dir, cfg, state=None):
  os.makedirs(run_dir)
  run_state.write_json(os.path.join(run_dir, run_state.CONFIG), lifecycle.jsonable(cfg))
  if state is not None:
    checkpointing.save_state(ev.learner_checkpoint_dir(run_dir), state, STEPS)
  return str(run_dir)


@pytest.fixture(scope='module')
def runs(tmp_path_factory):
  root = tmp_path_factory.mktemp('evaluate_policy')
  cfg = _config(root / 'random', options={'max_steps': MAX_STEPS})
  state = _learner_state(cfg)
  levels = root / 'levels.txt'
  levels.write_text(f'; 0\n{ONE_PUSH}\n; 1\n{CORNER}\n; 2\n{RUNWAY}\n')
  return {
      'random': _write_run(root / 'random', cfg, state),
      'right': _write_run(root / 'right', cfg, _always(state, RIGHT)),
      'no_checkpoint': _write_run(root / 'no_checkpoint', cfg),
      'cartpole': _write_run(root / 'cartpole', _config(root / 'cartpole', env='cartpole'), state),
      'levels': str(levels), 'root': root}


def _without_time(result):
  return {k: v for k, v in result.items() if k != 'wall_time_s'}


def test_results_have_keys_and_ranges_and_greedy_is_deterministic(runs):
  first = ev.evaluate(runs['random'], 'default', num_levels=3, seed=3)
  assert first['checkpoint_steps'] == STEPS and first['max_episode_steps'] == MAX_STEPS
  assert set(first['policies']) == {'greedy', 'sampled'}
  for name, s in first['policies'].items():
    assert s['episodes'] == 3
    assert 0 <= s['solved_fraction'] <= 1
    assert 0 <= s['mean_boxes_on_target'] <= 4  # the default levels have four boxes
    assert 1 <= s['mean_episode_length'] <= MAX_STEPS
    assert [r['level'] for r in first['episodes'][name]] == [0, 1, 2]
    for r in first['episodes'][name]:
      assert len(r['actions']) == r['length'] and set(r['actions']) <= set('0123')
  again = ev.evaluate(runs['random'], 'default', num_levels=3, seed=3)
  assert _without_time(again) == _without_time(first)
  other_seed = ev.evaluate(runs['random'], 'default', num_levels=3, policies=['sampled'], seed=4)
  assert ([r['actions'] for r in other_seed['episodes']['sampled']]
          != [r['actions'] for r in first['episodes']['sampled']])
  # A level's sampled episode depends on its level index, not on the batch it ran in.
  alone = ev.evaluate(runs['random'], 'default', num_levels=1, policies=['sampled'], seed=3)
  assert alone['episodes']['sampled'][0] == first['episodes']['sampled'][0]


def _oracle_count(level_text):
  """Irreversible actions of an always-right episode, judged step by step with a fresh oracle
  env (no cache), on an unpadded env of the level."""
  env = sokoban.Sokoban.from_text(level_text, max_steps=MAX_STEPS)
  judge_env = sokoban.Sokoban.from_text(level_text)
  env.reset()
  count = 0
  while True:
    count += oracle.check(judge_env, env.get_state(), RIGHT).irreversible
    if env.step(RIGHT).last():
      return count


def test_fixed_action_policy_solves_one_push_level_and_irreversible_count_matches_oracle(runs):
  result = ev.evaluate(runs['right'], runs['levels'], num_levels=2, policies=['greedy'],
                       count_irreversible=True, max_expansions=10_000)
  one_push, corner = result['episodes']['greedy']
  assert one_push['solved'] and one_push['length'] == 1 and one_push['boxes_on_target'] == 1
  # Solving ends the episode: the oracle calls the terminal push irreversible.
  assert one_push['irreversible'] == _oracle_count(ONE_PUSH) == 1
  assert not corner['solved'] and corner['length'] == MAX_STEPS
  assert corner['actions'] == str(RIGHT) * MAX_STEPS
  assert corner['irreversible'] == _oracle_count(CORNER) == 1
  s = result['policies']['greedy']
  assert s['solved_fraction'] == 0.5 and s['mean_irreversible'] == 1.0
  assert s['mean_irreversible_excl_solving'] == 0.5
  assert s['oracle_checks'] == 1 + MAX_STEPS and s['oracle_unknown'] == 0
  # Repeated no-op pushes against the wall are searched once.
  assert result['oracle_unique_checks'] == 3


def test_pushes_are_counted_and_the_per_push_fraction_leaves_out_the_solving_push(runs):
  result = ev.evaluate(runs['right'], runs['levels'], num_levels=3, policies=['greedy'],
                       count_irreversible=True, max_expansions=10_000)
  one_push, corner, runway = result['episodes']['greedy']
  # Pushes against a wall that do not move the box are not pushes.
  assert [r['pushes'] for r in (one_push, corner, runway)] == [1, 1, 3]
  assert runway['irreversible'] == _oracle_count(RUNWAY) == 1 and not runway['solved']
  s = result['policies']['greedy']
  assert s['mean_pushes'] == pytest.approx(5 / 3)
  # Outside the solving push: the corner's 1 of 1 pushes and the runway's 1 of 3.
  assert s['irreversible_per_push'] == pytest.approx(2 / 4)


def test_sampled_policy_follows_the_logits(runs):
  result = ev.evaluate(runs['right'], runs['levels'], num_levels=2, policies=['sampled'])
  assert [r['actions'] for r in result['episodes']['sampled']] == ['3', '3' * MAX_STEPS]


def test_checkpoint_of_another_network_is_refused(runs, tmp_path):
  cfg = _config(tmp_path / 'other')
  run = _write_run(tmp_path / 'other', cfg, impala_step.TrainingState({'w': np.zeros(3)}, ()))
  with pytest.raises(checkpointing.CheckpointError, match='does not fit'):
    ev.evaluate(run, 'default', num_levels=1)


def test_level_larger_than_the_network_input_is_refused(runs, tmp_path):
  wide = tmp_path / 'wide.txt'
  wide.write_text('; 0\n' + '#' * 12 + '\n#@$.' + ' ' * 7 + '#\n' + '#' * 12 + '\n')
  with pytest.raises(ev.EvaluateError, match='larger than'):
    ev.evaluate(runs['right'], str(wide), num_levels=1)


def _cli(*args):
  env = dict(os.environ, JAX_PLATFORMS='cpu', TF_CPP_MIN_LOG_LEVEL='3')
  return subprocess.run([sys.executable, '-m', 'experiments.evaluate_policy', *map(str, args)],
                        cwd=REPO, env=env, capture_output=True, text=True, timeout=120)


def test_cli_prints_table_and_writes_json(runs, tmp_path):
  out = tmp_path / 'new_dir' / 'results.json'  # its directory is made
  proc = _cli('--run_dir', runs['right'], '--levels', runs['levels'], '--num_levels', 2,
              '--policy', 'greedy', '--out', out)
  assert proc.returncode == 0, proc.stderr
  assert 'greedy' in proc.stdout and str(out) in proc.stdout
  saved = json.loads(out.read_text())
  assert saved['policies']['greedy']['solved_fraction'] == 0.5


@pytest.mark.parametrize('case, args, words', [
    ('missing run', ['--run_dir', '{root}/nope'], ['run directory not found']),
    ('no checkpoint', ['--run_dir', '{no_checkpoint}'], ['no learner checkpoint']),
    ('not sokoban', ['--run_dir', '{cartpole}', '--levels', 'default'], ["'cartpole' run"]),
    ('missing level file', ['--run_dir', '{right}', '--levels', '{root}/none.txt'],
     ['cannot read levels', 'not found']),
    ('bad level file', ['--run_dir', '{right}', '--levels', '{root}/bad.txt'],
     ['cannot read levels', 'bad.txt']),
    ('too many levels', ['--run_dir', '{right}', '--levels', '{levels}', '--num_levels', 4],
     ['exceeds the 3 levels']),
    ('no levels', ['--run_dir', '{right}', '--num_levels', 0], ['--num_levels must be >= 1']),
])
def test_cli_bad_input_is_one_line_exit_2(runs, case, args, words):
  (runs['root'] / 'bad.txt').write_text('; 0\n#####\n#@x.#\n#####\n')
  proc = _cli(*[str(a).format(**runs) for a in args])
  assert proc.returncode == 2, (case, proc.stderr)
  lines = [line for line in proc.stderr.splitlines() if line.strip()]
  assert len(lines) == 1 and lines[0].startswith('error: '), (case, proc.stderr)
  for word in words:
    assert word in lines[0], (case, lines[0])


# ------------------------------------------------------------------------------------ GIF --- #

def _untrained_psi(path, cfg):
  from estimators import checkpoint as est_checkpoint
  from estimators import networks as est_nets
  from estimators import training
  spec = builder.environment_spec(cfg)
  network = est_nets.default_estimator_config('sokoban')
  est = est_nets.make_estimators(network, spec.actions.num_values)
  obs = np.zeros(spec.observations.shape, spec.observations.dtype)
  state = training.init_state(est, training.TrainConfig(), obs)
  est_checkpoint.save(str(path), network, spec.actions.num_values, obs.shape, obs.dtype,
                      state.psi_params, None, {'purpose': 'test (untrained)'})
  return str(path)


def _room_width(run_dir):
  from launch.runtime import run_config
  cfg = run_config.from_dict(run_config.read(run_dir), run_dir)
  return builder.environment_spec(cfg).observations.shape[1] * policy_gif.CELL_PX


def _gif_frames(path):
  from PIL import Image
  with Image.open(path) as gif:
    return gif.n_frames, gif.size


def test_gif_replays_the_evaluated_episodes_one_after_the_other(runs, tmp_path):
  out = tmp_path / 'watch' / 'right.gif'
  result = ev.evaluate(runs['right'], runs['levels'], num_levels=2, policies=['greedy'],
                       gif=str(out), gif_levels=[0, 1])
  assert result['gif'] == str(out)
  frames, (width, _) = _gif_frames(out)
  # Level 0 is solved by its one push; level 1 runs to the time limit: a frame per step + reset.
  assert frames == (1 + 1) + (MAX_STEPS + 1)
  room_w = _room_width(runs['right'])
  assert width == room_w   # no psi panel: not an RAE run


def test_gif_of_an_rae_run_shows_psi_per_step_beside_the_room(runs, tmp_path):
  cfg = _config(tmp_path / 'rae', options={'max_steps': MAX_STEPS})
  ckpt = _untrained_psi(tmp_path / 'psi.ckpt', cfg)
  cfg = dataclasses.replace(cfg, reversibility=ReversibilityConfig(mode='rae', beta=0.9, lam=0.1),
                            estimator_checkpoint=ckpt)
  run_dir = _write_run(tmp_path / 'rae', cfg, _always(_learner_state(cfg), RIGHT))
  out = tmp_path / 'rae.gif'
  ev.evaluate(run_dir, runs['levels'], num_levels=1, policies=['greedy'], gif=str(out))
  frames, (width, _) = _gif_frames(out)
  assert frames == 2 and width == _room_width(run_dir) + policy_gif.PANEL_W
  spec = builder.environment_spec(cfg)
  (padded,) = ev.pad_levels(ev.evaluation_levels(runs['levels'], 1), spec.observations.shape[:2])
  level = sokoban.Sokoban(levels=[padded], max_steps=MAX_STEPS)
  _, observations = policy_gif.replay(level, str(RIGHT))
  (psi,) = policy_gif.psi_of_episodes(ckpt, [observations])
  assert psi.shape == (1,) and 0 <= psi[0] <= 1


@pytest.mark.parametrize('args, words', [
    (['--gif_levels', '5'], ['--gif_levels must be among the 2 levels']),
    (['--gif_levels', 'x'], ['--gif_levels must be level indices']),
    (['--gif_policy', 'sampled', '--policy', 'greedy'], ['--gif_policy sampled is not among']),
])
def test_gif_bad_input_is_one_line(runs, tmp_path, args, words):
  proc = _cli('--run_dir', runs['right'], '--levels', runs['levels'], '--num_levels', 2,
              '--gif', tmp_path / 'x.gif', *args)
  assert proc.returncode == 2, proc.stderr
  lines = [line for line in proc.stderr.splitlines() if line.strip()]
  assert len(lines) == 1 and all(w in lines[0] for w in words), proc.stderr
  assert not (tmp_path / 'x.gif').exists()

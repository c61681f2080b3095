"""The DQN / M-DQN baselines (agents/dqn.py, launch/train_dqn.py): App. C.4's settings in Acme's
units, Acme's losses, the CLI's checks, and (slow) a real short run with its run directory."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))


def _cli(*args, timeout=600):
  return subprocess.run([sys.executable, '-m', 'launch.train_dqn', *args], cwd=ROOT,
                        capture_output=True, text=True, timeout=timeout)


def test_defaults_are_the_papers_in_acmes_units():
  from agents import dqn_config as dqn
  c = dqn.DQNConfig()
  assert (c.hidden_sizes, c.batch_size, c.replay_size, c.learning_rate, c.discount) == (
      (512, 512), 128, 50_000, 1e-3, 0.99)
  # Target copy every 400 env steps with a gradient step every 4: Acme's learner counts its
  # own steps, so its period is 100.
  assert c.learner_target_period == 100
  assert dqn.DQNConfig(update_every=2, target_update_every=10).learner_target_period == 5
  with pytest.raises(ValueError, match='multiple of update_every'):
    dqn.DQNConfig(update_every=4, target_update_every=402)
  with pytest.raises(ValueError, match='algorithm'):
    dqn.DQNConfig(algorithm='ddqn')


def test_epsilon_decays_linearly_then_stays():
  from agents import dqn_config as dqn
  c = dqn.DQNConfig(epsilon_start=1.0, epsilon_end=0.1, epsilon_decay_steps=100)
  assert [c.epsilon(t) for t in (0, 50, 100, 10_000)] == pytest.approx([1.0, 0.55, 0.1, 0.1])
  assert dqn.DQNConfig(epsilon_decay_steps=0, epsilon_end=0.2).epsilon(0) == 0.2


def test_losses_are_acmes_with_the_papers_coefficients():
  from acme.agents.jax.dqn import losses

  from agents import dqn
  m = dqn.make_loss(dqn.DQNConfig(algorithm='mdqn'))
  assert isinstance(m, losses.MunchausenQLearning)
  assert (m.munchausen_coefficient, m.entropy_temperature, m.discount) == (0.9, 0.03, 0.99)
  assert m.clip_value_min == -1.0   # Vieillard et al.'s l0, not Acme's -1000
  q = dqn.make_loss(dqn.DQNConfig(algorithm='dqn', discount=0.9))
  assert isinstance(q, losses.QLearning) and q.discount == 0.9


def test_network_gives_one_q_value_per_action_and_refuses_images():
  import jax
  from acme import specs

  import envs
  from agents import dqn
  spec = specs.make_environment_spec(envs.make('cartpole', max_steps=50_000))
  net = dqn.make_network(spec, (16, 8))
  params = net.init(jax.random.PRNGKey(0))
  assert [p['w'].shape for p in params.values()] == [(4, 16), (16, 8), (8, 2)]
  assert net.apply(params, np.zeros((3, 4), np.float32)).shape == (3, 2)
  with pytest.raises(ValueError, match='vector observations'):
    dqn.make_network(specs.make_environment_spec(envs.make('turf')), (16,))


@pytest.mark.parametrize('args,message', [
    (('--max_steps', '0'), '--max_steps must be >= 1'),
    (('--eval_every', '0'), '--eval_every must be >= 1'),
    (('--target_update_every', '402'), 'target_update_every (402) must be a multiple'),
    (('--hidden_sizes', '64,x'), '--hidden_sizes expects comma-separated integers'),
    (('--env', 'turf'), '--env turf: DQN here takes vector observations'),
    (('--env_option', 'wind=0.1'), "environment 'cartpole' has no option(s) wind"),
])
def test_bad_input_is_one_line(tmp_path, args, message):
  r = _cli(*args, '--run_dir', str(tmp_path / 'run'))
  assert r.returncode == 2, r.stdout + r.stderr
  last = r.stderr.strip().splitlines()[-1]
  assert last.startswith(f'error: {message}') and 'Traceback' not in r.stderr, r.stderr
  assert not (tmp_path / 'run' / 'config.json').exists()


@pytest.mark.slow
def test_short_run_writes_the_run_directory_and_is_skipped_when_done(tmp_path):
  from experiments.analysis import aggregate
  run = str(tmp_path / 'run')
  args = ('--algorithm', 'mdqn', '--max_steps', '1500', '--min_replay_size', '200',
          '--eval_every', '500', '--hidden_sizes', '32,32', '--episode_steps', '200',
          '--run_dir', run)
  r = _cli(*args)
  assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
  summary = json.load(open(os.path.join(run, 'summary.json')))
  assert summary['status'] == 'completed' and summary['actor_steps'] == 1500
  assert summary['learner_steps'] > 0 and summary['eval_episodes'] == 3
  evals = json.load(open(os.path.join(run, 'eval.json')))['policies']['greedy']
  assert evals['max_return'] == summary['eval_max_return'] >= evals['mean_return'] > 0
  # The layout experiments.analysis.aggregate reads: training episodes on env steps, and wall time.
  lengths = aggregate.series(run, 'episode_length')
  assert lengths.xs[-1] <= 1500 and np.all(lengths.values <= 200)
  assert aggregate.series(run, 'episode_length', 'wall_time').xs[-1] > 0
  assert json.load(open(os.path.join(run, 'counts.json')))['actor_steps'] == 1500
  # Done: --resume does nothing; without --resume the directory is refused.
  again = _cli(*args, '--resume')
  assert again.returncode == 0 and 'nothing to do' in again.stdout, again.stderr
  refused = _cli(*args)
  assert refused.returncode == 2 and 'already holds a run' in refused.stderr
  # A longer budget starts the run again from step 0 (no replay checkpoint).
  longer = _cli('--run_dir', run, '--resume', '--max_steps', '1600')
  assert longer.returncode == 0, longer.stderr[-2000:]
  assert 'starting it again from step 0' in longer.stdout
  assert json.load(open(os.path.join(run, 'summary.json')))['actor_steps'] == 1600

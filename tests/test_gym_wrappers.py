"""The Gymnasium side: our environments as registered Gymnasium ids (env checker, oracle in
info, episode ends), episodes of any Gymnasium environment for psi/phi, and the RAE/RAC
wrappers on hand-computed cases (a checkpoint whose psi and phi are linear maps set by hand)."""
import os
import subprocess
import sys
import warnings

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.utils.env_checker import check_env

import envs.gym_adapter as gym_adapter
from agents import gym_wrappers
from estimators import checkpoint
from estimators import networks as nets

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))


def _sigmoid(x):
  return 1.0 / (1.0 + np.exp(-np.asarray(x, np.float64)))


# ------------------------------------------------------------------------------------------- #
# The environments as Gymnasium ids
# ------------------------------------------------------------------------------------------- #

@pytest.mark.parametrize('env_id', sorted(gym_adapter.IDS))
def test_every_id_passes_gymnasiums_checker(env_id):
  env = gymnasium.make(env_id)
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter('always')
    check_env(env.unwrapped, skip_render_check=False)
  # The checker reports through warnings what it does not raise. Unbounded float observations
  # (Cartpole's velocities, whose dm_env spec has no bounds, as in Gymnasium's own CartPole)
  # are the one warning accepted.
  assert [str(w.message) for w in caught if 'gymnasium' in str(w.filename)
          and 'infinity' not in str(w.message)] == []
  env.close()


def test_options_reach_the_environment_and_bad_ones_are_one_line():
  env = gymnasium.make('noturningback/Turf-v0', layout='winding', max_steps=7)
  assert env.unwrapped.dm_env.layout.name == 'winding'
  assert gymnasium.make('noturningback/CartpoleRewardFree-v0').unwrapped.options == {
      'reward_free': True, 'max_steps': 200}
  with pytest.raises(ValueError, match="has no option.*colour"):
    gymnasium.make('noturningback/Turf-v0', colour='red')
  with pytest.raises(ValueError, match='no exact oracle'):
    gymnasium.make('noturningback/CartpolePlus-v0', oracle=True)
  with pytest.raises(ValueError, match='no exact oracle'):
    gymnasium.make('noturningback/WindyCliff-v0', wind=0.2, oracle=True)


def test_turf_steps_carry_the_oracle_and_the_episode_measures():
  env = gymnasium.make('noturningback/Turf-v0', oracle=True, max_steps=3)
  obs, _ = env.reset(seed=0)
  assert obs.shape == (10, 10, 3) and obs.dtype == np.uint8
  # From the start (9, 0) on stone: up stays on the road (back down in one move) ...
  _, reward, terminated, truncated, info = env.step(0)
  assert (info['reversible'], info['steps_back']) == ('reversible', 1)
  assert (reward, terminated, truncated) == (0.0, False, False)
  # ... back down to the start, then right onto fresh grass: irreversible (leaving ruins it).
  assert env.step(1)[4]['reversible'] == 'reversible'
  _, _, terminated, truncated, info = env.step(3)
  assert (info['reversible'], info['steps_back']) == ('irreversible', gym_adapter.NO_WAY_BACK)
  # The time limit (3 steps) truncates; the episode's measures come with its last step: the
  # agent stands on the grass cell, which ruin='leave' has not ruined yet.
  assert (terminated, truncated) == (False, True)
  assert info['ruined_grass'] == 0 and info['grass_entries'] == '90>91'
  with pytest.raises(RuntimeError, match='call reset'):
    env.step(0)


def test_reset_seed_rebuilds_the_same_episode():
  env = gymnasium.make('noturningback/Turf-v0', start='stone')
  first = [env.reset(seed=s)[0] for s in (3, 3, 4)]
  assert np.array_equal(first[0], first[1])


# ------------------------------------------------------------------------------------------- #
# Hand-set estimators: phi(x) = sigmoid(x) per action, psi(x, x') = sigmoid(x'_0 - x_0 + 1)
# ------------------------------------------------------------------------------------------- #

def _linear_checkpoint(path, num_actions: int = 3) -> str:
  import jax

  from estimators import training
  network = nets.EstimatorNetConfig(torso='mlp', mlp_sizes=(), phi_hidden_sizes=())
  est = nets.make_estimators(network, num_actions)
  obs = np.zeros((num_actions,), np.float32)
  state = training.init_state(est, training.TrainConfig(), obs)
  psi = jax.tree_util.tree_map(np.asarray, state.psi_params)
  phi = jax.tree_util.tree_map(np.asarray, state.phi_params)
  (psi_out,) = [k for k in psi if k.endswith('psi_out')]
  (phi_out,) = [k for k in phi if k.endswith('phi_out')]
  w = np.zeros((2 * num_actions, 1), np.float32)
  w[0, 0], w[num_actions, 0] = -1.0, 1.0          # x'_0 - x_0
  psi[psi_out] = {'w': w, 'b': np.ones((1,), np.float32)}
  phi[phi_out] = {'w': np.eye(num_actions, dtype=np.float32),
                  'b': np.zeros((num_actions,), np.float32)}
  assert all(k in (psi_out,) for k in psi) and all(k in (phi_out,) for k in phi)
  checkpoint.save(str(path), network, num_actions, obs.shape, obs.dtype, psi, phi, {})
  return str(path)


class ScriptedEnv(gymnasium.Env):
  """Observations from a script, one row per step; ends after the last row."""

  def __init__(self, rows, rewards=None):
    self.rows = np.asarray(rows, np.float32)
    self.rewards = rewards if rewards is not None else [0.0] * len(self.rows)
    self.observation_space = spaces.Box(-np.inf, np.inf, self.rows.shape[1:], np.float32)
    self.action_space = spaces.Discrete(self.rows.shape[1])
    self.taken = []

  def reset(self, *, seed=None, options=None):
    super().reset(seed=seed)
    self.t = 0
    return self.rows[0], {}

  def step(self, action):
    self.taken.append(int(action))
    self.t += 1
    done = self.t == len(self.rows) - 1
    return self.rows[self.t], float(self.rewards[self.t]), done, False, {'t': self.t}


@pytest.fixture(scope='module')
def linear_ckpt(tmp_path_factory):
  return _linear_checkpoint(tmp_path_factory.mktemp('ckpt') / 'linear.ckpt')


def test_shield_mask_is_phi_at_least_beta_and_falls_back_to_argmax(linear_ckpt):
  # phi = sigmoid of each row: [0.9, 0.5, 0.1], then all below beta, then [0.5, 0.5, 0.1].
  logit = lambda p: float(np.log(p / (1 - p)))  # noqa: E731
  rows = [[logit(0.9), 0.0, logit(0.1)], [logit(0.1), logit(0.15), logit(0.05)],
          [0.0, 0.0, logit(0.1)], [0.0, 0.0, 0.0]]
  env = gym_wrappers.ReversibilityShield(ScriptedEnv(rows), linear_ckpt, beta=0.5)
  env.reset(seed=0)
  np.testing.assert_allclose(env.phi, [0.9, 0.5, 0.1], rtol=1e-5)
  assert env.action_masks().tolist() == [True, True, False]     # 0.5 >= 0.5 passes
  _, _, _, _, info = env.step(0)
  assert info['shield_allowed'] and not info['shield_fallback']
  # No action reaches beta: only argmax phi (action 1, phi 0.15) is allowed.
  assert env.action_masks().tolist() == [False, True, False]
  _, _, _, _, info = env.step(1)
  assert info['shield_fallback'] and info['shield_allowed']
  # The same rows behind beta 0.2: 0.9 and 0.5 pass.
  low = gym_wrappers.ReversibilityShield(ScriptedEnv(rows), linear_ckpt, beta=0.2)
  low.reset()
  assert low.action_masks().tolist() == [True, True, False]


def test_shield_step_modes_replace_and_refuse(linear_ckpt):
  rows = [[2.0, 0.0, -3.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]
  inner = ScriptedEnv(rows)
  env = gym_wrappers.ReversibilityShield(inner, linear_ckpt, beta=0.4, step_mode='replace')
  env.reset()
  _, _, _, _, info = env.step(2)              # phi 0.047 < 0.4: replaced by argmax phi = 0
  assert inner.taken == [0] and info['shield_replaced'] and not info['shield_allowed']
  inner = ScriptedEnv(rows)
  env = gym_wrappers.ReversibilityShield(inner, linear_ckpt, beta=0.4, step_mode='refuse')
  obs0, _ = env.reset()
  obs, reward, terminated, truncated, info = env.step(2)
  assert inner.taken == [] and info['shield_refused'] and np.array_equal(obs, obs0)
  assert (reward, terminated, truncated) == (0.0, False, False)
  env.step(1)
  assert inner.taken == [1]


def test_penalty_is_the_papers_formula(linear_ckpt):
  rows = [[0.0, 0, 0], [1.0, 0, 0], [-2.0, 0, 0], [-2.0, 0, 0]]
  env = gym_wrappers.ReversibilityPenalty(ScriptedEnv(rows, rewards=[0, 1.0, 0.5, 0]),
                                          linear_ckpt, beta=0.8, lam=0.1)
  env.reset()
  # psi(x, x') = sigmoid(x'_0 - x_0 + 1): sigmoid(2) = 0.881 > 0.8: penalty -0.1 * 0.881.
  _, reward, _, _, info = env.step(0)
  psi = _sigmoid(2.0)
  assert info['psi'] == pytest.approx(psi, rel=1e-5) and info['raw_reward'] == 1.0
  assert info['rae_penalty'] == pytest.approx(-0.1 * psi, rel=1e-5)
  assert reward == pytest.approx(1.0 - 0.1 * psi, rel=1e-5)
  # sigmoid(-3 + 1) = 0.119 <= 0.8: no penalty.
  _, reward, _, _, info = env.step(0)
  assert info['rae_penalty'] == 0.0 and reward == 0.5
  hinge = gym_wrappers.ReversibilityPenalty(ScriptedEnv(rows), linear_ckpt, beta=0.8, lam=2.0,
                                            reward_form='hinge')
  hinge.reset()
  assert hinge.step(0)[1] == pytest.approx(-2.0 * (psi - 0.8), rel=1e-4)


def test_bad_settings_are_one_line(linear_ckpt, tmp_path):
  env = ScriptedEnv([[0.0, 0, 0], [0.0, 0, 0]])
  with pytest.raises(gym_wrappers.WrapperError, match='beta must be in'):
    gym_wrappers.ReversibilityShield(env, linear_ckpt, beta=1.5)
  with pytest.raises(gym_wrappers.WrapperError, match='step_mode'):
    gym_wrappers.ReversibilityShield(env, linear_ckpt, beta=0.2, step_mode='skip')
  with pytest.raises(gym_wrappers.WrapperError, match=r'shape \[10, 10, 3\].*expects \[3\]'):
    gym_wrappers.ReversibilityShield(gymnasium.make('noturningback/Turf-v0'), linear_ckpt, 0.2)
  with pytest.raises(gym_wrappers.WrapperError, match='reward_form'):
    gym_wrappers.ReversibilityPenalty(env, linear_ckpt, beta=0.8, lam=0.1, reward_form='x')
  with pytest.raises(checkpoint.CheckpointError):
    gym_wrappers.ReversibilityShield(env, str(tmp_path / 'missing.ckpt'), beta=0.2)


# ------------------------------------------------------------------------------------------- #
# Vector forms: one network call per vector step
# ------------------------------------------------------------------------------------------- #

def test_vector_shield_and_penalty_batch_their_calls(linear_ckpt):
  rows = [[[1.0, -2.0, 0.5], [2.0, 0, 0], [0, 0, 0], [0, 0, 0]],
          [[-3.0, -2.0, -4.0], [-3.0, 1, 0], [0, 0, 0], [0, 0, 0]]]
  scores = gym_wrappers.EstimatorScores(linear_ckpt, need_phi=True, cache_size=0)

  def vec():
    return gymnasium.vector.SyncVectorEnv([lambda r=r: ScriptedEnv(r) for r in rows])
  shield = gym_wrappers.ReversibilityShieldVector(vec(), scores, beta=0.5)
  shield.reset(seed=0)
  # Copy 0: phi [0.73, 0.12, 0.62] -> [T, F, T]; copy 1: all below 0.5 -> argmax (action 1).
  assert shield.action_masks().tolist() == [[True, False, True], [False, True, False]]
  for _ in range(3):
    shield.step(np.array([0, 1]))
  assert scores.network_calls == 4          # reset + 3 steps, both copies in each call
  penalty = gym_wrappers.ReversibilityPenaltyVector(vec(), scores, beta=0.6, lam=1.0)
  penalty.reset(seed=0)
  _, reward, _, _, info = penalty.step(np.array([0, 0]))
  # psi = sigmoid(x'_0 - x_0 + 1): copy 0 sigmoid(2) = 0.88 > 0.6; copy 1 sigmoid(1) = 0.73.
  np.testing.assert_allclose(info['psi'], _sigmoid([2.0, 1.0]), rtol=1e-5)
  np.testing.assert_allclose(reward, -_sigmoid([2.0, 1.0]), rtol=1e-5)
  penalty.step(np.array([0, 0]))
  penalty.step(np.array([0, 0]))                   # both copies end here
  _, reward, _, _, info = penalty.step(np.array([0, 0]))   # their reset step: no transition
  assert np.all(np.isnan(info['psi'])) and reward.tolist() == [0.0, 0.0]
  assert scores.network_calls == 8


def test_the_cache_gives_the_networks_answers_and_skips_seen_rows(linear_ckpt):
  rng = np.random.default_rng(0)
  x = rng.normal(size=(8, 3)).astype(np.float32)
  y = rng.normal(size=(8, 3)).astype(np.float32)
  plain = gym_wrappers.EstimatorScores(linear_ckpt, cache_size=0)
  cached = gym_wrappers.EstimatorScores(linear_ckpt, cache_size=1000)
  # Rows 0-3 first; then all 8: only rows 4-7 are new, scored in one call.
  cached.phi_and_mask(x[:4], 0.5)
  cached.psi_and_penalty(x[:4], y[:4], 0.6, 1.0)
  for got, want in zip(cached.phi_and_mask(x, 0.5), plain.phi_and_mask(x, 0.5)):
    np.testing.assert_array_equal(got, want)
  for got, want in zip(cached.psi_and_penalty(x, y, 0.6, 1.0),
                       plain.psi_and_penalty(x, y, 0.6, 1.0)):
    np.testing.assert_array_equal(got, want)
  assert cached.network_calls == 4
  cached.phi_and_mask(x[::-1], 0.5)                       # all seen: no call
  assert cached.network_calls == 4
  # Another threshold is another answer, not the cached one.
  assert cached.phi_and_mask(x[:1], 0.99)[1].sum() == 1 and cached.network_calls == 5
  # A full cache starts again and still answers every row (here 8 + 8 > 12).
  small = gym_wrappers.EstimatorScores(linear_ckpt, cache_size=12)
  small.phi_and_mask(x, 0.5)
  for got, want in zip(small.phi_and_mask(x[::-1], 0.5), plain.phi_and_mask(x[::-1], 0.5)):
    np.testing.assert_array_equal(got, want)
  assert small.network_calls == 2 and len(small._cache['phi'][0]) == 8


def test_sb3_vec_env_shield_answers_masks_from_one_call(linear_ckpt):
  pytest.importorskip('stable_baselines3')
  from stable_baselines3.common.vec_env import DummyVecEnv

  from agents import sb3_wrappers
  rows = [[[1.0, -2.0, 0.5], [2.0, 0, 0], [0, 0, 0]],
          [[-3.0, -2.0, -4.0], [-3.0, 1, 0], [0, 0, 0]]]
  scores = gym_wrappers.EstimatorScores(linear_ckpt, need_phi=True, cache_size=0)
  venv = sb3_wrappers.shield_vec_env(DummyVecEnv([lambda r=r: ScriptedEnv(r) for r in rows]),
                                     scores, beta=0.5)
  venv.reset()
  from sb3_contrib.common.maskable.utils import get_action_masks, is_masking_supported
  assert is_masking_supported(venv)
  assert get_action_masks(venv).tolist() == [[True, False, True], [False, True, False]]
  venv.step(np.array([0, 1]))
  assert scores.network_calls == 2
  penalty = sb3_wrappers.penalty_vec_env(DummyVecEnv([lambda r=r: ScriptedEnv(r) for r in rows]),
                                         scores, beta=0.6, lam=1.0)
  penalty.reset()
  penalty.step(np.array([0, 0]))
  _, reward, dones, infos = penalty.step(np.array([0, 0]))  # ends: psi to the final observation
  assert dones.tolist() == [True, True]
  # copy 0: x_0 2 -> 0: sigmoid(-1) = 0.27 < 0.6; copy 1: -3 -> 0: sigmoid(4) = 0.98.
  np.testing.assert_allclose([i['psi'] for i in infos], _sigmoid([-1.0, 4.0]), rtol=1e-5)
  np.testing.assert_allclose(reward, [0.0, -_sigmoid(4.0)], rtol=1e-5)


# ------------------------------------------------------------------------------------------- #
# psi and phi from a Gymnasium environment Gymnasium ships
# ------------------------------------------------------------------------------------------- #

def _run(*args):
  return subprocess.run([sys.executable, '-m', *args], cwd=ROOT, capture_output=True, text=True,
                        timeout=600)


def test_episodes_of_a_gymnasium_env_read_back_as_collected(tmp_path):
  from estimators import dataset, gym_episodes
  out = str(tmp_path / 'fl')
  meta = gym_episodes.collect('FrozenLake-v1', 12, out, env_kwargs={'is_slippery': False},
                              seed=3)
  assert meta['env'] == 'gym:FrozenLake-v1' and meta['env_options'] == {'is_slippery': False}
  assert meta['observations_flattened'] and meta['observation_shape'] == [16]
  episodes, _ = dataset.load_episodes(out)
  assert len(episodes) == 12
  env = gymnasium.make('FrozenLake-v1', is_slippery=False)
  holes = {i for i, c in enumerate(''.join(r.decode() for r in env.unwrapped.desc.ravel()))
           if c in 'HG'}
  for ep in episodes:
    # One-hot states; a deterministic lake: replaying the actions gives the same states.
    assert np.all(ep.observations.sum(axis=1) == 1)
    obs, _ = env.reset()
    for t, a in enumerate(ep.actions):
      obs, _, terminated, truncated, _ = env.step(int(a))
      assert ep.observations[t + 1].argmax() == obs
      assert ep.discounts[t] == (0.0 if terminated else 1.0)
    # An episode ends in a hole or at the goal (terminated) or at the 100-step limit.
    assert (int(obs) in holes) == (ep.discounts[-1] == 0.0)
  # A given policy: always left, along the start's row edge: the 100-step limit cuts it.
  meta = gym_episodes.collect('FrozenLake-v1', 2, str(tmp_path / 'left'),
                              env_kwargs={'is_slippery': False},
                              policy=lambda obs, space, rng: 0, overwrite=True)
  assert meta['num_transitions'] == 200


@pytest.mark.slow
def test_collect_train_and_check_on_frozenlake(tmp_path):
  data, ckpt = str(tmp_path / 'frozenlake'), str(tmp_path / 'fl.ckpt')
  r = _run('launch.gym_collect', '--env', 'FrozenLake-v1', '--env_option', 'is_slippery=false',
           '--episodes', '300', '--heldout_episodes', '60', '--out', data)
  assert r.returncode == 0, r.stderr[-2000:]
  assert 'wrote' in r.stdout and 'observations [16] int64, flattened' in r.stdout
  # Labels of our own: entering a hole or the goal ends the episode (irreversible); the held-out
  # episodes' other moves on the frozen lake are reversible.
  from estimators import dataset
  episodes, _ = dataset.load_episodes(data + '-heldout')
  obs = np.concatenate([e.observations[:-1] for e in episodes])
  nxt = np.concatenate([e.observations[1:] for e in episodes])
  acts = np.concatenate([e.actions for e in episodes])
  irr = np.concatenate([e.discounts == 0 for e in episodes])
  labels = str(tmp_path / 'labels.npz')
  np.savez(labels, obs=obs, next_obs=nxt, irreversible=irr, actions=acts)
  # The second command: training, then the checks on held-out episodes and on the labels.
  r = _run('estimators.train', '--dataset', data, '--network_preset', 'cartpole', '--window',
           '20', '--num_pairs', '60000', '--phi', '--phi_transitions', '2000', '--out', ckpt,
           '--noprogress', '--check_dataset', data + '-heldout', '--check_labels', labels,
           '--check_pairs', '5000')
  assert r.returncode == 0, r.stderr[-2000:]
  import json
  line = [ln for ln in r.stdout.splitlines() if ln.startswith('check ')][-1]
  report = json.loads(line.split(': ', 1)[1])
  with open(str(tmp_path / 'fl.check.json')) as f:
    assert json.load(f) == report
  # Random walks on a 4x4 lake: order within a window is learnable from positions well above
  # chance; terminating moves stand out.
  assert report['psi_heldout_accuracy'] > 0.6
  assert report['psi_auroc'] > 0.8 and report['irreversible'] > 0
  # The same checks on the saved checkpoint, later.
  r = _run('launch.gym_check', '--checkpoint', ckpt, '--dataset', data + '-heldout',
           '--labels', labels, '--pairs', '5000')
  assert r.returncode == 0, r.stderr[-2000:]
  again = json.loads(r.stdout)
  assert again['psi_auroc'] == pytest.approx(report['psi_auroc'])
  r = _run('launch.gym_check', '--checkpoint', ckpt, '--labels', str(tmp_path / 'none.npz'))
  assert r.returncode == 2 and r.stderr.count('\n') == 1 and 'error:' in r.stderr


def test_train_refuses_checks_it_cannot_score_before_training(tmp_path):
  from estimators import gym_episodes
  data = str(tmp_path / 'fl')
  gym_episodes.collect('FrozenLake-v1', 6, data, env_kwargs={'is_slippery': False}, seed=0)
  bad = str(tmp_path / 'bad.npz')
  np.savez(bad, obs=np.zeros((3, 16)), next_obs=np.zeros((3, 16)))   # no `irreversible`
  ckpt = str(tmp_path / 'fl.ckpt')
  r = _run('estimators.train', '--dataset', data, '--network_preset', 'cartpole', '--num_pairs',
           '100', '--out', ckpt, '--check_labels', bad)
  assert r.returncode == 2 and r.stderr.count('\n') == 1, r.stderr[-2000:]
  assert '--check_labels' in r.stderr and 'irreversible' in r.stderr
  r = _run('estimators.train', '--dataset', data, '--network_preset', 'cartpole', '--num_pairs',
           '100', '--out', ckpt, '--check_dataset', str(tmp_path / 'missing'))
  assert r.returncode == 2 and r.stderr.count('\n') == 1 and 'missing' in r.stderr
  assert not os.path.exists(ckpt)


def test_collect_refuses_what_it_cannot_store(tmp_path):
  r = _run('launch.gym_collect', '--env', 'Pendulum-v1', '--episodes', '2', '--out',
           str(tmp_path / 'p'))
  assert r.returncode == 2 and 'Discrete actions' in r.stderr and r.stderr.count('\n') == 1
  r = _run('launch.gym_collect', '--env', 'NoSuchEnv-v0', '--episodes', '2', '--out',
           str(tmp_path / 'q'))
  assert r.returncode == 2 and 'NoSuchEnv' in r.stderr and r.stderr.count('\n') == 1


# ------------------------------------------------------------------------------------------- #
# The SB3 example (slow): MaskablePPO on Turf behind the shield for a few thousand steps
# ------------------------------------------------------------------------------------------- #

@pytest.mark.slow
def test_sb3_example_runs_on_turf(tmp_path):
  pytest.importorskip('sb3_contrib')
  import json

  from acme import specs

  import envs
  from bench import common
  ckpt = common.untrained_estimators(str(tmp_path / 'turf.ckpt'), 'turf',
                                     specs.make_environment_spec(envs.make('turf')))
  out = str(tmp_path / 'run')
  r = _run('experiments.sb3_shield', '--checkpoint', ckpt, '--beta', '0.2', '--steps', '4096',
           '--n_envs', '4', '--n_steps', '256', '--save_every', '2048', '--progress_every', '0',
           '--out', out)
  assert r.returncode == 0, r.stderr[-3000:]
  summary = json.load(open(os.path.join(out, 'summary.json')))
  assert summary['env_steps'] >= 4096 and summary['episodes'] > 0
  assert summary['ruined_grass_over_training'] >= 0 and 'goal_rate_last_100' in summary
  assert os.path.isfile(os.path.join(out, 'model.zip'))
  # Run again with a larger budget: it resumes from model.zip.
  r = _run('experiments.sb3_shield', '--checkpoint', ckpt, '--steps', '6144', '--n_envs', '4',
           '--n_steps', '256', '--progress_every', '0', '--out', out)
  assert r.returncode == 0 and 'resuming' in r.stdout, r.stderr[-3000:]
  assert json.load(open(os.path.join(out, 'summary.json')))['env_steps'] >= 6144

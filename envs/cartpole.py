"""Cartpole (gym's dynamics) as a dm_env, with the paper's reward-free and Cartpole+ variants.

- `reward_free=True` removes the extrinsic +1 per step (Sec. 5.1: the agent only sees RAE rewards).
- `max_steps=200` is classic Cartpole; `max_steps=50_000` is the paper's Cartpole+ (Sec. 5.4).
Falling (|theta| > 12 deg or |x| > 2.4) terminates (discount 0); the step limit truncates
(discount 1), so bootstrapping learners treat the two differently.
"""
import dm_env
import numpy as np
from dm_env import specs
from gym.envs.classic_control import cartpole as gym_cartpole
from PIL import Image, ImageDraw

from envs import base


class CartPole(dm_env.Environment):

  def __init__(self, seed: int = 0, reward_free: bool = False, max_steps: int = 200):
    if int(max_steps) < 1:
      raise ValueError(f'max_steps must be >= 1, got {max_steps}')
    self._env = gym_cartpole.CartPoleEnv()
    self._rng = np.random.default_rng(seed)
    self._reward_free = bool(reward_free)
    self._max_steps = int(max_steps)
    self._t = 0
    self._needs_reset = True
    self.num_actions = 2

  # dm_env API -------------------------------------------------------------------------------
  def reset(self) -> dm_env.TimeStep:
    self._env.state = self._rng.uniform(-0.05, 0.05, size=(4,))
    self._env.steps_beyond_terminated = None
    self._t = 0
    self._needs_reset = False
    return dm_env.restart(self._observation())

  def step(self, action) -> dm_env.TimeStep:
    if self._needs_reset:
      return self.reset()
    _, _, terminated, _, _ = self._env.step(int(action))
    self._t += 1
    reward = 0.0 if self._reward_free else 1.0
    obs = self._observation()
    return base.finish_step(self, reward, obs, terminated)

  def observation_spec(self):
    return specs.Array((4,), np.float32, 'observation')

  def action_spec(self):
    return specs.DiscreteArray(2, dtype=np.int32, name='action')

  # Extras used by tools (oracle-free env: state is continuous) -------------------------------
  def _observation(self) -> np.ndarray:
    return np.asarray(self._env.state, dtype=np.float32)

  def get_state(self):
    return (tuple(float(v) for v in self._env.state), self._t)

  def set_state(self, state) -> None:
    values, self._t = state
    self._env.state = np.array(values, dtype=np.float64)
    self._needs_reset = False

  def episode_info(self):
    """What ended the episode (read before the next reset): the pole's angle, the cart's
    position (both can hold on one step), or neither (the step limit, or not ended yet)."""
    x, _, theta, _ = self._env.state
    return {'fell_angle': float(abs(theta) > self._env.theta_threshold_radians),
            'fell_position': float(abs(x) > self._env.x_threshold)}

  def render(self, width: int = 240, height: int = 160) -> np.ndarray:
    x, _, theta, _ = self._env.state
    img = Image.new('RGB', (width, height), (255, 255, 255))
    draw = ImageDraw.Draw(img)
    scale = width / (2 * self._env.x_threshold * 1.2)
    ground = int(height * 0.75)
    cx = int(width / 2 + x * scale)
    draw.line([(0, ground), (width, ground)], fill=(0, 0, 0))
    draw.rectangle([cx - 15, ground - 10, cx + 15, ground + 5], fill=(40, 40, 40))
    pole = 2 * self._env.length * scale
    tip = (cx + pole * np.sin(theta), ground - 10 - pole * np.cos(theta))
    draw.line([(cx, ground - 10), tip], fill=(202, 152, 101), width=6)
    return np.asarray(img, dtype=np.uint8)

"""The actor: IMPALA or random policy for K environments at once, with RAE reward shaping and/or
the RAC shield, in one jitted call per step.

Per step, `BatchedActor.step` runs, for all K environments together: the policy forward pass on
the current observations, with RAC phi for every action and the shield, and with RAE
psi(x_t-1, x_t) for the transitions just taken (their intrinsic rewards are added to the reward
*written to Reverb*; the loop logs the extrinsic return and reports the intrinsic one apart).
Each environment keeps its own PRNG key, split exactly as a single-environment actor with that
seed would split it, so environment k of a K-actor acts as a 1-actor seeded with seeds[k] would.
"""
import dataclasses
from concurrent import futures
from typing import NamedTuple, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from agents import rewards, shield
from agents.policy_inference import PolicyInference
from agents.policy_net import DUMMY_CORE_STATE
from estimators import folding
from estimators import networks as est_nets
from estimators import training as est_training

MODES = ('none', 'rae', 'rac')


@dataclasses.dataclass(frozen=True)
class ReversibilityConfig:
  """How the actors use the estimators. Parsed once from flags (launch.program.config)."""
  mode: str = dataclasses.field(default='none', metadata={
      'help': 'Reversibility use: none, rae (reward shaping) or rac (action control).'})
  beta: float = dataclasses.field(default=0.7, metadata={
      'help': 'Threshold: RAE penalises psi > beta, RAC rejects actions with phi < beta.'})
  lam: float = dataclasses.field(default=1.0, metadata={'help': 'RAE penalty weight lambda.'})
  reward_form: str = dataclasses.field(default='paper', metadata={
      'help': "RAE reward: 'paper' -lam*1[psi>beta]*psi, 'hinge' -lam*max(psi-beta,0)."})
  shield_mode: str = dataclasses.field(default='rejection', metadata={
      'help': "RAC: 'rejection' (paper) or 'replace' with the most reversible action (authors' "
              'code).'})
  learner_mask: bool = dataclasses.field(default=False, metadata={
      'help': 'RAC: the learner restricts its policy to the actions the shield allowed at each '
              'step (invalid-action masking), so the policy that learns is the one that acts.'})

  def __post_init__(self):
    if self.mode not in MODES:
      raise ValueError(f'unknown mode {self.mode!r}; expected one of {MODES}')
    if not 0.0 <= self.beta <= 1.0:
      raise ValueError(f'threshold beta={self.beta} is impossible: it must lie in [0, 1]')
    if self.lam < 0:
      raise ValueError(f'RAE weight lambda must be >= 0, got {self.lam}')
    if self.reward_form not in rewards.REWARD_FORMS:
      raise ValueError(f'unknown reward form {self.reward_form!r}; expected {rewards.REWARD_FORMS}')
    if self.shield_mode not in shield.SHIELD_MODES:
      raise ValueError(f'unknown shield mode {self.shield_mode!r}; expected {shield.SHIELD_MODES}')
    if self.learner_mask and self.mode != 'rac':
      raise ValueError(f'learner_mask masks the shield of RAC; mode {self.mode!r} has no shield')

  @property
  def uses_estimators(self) -> bool:
    return self.mode in ('rae', 'rac')


class FixedParams:
  """A parameter source that never changes (a checkpoint's estimators; benchmarks), with the
  interface of Acme's VariableClient that the actor uses."""

  def __init__(self, params):
    self.params = params

  def update(self, wait: bool = False):
    del wait


class PolicyClient:
  """The actor's policy from its learner (`.params`, `.version`, `.update()`): every
  `update_period` calls of `update`, a background thread asks the learner for its parameters if
  they are not the ones held (`agents.learning.IMPALALearner.get_policy_since`), and swaps them
  in when they come. While the learner has not updated, a fetch is a small RPC rather than a copy
  of every parameter (BUILD_NOTES.md, "One row per actor step"). A fetch that fails (the learner
  restarting) is tried again a period later."""

  def __init__(self, learner, update_period: int):
    self._learner, self._period = learner, max(1, update_period)
    self._calls = 0
    self._held = None   # (params on the CPU device, version): swapped whole by the fetch
    self._executor = futures.ThreadPoolExecutor(max_workers=1)
    self._future = None

  def _fetch(self):
    got = self._learner.get_policy_since(-1.0 if self._held is None else self._held[1])
    if got is not None:
      params, version = got
      self._held = (jax.device_put(params, jax.devices('cpu')[0]), float(version))

  @property
  def params(self):
    if self._held is None:
      self._fetch()
    return self._held[0]

  @property
  def version(self) -> float:
    if self._held is None:
      self._fetch()
    return self._held[1]

  def update(self, wait: bool = False):
    self._calls += 1
    if self._calls < self._period or (self._future is not None and not self._future.done()):
      return
    self._calls = 0
    if wait:
      self._fetch()
    else:
      self._future = self._executor.submit(self._fetch)


class StepOutput(NamedTuple):
  """What one fused call returns, one row per environment (numpy)."""
  action: np.ndarray       # [K] int32
  logits: np.ndarray       # [K, A] behaviour logits: pi's, or pi_bar's under RAC
  rejected: np.ndarray     # [K] bool (RAC)
  fallback: np.ndarray     # [K] bool (RAC)
  psi: np.ndarray          # [K] psi(x_t-1, x_t) (RAE)
  intrinsic: np.ndarray    # [K] r_beta(psi) (RAE)


class BatchedActor:
  """Selects actions for K environments and scores their last transitions in one jitted call."""

  def __init__(self, num_actions: int, rev: ReversibilityConfig, seeds: Sequence[int],
               policy_forward=None,   # IMPALANetworks.forward_fn (one observation); None = random
               policy_source=None,    # .params / .version / .update(): PolicyClient or FixedParams
               estimators: Optional[est_nets.Estimators] = None,
               estimator_source=None,  # .params = (psi, phi): VariableClient or FixedParams
               policy_inference: Optional[PolicyInference] = None,
               psi_inference: Optional[folding.PsiInference] = None):
    """policy_inference / psi_inference: the networks' folded forms (agents.policy_inference,
    estimators.folding), used in place of policy_forward / the estimators' psi where given:
    the same values, about half the multiply-adds per step."""
    if rev.uses_estimators and (estimators is None or estimator_source is None):
      raise ValueError(f'mode {rev.mode!r} needs estimator networks and a parameter source')
    if policy_forward is not None and policy_source is None:
      raise ValueError('an IMPALA policy needs a parameter source')
    self._rev = rev
    self._num_envs = len(seeds)
    self._policy_source = policy_source
    self._estimator_source = estimator_source
    self._keys = jnp.stack([jax.random.PRNGKey(s) for s in seeds])
    self._policy_params = _Folded(policy_inference.fold if policy_inference else None)
    self._psi_params = _Folded(psi_inference.fold if psi_inference else None)

    def policy_logits(policy_params, obs):
      if policy_forward is None:
        return jnp.zeros((obs.shape[0], num_actions), jnp.float32)
      if policy_inference is not None:
        return policy_inference.forward(policy_params, obs)[0]
      return jax.vmap(lambda o: policy_forward(policy_params, o, DUMMY_CORE_STATE)[0][0])(obs)

    def select_one(phi_params, key, obs, logits):
      key, sub = jax.random.split(key)
      if rev.mode == 'rac':
        phi = est_training.phi_prob(estimators, phi_params, obs[None])[0]
        out = shield.shield(sub, logits, phi, rev.beta, rev.shield_mode)
        # Behaviour logits for V-trace: those of pi_bar, the policy that acted.
        return out.action, out.logits, out.rejected, out.fallback, key
      action = jax.random.categorical(sub, logits).astype(jnp.int32)
      return action, logits, jnp.bool_(False), jnp.bool_(False), key

    def psi_prob(psi_params, psi_from, psi_to):
      if psi_inference is not None:
        return jax.nn.sigmoid(psi_inference.logits(psi_params, psi_from, psi_to))
      return est_training.psi_prob(estimators, psi_params, psi_from, psi_to)

    def step(policy_params, psi_params, phi_params, keys, obs, psi_from):
      action, logits, rejected, fallback, keys = jax.vmap(
          select_one, in_axes=(None, 0, 0, 0))(phi_params, keys, obs,
                                               policy_logits(policy_params, obs))
      if rev.mode == 'rae':
        p = psi_prob(psi_params, psi_from, obs)
        r = rewards.rae_reward(p, rev.beta, rev.lam, rev.reward_form)
      else:
        p = r = jnp.zeros(obs.shape[:1], jnp.float32)
      return (action, logits, rejected, fallback, p, r), keys

    self._step = jax.jit(step)

  @property
  def num_envs(self) -> int:
    return self._num_envs

  @property
  def policy_version(self) -> float:
    """The learner update that made the policy parameters in use (0 where unknown)."""
    return float(getattr(self._policy_source, 'version', 0.0))

  def estimator_params(self):
    if self._estimator_source is None:
      return None, None
    return self._estimator_source.params

  def step(self, obs: np.ndarray, psi_from: np.ndarray) -> StepOutput:
    """obs [K, ...]: the observations to act on. RAE scores the transitions just taken,
    psi(psi_from, obs) [K]; the caller ignores the rows that hold no transition (a room just
    reset, and the first call)."""
    policy = self._policy_source.params if self._policy_source is not None else None
    psi, phi = self.estimator_params()
    policy = self._policy_params(policy, getattr(self._policy_source, 'version', None))
    psi = self._psi_params(psi)
    out, self._keys = self._step(policy, psi, phi, self._keys, obs, psi_from)
    return StepOutput(*jax.device_get(out))

  def update(self, wait: bool = False):
    """Fetches fresh parameters (each source applies its own update period)."""
    if self._policy_source is not None:
      self._policy_source.update(wait)
    if self._estimator_source is not None:
      self._estimator_source.update(wait)


class _Folded:
  """A network's parameters in its folded form, composed again only when they change; `fold`
  None: as given.

  A parameter client hands out a new object at every fetch, changed or not: an actor fetches the
  policy every few of its steps, while at batch 256 the learner updates it about once in thirty
  fetches, and a fold is a jitted call worth several actor steps. So where the source gives the
  parameters' version (the learner's update count), a new object is folded only under a new
  version; otherwise under a new object. (A learner restored from a checkpoint may reach a
  version an actor last saw with other values: the actor then acts one update behind, with
  behaviour logits that are still those of the parameters it acted with.)"""

  def __init__(self, fold):
    self._fold = fold
    self._params = self._folded = self._version = None

  def __call__(self, params, version=None):
    if self._fold is None or params is None:
      return params
    if params is not self._params and (version is None or version != self._version):
      self._folded, self._version = self._fold(params), version
    self._params = params
    return self._folded


class ParamChangeTracker:
  """How far the online psi has moved from the first parameters an actor received (logged per
  episode as psi_fetches / psi_change, to see the precedence learner reaching the actors)."""

  def __init__(self):
    self._first = self._last = None
    self.fetches = 0

  def observe(self, params):
    if params is self._last:
      return
    if self._first is None:
      self._first = params
    else:
      self.fetches += 1
    self._last = params

  def change(self) -> float:
    if self._first is None or self._last is self._first:
      return 0.0
    diffs = jax.tree_util.tree_map(lambda a, b: np.sum(np.square(np.asarray(a) - np.asarray(b))),
                                   self._last, self._first)
    return float(np.sqrt(sum(jax.tree_util.tree_leaves(diffs))))

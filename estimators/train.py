r"""Offline training of the precedence estimator psi (and the reversibility estimator phi, RAC)
from a stored episode dataset, with the same jitted update as the online precedence learner.

    python -m estimators.train --dataset data/cartpole_random --window 200 \
        --num_pairs 3000000 --batch_size 128 --phi --out ckpt/cartpole.ckpt
    python -m estimators.train --dataset data/turf_random --window 120 --num_pairs 300000 \
        --out ckpt/turf.ckpt

Several --dataset (one environment; their options may differ) are concatenated: e.g. phi alone
(--psi_checkpoint) on the paper's random episodes mixed with start=stone ones,

    python -m estimators.train --dataset data/turf_random --dataset data/turf_stone \
        --dataset_weights 0.5,0.5 --psi_checkpoint ckpt/turf.ckpt --phi --out ckpt/turf_mix.ckpt

Recipe (Appendix C): psi is trained on ceil(num_pairs / batch_size) batches of windowed,
shuffled pairs; with --phi, phi is then trained (psi frozen) on --phi_transitions (x, a, x')
transitions of the same dataset, regressed onto psi(x', x) (L2, or --phi_loss bce).
`--phi_schedule joint` instead trains phi alongside psi, one phi batch per psi batch, as the
online learner does. The whole flat dataset is put on the device once; each jitted call does
--steps_per_call steps (lax.scan) to amortise dispatch.

The authors' released code differs in three options (each off by default): `--embedding_relu`
(a ReLU after psi's embedding), `--exclude_terminal` (no transition that ends an episode in phi's
batches, no episode's final observation in psi's pairs) and `--phi_draw 1024` (each phi step
draws 1,024 transitions and keeps up to --batch_size non-terminal ones); their phi runs 100k
steps (`--phi_transitions 12800000`) with `--phi_loss bce` onto psi(x, x') (`--phi_target
one_minus_forward`: phi stays a reversibility, 1 - their irreversibility). `--phi_save_steps 3907,25000` also
writes phi after those steps of the same run (STEM.phi3907.ckpt, ...). `--phi_resume_every
5000` saves phi's training state every 5,000 steps (STEM.resume): the same command run again
continues from it, and gives the phi an uninterrupted run would.

Defaults follow the dataset's environment's preset (`--network_preset`; `envs.presets`): window,
learning rate, weight decay, pair and phi budgets. Cartpole/Turf: w 200/120, Adam 0.01, 3M pairs;
Sokoban: w 15, Adam 5e-4 with weight decay 1e-4, 20M pairs, dropout 0.1.
Errors (missing dataset, bad window...) are printed as one line; the exit code is then 2 and no
checkpoint is written (an existing one is left untouched).
"""
import dataclasses
import math
import os
import sys
import time
import types
from typing import Any, Dict, Optional, Tuple

from absl import app, flags

from envs import cli as envs_cli
from envs import presets
from estimators import check, cli, recipes

FLAGS = flags.FLAGS
_PRESET = " (default: the dataset's environment's preset, envs.presets)"


@dataclasses.dataclass(frozen=True)
class Job:
  """What a training reads, writes and runs; how psi/phi are optimised is TrainConfig's, what
  the network is EstimatorNetConfig's (`sections`). Each field is one flag."""
  dataset: Optional[Tuple[str, ...]] = dataclasses.field(default=None, metadata={
      'help': 'Episode dataset directory (estimators.dataset / launch.collect); repeat it to '
              'train on several datasets of one environment (options may differ), concatenated.',
      'repeat': True})
  dataset_weights: Optional[Tuple[str, ...]] = dataclasses.field(default=None, metadata={
      'help': "With several --dataset: the share of the sampled transitions each gives (phi's "
              "transitions, the first observation of psi's pair proposals), e.g. 0.5,0.5 "
              '(normalised; default: in proportion to their transitions).'})
  out: Optional[str] = dataclasses.field(default=None, metadata={
      'help': 'Checkpoint file to write (estimators.checkpoint).'})
  network_preset: Optional[str] = dataclasses.field(default=None, metadata={
      'help': "Network and recipe preset (default: the dataset's environment).",
      'choices': presets.network_names()})
  num_pairs: Optional[int] = dataclasses.field(default=None, metadata={
      'help': 'Total psi training pairs, steps = ceil(P / batch_size).'})
  phi: bool = dataclasses.field(default=False, metadata={
      'help': 'Also train the reversibility estimator phi (RAC), on batches of batch_size '
              'transitions.'})
  phi_transitions: Optional[int] = dataclasses.field(default=None, metadata={
      'help': 'Transitions fed to phi, steps = ceil(N / batch_size).'})
  phi_schedule: str = dataclasses.field(default='after', metadata={
      'help': "'after': phi after psi, psi frozen (paper, offline); 'joint': alongside psi.",
      'choices': ('after', 'joint')})
  psi_checkpoint: Optional[str] = dataclasses.field(default=None, metadata={
      'help': 'Take psi from this checkpoint (same network) and train phi only (needs --phi): '
              'phi variants without retraining psi.'})
  phi_save_steps: Tuple[int, ...] = dataclasses.field(default=(), metadata={
      'help': 'Also write phi after these many phi steps (below the total), each beside --out '
              'as STEM.phi<steps>.ckpt: one run scored at several budgets.'})
  phi_resume_every: int = dataclasses.field(default=0, metadata={
      'help': "Save phi's whole training state (parameters, optimiser, key) every this many phi "
              'steps beside --out as STEM.resume; the same command run again continues from it '
              '(a long phi run survives a stopped session); removed once --out is written. 0: '
              'off.'})
  steps_per_call: int = dataclasses.field(default=100, metadata={
      'help': 'Training steps per update call (one lax.scan; conv nets on CPU loop).'})
  eval_pairs: int = dataclasses.field(default=10_000, metadata={
      'help': 'Pairs re-sampled from the dataset after training to report psi accuracy without '
              'dropout (0: skip).'})
  check_dataset: Optional[str] = dataclasses.field(default=None, metadata={
      'help': "After training, psi's precedence accuracy on pairs of these held-out episodes "
              '(e.g. launch.gym_collect\'s OUT-heldout), printed and written to STEM.check.json.'})
  check_labels: Optional[str] = dataclasses.field(default=None, metadata={
      'help': 'After training, psi (and phi) against your labelled transitions: an .npz of obs, '
              'next_obs, irreversible (0/1) and optionally actions (estimators.check).'})
  check_pairs: int = dataclasses.field(default=20_000, metadata={
      'help': 'Held-out pairs scored by --check_dataset.'})
  check_beta: float = dataclasses.field(default=0.7, metadata={
      'help': 'With --check_labels: psi > beta predicts an irreversible transition.'})
  progress: bool = dataclasses.field(default=True, metadata={'help': 'Show a tqdm progress bar.'})


# The fields the command line sets of the optimisation (phi_batch_size is batch_size) and of the
# network (the preset's, with these overrides).
TRAIN_FIELDS = ('window', 'batch_size', 'learning_rate', 'phi_learning_rate', 'weight_decay',
                'pair_sampling', 'phi_loss', 'exclude_terminal', 'phi_draw', 'phi_target', 'seed')
NETWORK_FIELDS = ('mlp_sizes', 'conv_channels', 'conv_strides', 'dropout', 'psi_fusion',
                  'conv_padding', 'embedding_relu')


def sections():
  from estimators.networks import EstimatorNetConfig
  from estimators.training import TrainConfig
  return (envs_cli.Section('', Job), envs_cli.Section('train', TrainConfig, only=TRAIN_FIELDS),
          envs_cli.Section('network', EstimatorNetConfig, only=NETWORK_FIELDS))


def _recipe_fields():
  """The fields whose default is the preset's recipe (`apply_preset`), or follows another's."""
  return {f.name for f in dataclasses.fields(recipes.EstimatorRecipe)} | {'phi_learning_rate'}


def _default(ff):
  if ff.section == 'network' or ff.field in _recipe_fields():
    return None
  return ff.default


def _help_note(ff) -> str:
  if ff.section == 'network':
    return " (default: the network preset's)"
  if ff.field == 'phi_learning_rate':
    return ' (default: --learning_rate)'
  return _PRESET if ff.field in _recipe_fields() else ''


def define_flags(flag_values=flags.FLAGS):
  """Defines the CLI flags, one per field of `sections()` (on the global FLAGS when run as a
  script, on a private FlagValues in tests; several CLIs share flag names, so none defines them
  at import)."""
  envs_cli.define_field_flags(flag_values, sections(), _default, _help_note)


def options(flag_values) -> types.SimpleNamespace:
  """What `run` trains, from parsed flags: one attribute per flag, None for one left to the
  preset (lists as tuples)."""
  values = envs_cli.field_values(flag_values, sections())
  return types.SimpleNamespace(**{k: v for section in values.values() for k, v in section.items()})


_SHORT = {'psi_loss': 'loss', 'psi_accuracy': 'acc', 'phi_loss': 'phi_loss'}


class TrainError(ValueError):
  """A bad argument or input, reported as one line."""


def _ints(values, name) -> Tuple[int, ...]:
  try:
    out = tuple(int(v) for v in values)
  except ValueError as e:
    raise TrainError(f'--{name} expects comma-separated integers, got {",".join(values)}') from e
  if any(v < 1 for v in out):
    raise TrainError(f'--{name} values must be >= 1, got {",".join(values)}')
  return out


def network_config(preset: str, given):
  """The preset's EstimatorNetConfig with the overrides `given` (NETWORK_FIELDS, None: the
  preset's) applied; a conv_channels makes the torso conv, with strides 1 unless given."""
  from estimators import networks as nets
  config = nets.default_estimator_config(preset)
  changes: Dict[str, Any] = {name: getattr(given, name) for name in NETWORK_FIELDS
                             if getattr(given, name) not in (None, ())}
  for name in ('mlp_sizes', 'conv_channels', 'conv_strides'):
    if name in changes:
      changes[name] = _ints(changes[name], name)
  if 'conv_channels' in changes:
    changes['torso'] = 'conv'
    if 'conv_strides' not in changes and len(changes['conv_channels']) != len(config.conv_strides):
      changes['conv_strides'] = (1,) * len(changes['conv_channels'])
  try:
    return dataclasses.replace(config, **changes)
  except ValueError as e:
    raise TrainError(f'bad network: {e}') from e


def mixture_starts(last, segment_ends, shares):
  """The transition starts of a flat dataset made of segments (one per source dataset, ending
  at the flat positions `segment_ends`), each segment's starts repeated cyclically so that it
  fills the fraction `shares[i]` of the result (to rounding): a uniform draw from it takes a
  transition of segment i with probability shares[i], uniform within the segment up to one
  repeat. Every transition appears at least once."""
  import numpy as np
  last = np.asarray(last)
  starts = np.flatnonzero(last > np.arange(len(last)))
  bounds = np.searchsorted(starts, np.asarray(segment_ends))
  segments = np.split(starts, bounds[:-1])
  shares = np.asarray(shares, np.float64) / np.sum(shares)
  if any(len(seg) == 0 for seg in segments):
    raise TrainError('a --dataset of the mixture has no transitions')
  total = max(math.ceil(len(seg) / share) for seg, share in zip(segments, shares))
  return np.concatenate([np.resize(seg, max(len(seg), int(round(share * total))))
                         for seg, share in zip(segments, shares)]).astype(np.int32)


def flat_batch(flat, segment_ends=None, shares=None):
  """The whole flat dataset as one device-resident `training.Batch` (starts = transitions; with
  `shares`, weighted per segment of the flat dataset, see `mixture_starts`)."""
  import jax
  import jax.numpy as jnp
  import numpy as np

  from estimators import training
  last = np.asarray(flat.last, np.int32)
  if shares is not None:
    starts = mixture_starts(last, segment_ends, shares)
  else:
    starts = np.flatnonzero(last > np.arange(len(last))).astype(np.int32)
  if len(starts) == 0:
    raise TrainError('the dataset has no transitions (every episode has a single observation)')
  batch = training.Batch(jnp.asarray(flat.observations), jnp.asarray(flat.actions, jnp.int32),
                         jnp.asarray(last), jnp.asarray(starts), jnp.asarray(len(starts), jnp.int32))
  return jax.device_put(batch)


def run_steps(est, config, state, batch, num_steps: int, steps_per_call: int,
              items_per_step: int, desc: str, progress: bool = True,
              metric_keys=('psi_loss', 'psi_accuracy'), unit: str = 'pair'):
  """Runs `num_steps` steps of `training.make_update` in calls of `steps_per_call` steps.

  Returns (state, stats): stats has wall seconds (incl. compilation), steady-state items/s
  (calls after the first, i.e. without compilation) and the mean metrics of the last calls.
  """
  import jax
  import numpy as np
  from tqdm import tqdm

  from estimators import training

  k = max(1, min(int(steps_per_call), num_steps))
  full_calls, rem = divmod(num_steps, k)
  update = training.make_update(est, config, steps_per_call=k)
  update_rem = training.make_update(est, config, steps_per_call=rem) if rem else None

  history = []
  bar = tqdm(total=num_steps * items_per_step, desc=desc, unit=unit, unit_scale=True,
             disable=not progress, file=sys.stderr, dynamic_ncols=True, mininterval=1.0)
  start = time.time()
  first_call_s = None
  steady_steps, steady_s = 0, 0.0
  calls = [(update, k)] * full_calls + ([(update_rem, rem)] if rem else [])
  last_log, log_every_s = start, 30.0
  for i, (fn, n) in enumerate(calls):
    t0 = time.time()
    state, metrics = fn(state, batch)
    metrics = jax.device_get(metrics)
    dt = time.time() - t0
    if i == 0:
      first_call_s = dt
    elif fn is update:  # the remainder call compiles too: keep it out of the steady rate
      steady_steps += n
      steady_s += dt
    history.append({m: float(v) for m, v in metrics.items()})
    bar.update(n * items_per_step)
    rate = (steady_steps * items_per_step / steady_s) if steady_s > 0 else n * items_per_step / dt
    postfix = {f'{unit}s/s': f'{rate:,.0f}'}
    for m in metric_keys:
      if m in history[-1]:
        postfix[_SHORT.get(m, m)] = f'{history[-1][m]:.4f}'
    bar.set_postfix(postfix, refresh=False)
    if not progress and (time.time() - last_log > log_every_s or i == len(calls) - 1):
      last_log = time.time()
      done = sum(c[1] for c in calls[:i + 1]) * items_per_step
      print(f'{desc}: {done:,}/{num_steps * items_per_step:,} {unit}s, {rate:,.0f} {unit}s/s, '
            + ', '.join(f'{name} {v}' for name, v in postfix.items() if not name.endswith('/s')),
            file=sys.stderr, flush=True)
  bar.close()
  wall = time.time() - start
  tail = history[-max(1, min(10, len(history) // 5 or 1)):]
  final = {m: float(np.mean([h[m] for h in tail])) for m in tail[0]}
  stats = {
      'steps': num_steps, 'items': num_steps * items_per_step, 'wall_s': wall,
      'first_call_s': first_call_s,
      'items_per_s': num_steps * items_per_step / wall if wall > 0 else float('nan'),
      'steady_items_per_s': (steady_steps * items_per_step / steady_s) if steady_s > 0 else None,
      'final': final,
  }
  return state, stats


class PhiResume:
  """phi's training state on disk every `every` phi steps, so that the same command, run
  again, continues a long phi phase (Turf's 100k steps take hours here). The file records the
  run's options (`fingerprint`); a file from another run is refused in one line, not used or
  overwritten. Written to a temporary file and renamed: a kill mid-save keeps the last one."""

  def __init__(self, path: str, every: int, fingerprint: dict):
    self.path, self.every, self._fingerprint = path, every, fingerprint

  def load(self, state):
    """{steps, state, seconds, psi_stats} from the file (`state`: its expected structure), or
    None when there is none."""
    import pickle

    import jax
    if not os.path.exists(self.path):
      return None
    try:
      with open(self.path, 'rb') as f:
        saved = pickle.load(f)
      fingerprint, tree = saved['fingerprint'], saved['state']
      saved['steps'], saved['seconds'], saved['psi_stats']   # all there
    except Exception as e:   # truncated or not ours: say so, touch nothing
      raise TrainError(f'cannot resume from {self.path}: unreadable ({type(e).__name__}); '
                       'delete it to start phi afresh') from None
    if fingerprint != self._fingerprint:
      changed = sorted(k for k in set(fingerprint) | set(self._fingerprint)
                       if fingerprint.get(k) != self._fingerprint.get(k))
      raise TrainError(f'{self.path} is the resume state of another run (differs in '
                       f'{", ".join(changed)}); delete it or change --out')
    if jax.tree_util.tree_structure(tree) != jax.tree_util.tree_structure(state):
      raise TrainError(f'{self.path} holds a training state of another shape; delete it or '
                       'change --out')
    return dict(saved, state=jax.device_put(tree))

  def save(self, steps: int, state, seconds: float, psi_stats: dict) -> None:
    import pickle

    import jax
    tmp = f'{self.path}.tmp'
    with open(tmp, 'wb') as f:
      pickle.dump({'fingerprint': self._fingerprint, 'steps': int(steps), 'seconds': seconds,
                   'psi_stats': psi_stats, 'state': jax.device_get(state)}, f)
      f.flush()
      os.fsync(f.fileno())
    os.replace(tmp, self.path)

  def remove(self) -> None:
    if os.path.exists(self.path):
      os.remove(self.path)


def resume_path(out: str) -> str:
  return f'{os.path.splitext(out)[0]}.resume'


def train(flat, network, num_actions: int, train_config, num_pairs: int, phi: bool = False,
          phi_transitions: int = 100_000, phi_schedule: str = 'after', steps_per_call: int = 100,
          progress: bool = True, eval_pairs: int = 0, psi_params=None, segment_ends=None,
          shares=None, phi_save_steps=(), on_phi_steps=None, resume=None):
  """Trains psi (and phi) on a `dataset.FlatData`. Returns (psi_params, phi_params, summary).
  Given `psi_params` (a trained psi), psi is not trained: phi only. Given `shares`, the
  segments of `flat` ending at `segment_ends` are sampled in those shares (`mixture_starts`).
  `on_phi_steps(steps, psi_params, phi_params, phi_loss, phi_seconds)` is called after each of
  `phi_save_steps` phi steps (below the total). Given `resume` (a `PhiResume`), phi's phase
  starts from its saved state, if any, and saves it every `resume.every` steps."""
  import jax
  import numpy as np

  from estimators import networks as nets
  from estimators import training

  if num_pairs < 1:
    raise TrainError(f'--num_pairs must be >= 1, got {num_pairs}')
  if phi and phi_transitions < 1:
    raise TrainError(f'--phi_transitions must be >= 1, got {phi_transitions}')
  if steps_per_call < 1:
    raise TrainError(f'--steps_per_call must be >= 1, got {steps_per_call}')
  est = nets.make_estimators(network, num_actions)
  batch = flat_batch(flat, segment_ends, shares)
  joint = phi and phi_schedule == 'joint'
  psi_config = dataclasses.replace(train_config, train_psi=True, train_phi=joint)
  state = training.init_state(est, psi_config, np.asarray(flat.observations[0]))

  # A saved phi state holds psi too (trained here or given): the psi phase is not run again.
  saved = resume.load(state) if (resume and phi and phi_schedule != 'joint') else None
  if saved is not None:
    psi_stats = saved['psi_stats']
  elif psi_params is not None:
    state = state._replace(psi_params=jax.device_put(psi_params))
    psi_stats = {'steps': 0, 'items': 0, 'wall_s': 0.0, 'first_call_s': None, 'items_per_s': 0.0,
                 'steady_items_per_s': None, 'final': {}}
  else:
    psi_steps = math.ceil(num_pairs / train_config.batch_size)
    keys = ('psi_loss', 'psi_accuracy') + (('phi_loss',) if joint else ())
    state, psi_stats = run_steps(est, psi_config, state, batch, psi_steps, steps_per_call,
                                 train_config.batch_size, 'psi', progress, keys)
  # The dataset's transitions (a mixture's starts repeat some of them).
  summary = {'psi': psi_stats, 'num_transitions': int(len(flat.last) - len(flat.lengths)),
             'num_observations': int(len(flat.last))}
  if phi and not joint:
    phi_config = dataclasses.replace(train_config, train_psi=False, train_phi=True)
    phi_steps = math.ceil(phi_transitions / train_config.phi_batch_size)
    # The run in pieces ending at each of `phi_save_steps` (the state, optimiser and key carry
    # over, so the pieces are the one run), each piece's end handed to `on_phi_steps`.
    saves = {n for n in phi_save_steps if 0 < n < phi_steps}
    resume_points = set(range(resume.every, phi_steps, resume.every)) if resume else set()
    done, earlier_s, pieces = 0, 0.0, []
    if saved is not None:
      done, state, earlier_s = saved['steps'], saved['state'], saved['seconds']
      print(f'phi: resumed at step {done:,} of {phi_steps:,} from {resume.path}',
            file=sys.stderr, flush=True)
    for end in sorted(n for n in saves | resume_points | {phi_steps} if n > done):
      state, piece = run_steps(est, phi_config, state, batch, end - done, steps_per_call,
                               train_config.phi_batch_size, 'phi', progress, ('phi_loss',),
                               unit='transition')
      pieces.append(piece)
      done = end
      wall_s = earlier_s + sum(p['wall_s'] for p in pieces)
      if end in saves and on_phi_steps is not None:
        on_phi_steps(end, jax.device_get(state.psi_params), jax.device_get(state.phi_params),
                     piece['final'].get('phi_loss'), wall_s)
      if end in resume_points:
        resume.save(end, state, wall_s, psi_stats)
    phi_stats = dict(pieces[-1], steps=phi_steps, items=phi_steps * train_config.phi_batch_size,
                     wall_s=earlier_s + sum(p['wall_s'] for p in pieces))
    phi_stats['items_per_s'] = phi_stats['items'] / max(phi_stats['wall_s'], 1e-9)
    summary['phi'] = phi_stats
  if eval_pairs:
    summary['psi_eval_accuracy'] = check.pair_accuracy(
        est, state.psi_params, batch.observations, batch.last, batch.starts, train_config.window,
        eval_pairs)
  return jax.device_get(state.psi_params), jax.device_get(state.phi_params), summary


def _check_output(path: str) -> str:
  """The checkpoint path, refused before any training if it cannot be written (nothing is
  created here: checkpoint.save makes the directories)."""
  from estimators import dataset as dataset_lib
  path = os.path.abspath(path)
  if os.path.isdir(path):
    raise TrainError(f'--out {path} is a directory; give a checkpoint file path')
  problem = dataset_lib.unwritable_reason(path)
  if problem:
    raise TrainError(f'cannot write --out {path}: {problem}')
  return path


def check_flags(f):
  """Every argument that can be judged without the dataset, in one place: a bad one is a
  one-line TrainError before anything is loaded or trained."""
  if not f.dataset:
    raise TrainError('--dataset is required')
  datasets = _datasets(f.dataset)
  if f.dataset_weights:
    _shares(f.dataset_weights, len(datasets))
  if not f.out:
    raise TrainError('--out is required (the checkpoint file to write)')
  at_least = (('window', 1), ('num_pairs', 1), ('batch_size', 1), ('phi_transitions', 1),
              ('steps_per_call', 1), ('eval_pairs', 0), ('phi_draw', 0), ('phi_resume_every', 0),
              ('check_pairs', 1))
  for name, low in at_least:
    value = getattr(f, name)
    if value is not None and value < low:
      raise TrainError(f'--{name} must be >= {low}, got {value}')
  for name in ('learning_rate', 'phi_learning_rate'):
    value = getattr(f, name)
    if value is not None and not value > 0:   # `not >` also refuses nan
      raise TrainError(f'--{name} must be > 0, got {value}')
  if f.weight_decay is not None and not f.weight_decay >= 0:
    raise TrainError(f'--weight_decay must be >= 0, got {f.weight_decay}')
  if f.dropout is not None and not 0 <= f.dropout < 1:
    raise TrainError(f'--dropout must be in [0, 1), got {f.dropout}')


def _datasets(value) -> Tuple[str, ...]:
  return (value,) if isinstance(value, str) else tuple(value)


def _shares(weights, num_datasets: int) -> Tuple[float, ...]:
  """--dataset_weights as shares summing to 1; TrainError for a bad one."""
  text = ','.join(str(w) for w in weights)
  if len(weights) != num_datasets:
    raise TrainError(f'--dataset_weights needs one weight per --dataset ({num_datasets}), got '
                     f'{len(weights)}: {text}')
  try:
    values = [float(w) for w in weights]
  except ValueError as e:
    raise TrainError(f'--dataset_weights expects comma-separated numbers, got {text}') from e
  if not all(math.isfinite(v) and v > 0 for v in values):
    raise TrainError(f'--dataset_weights must all be finite and > 0, got {text}')
  return tuple(v / sum(values) for v in values)


def check_network_fits(preset: str, network, obs_shape, obs_dtype, explicit: bool):
  """Refuses a network that cannot take the dataset's observations, before building it: a conv
  torso needs images [H, W, C] large enough for its 3x3 VALID convs; an MLP flattens anything
  numeric."""
  import numpy as np
  shape, dtype = tuple(int(s) for s in obs_shape), np.dtype(obs_dtype)
  name = f'--network_preset {preset}' if explicit else f'the network preset {preset!r}'
  have = f"the dataset's observations are {list(shape)} {dtype.name}"
  if dtype.kind not in 'biuf':
    raise TrainError(f'{name} needs numeric observations; {have}')
  if network.torso != 'conv':
    return
  if len(shape) != 3:
    raise TrainError(f'{name} has a conv torso and expects image observations [H, W, C]; {have}')
  size = list(shape[:2])
  for stride in network.conv_strides:
    if network.conv_padding == 'SAME':
      size = [-(-n // stride) for n in size]
    else:
      size = [(n - 3) // stride + 1 for n in size]
    if min(size) < 1:
      raise TrainError(f'{name} needs images of at least {_min_image_side(network)}x'
                       f'{_min_image_side(network)} for its 3x3 convs (strides '
                       f'{list(network.conv_strides)}); {have}')


def _min_image_side(network) -> int:
  side = 1
  for stride in reversed(network.conv_strides):
    side = (side - 1) * stride + 3
  return side


def _env_name(meta: dict) -> str:
  return meta.get('env') or meta.get('env_name') or 'unknown'


def _read_metadata(datasets):
  """Each dataset's metadata (read before anything is loaded) and their one environment."""
  from estimators import dataset as dataset_lib
  metas = [dataset_lib.read_metadata(path) for path in datasets]
  meta, env_name = metas[0], _env_name(metas[0])
  for path, other in zip(datasets[1:], metas[1:]):
    if _env_name(other) != env_name or other.get('num_actions') != meta.get('num_actions'):
      raise TrainError(f'--dataset {path} holds {_env_name(other)!r} with '
                       f"{other.get('num_actions')} actions, --dataset {datasets[0]} "
                       f"{env_name!r} with {meta.get('num_actions')}: a mixture needs one "
                       'environment')
  return metas, env_name


def apply_preset(args, env_name: str):
  """The preset's recipe and network with what the command line gave laid over them (the one
  place presets apply): (preset name, TrainConfig, EstimatorNetConfig, num_pairs,
  phi_transitions). phi's learning rate follows psi's, its batch size is batch_size."""
  from estimators import training
  preset = args.network_preset or env_name
  try:
    recipe = recipes.recipe(preset)
  except presets.PresetError as e:
    raise TrainError(f'{e} (or pass --network_preset)' if not args.network_preset else str(e)) from None
  given = {k: v for k, v in vars(args).items() if v is not None}
  values = {**dataclasses.asdict(recipe), **given}
  values.setdefault('phi_learning_rate', values['learning_rate'])
  network = network_config(preset, args)
  try:
    config = training.TrainConfig(phi_batch_size=values['batch_size'],
                                  **{name: values[name] for name in TRAIN_FIELDS})
  except ValueError as e:
    raise TrainError(str(e)) from e
  return preset, config, network, values['num_pairs'], values['phi_transitions']


@dataclasses.dataclass
class Plan:
  """A training as its options and the datasets' metadata decide it, before any data loads."""
  args: types.SimpleNamespace
  out: str
  datasets: Tuple[str, ...]
  metas: list
  env_name: str
  shares: Optional[Tuple[float, ...]]
  preset: str
  config: Any                     # estimators.training.TrainConfig
  network: Any                    # estimators.networks.EstimatorNetConfig
  num_pairs: int
  phi_transitions: int
  psi_from: Any = None            # the --psi_checkpoint, loaded
  save_steps: Tuple[int, ...] = ()


def plan_training(args) -> Plan:
  """Every check that needs no data loaded, and the resolved configuration."""
  from estimators import checkpoint
  from estimators import dataset as dataset_lib
  check_flags(args)
  out = _check_output(args.out)
  datasets = _datasets(args.dataset)
  metas, env_name = _read_metadata(datasets)
  shares = _shares(args.dataset_weights, len(datasets)) if args.dataset_weights else None
  preset, config, network, num_pairs, phi_transitions = apply_preset(args, env_name)
  meta = metas[0]
  if 'observation_shape' in meta and 'observation_dtype' in meta:
    try:
      check_network_fits(preset, network, meta['observation_shape'], meta['observation_dtype'],
                         explicit=bool(args.network_preset))
    except (TypeError, ValueError) as e:
      if isinstance(e, TrainError):
        raise
      raise dataset_lib.DatasetError(f'corrupt dataset at {datasets[0]}: bad observation spec in '
                                     f'{dataset_lib.METADATA_FILE}') from e
  phi_after = args.phi and args.phi_schedule == 'after'
  if args.psi_checkpoint and not phi_after:
    raise TrainError('--psi_checkpoint trains phi only, after the given psi: pass --phi '
                     '(with --phi_schedule after)')
  for name in ('phi_save_steps', 'phi_resume_every'):
    if getattr(args, name) and not phi_after:
      raise TrainError(f'--{name} needs --phi (with --phi_schedule after)')
  _check_inputs(args, meta)
  p = Plan(args, out, datasets, metas, env_name, shares, preset, config, network, num_pairs,
           phi_transitions, save_steps=_ints(args.phi_save_steps, 'phi_save_steps')
           if args.phi_save_steps else ())
  if args.psi_checkpoint:
    p.psi_from = checkpoint.load(args.psi_checkpoint)
    if p.psi_from.network != network:
      raise TrainError(f'--psi_checkpoint {args.psi_checkpoint} holds another network than '
                       f'{preset!r} with these overrides')
  return p


def _check_inputs(args, meta: dict) -> None:
  """--check_dataset and --check_labels refused before training when they cannot be scored."""
  from estimators import dataset as dataset_lib
  if args.check_dataset:
    other = dataset_lib.read_metadata(args.check_dataset)
    if other.get('observation_shape') != meta.get('observation_shape'):
      raise TrainError(f'--check_dataset {args.check_dataset} has observations '
                       f'{other.get("observation_shape")}; --dataset has '
                       f'{meta.get("observation_shape")}')
  if args.check_labels:
    try:
      labels = check.read_labels(args.check_labels)
    except (OSError, ValueError) as e:
      raise TrainError(f'--check_labels: {str(e).splitlines()[0]}') from e
    if list(labels['obs'].shape[1:]) != list(meta.get('observation_shape', [])):
      raise TrainError(f'--check_labels {args.check_labels} has observations '
                       f'{list(labels["obs"].shape[1:])}; --dataset has '
                       f'{meta.get("observation_shape")}')


def load(p: Plan):
  """The datasets as one flat dataset: (flat, one size record per dataset, the flat position
  where each ends)."""
  import numpy as np

  from estimators import dataset as dataset_lib
  t0 = time.time()
  parts = []
  for path in p.datasets:
    part, _ = dataset_lib.load_flat(path)   # = flatten(load_episodes(...)), batched
    if not len(part.lengths):
      raise TrainError(f'the dataset at {path} has no episodes')
    parts.append(part)
  sizes = [{'path': os.path.abspath(path), 'env_options': m.get('env_options', {}),
            'episodes': int(len(part.lengths)), 'observations': int(len(part.last)),
            'transitions': int(len(part.last) - len(part.lengths))}
           for path, m, part in zip(p.datasets, p.metas, parts)]
  segment_ends = np.cumsum([s['observations'] for s in sizes])
  try:
    flat = dataset_lib.concat_flat(parts)
  except ValueError as e:
    raise TrainError(f'--dataset: {e}') from e
  del parts   # the concatenation is a copy: keep one
  load_s = time.time() - t0
  # Again on what was loaded: older datasets lack the spec in their metadata.
  check_network_fits(p.preset, p.network, flat.observations.shape[1:], flat.observations.dtype,
                     explicit=bool(p.args.network_preset))
  if len(p.datasets) > 1:
    for i, s in enumerate(sizes):
      print(f"  {s['path']}: {s['episodes']:,} episodes, {s['transitions']:,} transitions"
            + (f', share {p.shares[i]:.3f}' if p.shares else ''), file=sys.stderr, flush=True)
  print(f'dataset {" + ".join(p.datasets)}: env {p.env_name}, {len(flat.lengths):,} episodes, '
        f'{len(flat.last):,} observations {tuple(flat.observations.shape[1:])} '
        f'{flat.observations.dtype}, longest episode {int(np.max(flat.lengths)) - 1} steps '
        f'(loaded in {load_s:.1f}s)', file=sys.stderr, flush=True)
  if p.psi_from is not None:
    from estimators import checkpoint
    checkpoint.check_compatible(p.psi_from, flat.observations.shape[1:], flat.observations.dtype,
                                int(p.metas[0]['num_actions']))
  return flat, sizes, segment_ends


def _common_metadata(p: Plan, sizes) -> dict:
  """What a checkpoint of the run says of its data and configuration."""
  return {'env_name': p.env_name, 'env_options': p.metas[0].get('env_options', {}),
          # env_options and dataset: the first --dataset's; datasets: each, with its share.
          'dataset': os.path.abspath(p.datasets[0]),
          'datasets': [dict(s, share=None if p.shares is None else p.shares[i])
                       for i, s in enumerate(sizes)],
          'network_preset': p.preset, 'window': int(p.config.window),
          'train_config': dataclasses.asdict(p.config),
          'created': time.strftime('%Y-%m-%dT%H:%M:%S%z')}


def _save_phi_piece(p: Plan, flat, sizes):
  """on_phi_steps for `train`: phi after `steps` of its steps, beside --out."""
  from estimators import checkpoint

  def save(steps, piece_psi, piece_phi, phi_loss, seconds):
    stem, ext = os.path.splitext(p.out)
    path = f'{stem}.phi{steps}{ext or ".ckpt"}'
    args = p.args
    checkpoint.save(
        path, p.network, int(p.metas[0]['num_actions']), flat.observations.shape[1:],
        flat.observations.dtype, piece_psi, piece_phi, {
            **_common_metadata(p, sizes), 'phi_trained': True, 'phi_loss_kind': args.phi_loss,
            'phi_steps': int(steps), 'phi_transitions': int(steps * p.config.phi_batch_size),
            'phi_loss': phi_loss, 'phi_train_seconds': seconds, 'piece_of': p.out,
            'psi_from': os.path.abspath(args.psi_checkpoint) if args.psi_checkpoint else None})
    print(f'saved {path}: phi after {steps:,} steps, loss {phi_loss:.4f}', file=sys.stderr,
          flush=True)
  return save


def _phi_resume(p: Plan) -> Optional[PhiResume]:
  if not p.args.phi_resume_every:
    return None
  # What makes two commands the same run: every option but the display and the period.
  fingerprint = {k: v for k, v in vars(p.args).items()
                 if k not in ('progress', 'phi_resume_every', 'eval_pairs') and
                 not k.startswith('check_')}
  fingerprint['out'] = p.out
  return PhiResume(resume_path(p.out), p.args.phi_resume_every, fingerprint)


def _metadata(p: Plan, flat, sizes, summary) -> dict:
  """The checkpoint's metadata: the data, the configuration and what training measured."""
  args, psi = p.args, summary['psi']
  metadata = {
      **_common_metadata(p, sizes), 'dataset_episodes': int(len(flat.lengths)),
      'dataset_observations': int(len(flat.last)), 'dataset_transitions': summary['num_transitions'],
      'pair_sampling': p.config.pair_sampling, 'num_pairs': int(psi['items']),
      'requested_pairs': int(p.num_pairs), 'batch_size': int(p.config.batch_size),
      'psi_steps': int(psi['steps']), 'learning_rate': float(p.config.learning_rate),
      'weight_decay': float(p.config.weight_decay),
      'seed': int(p.config.seed), 'steps_per_call': int(args.steps_per_call),
      'psi_loss': psi['final'].get('psi_loss'), 'psi_accuracy': psi['final'].get('psi_accuracy'),
      'psi_eval_accuracy': summary.get('psi_eval_accuracy'),
      'psi_train_seconds': psi['wall_s'], 'psi_pairs_per_s': psi['items_per_s'],
      'psi_steady_pairs_per_s': psi['steady_items_per_s'],
      'training_seconds': psi['wall_s'] + (summary['phi']['wall_s'] if 'phi' in summary else 0.0),
      'phi_trained': bool(args.phi),
  }
  if p.psi_from is not None:
    # psi's figures are those of the checkpoint it came from.
    old = p.psi_from.metadata
    metadata.update({k: old.get(k) for k in (
        'num_pairs', 'requested_pairs', 'psi_steps', 'psi_loss', 'psi_accuracy',
        'psi_train_seconds', 'psi_pairs_per_s', 'psi_steady_pairs_per_s')},
        psi_from=os.path.abspath(args.psi_checkpoint))
  if args.phi:
    metadata.update(phi_loss_kind=args.phi_loss, phi_schedule=args.phi_schedule)
    if 'phi' in summary:
      metadata.update(phi_transitions=int(summary['phi']['items']),
                      phi_loss=summary['phi']['final'].get('phi_loss'),
                      phi_train_seconds=summary['phi']['wall_s'])
    else:
      metadata.update(phi_transitions=int(psi['items']), phi_loss=psi['final'].get('phi_loss'))
  return metadata


def _report(p: Plan, metadata: dict, psi: dict) -> None:
  nan = float('nan')
  eval_acc = metadata['psi_eval_accuracy']
  psi_loss = nan if metadata['psi_loss'] is None else metadata['psi_loss']
  psi_acc = nan if metadata['psi_accuracy'] is None else metadata['psi_accuracy']
  print(f"saved {p.out}: psi loss {psi_loss:.4f}, accuracy {psi_acc:.3f}"
        + (f' (re-sampled pairs, no dropout: {eval_acc:.3f})' if eval_acc is not None else '')
        + (f', psi from {p.args.psi_checkpoint}' if p.psi_from is not None else
           f", {psi['items']:,} pairs in {psi['wall_s']:.1f}s ({psi['items_per_s']:,.0f} pairs/s)")
        + (f", phi loss {metadata['phi_loss']:.4f}" if p.args.phi else ''), flush=True)


def run(args) -> dict:
  """Trains what `args` (`options(flag_values)`) say; returns the checkpoint metadata. Raises
  TrainError etc."""
  from estimators import checkpoint
  p = plan_training(args)
  flat, sizes, segment_ends = load(p)
  resume = _phi_resume(p)
  psi_params, phi_params, summary = train(
      flat, p.network, int(p.metas[0]['num_actions']), p.config, p.num_pairs, phi=args.phi,
      phi_transitions=p.phi_transitions, phi_schedule=args.phi_schedule,
      steps_per_call=args.steps_per_call, progress=args.progress, eval_pairs=args.eval_pairs,
      psi_params=None if p.psi_from is None else p.psi_from.psi_params,
      segment_ends=segment_ends, shares=p.shares, phi_save_steps=p.save_steps,
      on_phi_steps=_save_phi_piece(p, flat, sizes), resume=resume)
  metadata = _metadata(p, flat, sizes, summary)
  checkpoint.save(p.out, p.network, int(p.metas[0]['num_actions']), flat.observations.shape[1:],
                  flat.observations.dtype, psi_params, phi_params if args.phi else None, metadata)
  if resume is not None:
    resume.remove()   # --out holds the run now
  _report(p, metadata, summary['psi'])
  if args.check_dataset or args.check_labels:
    _check(p)
  return metadata


def check_report_path(out: str) -> str:
  return f'{os.path.splitext(out)[0]}.check.json'


def _check(p: Plan) -> None:
  """--check_dataset / --check_labels on the checkpoint just written: printed as one line and
  written beside it (STEM.check.json)."""
  import json

  from envs import paths
  from estimators import checkpoint
  args = p.args
  ckpt = checkpoint.load(p.out)
  report = {'checkpoint': p.out}
  try:
    if args.check_dataset:
      report.update(check.heldout_accuracy(ckpt, args.check_dataset, args.check_pairs,
                                           seed=p.config.seed + 1))
    if args.check_labels:
      report.update(check.label_scores(ckpt, args.check_labels, args.check_beta))
  except (ValueError, KeyError) as e:
    raise TrainError(f'check of {p.out} (kept): {str(e).splitlines()[0]}') from e
  path = check_report_path(p.out)
  paths.write_json(path, report, sort_keys=True)
  print(f'check {path}: ' + json.dumps(report, sort_keys=True, default=float), flush=True)


def main(argv):
  cli.quiet_logs(FLAGS)
  if cli.unexpected_arguments(argv):
    return 2
  from estimators.checkpoint import CheckpointError
  from estimators.dataset import DatasetError
  try:
    run(options(FLAGS))
  except (TrainError, DatasetError, CheckpointError) as e:
    print(f'error: {e}', file=sys.stderr)
    return 2
  except OSError as e:
    print(f'error: {e.strerror or e}: {getattr(e, "filename", "") or ""}'.rstrip(': '), file=sys.stderr)
    return 2
  return 0


if __name__ == '__main__':
  # TensorFlow (behind the dataset reader) must be imported before absl's app.run: imported
  # inside main, tf.data fails with "Unable to find FunctionDef ... read_one_file" (TF 2.8).
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  import tensorflow  # noqa: F401
  define_flags()
  app.run(main)

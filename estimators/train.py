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
from typing import Any, Dict, Optional, Tuple

from absl import app, flags

from envs import presets
from estimators import cli, recipes

FLAGS = flags.FLAGS


def define_flags(flag_values=flags.FLAGS):
  """Defines the CLI flags (on the global FLAGS when run as a script, on a private
  FlagValues in tests; several CLIs share flag names, so none defines them at import)."""
  fv = flag_values
  flags.DEFINE_multi_string('dataset', None, 'Episode dataset directory (estimators.dataset / '
                            'launch.collect); repeat it to train on several datasets of one '
                            'environment (options may differ), concatenated.', flag_values=fv)
  flags.DEFINE_list('dataset_weights', None, 'With several --dataset: the share of the sampled '
                    "transitions each gives (phi's transitions, the first observation of psi's "
                    'pair proposals), e.g. 0.5,0.5 (normalised; default: in proportion to their '
                    'transitions).', flag_values=fv)
  flags.DEFINE_string('out', None, 'Checkpoint file to write (estimators.checkpoint).', flag_values=fv)
  flags.DEFINE_integer('window', None, 'Precedence window w (default: the preset recipe: '
                       'cartpole 200, turf 120, sokoban 15, cliff 200).', flag_values=fv)
  flags.DEFINE_integer('num_pairs', None, 'Total psi training pairs, steps = ceil(P / B) (default: the '
                       'preset recipe: 3M, sokoban 20M).', flag_values=fv)
  flags.DEFINE_integer('batch_size', 128, 'Pairs per psi step (and transitions per phi step).', flag_values=fv)
  flags.DEFINE_bool('phi', False, 'Also train the reversibility estimator phi (RAC).', flag_values=fv)
  flags.DEFINE_enum('phi_loss', 'l2', ['l2', 'bce'], "phi loss: 'l2' (paper) or 'bce' (authors' code).", flag_values=fv)
  flags.DEFINE_integer('phi_transitions', None, 'Transitions fed to phi, steps = ceil(N / B) '
                       '(default: the preset recipe, 100k).', flag_values=fv)
  flags.DEFINE_enum('phi_schedule', 'after', ['after', 'joint'],
                    "'after': phi after psi, psi frozen (paper, offline); 'joint': alongside psi.", flag_values=fv)
  flags.DEFINE_enum('pair_sampling', None, ['uniform', 'start_uniform'],
                    "psi pairs: 'uniform' over the valid pairs (paper) or 'start_uniform' (start "
                    'uniform, then gap uniform) (default: the preset recipe).', flag_values=fv)
  flags.DEFINE_float('learning_rate', None, 'Adam learning rate (default: preset; 0.01, sokoban 5e-4).', flag_values=fv)
  flags.DEFINE_float('phi_learning_rate', None, 'phi learning rate (default: --learning_rate).', flag_values=fv)
  flags.DEFINE_float('weight_decay', None, 'AdamW weight decay (default: preset; 0, sokoban 1e-4).', flag_values=fv)
  flags.DEFINE_enum('network_preset', None, list(presets.network_names()),
                    "Network/recipe preset (default: the dataset's environment).", flag_values=fv)
  flags.DEFINE_list('mlp_sizes', None, 'Override: encoder MLP sizes, e.g. 64,64.', flag_values=fv)
  flags.DEFINE_list('conv_channels', None, 'Override: encoder conv channels, e.g. 32,64,64 (conv torso).', flag_values=fv)
  flags.DEFINE_list('conv_strides', None, 'Override: encoder conv strides, e.g. 1,1,1.', flag_values=fv)
  flags.DEFINE_float('dropout', None, 'Override: dropout in the psi head.', flag_values=fv)
  flags.DEFINE_enum('psi_fusion', None, ['siamese', 'early'], "Override: psi embeds each "
                    "observation ('siamese') or stacks both along channels first ('early').",
                    flag_values=fv)
  flags.DEFINE_enum('conv_padding', None, ['VALID', 'SAME'], 'Override: padding of the encoder '
                    'convs (default: the preset; VALID).', flag_values=fv)
  flags.DEFINE_bool('embedding_relu', None, "Override: a ReLU after psi's embedding projection "
                    "(the authors' released Turf net; default: the preset, linear).",
                    flag_values=fv)
  flags.DEFINE_bool('exclude_terminal', False, "Keep the transitions that end an episode (goal, "
                    "time-out) out of phi's batches and each episode's final observation out of "
                    "psi's pairs (the authors' code).", flag_values=fv)
  flags.DEFINE_integer('phi_draw', 0, "phi's batch: draw this many transitions, keep the first "
                       '--batch_size non-terminal ones (with --exclude_terminal; the authors\' '
                       'code: 1024); 0: draw --batch_size.', flag_values=fv)
  flags.DEFINE_enum('phi_target', 'reverse', ['reverse', 'one_minus_forward'],
                    "phi's target: psi(x', x) ('reverse', Sec. 4) or 1 - psi(x, x') "
                    "('one_minus_forward', the authors' code).", flag_values=fv)
  flags.DEFINE_list('phi_save_steps', [], 'Also write phi after these many phi steps (below the '
                    'total), each beside --out as STEM.phi<steps>.ckpt: one run scored at several '
                    'budgets.', flag_values=fv)
  flags.DEFINE_integer('phi_resume_every', 0, 'Save phi\'s whole training state (parameters, '
                       'optimiser, key) every this many phi steps beside --out as STEM.resume; '
                       'the same command run again continues from it (a long phi run survives '
                       'a stopped session); removed once --out is written. 0: off.',
                       flag_values=fv)
  flags.DEFINE_integer('steps_per_call', 100, 'Training steps per update call (one lax.scan; conv nets on CPU loop).', flag_values=fv)
  flags.DEFINE_integer('seed', 0, 'Random seed (initialisation and pair sampling).', flag_values=fv)
  flags.DEFINE_string('psi_checkpoint', None, 'Take psi from this checkpoint (same network) and '
                      'train phi only (needs --phi): phi variants without retraining psi.',
                      flag_values=fv)
  flags.DEFINE_integer('eval_pairs', 10_000, 'Pairs re-sampled from the dataset after training to '
                       'report psi accuracy without dropout (0: skip).', flag_values=fv)
  flags.DEFINE_bool('progress', True, 'Show a tqdm progress bar.', flag_values=fv)


_SHORT = {'psi_loss': 'loss', 'psi_accuracy': 'acc', 'phi_loss': 'phi_loss'}


@dataclasses.dataclass(frozen=True)
class TrainOptions:
  """What `run` trains, one field per flag of the CLI (see `define_flags` for each meaning);
  `cli.options_from_flags(TrainOptions, FLAGS)` builds it from parsed flags."""
  dataset: Optional[Tuple[str, ...]] = None
  dataset_weights: Optional[Tuple[str, ...]] = None
  out: Optional[str] = None
  window: Optional[int] = None
  num_pairs: Optional[int] = None
  batch_size: int = 128
  phi: bool = False
  phi_loss: str = 'l2'
  phi_transitions: Optional[int] = None
  phi_schedule: str = 'after'
  pair_sampling: Optional[str] = None
  learning_rate: Optional[float] = None
  phi_learning_rate: Optional[float] = None
  weight_decay: Optional[float] = None
  network_preset: Optional[str] = None
  mlp_sizes: Optional[Tuple[str, ...]] = None
  conv_channels: Optional[Tuple[str, ...]] = None
  conv_strides: Optional[Tuple[str, ...]] = None
  dropout: Optional[float] = None
  psi_fusion: Optional[str] = None
  conv_padding: Optional[str] = None
  embedding_relu: Optional[bool] = None
  exclude_terminal: bool = False
  phi_draw: int = 0
  phi_target: str = 'reverse'
  phi_save_steps: Tuple[str, ...] = ()
  phi_resume_every: int = 0
  steps_per_call: int = 100
  seed: int = 0
  psi_checkpoint: Optional[str] = None
  eval_pairs: int = 10_000
  progress: bool = True


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


def network_config(preset: str, mlp_sizes=None, conv_channels=None, conv_strides=None,
                   dropout=None, conv_padding=None, psi_fusion=None, embedding_relu=None):
  """The preset's EstimatorNetConfig with the given overrides applied."""
  from estimators import networks as nets
  config = nets.default_estimator_config(preset)
  changes: Dict[str, Any] = {}
  if mlp_sizes:
    changes['mlp_sizes'] = _ints(mlp_sizes, 'mlp_sizes')
  if conv_channels:
    changes['conv_channels'] = _ints(conv_channels, 'conv_channels')
    changes['torso'] = 'conv'
    if not conv_strides and len(changes['conv_channels']) != len(config.conv_strides):
      changes['conv_strides'] = (1,) * len(changes['conv_channels'])
  if conv_strides:
    changes['conv_strides'] = _ints(conv_strides, 'conv_strides')
  if dropout is not None:
    changes['dropout'] = float(dropout)
  if conv_padding is not None:
    changes['conv_padding'] = conv_padding
  if psi_fusion is not None:
    changes['psi_fusion'] = psi_fusion
  if embedding_relu is not None:
    changes['embedding_relu'] = bool(embedding_relu)
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


def eval_psi_accuracy(est, psi_params, batch, window: int, num_pairs: int, seed: int = 1,
                      chunk: int = 4096) -> Optional[float]:
  """psi accuracy (dropout off) on `num_pairs` pairs freshly sampled from `batch`."""
  import jax
  import jax.numpy as jnp
  import numpy as np

  from estimators import pairs as pairs_lib
  from estimators import training
  if num_pairs <= 0:
    return None
  p = pairs_lib.sample_pairs(jax.random.PRNGKey(seed), batch.last, batch.starts, batch.num_starts,
                             num_pairs, window)
  prob_fn = jax.jit(lambda params, x, y: training.psi_prob(est, params, x, y))
  correct = 0
  first, second, label = (np.asarray(a) for a in (p.first, p.second, p.label))
  for s in range(0, num_pairs, chunk):
    x = batch.observations[jnp.asarray(first[s:s + chunk])]
    y = batch.observations[jnp.asarray(second[s:s + chunk])]
    prob = np.asarray(prob_fn(psi_params, x, y))
    correct += int(np.sum((prob > 0.5) == (label[s:s + chunk] > 0.5)))
  return correct / num_pairs


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
    summary['psi_eval_accuracy'] = eval_psi_accuracy(est, state.psi_params, batch,
                                                     train_config.window, eval_pairs)
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
              ('steps_per_call', 1), ('eval_pairs', 0), ('phi_draw', 0), ('phi_resume_every', 0))
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


def run(options: TrainOptions) -> dict:
  """Trains what `options` say; returns the checkpoint metadata. Raises TrainError etc."""
  import numpy as np

  from estimators import checkpoint, training
  from estimators import dataset as dataset_lib

  f = options
  check_flags(f)
  out = _check_output(f.out)

  datasets = _datasets(f.dataset)
  metas = [dataset_lib.read_metadata(path) for path in datasets]   # fails fast, before loading
  meta = metas[0]
  env_name = _env_name(meta)
  for path, other in zip(datasets[1:], metas[1:]):
    if _env_name(other) != env_name or other.get('num_actions') != meta.get('num_actions'):
      raise TrainError(f'--dataset {path} holds {_env_name(other)!r} with '
                       f"{other.get('num_actions')} actions, --dataset {datasets[0]} "
                       f"{env_name!r} with {meta.get('num_actions')}: a mixture needs one "
                       'environment')
  shares = _shares(f.dataset_weights, len(datasets)) if f.dataset_weights else None
  preset = f.network_preset or env_name
  try:
    recipe = recipes.recipe(preset)
  except presets.PresetError as e:
    raise TrainError(f'{e} (or pass --network_preset)' if not f.network_preset else str(e)) from None
  network = network_config(preset, f.mlp_sizes, f.conv_channels, f.conv_strides, f.dropout,
                           f.conv_padding, f.psi_fusion, f.embedding_relu)
  if 'observation_shape' in meta and 'observation_dtype' in meta:
    try:
      check_network_fits(preset, network, meta['observation_shape'], meta['observation_dtype'],
                         explicit=bool(f.network_preset))
    except (TypeError, ValueError) as e:
      if isinstance(e, TrainError):
        raise
      raise dataset_lib.DatasetError(f'corrupt dataset at {datasets[0]}: bad observation spec in '
                                     f'{dataset_lib.METADATA_FILE}') from e
  window = f.window if f.window is not None else recipe.window
  lr = f.learning_rate if f.learning_rate is not None else recipe.learning_rate
  wd = f.weight_decay if f.weight_decay is not None else recipe.weight_decay
  num_pairs = f.num_pairs if f.num_pairs is not None else recipe.num_pairs
  phi_transitions = f.phi_transitions if f.phi_transitions is not None else recipe.phi_transitions
  try:
    config = training.TrainConfig(
        window=window, batch_size=f.batch_size, learning_rate=lr, weight_decay=wd,
        pair_sampling=f.pair_sampling or recipe.pair_sampling,
        phi_loss=f.phi_loss, phi_batch_size=f.batch_size,
        phi_learning_rate=f.phi_learning_rate if f.phi_learning_rate is not None else lr,
        exclude_terminal=f.exclude_terminal, phi_draw=f.phi_draw, phi_target=f.phi_target,
        seed=f.seed)
  except ValueError as e:
    raise TrainError(str(e)) from e

  psi_from = None
  if f.psi_checkpoint:
    if not f.phi or f.phi_schedule != 'after':
      raise TrainError('--psi_checkpoint trains phi only, after the given psi: pass --phi '
                       '(with --phi_schedule after)')
    psi_from = checkpoint.load(f.psi_checkpoint)
    if psi_from.network != network:
      raise TrainError(f'--psi_checkpoint {f.psi_checkpoint} holds another network than '
                       f'{preset!r} with these overrides')

  t0 = time.time()
  parts = []
  for path in datasets:
    part, _ = dataset_lib.load_flat(path)   # = flatten(load_episodes(...)), batched
    if not len(part.lengths):
      raise TrainError(f'the dataset at {path} has no episodes')
    parts.append(part)
  sizes = [{'path': os.path.abspath(path), 'env_options': m.get('env_options', {}),
            'episodes': int(len(p.lengths)), 'observations': int(len(p.last)),
            'transitions': int(len(p.last) - len(p.lengths))}
           for path, m, p in zip(datasets, metas, parts)]
  segment_ends = np.cumsum([s['observations'] for s in sizes])
  try:
    flat = dataset_lib.concat_flat(parts)
  except ValueError as e:
    raise TrainError(f'--dataset: {e}') from e
  del parts   # the concatenation is a copy: keep one
  load_s = time.time() - t0
  # Again on what was loaded: older datasets lack the spec in their metadata.
  check_network_fits(preset, network, flat.observations.shape[1:], flat.observations.dtype,
                     explicit=bool(f.network_preset))
  num_actions = int(meta['num_actions'])
  max_len = int(np.max(flat.lengths)) - 1
  if len(datasets) > 1:
    for i, s in enumerate(sizes):
      print(f"  {s['path']}: {s['episodes']:,} episodes, {s['transitions']:,} transitions"
            + (f', share {shares[i]:.3f}' if shares else ''), file=sys.stderr, flush=True)
  print(f'dataset {" + ".join(datasets)}: env {env_name}, {len(flat.lengths):,} episodes, '
        f'{len(flat.last):,} observations {tuple(flat.observations.shape[1:])} '
        f'{flat.observations.dtype}, longest episode {max_len} steps (loaded in {load_s:.1f}s)',
        file=sys.stderr, flush=True)

  if psi_from is not None:
    checkpoint.check_compatible(psi_from, flat.observations.shape[1:], flat.observations.dtype,
                                num_actions)
  save_steps = _ints(f.phi_save_steps, 'phi_save_steps') if f.phi_save_steps else ()
  if save_steps and not (f.phi and f.phi_schedule == 'after'):
    raise TrainError('--phi_save_steps needs --phi (with --phi_schedule after)')

  def save_phi_piece(steps, piece_psi, piece_phi, phi_loss, seconds):
    """phi after `steps` of its steps, beside --out (its metadata: the run's, so far)."""
    stem, ext = os.path.splitext(out)
    path = f'{stem}.phi{steps}{ext or ".ckpt"}'
    checkpoint.save(path, network, num_actions, flat.observations.shape[1:],
                    flat.observations.dtype, piece_psi, piece_phi, {
                        'env_name': env_name, 'env_options': meta.get('env_options', {}),
                        'dataset': os.path.abspath(datasets[0]), 'datasets': sizes,
                        'network_preset': preset, 'window': int(window),
                        'train_config': dataclasses.asdict(config), 'phi_trained': True,
                        'phi_loss_kind': f.phi_loss, 'phi_steps': int(steps),
                        'phi_transitions': int(steps * config.phi_batch_size),
                        'phi_loss': phi_loss, 'phi_train_seconds': seconds,
                        'psi_from': os.path.abspath(f.psi_checkpoint) if f.psi_checkpoint else None,
                        'piece_of': out, 'created': time.strftime('%Y-%m-%dT%H:%M:%S%z')})
    print(f'saved {path}: phi after {steps:,} steps, loss {phi_loss:.4f}', file=sys.stderr,
          flush=True)

  resume = None
  if f.phi_resume_every:
    if not (f.phi and f.phi_schedule == 'after'):
      raise TrainError('--phi_resume_every needs --phi (with --phi_schedule after)')
    # What makes two commands the same run: every option but the display and the period.
    fingerprint = {k: v for k, v in dataclasses.asdict(f).items()
                   if k not in ('progress', 'phi_resume_every', 'eval_pairs')}
    fingerprint['out'] = out
    resume = PhiResume(resume_path(out), f.phi_resume_every, fingerprint)

  psi_params, phi_params, summary = train(
      flat, network, num_actions, config, num_pairs, phi=f.phi,
      phi_transitions=phi_transitions, phi_schedule=f.phi_schedule,
      steps_per_call=f.steps_per_call, progress=f.progress, eval_pairs=f.eval_pairs,
      psi_params=None if psi_from is None else psi_from.psi_params,
      segment_ends=segment_ends, shares=shares, phi_save_steps=save_steps,
      on_phi_steps=save_phi_piece, resume=resume)

  psi = summary['psi']
  metadata = {
      'env_name': env_name, 'env_options': meta.get('env_options', {}),
      # env_options and dataset: the first --dataset's; datasets: each, with its share.
      'dataset': os.path.abspath(datasets[0]), 'dataset_episodes': int(len(flat.lengths)),
      'datasets': [dict(s, share=None if shares is None else shares[i])
                   for i, s in enumerate(sizes)],
      'dataset_observations': int(len(flat.last)), 'dataset_transitions': summary['num_transitions'],
      'network_preset': preset, 'window': int(window), 'pair_sampling': config.pair_sampling,
      'num_pairs': int(psi['items']),
      'requested_pairs': int(num_pairs), 'batch_size': int(f.batch_size),
      'psi_steps': int(psi['steps']), 'learning_rate': float(lr), 'weight_decay': float(wd),
      'seed': int(f.seed), 'steps_per_call': int(f.steps_per_call),
      'psi_loss': psi['final'].get('psi_loss'), 'psi_accuracy': psi['final'].get('psi_accuracy'),
      'psi_eval_accuracy': summary.get('psi_eval_accuracy'),
      'psi_train_seconds': psi['wall_s'], 'psi_pairs_per_s': psi['items_per_s'],
      'psi_steady_pairs_per_s': psi['steady_items_per_s'],
      'training_seconds': psi['wall_s'] + (summary['phi']['wall_s'] if 'phi' in summary else 0.0),
      'phi_trained': bool(f.phi), 'train_config': dataclasses.asdict(config),
      'created': time.strftime('%Y-%m-%dT%H:%M:%S%z'),
  }
  if psi_from is not None:
    # psi's figures are those of the checkpoint it came from.
    old = psi_from.metadata
    metadata.update({k: old.get(k) for k in (
        'num_pairs', 'requested_pairs', 'psi_steps', 'psi_loss', 'psi_accuracy',
        'psi_train_seconds', 'psi_pairs_per_s', 'psi_steady_pairs_per_s')},
        psi_from=os.path.abspath(f.psi_checkpoint))
  if f.phi:
    metadata.update(phi_loss_kind=f.phi_loss, phi_schedule=f.phi_schedule)
    if 'phi' in summary:
      metadata.update(phi_transitions=int(summary['phi']['items']),
                      phi_loss=summary['phi']['final'].get('phi_loss'),
                      phi_train_seconds=summary['phi']['wall_s'])
    else:
      metadata.update(phi_transitions=int(psi['items']), phi_loss=psi['final'].get('phi_loss'))
  checkpoint.save(out, network, num_actions, flat.observations.shape[1:], flat.observations.dtype,
                  psi_params, phi_params if f.phi else None, metadata)
  if resume is not None:
    resume.remove()   # --out holds the run now
  eval_acc = metadata['psi_eval_accuracy']
  psi_loss = metadata['psi_loss'] if metadata['psi_loss'] is not None else float('nan')
  psi_acc = metadata['psi_accuracy'] if metadata['psi_accuracy'] is not None else float('nan')
  print(f"saved {out}: psi loss {psi_loss:.4f}, accuracy {psi_acc:.3f}"
        + (f' (re-sampled pairs, no dropout: {eval_acc:.3f})' if eval_acc is not None else '')
        + (f', psi from {f.psi_checkpoint}' if psi_from is not None else
           f", {psi['items']:,} pairs in {psi['wall_s']:.1f}s ({psi['items_per_s']:,.0f} pairs/s)")
        + (f", phi loss {metadata['phi_loss']:.4f}" if f.phi else ''), flush=True)
  return metadata


def main(argv):
  cli.quiet_logs(FLAGS)
  if cli.unexpected_arguments(argv):
    return 2
  from estimators.checkpoint import CheckpointError
  from estimators.dataset import DatasetError
  try:
    run(cli.options_from_flags(TrainOptions, FLAGS))
  except (TrainError, DatasetError, CheckpointError) as e:
    print(f'error: {e}', file=sys.stderr)
    return 2
  except OSError as e:
    print(f'error: {e.strerror or e}: {getattr(e, "filename", "") or ""}'.rstrip(': '), file=sys.stderr)
    return 2
  return 0


if __name__ == '__main__':
  define_flags()
  # TensorFlow (behind the dataset reader) must be imported before absl's app.run: imported
  # inside main, tf.data fails with "Unable to find FunctionDef ... read_one_file" (TF 2.8).
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  import tensorflow  # noqa: F401
  app.run(main)

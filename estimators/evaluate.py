r"""Scores a trained estimator checkpoint against ground truth, or draws the paper's pictures.

    python -m estimators.evaluate --checkpoint ckpt/turf.ckpt --env turf --transitions 2000 \
        --out results/eval_turf
    python -m estimators.evaluate --checkpoint ckpt/cartpole.ckpt --env cartpole \
        --env_option max_steps=200 --transitions 20000 --out results/eval_cartpole

Discrete deterministic environments (turf, cliff with wind=0, sokoban): N transitions are
collected with a uniformly random policy and each is labelled by the exact oracle
(`envs.oracle.check`: reversible / irreversible / unknown; unknown ones are dropped and
counted). psi(x, x') and, when the checkpoint has phi, phi(x, a) are computed in batched jitted
passes. The report (JSON, also printed) holds the AUROC of psi for irreversible transitions
(high psi = irreversible), the AUROC of 1 - phi (low phi = irreversible), precision/recall of
"psi > beta" and "phi < phi_beta", the best-F1 thresholds, and the calibration bins; the
calibration plot (fraction irreversible vs binned psi and vs binned 1 - phi) goes to
OUT/calibration.png.

Cartpole (continuous, no oracle): the paper's Fig. 6b/6c. States of random-policy trajectories
are placed at the pole tip's coordinates relative to the cart (x = l sin(theta),
y = l cos(theta), l the full pole length) and coloured by phi(x, a) for a = 0 (push left) and
a = 1 (push right), and by psi(x_t, x_t+1) for the transitions; a grid over (theta, theta_dot)
at x = x_dot = 0 shows phi(., 0) - phi(., 1). Summary statistics go to the JSON: mean phi per
action, the fraction of states where the action pushing the cart towards the side the pole
leans to is judged more reversible (the paper's physical check), and the AUROC of psi / 1 - phi
for terminating transitions (falling is irreversible).

--labels_cache DIR keeps the oracle's labels of the collected transitions (keyed by env,
options, seed and count, checked against a digest of the transitions), so evaluating several
checkpoints on the same transitions runs the search once (Sokoban: minutes per 4000).

Thresholds: --beta (psi) defaults to the paper's value for the env (turf 0.8, sokoban 0.9,
others 0.7); --phi_beta defaults to --beta when that is given, else the paper's RAC value
(turf 0.2, others 0.4).
"""
import dataclasses
import hashlib
import json
import os
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

from absl import app, flags

from envs import cli as envs_cli
from envs import paths, presets
from envs.cli import field
from estimators import cli
from estimators import kinds as kinds_lib

FLAGS = flags.FLAGS


@dataclasses.dataclass(frozen=True)
class EvaluateOptions:
  """What `run` evaluates: one flag per field (envs.cli field flags);
  `cli.options_from_flags(EvaluateOptions, FLAGS)` builds it from the parsed flags. The
  thresholds left unset are the preset's, applied in `default_betas`."""
  checkpoint: Optional[str] = field(None, 'Estimator checkpoint (estimators.train --out).')
  env: Optional[str] = field(None, 'Environment name (envs.make): turf, cliff, sokoban, cartpole.')
  env_option: Tuple[str, ...] = field((), 'Environment option key=value (repeatable).',
                                      repeat=True)
  transitions: int = field(2000, 'Transitions to collect with the policy.')
  beta: Optional[float] = field(None, 'Threshold of "psi > beta" (irreversible) (default: the '
                                "environment's RAE beta, envs.presets).")
  phi_beta: Optional[float] = field(None, 'Threshold of "phi < phi_beta" (irreversible) '
                                    "(default: --beta when given, else the environment's RAC "
                                    'beta, envs.presets).')
  out: Optional[str] = field(None, 'Output directory (default: CHECKPOINT.eval).')
  policy: str = field('random', 'Policy collecting the transitions.', choices=('random',))
  max_expansions: int = field(100_000, 'Oracle search budget per transition.')
  num_bins: int = field(10, 'Calibration bins.')
  seed: int = field(0, 'Seed of the environment and the policy.')
  batch: int = field(4096, 'Rows per jitted forward pass.')
  phi_betas: Tuple[str, ...] = field((), 'More phi thresholds for the per-kind split '
                                     '(environments with transition kinds, e.g. turf): '
                                     '"phi < beta" per kind at each.')
  labels_cache: Optional[str] = field(None, 'Directory caching the oracle labels of the '
                                      'collected transitions (same env, options, seed, count): '
                                      're-evaluations skip the search.')


SECTIONS = (envs_cli.Section('', EvaluateOptions),)


def define_flags(flag_values=flags.FLAGS):
  """Defines the CLI flags, one per field of EvaluateOptions (on the global FLAGS when run as a
  script, on a private FlagValues in tests; several CLIs share flag names, so none defines them
  at import)."""
  envs_cli.define_field_flags(flag_values, SECTIONS)


CARTPOLE_POLE_LENGTH = 1.0  # gym's `length` (0.5) is half the pole


class EvaluateError(ValueError):
  """Bad argument or input, reported as one line."""


def default_betas(env_name: str, beta: Optional[float], phi_beta: Optional[float]):
  """(psi threshold, phi threshold): the given ones, else the thresholds the environment's runs
  use (envs.presets): RAE's beta for psi, RAC's for phi; `beta` alone sets both."""
  psi_b = beta if beta is not None else presets.thresholds(env_name, 'rae')['beta']
  if phi_beta is not None:
    phi_b = phi_beta
  else:
    phi_b = beta if beta is not None else presets.thresholds(env_name, 'rac')['beta']
  return float(psi_b), float(phi_b)


def collect_transitions(env, num: int, seed: int = 0, with_states: bool = True) -> Dict[str, Any]:
  """`num` transitions of a uniformly random policy: obs, next_obs, actions, states (before each
  action, when `with_states`), `terminal` (the step ended the episode with discount 0)."""
  import numpy as np
  rng = np.random.default_rng(seed)
  num_actions = int(env.action_spec().num_values)
  obs, next_obs, actions, states, terminal = [], [], [], [], []
  ts = env.reset()
  episodes = 1
  while len(actions) < num:
    if with_states:
      states.append(env.get_state())
    a = int(rng.integers(num_actions))
    nxt = env.step(a)
    obs.append(np.asarray(ts.observation))
    next_obs.append(np.asarray(nxt.observation))
    actions.append(a)
    terminal.append(bool(nxt.last() and nxt.discount is not None and float(nxt.discount) == 0.0))
    if nxt.last():
      ts = env.reset()
      if len(actions) < num:
        episodes += 1
    else:
      ts = nxt
  return {'obs': np.stack(obs), 'next_obs': np.stack(next_obs),
          'actions': np.asarray(actions, np.int32), 'states': states if with_states else None,
          'terminal': np.asarray(terminal, bool), 'episodes': episodes,
          'num_actions': num_actions}


def _finite(x):
  """JSON-safe float (NaN/inf -> None)."""
  if x is None:
    return None
  x = float(x)
  return x if x == x and abs(x) != float('inf') else None


def _clean(obj):
  import numpy as np
  if isinstance(obj, dict):
    return {k: _clean(v) for k, v in obj.items()}
  if isinstance(obj, (list, tuple)):
    return [_clean(v) for v in obj]
  if isinstance(obj, np.ndarray):
    return _clean(obj.tolist())
  if isinstance(obj, (float, np.floating)):
    return _finite(obj)
  if isinstance(obj, np.integer):
    return int(obj)
  if isinstance(obj, np.bool_):
    return bool(obj)
  return obj


def score(scores, irreversible, predicted, num_bins: int) -> Dict[str, Any]:
  """AUROC, precision/recall of `predicted`, best-F1 threshold, calibration bins of `scores`."""
  import numpy as np

  from estimators import metrics
  cal = metrics.calibration_bins(scores, irreversible, num_bins)
  irr = np.asarray(irreversible, bool)
  out = {
      'auroc': metrics.auroc(scores, irreversible),
      **metrics.precision_recall(predicted, irreversible),
      'best_f1': metrics.best_f1_threshold(scores, irreversible),
      'mean_score_irreversible': float(np.mean(scores[irr])) if irr.any() else None,
      'mean_score_reversible': float(np.mean(scores[~irr])) if (~irr).any() else None,
      'calibration': {'edges': cal['edges'], 'counts': cal['counts'],
                      'fraction_irreversible': cal['fraction_positive'],
                      'mean_score': cal['mean_score']},
  }
  return out


def _plt():
  import matplotlib
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt
  return plt


def calibration_plot(path: str, panels: List[Dict[str, Any]], title: str) -> str:
  """One panel per entry: {'name', 'calibration', 'auroc'}; fraction irreversible per bin (line)
  over the bin counts (bars, right axis)."""
  import numpy as np
  plt = _plt()
  fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.2), squeeze=False)
  for ax, panel in zip(axes[0], panels):
    cal = panel['calibration']
    edges = np.asarray(cal['edges'], float)
    centers = (edges[:-1] + edges[1:]) / 2
    width = edges[1] - edges[0]
    counts = np.asarray(cal['counts'], float)
    frac = np.asarray([np.nan if v is None else v for v in cal['fraction_irreversible']], float)
    ax2 = ax.twinx()
    ax2.bar(centers, counts, width=width * 0.9, color='0.85', zorder=0)
    ax2.set_ylabel('transitions per bin', color='0.4')
    ax2.set_yscale('log' if counts.max(initial=0) > 50 else 'linear')
    ax.set_zorder(ax2.get_zorder() + 1)
    ax.patch.set_visible(False)
    ok = ~np.isnan(frac)
    ax.plot(centers[ok], frac[ok], 'o-', color='C3', label='fraction irreversible (oracle)')
    ax.plot([0, 1], [0, 1], '--', color='0.5', linewidth=1, label='ideal')
    ax.set_xlim(0, 1)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel(panel['name'])
    ax.set_ylabel('fraction irreversible')
    auroc = panel.get('auroc')
    ax.set_title(f"{panel['name']}: AUROC {auroc:.3f}" if auroc is not None else panel['name'])
    ax.legend(loc='upper left', fontsize=8)
  fig.suptitle(title)
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)
  return path


def oracle_labels(env_name: str, env_options: dict, data: Dict[str, Any], seed: int,
                  max_expansions: int, labels_cache: Optional[str] = None):
  """The oracle's status per transition of `data` (collect_transitions with states), read from
  `labels_cache` when the very same transitions were labelled before; returns (status, cached)."""
  import numpy as np

  import envs
  from envs import oracle

  cache_path = None
  status = None
  num = len(data['actions'])
  if labels_cache:
    # Collection is deterministic given (env, options, seed, num): cache the oracle's labels.
    key = hashlib.sha1(json.dumps([env_name, env_options, num, seed, max_expansions, 'random'],
                                  sort_keys=True, default=str).encode()).hexdigest()[:16]
    cache_path = os.path.join(labels_cache, f'oracle-{env_name}-{key}.npz')
    # The labels are reused only for the very same transitions (e.g. not after a level set of
    # the environment changed): the digest covers every observation and action.
    digest = hashlib.sha1()
    for part in (data['obs'], data['next_obs'], data['actions']):
      digest.update(np.ascontiguousarray(part).tobytes())
    digest = digest.hexdigest()
    if os.path.isfile(cache_path):
      with np.load(cache_path, allow_pickle=False) as cached:
        if str(cached['digest']) == digest and len(cached['status']) == num:
          status = cached['status']
  if status is not None:
    return status, True
  oracle_env = envs.make(env_name, seed=seed, **env_options)
  results = oracle.label_transitions(oracle_env, data['states'], data['actions'],
                                     max_expansions=max_expansions)
  status = np.array([r.status for r in results])
  if cache_path:
    os.makedirs(labels_cache, exist_ok=True)
    with paths.atomic_write(cache_path, 'wb') as f:
      np.savez(f, status=status, digest=np.array(digest))
  return status, False


def _env_kinds(env) -> Tuple[str, ...]:
  import sys as _sys
  return tuple(getattr(_sys.modules[type(env).__module__], 'TRANSITION_KINDS', ()))


def transition_kinds(env, states, actions) -> List[str]:
  """The env's kind of each (state, action): the step replayed from `state` (the env is left
  in an arbitrary state)."""
  kinds = []
  for state, action in zip(states, actions):
    env.set_state(state)
    env.step(int(action))
    kinds.append(env.transition_kind(state, env.get_state()))
  return kinds


def clean_states_by_kind(env, predictor, psi_beta: float, phi_betas, max_expansions: int):
  """Every action from each of `env.clean_states()`, labelled by the oracle and split by kind:
  the states an agent that has ruined nothing stands in, which a random walk rarely visits."""
  import numpy as np

  from envs import oracle
  states, actions, obs, next_obs = [], [], [], []
  for state in env.clean_states():
    for a in range(int(env.action_spec().num_values)):
      env.set_state(state)
      obs.append(np.asarray(env.observation()))
      next_obs.append(np.asarray(env.step(a).observation))
      states.append(state)
      actions.append(a)
  obs, next_obs, actions = np.stack(obs), np.stack(next_obs), np.asarray(actions, np.int32)
  kinds = transition_kinds(env, states, actions)
  status = np.array([r.status for r in oracle.label_transitions(env, states, actions,
                                                                max_expansions=max_expansions)])
  known = status != oracle.UNKNOWN
  irr = status[known] == oracle.IRREVERSIBLE
  psi = predictor.psi(obs[known], next_obs[known])
  phi = target = None
  if predictor.ckpt.phi_params is not None:
    phi = predictor.phi(obs[known])[np.arange(int(known.sum())), actions[known]]
    target = predictor.phi_target(obs[known], next_obs[known])
  split = kinds_lib.by_kind([k for k, ok in zip(kinds, known) if ok], irr, psi, phi, psi_beta,
                            phi_betas, _env_kinds(env), phi_target=target)
  return {'transitions': int(known.sum()), 'unknown_dropped': int((~known).sum()),
          'by_kind': split}


def _oracle_env(env_name: str, env_options: dict, seed: int):
  """The environment to collect from and label: one the exact oracle can search (states it
  can get and set, deterministic steps), else a one-line EvaluateError."""
  import envs
  env = envs.make(env_name, seed=seed, **env_options)
  if not callable(getattr(env, 'get_state', None)) or not callable(getattr(env, 'set_state', None)):
    raise EvaluateError(f'environment {env_name!r} has no exact oracle (no get_state/set_state)')
  if not getattr(env, 'deterministic', True):
    raise EvaluateError(f'environment {env_name!r} with options {env_options} is stochastic: '
                        'the exact oracle needs a deterministic environment (e.g. cliff wind=0)')
  return env


def _split_by_kind(report: Dict[str, Any], env, predictor, data, known, irreversible, psi,
                   phi_taken, psi_beta: float, betas, max_expansions: int, out_dir: str) -> None:
  """Adds to `report` the scores per transition kind of the labelled random-policy transitions
  (and of every action from the env's clean states, where it has them), and writes them as
  OUT/by_kind.md."""
  from estimators import predict
  kinds_random = transition_kinds(env, [s for s, k in zip(data['states'], known) if k],
                                  data['actions'][known])
  target = (predictor.phi_target(data['obs'][known], data['next_obs'][known])
            if phi_taken is not None else None)
  report['by_kind'] = kinds_lib.by_kind(kinds_random, irreversible, psi, phi_taken, psi_beta,
                                        betas, _env_kinds(env), phi_target=target)
  report['phi_target'] = predictor.phi_target_name
  if callable(getattr(env, 'clean_states', None)):
    report['clean_by_kind'] = clean_states_by_kind(env, predictor, psi_beta, betas,
                                                   max_expansions)
  os.makedirs(out_dir, exist_ok=True)
  with open(os.path.join(out_dir, 'by_kind.md'), 'w') as fh:
    target_text = predict.PHI_TARGET_TEXT[predictor.phi_target_name]
    fh.write(kinds_lib.markdown(report['by_kind'], f'{int(known.sum())} random-policy '
                                'transitions (oracle-labelled), by kind', target_text) + '\n')
    if 'clean_by_kind' in report:
      fh.write(kinds_lib.markdown(report['clean_by_kind']['by_kind'],
                                  f"every action from every state with no ruined grass "
                                  f"({report['clean_by_kind']['transitions']} transitions), "
                                  'by kind', target_text))


def evaluate_discrete(ckpt, env_name: str, env_options: dict, num: int, psi_beta: float,
                      phi_beta: float, out_dir: str, max_expansions: int = 100_000,
                      seed: int = 0, num_bins: int = 10, batch: int = 4096,
                      labels_cache: Optional[str] = None,
                      phi_betas: Tuple[float, ...] = ()) -> Dict[str, Any]:
  import numpy as np

  from envs import oracle
  from estimators import predict

  env = _oracle_env(env_name, env_options, seed)
  predictor = predict.Predictor(ckpt, batch)
  t0 = time.time()
  data = collect_transitions(env, num, seed=seed, with_states=True)
  predictor.check_obs(data['obs'])  # shape mismatch with the checkpoint: fail before the oracle
  collect_s = time.time() - t0

  t0 = time.time()
  status, cached_labels = oracle_labels(env_name, env_options, data, seed, max_expansions,
                                        labels_cache)
  oracle_s = time.time() - t0
  known = status != oracle.UNKNOWN
  irreversible = status[known] == oracle.IRREVERSIBLE

  t0 = time.time()
  psi = predictor.psi(data['obs'][known], data['next_obs'][known])
  phi_all = predictor.phi(data['obs'][known]) if ckpt.phi_params is not None else None
  forward_s = time.time() - t0

  report: Dict[str, Any] = {
      'env': env_name, 'env_options': env_options, 'policy': 'random', 'seed': seed,
      'transitions': int(num), 'episodes': data['episodes'],
      'labels': {'reversible': int(np.sum(status == oracle.REVERSIBLE)),
                 'irreversible': int(np.sum(status == oracle.IRREVERSIBLE)),
                 'unknown_dropped': int(np.sum(~known))},
      'evaluated': int(known.sum()),
      'terminal_transitions': int(data['terminal'].sum()),
      'max_expansions': max_expansions, 'psi_beta': psi_beta, 'phi_beta': phi_beta,
      'psi': score(psi, irreversible, psi > psi_beta, num_bins),
      'phi': None,
      'seconds': {'collect': collect_s, 'oracle': oracle_s, 'forward': forward_s},
      'oracle_labels_cached': cached_labels,
  }
  phi_taken = (phi_all[np.arange(len(phi_all)), data['actions'][known]]
               if phi_all is not None else None)
  if callable(getattr(env, 'transition_kind', None)):
    _split_by_kind(report, env, predictor, data, known, irreversible, psi, phi_taken, psi_beta,
                   sorted({phi_beta, *phi_betas}), max_expansions, out_dir)
  panels = [{'name': 'psi(x, x\')', 'calibration': report['psi']['calibration'],
             'auroc': _finite(report['psi']['auroc'])}]
  if phi_all is not None:
    report['phi'] = score(1.0 - phi_taken, irreversible, phi_taken < phi_beta, num_bins)
    report['phi']['note'] = 'scores are 1 - phi(x, a); predicted irreversible: phi < phi_beta'
    panels.append({'name': '1 - phi(x, a)', 'calibration': report['phi']['calibration'],
                   'auroc': _finite(report['phi']['auroc'])})
  os.makedirs(out_dir, exist_ok=True)
  report['calibration_png'] = calibration_plot(
      os.path.join(out_dir, 'calibration.png'), panels,
      f'{env_name}: {int(known.sum())} random-policy transitions, '
      f'{int(irreversible.sum())} irreversible (oracle)')
  return report


def _cartpole_grid(predictor, n: int = 61):
  import numpy as np
  theta = np.linspace(-0.21, 0.21, n)
  theta_dot = np.linspace(-2.0, 2.0, n)
  tt, dd = np.meshgrid(theta, theta_dot)
  obs = np.stack([np.zeros(tt.size), np.zeros(tt.size), tt.ravel(), dd.ravel()], axis=1)
  phi = predictor.phi(obs.astype(np.float32))
  return theta, theta_dot, phi.reshape(n, n, -1)


def _cartpole_scatter(path: str, obs, values, label: str, title: str) -> str:
  """Cartpole states coloured by `values`. Left: the paper's view (pole tip relative to the
  cart); right: (theta, theta_dot), where states with the same angle but different angular
  velocities no longer overlap."""
  import numpy as np
  plt = _plt()
  theta = obs[:, 2].astype(np.float64)
  theta_dot = obs[:, 3].astype(np.float64)
  tip_x = CARTPOLE_POLE_LENGTH * np.sin(theta)
  tip_y = CARTPOLE_POLE_LENGTH * np.cos(theta)
  fig, axes = plt.subplots(1, 2, figsize=(10.5, 4.3))
  order = np.argsort(np.abs(values - 0.5))  # extreme values drawn last, on top
  for ax, (x, y, xl, yl) in zip(axes, (
      (tip_x, tip_y, 'pole tip x relative to the cart (l sin theta)', 'pole tip y (l cos theta)'),
      (theta, theta_dot, 'theta (rad)', 'theta_dot (rad/s)'))):
    sc = ax.scatter(x[order], y[order], c=values[order], s=5, cmap='viridis', vmin=0.0,
                    vmax=1.0, linewidths=0)
    ax.set_xlabel(xl)
    ax.set_ylabel(yl)
  fig.colorbar(sc, ax=axes, label=label)
  fig.suptitle(title)
  fig.savefig(path, dpi=110)
  plt.close(fig)
  return path


def _cartpole_phi_grid_png(predictor, path: str) -> str:
  """phi(., 0) - phi(., 1) over a (theta, theta_dot) grid at x = x_dot = 0."""
  import numpy as np
  plt = _plt()
  th, thd, grid = _cartpole_grid(predictor)
  fig, ax = plt.subplots(figsize=(5.6, 4.4))
  diff = grid[..., 0] - grid[..., 1]
  lim = max(1e-6, float(np.abs(diff).max()))
  im = ax.pcolormesh(th, thd, diff, cmap='RdBu', vmin=-lim, vmax=lim, shading='auto')
  fig.colorbar(im, ax=ax, label='phi(x, 0) - phi(x, 1)')
  ax.set_xlabel('theta (rad)')
  ax.set_ylabel('theta_dot (rad/s)')
  ax.set_title('Cartpole (x = x_dot = 0): left minus right reversibility')
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)
  return path


def _cartpole_phi(predictor, data, phi, phi_beta: float, out_dir: str,
                  pngs: Dict[str, str]) -> Dict[str, Any]:
  """phi's part of the Cartpole report (the physical check: does pushing the cart towards the
  side the pole leans to look more reversible?); its pictures are added to `pngs`."""
  import numpy as np

  from estimators import metrics
  theta = data['obs'][:, 2].astype(np.float64)
  lean_left, lean_right = theta < 0, theta > 0
  agree = np.concatenate([phi[lean_left, 0] > phi[lean_left, 1],
                          phi[lean_right, 1] > phi[lean_right, 0]])
  phi_taken = phi[np.arange(len(phi)), data['actions']]
  for a, name in ((0, 'left'), (1, 'right')):
    pngs[f'phi_action{a}'] = _cartpole_scatter(
        os.path.join(out_dir, f'cartpole_phi_action{a}.png'), data['obs'], phi[:, a],
        f'phi(x, a={a})', f'Cartpole: reversibility of action {a} (push {name})')
  pngs['phi_grid'] = _cartpole_phi_grid_png(predictor,
                                            os.path.join(out_dir, 'cartpole_phi_grid.png'))
  return {
      'mean_per_action': phi.mean(axis=0),
      'fraction_below_beta_per_action': np.mean(phi < phi_beta, axis=0),
      'lean_agreement': float(agree.mean()) if agree.size else None,
      'lean_agreement_note': 'fraction of states where pushing the cart towards the side the '
                             'pole leans to (theta<0: a=0, theta>0: a=1) has the higher phi',
      'terminal_auroc': metrics.auroc(1.0 - phi_taken, data['terminal']),
  }


def evaluate_cartpole(ckpt, env_options: dict, num: int, psi_beta: float, phi_beta: float,
                      out_dir: str, seed: int = 0, batch: int = 4096) -> Dict[str, Any]:
  import numpy as np

  import envs
  from estimators import metrics, predict

  env = envs.make('cartpole', seed=seed, **env_options)
  predictor = predict.Predictor(ckpt, batch)
  t0 = time.time()
  data = collect_transitions(env, num, seed=seed, with_states=False)
  predictor.check_obs(data['obs'])
  collect_s = time.time() - t0
  t0 = time.time()
  psi = predictor.psi(data['obs'], data['next_obs'])
  phi = predictor.phi(data['obs']) if ckpt.phi_params is not None else None
  forward_s = time.time() - t0

  terminal = data['terminal']
  os.makedirs(out_dir, exist_ok=True)
  report: Dict[str, Any] = {
      'env': 'cartpole', 'env_options': env_options, 'policy': 'random', 'seed': seed,
      'transitions': int(num), 'episodes': data['episodes'],
      'terminal_transitions': int(terminal.sum()), 'psi_beta': psi_beta, 'phi_beta': phi_beta,
      'pole_length': CARTPOLE_POLE_LENGTH,
      'psi': {'mean': float(psi.mean()), 'fraction_above_beta': float(np.mean(psi > psi_beta)),
              'mean_terminal': float(psi[terminal].mean()) if terminal.any() else None,
              'mean_non_terminal': float(psi[~terminal].mean()) if (~terminal).any() else None,
              'terminal_auroc': metrics.auroc(psi, terminal)},
      'phi': None,
      'seconds': {'collect': collect_s, 'forward': forward_s},
  }
  pngs = {'psi': _cartpole_scatter(os.path.join(out_dir, 'cartpole_psi.png'), data['obs'], psi,
                                   'psi(x_t, x_t+1)', 'Cartpole: psi of random-policy transitions')}
  if phi is not None:
    report['phi'] = _cartpole_phi(predictor, data, phi, phi_beta, out_dir, pngs)
  report['pngs'] = pngs
  return report


def report_dir(f: EvaluateOptions) -> str:
  """Where the report goes: --out, else beside the checkpoint (CHECKPOINT.eval)."""
  return f.out or (os.path.abspath(f.checkpoint) + '.eval')


def check_flags(f):
  """Every argument that can be judged on its own, in one place: a bad one is a one-line
  EvaluateError before the checkpoint is loaded or any transition collected."""
  from estimators import dataset
  if not f.checkpoint:
    raise EvaluateError('--checkpoint is required')
  if not f.env:
    raise EvaluateError('--env is required')
  for name, low in (('transitions', 1), ('num_bins', 1), ('max_expansions', 1), ('batch', 1),
                    ('seed', 0)):
    if getattr(f, name) < low:
      raise EvaluateError(f'--{name} must be >= {low}, got {getattr(f, name)}')
  for name in ('beta', 'phi_beta'):   # thresholds on probabilities
    value = getattr(f, name)
    if value is not None and not 0.0 <= value <= 1.0:   # also refuses nan
      raise EvaluateError(f'--{name} is a probability threshold and must lie in [0, 1], '
                          f'got {value}')
  outputs = (('out', report_dir(f)),
             ('labels_cache', f.labels_cache))
  for name, path in outputs:   # directories: something must be creatable inside them
    problem = path and dataset.unwritable_reason(os.path.join(path, 'report.json'))
    if problem:
      raise EvaluateError(f'cannot write --{name} {os.path.abspath(path)}: {problem}')


def parse_betas(values) -> Tuple[float, ...]:
  """--phi_betas as floats in [0, 1]; one-line EvaluateError otherwise."""
  out = []
  for v in values or ():
    try:
      b = float(v)
    except ValueError:
      raise EvaluateError(f'--phi_betas expects comma-separated numbers, got {v!r}') from None
    if not 0.0 <= b <= 1.0:
      raise EvaluateError(f'--phi_betas are probability thresholds in [0, 1], got {v}')
    out.append(b)
  return tuple(out)


def run(f: EvaluateOptions) -> Dict[str, Any]:
  """Evaluates what `f` says; writes OUT/report.json and returns the report."""
  import envs
  from estimators import checkpoint
  check_flags(f)
  parse_betas(f.phi_betas)
  options = envs.parse_options(f.env_option)
  envs.env_class(f.env)  # unknown name: EnvError
  ckpt = checkpoint.load(f.checkpoint)
  trained_on = ckpt.metadata.get('env_name')
  if trained_on and trained_on != f.env:
    print(f'warning: the checkpoint was trained on {trained_on!r}, evaluating on {f.env!r}',
          file=sys.stderr)
  psi_beta, phi_beta = default_betas(f.env, f.beta, f.phi_beta)
  out = report_dir(f)
  if f.env == 'cartpole':
    report = evaluate_cartpole(ckpt, options, f.transitions, psi_beta, phi_beta, out,
                               seed=f.seed, batch=f.batch)
  else:
    report = evaluate_discrete(ckpt, f.env, options, f.transitions, psi_beta, phi_beta, out,
                               max_expansions=f.max_expansions, seed=f.seed,
                               num_bins=f.num_bins, batch=f.batch, labels_cache=f.labels_cache,
                               phi_betas=parse_betas(f.phi_betas))
  report['checkpoint'] = os.path.abspath(f.checkpoint)
  report['checkpoint_metadata'] = {k: ckpt.metadata.get(k) for k in (
      'env_name', 'window', 'num_pairs', 'psi_accuracy', 'phi_trained')}
  report = _clean(report)
  path = os.path.join(out, 'report.json')
  paths.write_json(path, report)
  report['report_json'] = path
  return report


def summary_line(report: Dict[str, Any]) -> str:
  def fmt(v):
    return 'n/a' if v is None else f'{v:.3f}'
  if report['env'] == 'cartpole':
    phi = report.get('phi') or {}
    return (f"cartpole: {report['transitions']} transitions; psi terminal AUROC "
            f"{fmt(report['psi'].get('terminal_auroc'))}; phi lean agreement "
            f"{fmt(phi.get('lean_agreement'))}")
  phi = report.get('phi') or {}
  return (f"{report['env']}: {report['evaluated']} labelled transitions "
          f"({report['labels']['irreversible']} irreversible, {report['labels']['unknown_dropped']} "
          f"unknown dropped); psi AUROC {fmt(report['psi']['auroc'])}, P/R@{report['psi_beta']} "
          f"{fmt(report['psi']['precision'])}/{fmt(report['psi']['recall'])}; phi AUROC "
          f"{fmt(phi.get('auroc'))}")


def main(argv):
  cli.quiet_logs(FLAGS)
  if cli.unexpected_arguments(argv):
    return 2
  import envs
  from estimators.checkpoint import CheckpointError
  from estimators.predict import PredictError
  try:
    report = run(cli.options_from_flags(EvaluateOptions, FLAGS))
  except (EvaluateError, CheckpointError, PredictError, envs.EnvError) as e:
    print(f'error: {e}', file=sys.stderr)
    return 2
  except ValueError as e:  # e.g. the oracle refusing a stochastic env
    print(f'error: {str(e).splitlines()[0] if str(e) else type(e).__name__}', file=sys.stderr)
    return 2
  except OSError as e:
    print(f'error: {e}', file=sys.stderr)
    return 2
  printable = {k: v for k, v in report.items()}
  for key in ('psi', 'phi'):
    if isinstance(printable.get(key), dict):
      printable[key] = {k: v for k, v in printable[key].items() if k != 'calibration'}
  print(json.dumps(printable, indent=2))
  print(summary_line(report))
  return 0


if __name__ == '__main__':
  define_flags()
  app.run(main)

"""The estimators' scores split by transition kind (e.g. Turf's `TRANSITION_KINDS`): which kind
of transition psi and phi get wrong, rather than one AUROC over all of them.

    split = by_kind(kinds, irreversible, psi, phi_taken, psi_beta=0.8, phi_betas=(0.2, 0.3))

Per kind: its count and how many the oracle labels irreversible; psi's mean and its AUROC
twice: within the kind (NaN when the kind is all one class, e.g. Turf's bumps) and "against
every reversible transition" (the kind's irreversible transitions as positives, the reversible
transitions of all kinds as negatives: can psi tell this kind's irreversible steps from the
safe ones?); and for phi(x, a) of the action taken, at each beta, what "phi < beta" flags
within the kind: precision, recall (of the kind's irreversible transitions) and the fraction of
the kind's reversible transitions flagged (what RAC would forbid needlessly). With
`phi_target` (what phi is regressed onto: psi(x', x), or 1 - psi(x, x') as in the authors'
code) the same figures for "target < beta": what a phi that fitted its target exactly would
flag, which tells a psi problem from a phi one. Kinds
named in `kinds_order` come first, in that order; other kinds follow as met.
"""
from typing import Any, Dict, Optional, Sequence

import numpy as np

from estimators import metrics


def _fraction(mask: np.ndarray) -> Optional[float]:
  return float(mask.mean()) if mask.size else None


def _kind_phi(phi: np.ndarray, irr: np.ndarray, beta: float) -> Dict[str, Any]:
  flagged = phi < beta
  pr = metrics.precision_recall(flagged, irr)
  return {'beta': float(beta), 'flagged': int(flagged.sum()), 'precision': pr['precision'],
          'recall': pr['recall'],
          'reversible_flagged': _fraction(flagged[~irr])}


def by_kind(kinds: Sequence[str], irreversible, psi=None, phi_taken=None, psi_beta: float = 0.5,
            phi_betas: Sequence[float] = (), kinds_order: Sequence[str] = (),
            phi_target=None) -> Dict[str, Any]:
  """{kind: figures} for the transitions labelled `irreversible` (bool) with their kind, psi
  scores and phi of the action taken (either may be None); see the module docstring."""
  kinds = np.asarray(kinds, dtype=object)
  irr = np.asarray(irreversible, bool)
  if kinds.shape != irr.shape:
    raise ValueError(f'{len(kinds)} kinds but {len(irr)} labels')
  psi = None if psi is None else np.asarray(psi, np.float64)
  phi = None if phi_taken is None else np.asarray(phi_taken, np.float64)
  target = None if phi_target is None else np.asarray(phi_target, np.float64)
  for name, values in (('psi', psi), ('phi', phi), ('phi_target', target)):
    if values is not None and values.shape != irr.shape:
      raise ValueError(f'{len(values)} {name} scores but {len(irr)} labels')
  seen = list(dict.fromkeys(kinds.tolist()))
  order = [k for k in kinds_order if k in seen] + [k for k in seen if k not in kinds_order]
  out: Dict[str, Any] = {}
  for kind in order:
    m = kinds == kind
    k_irr = irr[m]
    entry: Dict[str, Any] = {'count': int(m.sum()), 'irreversible': int(k_irr.sum())}
    if psi is not None:
      k_psi = psi[m]
      vs_rev = m & irr | ~irr   # this kind's irreversible transitions and every reversible one
      entry['psi'] = {
          'mean': float(k_psi.mean()),
          'auroc_within': metrics.auroc(k_psi, k_irr),
          'auroc_vs_reversible': (metrics.auroc(psi[vs_rev], irr[vs_rev]) if k_irr.any()
                                  else float('nan')),
          'above_beta': _fraction(k_psi > psi_beta), 'beta': float(psi_beta)}
    if phi is not None:
      k_phi = phi[m]
      entry['phi'] = {'mean': float(k_phi.mean()),
                      'auroc_within': metrics.auroc(1.0 - k_phi, k_irr),
                      'at_beta': [_kind_phi(k_phi, k_irr, b) for b in phi_betas]}
    if target is not None:
      k_t = target[m]
      entry['phi_target'] = {'mean': float(k_t.mean()),
                             'at_beta': [_kind_phi(k_t, k_irr, b) for b in phi_betas]}
    out[kind] = entry
  return out


def _f(v, digits: int = 3) -> str:
  return '–' if v is None or v != v else f'{v:.{digits}f}'


def markdown(split: Dict[str, Any], title: str, target_text: str = "psi(x', x)") -> str:
  """A table of `by_kind`'s output: one row per kind; `target_text` names phi's target."""
  betas = []
  for entry in split.values():
    betas = [b['beta'] for b in entry.get('phi', {}).get('at_beta', [])] or betas
  targets = any('phi_target' in e for e in split.values())
  head = ['kind', 'n', 'irreversible', 'psi mean', 'psi AUROC vs reversible', 'psi AUROC within',
          'phi mean'] + [f'phi<{b:g}: P / R / reversible flagged' for b in betas]
  if targets:
    head += [f"phi's target {target_text} mean"] + [f'target<{b:g}: R / reversible flagged'
                                                 for b in betas]
  lines = [f'**{title}**', '', '| ' + ' | '.join(head) + ' |', '|' + '---|' * len(head)]
  for kind, e in split.items():
    psi, phi = e.get('psi', {}), e.get('phi', {})
    cells = [kind, str(e['count']), str(e['irreversible']), _f(psi.get('mean')),
             _f(psi.get('auroc_vs_reversible')), _f(psi.get('auroc_within')), _f(phi.get('mean'))]
    cells += [f"{_f(b['precision'], 2)} / {_f(b['recall'], 2)} / {_f(b['reversible_flagged'], 2)}"
              for b in phi.get('at_beta', [])]
    if targets:
      t = e.get('phi_target', {})
      cells += [_f(t.get('mean'))] + [f"{_f(b['recall'], 2)} / {_f(b['reversible_flagged'], 2)}"
                                      for b in t.get('at_beta', [])]
    lines.append('| ' + ' | '.join(cells) + ' |')
  return '\n'.join(lines) + '\n'

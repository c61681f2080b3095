"""psi of a Sokoban experiment against the exact oracle, on random transitions of each level set
it was scored on, and along a solution (Fig. 5c): a section of the Sokoban pages. Its steps:
`experiments.sokoban.sokoban_psi_steps`."""
import os

# (checkpoint suffix, label) of the Sokoban comparison's two psi, and (eval name, label) of the
# level sets it scores them on.
SOKOBAN_PSIS = (('', 'Sokoban preset (early fusion, SAME, 32 channels)'),
                ('_paper', "the paper's network (App. C.3)"))
SOKOBAN_PSI_SETS = (('train_levels', 'training set (1k)'), ('boxoban', 'Boxoban, never seen'))


def sokoban_psi_markdown(table: dict, out: str, psis=SOKOBAN_PSIS,
                         sets=SOKOBAN_PSI_SETS) -> str:
  """Each of `psis` against the exact oracle on each of `sets`, and along a solution."""
  from experiments.pages import read_json
  read = lambda path: read_json(os.path.join(out, path))  # noqa: E731
  lines = ['## psi against the exact oracle (random transitions, beta = 0.9)', '',
           '| psi | levels | labelled transitions | irreversible | AUROC | precision at beta | '
           'recall at beta |', '|---|---|---|---|---|---|---|']
  num = lambda v: '–' if v is None else f'{v:.3f}'  # noqa: E731  (None: no irreversible drawn)
  for suffix, psi_name in psis:
    for name, label in sets:
      r = read(f'psi_eval{suffix}/{name}/report.json')
      if r is None:
        lines.append(f'| {psi_name} | {label} | – | – | – | – | – |')
        continue
      psi = r['psi']
      lines.append(f"| {psi_name} | {label} | {r['evaluated']} | {r['labels']['irreversible']} | "
                   f"{num(psi['auroc'])} | {num(psi['precision'])} | {num(psi['recall'])} |")
  for suffix, psi_name in psis:
    trace = read(f'psi_eval{suffix}/trace.json')
    if trace is not None:
      t = trace['summary']
      lines += ['', f"{psi_name[0].upper() + psi_name[1:]}, along a solution of level 0 "
                f"(`psi_trace{suffix}.png`, Fig. 5c): {t['steps']} steps, {t['irreversible']} "
                f"irreversible by the oracle, {t['irreversible_above_beta']} of them with psi > "
                f"beta, {t['psi_above_beta'] - t['irreversible_above_beta']} reversible steps "
                f"above beta.", '', f'![psi along a solution](psi_trace{suffix}.png)']
  return '\n'.join(lines) + '\n'

"""One table from the leak study's outputs: corner_*.json (clean map), in_data_*.json (the random
data's own entries) and eval/NAME/report.json (10,000 oracle-labelled random transitions).
Usage: summarize.py OUT.md NAME=CKPT..."""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CORNER = [((1, 8), 'right'), ((1, 8), 'down'), ((2, 7), 'down'), ((0, 8), 'left'),
          ((2, 7), 'right'), ((9, 0), 'right'), ((1, 8), 'up')]
IN_DATA = ['(1, 8)->(1, 9)', '(1, 8)->(2, 8)', '(2, 7)->(2, 8)', '(0, 8)->(0, 7)']


def load(path):
  with open(path) as f:
    return json.load(f)


corner, in_data = {}, {}
for name in os.listdir(HERE):
  if name.startswith('corner_') and name.endswith('.json'):
    corner.update(load(os.path.join(HERE, name)))
  if name.startswith('in_data_') and name.endswith('.json'):
    in_data.update(load(os.path.join(HERE, name)))
head = ('| variant | psi(x, x\'), clean map: ' + ' / '.join(f'{c} {a}' for c, a in CORNER)
        + ' | in the data, mean psi (n): ' + ' / '.join(IN_DATA)
        + ' | psi AUROC | AUROC enter fresh grass | AUROC leave fresh grass | stone: mean psi, share > 0.8 | goal: mean psi |')
lines = [head, '|' + '---|' * 8]
for item in sys.argv[2:]:
  name, ckpt = item.split('=', 1)
  rows = {(tuple(r['cell']), r['action']): r for r in corner.get(ckpt, [])}
  cells = ' / '.join(f"{rows[(c, a)]['psi_forward']:.3f}" if (c, a) in rows else '–'
                     for c, a in CORNER)
  d = in_data.get(ckpt, {})
  ind = ' / '.join(f"{d[m]['mean']:.3f} ({d[m]['n']})" if m in d else '–' for m in IN_DATA)
  rep_path = os.path.join(HERE, 'eval', name, 'report.json')
  if os.path.exists(rep_path):
    rep = load(rep_path)
    k = rep['by_kind']
    auroc = f"{rep['psi']['auroc']:.3f}" if 'auroc' in rep['psi'] else '–'
    ev = (f"{auroc} | {k['enter_fresh_grass']['psi']['auroc_vs_reversible']:.3f} | "
          f"{k['leave_fresh_grass']['psi']['auroc_vs_reversible']:.3f} | "
          f"{k['stone']['psi']['mean']:.3f}, {k['stone']['psi']['above_beta']:.3f} | "
          f"{k['goal']['psi']['mean']:.3f}")
  else:
    ev = '– | – | – | – | –'
  lines.append(f'| {name} (`{ckpt}`) | {cells} | {ind} | {ev} |')
text = '\n'.join(lines) + '\n'
print(text, end='')
with open(sys.argv[1], 'w') as f:
  f.write(text)

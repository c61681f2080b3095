#!/usr/bin/env bash
# The 30M-step Sokoban comparison (IMPALA vs IMPALA + RAE, 3 seeds), reached over many sessions:
# rerun this same script after every stop. It trains the preset psi once, then takes every run
# to 10M env steps, then 20M, then 30M (rungs keep the arms level while the budget is spent), then
# runs the whole experiment, which adds the final evaluations, GIFs and the page. Steps already
# done are skipped; a stopped run resumes from its checkpoint, or, on a machine that lacks the run,
# from the checkpoint committed in its export (RUN/csv, `launch.export_logs --checkpoint`).
#
#   nohup setsid bash scripts/sokoban_30m.sh > /dev/null 2>&1 &      # progress: OUT/experiment.log
#
# ROOT: the checkout whose code runs (a frozen copy keeps edits in the main one out of the runs);
# PY: its interpreter; OUT: where the runs live; NICE: the runs' niceness. From a frozen copy:
#
#   git worktree add --detach /work/frozen HEAD
#   ROOT=/work/frozen PY=$PWD/.venv/bin/python OUT=$PWD/results/sokoban_30m \
#     nohup setsid bash /work/frozen/scripts/sokoban_30m.sh > /dev/null 2>&1 &
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROOT="${ROOT:-$here}"
PY="${PY:-$ROOT/.venv/bin/python}"
OUT="${OUT:-$here/results/sokoban_30m}"
NICE="${NICE:-10}"
mkdir -p "$OUT"
log="$OUT/experiment.log"
cd "$ROOT" || exit 1
# The venv's .pth puts the checkout it was made in on sys.path, and Launchpad's node processes
# start from their own entry script, not from ROOT: PYTHONPATH puts ROOT's code first in all.
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
# A new machine has no venv yet: the project's own setup makes it (`make setup`, ~1-2 min).
if [ ! -x "$PY" ] && [ "$PY" = "$ROOT/.venv/bin/python" ]; then
  bash "$ROOT/scripts/setup_venv.sh" >> "$log" 2>&1 || { echo "setup failed: see $log" >&2; exit 1; }
fi

experiment() {
  echo "== $(date -u '+%F %T') launch.experiment $*" >> "$log"
  nice -n "$NICE" "$PY" -m launch.experiment sokoban --scale long --seeds 3 --out "$OUT" "$@" \
    >> "$log" 2>&1
}

# The random episodes only feed psi's training: a machine that has the committed psi skips them.
psi_steps='train_psi,eval_psi_*,psi_trace'
[ -f "$OUT/psi.ckpt" ] || psi_steps="collect_random,$psi_steps"
experiment --only "$psi_steps" || exit 1
for rung in 10000000 20000000 30000000; do
  experiment --max_steps "$rung" --only 'impala-s?,impala_rae-s?' || exit 1
done
# The whole experiment but the random episodes (psi is trained by now, perhaps on another machine).
experiment --only "train_psi,eval_psi_*,psi_trace,impala-s?*,impala_rae-s?*"

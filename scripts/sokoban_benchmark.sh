#!/usr/bin/env bash
# A Sokoban comparison (IMPALA vs IMPALA + RAE, 3 seeds) at one scale of `experiments
# sokoban`, reached over many sessions: rerun this same script after every stop. It takes the
# preset psi (trained once; a scale whose directory lacks it copies the one the 30M comparison
# committed, so every comparison's RAE arm uses the same psi), then takes every run to each rung
# of env steps in turn (rungs keep the arms level while the budget is spent), then runs the
# whole experiment, which adds the final evaluations, GIFs and the page. Steps already done are
# skipped; a stopped run resumes from its checkpoint, or, on a machine that lacks the run, from
# the checkpoint committed in its export (RUN/csv, `launch.export_logs --checkpoint`).
#
#   nohup setsid bash scripts/sokoban_benchmark.sh > /dev/null 2>&1 &   # progress: OUT/experiment.log
#   bash scripts/sokoban_benchmark_stop.sh     # before a session ends; then commit OUT
#
# SCALE: field_reuse (default: the Sokoban preset's agent, the recipe comparison's winner, to
# 30M, results/sokoban_field_reuse), authors (App. C.3's agent to 50M, results/sokoban_authors),
# long (the batch-16 agent to 30M, results/sokoban_30m), field (the field's recipe as its
# authors run it, to 30M, results/sokoban_field); or
# a scale of the recipe comparison (`python -m experiments sokoban_recipe`, one seed, no psi):
# small_rooms (7x7 rooms with 2 boxes to 5M, results/sokoban_recipe_small_rooms) or boxoban_1k
# (the 1k set to 10M, results/sokoban_recipe_1k); or a rung of the ladder of rooms
# (`python -m experiments sokoban_ladder`: 7x7_2boxes, 7x7_3boxes, 10x10_3boxes or 10x10_4boxes,
# results/sokoban_ladder_RUNG), its psi trained on the rung's own random episodes, its rungs of
# env steps 2.5M, 5M, 10M, 15M, 20M up to the rung's budget (LADDER_SCALES). A rung's budget is
# probed first with its IMPALA seed 0 alone (RUNS=impala-s0). ROOT: the checkout whose code runs (a frozen copy keeps edits in
# the main one out of the runs); PY: its interpreter; OUT: where the runs live; RUNS: the runs
# taken, in this order at every rung (default: both arms' 3 seeds; the authors scale's one-seed
# diagnostics are taken by naming them, e.g. RUNS="impala_drawn-s0 impala_drawn_haiku-s0
# impala_drawn_haiku_bytes-s0"); RUNGS: the env steps every run reaches before any goes further;
# NICE: the runs' niceness. From a frozen copy:
#
#   git worktree add --detach /work/frozen HEAD
#   ROOT=/work/frozen PY=$PWD/.venv/bin/python OUT=$PWD/results/sokoban_authors \
#     nohup setsid bash /work/frozen/scripts/sokoban_benchmark.sh > /dev/null 2>&1 &
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SCALE="${SCALE:-field_reuse}"
EXPERIMENT=sokoban
SEEDS=3
RECIPE_RUNS="field-s0 field_resnet-s0 field_lambda1-s0 preset-s0 field_mb32-s0 field_reuse4-s0 field_mb32_reuse4-s0"
case "$SCALE" in
  authors) default_out=sokoban_authors; default_rungs="10000000 20000000 30000000 40000000 50000000" ;;
  long) default_out=sokoban_30m; default_rungs="10000000 20000000 30000000" ;;
  field) default_out=sokoban_field; default_rungs="10000000 20000000 30000000" ;;
  field_reuse) default_out=sokoban_field_reuse; default_rungs="10000000 20000000 30000000" ;;
  small_rooms) EXPERIMENT=sokoban_recipe; SEEDS=1; default_out=sokoban_recipe_small_rooms
    default_rungs="1000000 2500000 5000000"; RUNS="${RUNS:-$RECIPE_RUNS}" ;;
  boxoban_1k) EXPERIMENT=sokoban_recipe; SEEDS=1; default_out=sokoban_recipe_1k
    default_rungs="2500000 5000000 10000000"; RUNS="${RUNS:-$RECIPE_RUNS}" ;;
  7x7_2boxes|7x7_3boxes|10x10_3boxes|10x10_4boxes) EXPERIMENT=sokoban_ladder
    default_out="sokoban_ladder_$SCALE"; default_rungs="2500000 5000000 10000000 15000000 20000000" ;;
  *) echo "error: SCALE=$SCALE is not a Sokoban benchmark scale (field_reuse, authors, long, field, small_rooms, boxoban_1k, or a ladder rung: 7x7_2boxes, 7x7_3boxes, 10x10_3boxes, 10x10_4boxes)" >&2; exit 2 ;;
esac
ROOT="${ROOT:-$here}"
PY="${PY:-$ROOT/.venv/bin/python}"
OUT="${OUT:-$here/results/$default_out}"
RUNGS="${RUNGS:-$default_rungs}"
RUNS="${RUNS:-impala-s0 impala_rae-s0 impala-s1 impala_rae-s1 impala-s2 impala_rae-s2}"
NICE="${NICE:-10}"
mkdir -p "$OUT"
log="$OUT/experiment.log"
# The stop script ends this chain, and no other, through its pid here.
echo $$ > "$OUT/chain.pid"
cd "$ROOT" || exit 1
# The venv's .pth puts the checkout it was made in on sys.path, and Launchpad's node processes
# start from their own entry script, not from ROOT: PYTHONPATH puts ROOT's code first in all.
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
# A new machine has no venv yet: the project's own setup makes it (`make setup`, ~1-2 min).
if [ ! -x "$PY" ] && [ "$PY" = "$ROOT/.venv/bin/python" ]; then
  bash "$ROOT/scripts/setup_venv.sh" >> "$log" 2>&1 || { echo "setup failed: see $log" >&2; exit 1; }
fi

experiment() {
  echo "== $(date -u '+%F %T') experiments $*" >> "$log"
  nice -n "$NICE" "$PY" -m experiments "$EXPERIMENT" --scale "$SCALE" --seeds "$SEEDS" --out "$OUT" "$@" \
    >> "$log" 2>&1
}

psi_steps=''
if [ "$EXPERIMENT" = sokoban_ladder ]; then
  # Each rung has its own psi, from its own random episodes. No run goes past the rung's budget:
  # the rungs above it give way to the budget itself.
  budget=$("$PY" -c "from experiments.sokoban_ladder import LADDER_SCALES as s; print(s['$SCALE']['max_steps'])") || exit 1
  RUNGS="$(for r in $RUNGS; do [ "$r" -lt "$budget" ] && echo "$r"; done) $budget"
elif [ "$EXPERIMENT" = sokoban ]; then
  # The same psi drives every comparison's RAE arm: the 30M comparison's, with its scores.
  shared_psi="$here/results/sokoban_30m"
  if [ ! -f "$OUT/psi.ckpt" ] && [ "$OUT" != "$shared_psi" ] && [ -f "$shared_psi/psi.ckpt" ]; then
    cp "$shared_psi/psi.ckpt" "$OUT/" && cp -r "$shared_psi/psi_eval" "$shared_psi/psi_trace.png" "$OUT/"
  fi
fi
if [ "$EXPERIMENT" != sokoban_recipe ]; then
  # psi before any run. The random episodes only feed psi's training: a machine that has the
  # psi skips them.
  psi_steps='train_psi,eval_psi_*,psi_trace'
  [ -f "$OUT/psi.ckpt" ] || psi_steps="collect_random,$psi_steps"
  experiment --only "$psi_steps" || exit 1
  psi_steps="train_psi,eval_psi_*,psi_trace,"
fi
# One run at a time, each exported with its newest checkpoint as soon as it reaches the rung: a
# session that ends without the stop script loses at most the run in flight, not the rung.
export_run() {
  # Nothing to do for a run that is not here, or whose export already holds its saved counts.
  [ -d "$OUT/runs/$1/logs" ] || return 0
  cmp -s "$OUT/runs/$1/counts.json" "$OUT/runs/$1/csv/counts.json" && return 0
  nice -n "$NICE" "$PY" -m launch.export_logs "$OUT/runs/$1" --checkpoint --replace --actor_every 4 \
    --digits 3 >> "$log" 2>&1
}
# The env steps a run has saved, here or in its export (0 for a run not begun).
saved_steps() {
  local f
  for f in "$OUT/runs/$1/counts.json" "$OUT/runs/$1/csv/counts.json"; do
    if [ -f "$f" ]; then
      sed -nE 's/.*"actor_steps": *([0-9]+).*/\1/p' "$f" | head -1
      return
    fi
  done
  echo 0
}
for rung in $RUNGS; do
  for run in $RUNS; do
    # A run already past the rung needs no launch of the experiment (each costs ~25 s).
    if [ "$(saved_steps "$run")" -lt "$rung" ]; then
      experiment --max_steps "$rung" --only "$run" || exit 1
    fi
    export_run "$run" || exit 1
  done
done
# These runs' final evaluations and the page; psi's steps are done by now (perhaps on another
# machine), so the random episodes are not collected again.
runs_and_evals=$(printf '%s*,' $RUNS)
experiment --only "$psi_steps${runs_and_evals%,}"

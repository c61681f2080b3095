#!/usr/bin/env bash
# Ends a session of a Sokoban comparison (scripts/sokoban_benchmark.sh) so that any machine
# can take it on: asks the run in flight to stop (its learner saves its last step), waits for the
# chain to end, exports every run with its newest checkpoint into RUN/csv (launch.export_logs
# --checkpoint --replace; a run with no env steps saved yet is removed instead), and redraws the
# page. Then commit OUT.
#
#   bash scripts/sokoban_benchmark_stop.sh
#
# SCALE: as the benchmark script's; PY: the interpreter (default: this
# checkout's .venv); OUT: where the runs live (default: the scale's).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PY:-$here/.venv/bin/python}"
SCALE="${SCALE:-field_reuse}"
EXPERIMENT=sokoban
SEEDS=3
case "$SCALE" in
  authors) default_out=sokoban_authors ;;
  long) default_out=sokoban_30m ;;
  field) default_out=sokoban_field ;;
  field_reuse) default_out=sokoban_field_reuse ;;
  small_rooms) EXPERIMENT=sokoban_recipe; SEEDS=1; default_out=sokoban_recipe_small_rooms ;;
  boxoban_1k) EXPERIMENT=sokoban_recipe; SEEDS=1; default_out=sokoban_recipe_1k ;;
  7x7_2boxes|7x7_3boxes|10x10_3boxes|10x10_4boxes) EXPERIMENT=sokoban_ladder
    default_out="sokoban_ladder_$SCALE" ;;
  *) echo "error: SCALE=$SCALE is not a Sokoban benchmark scale (field_reuse, authors, long, field, small_rooms, boxoban_1k, or a ladder rung: 7x7_2boxes, 7x7_3boxes, 10x10_3boxes, 10x10_4boxes)" >&2; exit 2 ;;
esac
OUT="${OUT:-$here/results/$default_out}"
cd "$here" || exit 1

# Every launch.train of OUT's runs is asked to stop (a launcher left behind by an earlier run
# counts too: waiting on it alone once held a stop past its session's end), then waited for.
stop_runs() {
  local line run pid pids=()
  while read -r line; do
    [ -n "$line" ] || continue
    pid=${line%% *}
    run=$(sed -E 's/.*--run_dir ([^ ]+).*/\1/' <<< "$line")
    echo "asking $run (pid $pid) to stop"
    "$PY" -c 'import sys; from launch.runtime import run_state; run_state.RunRecords(sys.argv[1]).request_stop()' "$run"
    pids+=("$pid")
  done < <(pgrep -af 'launch\.train --run_dir' | grep -F "$OUT/runs/")
  for pid in "${pids[@]}"; do
    for _ in $(seq 120); do kill -0 "$pid" 2>/dev/null || break; sleep 5; done
    if kill -0 "$pid" 2>/dev/null; then echo "error: pid $pid still running after 10 min" >&2; exit 1; fi
  done
}

# The chain starts the next run once one ends: stop it first (the run in flight goes on), then
# the run, so nothing new starts.
chain=$(cat "$OUT/chain.pid" 2>/dev/null)
if [ -n "$chain" ] && grep -qs 'sokoban_benchmark\.sh' "/proc/$chain/cmdline"; then
  kill "$chain" && echo "stopped the chain script (pid $chain)"
fi
stop_runs
while pgrep -f "launch\.experiment $EXPERIMENT .*--out $OUT" > /dev/null; do sleep 2; done

for run in "$OUT"/runs/*/; do
  run=${run%/}
  [ -f "$run/config.json" ] && [ -d "$run/logs" ] || continue
  # A run stopped before its first saved step holds nothing to keep, and its export would put a
  # 0-step run on the page; the next start begins it afresh, which is the same thing.
  if [ ! -d "$run/csv" ] && "$PY" -c 'import sys; from launch.runtime import run_state
sys.exit(run_state.RunRecords(sys.argv[1]).saved_actor_steps() > 0)' "$run"; then
    echo "$(basename "$run"): no env steps saved yet; its directory removed, not exported"
    rm -rf "$run"
    continue
  fi
  # The benchmark script exports each run that reaches a rung: only the one stopped is left.
  if cmp -s "$run/counts.json" "$run/csv/counts.json"; then
    echo "$(basename "$run"): its export holds its saved steps already"
    continue
  fi
  "$PY" -m launch.export_logs "$run" --checkpoint --replace --actor_every 4 --digits 3 \
    | sed "s|^|$(basename "$run"): |" || exit 1
done
"$PY" -m experiments "$EXPERIMENT" --scale "$SCALE" --seeds "$SEEDS" --out "$OUT" --report_only > /dev/null || exit 1
echo "exported; now: git add $OUT && git commit"

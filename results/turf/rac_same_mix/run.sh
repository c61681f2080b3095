#!/bin/bash
# IMPALA + RAC at beta 0.2 behind phi from the SAME psi trained on the start=stone mix
# (results/turf/leak/README.md), 3 seeds with the learner's mask, then 3 without; resumable
# (a finished run is skipped, a stopped one resumed).
# Usage: ROOT=<code tree> PY=<python> bash results/turf/rac_same_mix/run.sh
set -u
ROOT=${ROOT:-.}; PY=${PY:-python}
OUT=$(cd "$(dirname "$0")" && pwd)
CKPT=$OUT/../leak/same_mix_phi_s1.ckpt
for arm in mask nomask; do
  for seed in 0 1 2; do
    name=impala_rac$([ $arm = mask ] && echo _mask)-b0.2-s$seed
    dir=$OUT/runs/$name
    extra=(); [ $arm = mask ] && extra=(--learner_mask)
    resume=(); [ -f "$dir/config.pkl" ] && resume=(--resume)
    (cd "$ROOT" && PYTHONPATH=$ROOT $PY -m launch.train --run_dir "$dir" --seed $seed \
      --max_steps 500000 --env turf --num_actors 2 --envs_per_actor 8 --mode rac \
      --estimator_checkpoint "$CKPT" --beta 0.2 "${extra[@]}" "${resume[@]}" --noprogress) \
      >> "$OUT/logs/$name.log" 2>&1
  done
done

#!/bin/bash
# The beta sweep behind the mask (Fig. 7): IMPALA + RAC with --learner_mask at beta 0, 0.1, 0.3,
# 0.4 and 0.5, seed 0, with the flags of run.sh; resumable like it.
# Usage: ROOT=<code tree> PY=<python> bash results/turf/rac_same_mix/sweep.sh
set -u
ROOT=${ROOT:-.}; PY=${PY:-python}
OUT=$(cd "$(dirname "$0")" && pwd)
CKPT=$OUT/../leak/same_mix_phi_s1.ckpt
for beta in 0 0.1 0.3 0.4 0.5; do
  name=impala_rac_mask-b$beta-s0
  dir=$OUT/runs/$name
  resume=(); [ -f "$dir/config.pkl" ] && resume=(--resume)
  (cd "$ROOT" && PYTHONPATH=$ROOT $PY -m launch.train --run_dir "$dir" --seed 0 \
    --max_steps 500000 --env turf --num_actors 2 --envs_per_actor 8 --mode rac \
    --estimator_checkpoint "$CKPT" --beta $beta --learner_mask "${resume[@]}" --noprogress) \
    >> "$OUT/logs/$name.log" 2>&1
done

#!/bin/bash
# IMPALA + RAC behind phi from the SAME psi trained on the start=stone mix
# (results/turf/leak/README.md): at beta 0.2, 3 seeds with the learner's mask, then 3 without;
# then the beta sweep with the mask (Fig. 7: 0, 0.1, 0.3, 0.4, 0.5, seed 0). Resumable: a
# finished run is skipped, a stopped one resumed.
# Usage: ROOT=<code tree> PY=<python> bash results/turf/rac_same_mix/run.sh
set -u
ROOT=${ROOT:-.}; PY=${PY:-python}
OUT=$(cd "$(dirname "$0")" && pwd)
CKPT=$OUT/../leak/same_mix_phi_s1.ckpt
train() {  # train BETA SEED mask|nomask
  local beta=$1 seed=$2 arm=$3
  local name=impala_rac$([ $arm = mask ] && echo _mask)-b$beta-s$seed
  local dir=$OUT/runs/$name extra=() resume=()
  [ $arm = mask ] && extra=(--learner_mask)
  [ -f "$dir/config.pkl" ] && resume=(--resume)
  (cd "$ROOT" && PYTHONPATH=$ROOT $PY -m launch.train --run_dir "$dir" --seed $seed \
    --max_steps 500000 --env turf --num_actors 2 --envs_per_actor 8 --mode rac \
    --estimator_checkpoint "$CKPT" --beta $beta "${extra[@]}" "${resume[@]}" --noprogress) \
    >> "$OUT/logs/$name.log" 2>&1
}
for arm in mask nomask; do
  for seed in 0 1 2; do train 0.2 $seed $arm; done
done
for beta in 0 0.1 0.3 0.4 0.5; do train $beta 0 mask; done

#!/usr/bin/env bash
# MaskablePPO (SB3-contrib) on Turf behind our RAC shield (experiments.sb3_shield): the same_mix
# estimators at beta 0.2, 3 seeds x 500k env steps, side by side (RESULTS.md). Makes the
# estimators first when they are missing. Rerunning resumes each seed from its model.zip; a
# finished seed (summary.json at 500k steps) is skipped. Needs `make setup-sb3`.
# Usage: bash scripts/turf_sb3_shield.sh   (OUT=results/turf_gym by default)
set -u
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="${PY:-$root/.venv/bin/python}"
out="${OUT:-$root/results/turf_gym}"
ckpt="$out/same_mix/estimators.ckpt"
cd "$root"
if [ ! -f "$ckpt" ]; then
  "$py" -m experiments turf --scale same_mix --only 'collect_*,train_*' --out "$out/same_mix" || exit 1
fi
for seed in 0 1 2; do
  dir="$out/sb3_rac/s$seed"
  if [ -f "$dir/summary.json" ] && "$py" -c 'import json,sys; sys.exit(json.load(open(sys.argv[1]))["env_steps"] < 500000)' "$dir/summary.json"; then
    continue
  fi
  mkdir -p "$dir"
  nice -n 10 "$py" -m experiments.sb3_shield --checkpoint "$ckpt" --beta 0.2 --steps 500000 \
    --seed "$seed" --out "$dir" >> "$dir/log.txt" 2>&1 &
done
wait

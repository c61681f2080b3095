#!/usr/bin/env bash
# The learner's speed on a GPU host that has Python 3.12 and a current jax[cuda12] but nothing of
# this project's stack (no Python 3.10, TensorFlow, Launchpad or Reverb) and no network: installs
# the small wheels carried in ./wheels (haiku, optax, chex, rlax and what they need besides jax,
# numpy and scipy; made on the dev machine with
#   python3 -m pip download --only-binary=:all: --python-version 3.12 --implementation cp \
#     --abi cp312 --platform manylinux_2_28_x86_64 --platform any dm-haiku optax chex rlax -d wheels
# then the jax, jaxlib, numpy, scipy, ml_dtypes, opt_einsum wheels deleted) into a venv that sees
# the host's jax, then runs bench/gpu_learner_check.py (under 8 minutes).
#   bash bench/gpu_learner_check.sh [--cores N] [--batch_sizes 16,64,256,1024,4096] ...
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${GPU_CHECK_VENV:-/tmp/ntb-gpu-check}
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv --system-site-packages "$VENV"
fi
"$VENV/bin/python" -m pip install -q --no-index --find-links wheels dm-haiku optax chex rlax
"$VENV/bin/python" -c 'import jax; print("jax", jax.__version__, jax.devices())'
PYTHONPATH="$PWD" exec timeout 470 "$VENV/bin/python" -m bench.gpu_learner_check "$@"

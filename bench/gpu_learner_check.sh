#!/usr/bin/env bash
# The learner's speed on a GPU host that has Python 3.12 and a current jax[cuda12/13], chex and
# optax but nothing else of this project's stack (no Python 3.10, TensorFlow, Launchpad or
# Reverb) and no network: installs the small wheels carried in ./wheels, without their
# dependencies, into a folder on PYTHONPATH, then runs bench/gpu_learner_check.py (under 8 min).
# The wheels are haiku and rlax with what they need that such a host lacks; made on the dev
# machine with
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#     --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
#     --platform any -d wheels dm-haiku==0.0.17 jmp==0.0.4 rlax==0.1.9 distrax==0.1.9 \
#     dm-env==1.6 dm-tree==0.1.10 tfp-nightly==0.26.0.dev20261027 gast==0.7.0 decorator==5.3.1
# (tested first on the dev machine with jax 0.10.2 from PyPI; 7.7 MB in all).
#   bash bench/gpu_learner_check.sh [--cores N] [--batch_sizes 16,64,256,1024,4096] ...
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
SITE=${GPU_CHECK_SITE:-/tmp/ntb-gpu-site}
"$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target "$SITE" wheels/*.whl
export PYTHONPATH="$PWD:$SITE"
"$PY" -c 'import jax, haiku, rlax, optax; print("jax", jax.__version__, jax.devices())'
exec timeout 470 "$PY" -m bench.gpu_learner_check "$@"

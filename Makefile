# Two entry points for users: `make run` (main job) and `make test`. Both set up ./.venv first.
PY := .venv/bin/python
.PHONY: setup setup-sb3 run test lint test-slow test-slurm bench bench-cluster lock

# ACCEL=cuda12: jax's CUDA 12 build (docs/gpu.md); ACCEL=cpu: back to the default.
setup:
	@ACCEL=$(ACCEL) bash scripts/setup_venv.sh

# The optional sb3 extra (setup.py): Stable-Baselines3, SB3-contrib and torch (PyPI's torch brings
# its CUDA libraries, ~3 GB), for experiments.sb3_shield; constraints.txt keeps the stack's pins.
setup-sb3: setup
	$(PY) -m pip install -q -c constraints.txt 'stable-baselines3==2.4.1' 'sb3-contrib==2.4.0' 'torch==2.5.1'

run: setup
	$(PY) -m launch.train $(ARGS)

# Two pytest workers (pytest-xdist): much of the suite waits on one-core work (interpreter
# start-up, XLA compiles), so two tests overlap; an idle worker takes tests from the other's
# queue, so one long file at the end does not leave a core idle (BUILD_NOTES "Test time").
TEST_WORKERS ?= 2
test: setup lint
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist worksteal tests $(PYTEST_ARGS)

# pyflakes' rules (unused or undefined names) and import order, over the whole checkout (ruff.toml).
lint: setup
	$(PY) -m ruff check --quiet .

test-slow: setup
	$(PY) -m pytest -q -m slow tests $(PYTEST_ARGS)

# The generated Slurm job under a real Slurm started on this machine (needs root: network
# namespaces, daemons). Installs Debian's slurm-wlm and munge first where slurmctld is missing.
test-slurm: setup
	@command -v slurmctld >/dev/null || { apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends slurm-wlm munge; }
	$(PY) -m pytest -q -s -m slow tests/test_slurm.py tests/test_slurm_lock.py $(PYTEST_ARGS)

bench: setup
	$(PY) -m bench.throughput $(ARGS)

# Cluster launch across network namespaces with 1, 2, 4, 8 actors (needs root).
bench-cluster: setup
	$(PY) -m bench.cluster_scaling $(ARGS)

# Re-resolve requirements.lock from the human-edited pins in constraints.txt (needs `uv`).
lock:
	uv pip compile --python-version 3.10 --python-platform x86_64-unknown-linux-gnu constraints.txt -o requirements.lock

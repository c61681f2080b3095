#!/usr/bin/env bash
# Creates ./.venv (or $VENV) with Python 3.10 and the pinned stack, then installs this project.
# ACCEL=cuda12 also installs jax's CUDA 12 build (requirements-cuda12.lock, over the CPU lock);
# ACCEL=cpu goes back. Without ACCEL the venv keeps the build it has (recorded beside its stamp),
# so `make test` after `make setup ACCEL=cuda12` does not reinstall the CPU build.
# Idempotent: a venv whose stamp matches the locks + setup.py + this script + ACCEL is reused.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${VENV:-$root/.venv}"
stamp="$venv/.noturningback-stamp"
accel_file="$venv/.noturningback-accel"
accel="${ACCEL:-$(cat "$accel_file" 2>/dev/null || echo cpu)}"
case "$accel" in
  cpu) overlay="" ;;
  cuda12) overlay="$root/requirements-cuda12.lock" ;;
  *) echo "setup: unknown ACCEL=$accel (cpu or cuda12)" >&2; exit 1 ;;
esac
want="$( (cat "$root/requirements.lock" "$root/setup.py" "$root/scripts/setup_venv.sh" ${overlay:+"$overlay"}; echo "$accel") | sha256sum | cut -d' ' -f1)"

if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi

find_python310() {
  # PATH first; the pyenv shim on PATH refuses unless that version is selected, so test it runs.
  for cand in python3.10 "$(command -v pyenv >/dev/null 2>&1 && echo "$(pyenv root)/versions/3.10"*/bin/python3.10)" \
              "$HOME"/.pyenv/versions/3.10*/bin/python3.10 /usr/bin/python3.10 /usr/local/bin/python3.10; do
    [ -n "$cand" ] || continue
    if "$cand" -c 'import sys; assert sys.version_info[:2] == (3, 10)' >/dev/null 2>&1; then
      echo "$cand"; return 0
    fi
  done
  if command -v pyenv >/dev/null 2>&1; then
    for v in $(pyenv versions --bare 2>/dev/null | grep '^3\.10' || true); do
      if PYENV_VERSION="$v" python3.10 -c 'import sys' >/dev/null 2>&1; then
        echo "$(pyenv root)/versions/$v/bin/python3.10"; return 0
      fi
    done
  fi
  return 1
}

py="$(find_python310)" || { echo "setup: no Python 3.10 found (PATH or pyenv); install 3.10 (e.g. 'pyenv install 3.10.13')" >&2; exit 1; }
echo "setup: using $py"
rm -rf "$venv"
"$py" -m venv "$venv"
"$venv/bin/pip" install -q --upgrade 'pip<25' 'setuptools<70' wheel
# Step 1: the fully resolved lock (made from constraints.txt by `make lock`), installed without
# re-resolving: pip's own resolver backtracks for many minutes against protobuf 3.19.
# Step 2: Acme without its own (conflicting) dependency pins.
"$venv/bin/pip" install -q --no-deps -r "$root/requirements.lock"
"$venv/bin/pip" install -q --no-deps dm-acme==0.4.0
if [ -n "$overlay" ]; then
  # jax 0.4.23 with its CUDA 12 plugin and the NVIDIA wheels (~3 GB), haiku 0.0.13 (BUILD_NOTES.md,
  # "Pins"); the shim's jax.xla / DeviceArray aliases keep Acme 0.4.0 importing on it.
  echo "setup: installing the CUDA 12 build of jax ($overlay)"
  "$venv/bin/pip" install -q --no-deps -r "$overlay"
fi
"$venv/bin/pip" install -q --no-deps -e "$root"
# The jax<->acme shim must run at interpreter start in every process (Launchpad workers unpickle
# Acme objects before any project code runs), hence a .pth file in the venv's site-packages.
site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
printf "%s\nimport noturningback_shim\n" "$root" > "$site/noturningback_shim.pth"
"$venv/bin/python" -c 'import acme, launchpad, reverb, haiku, optax, gym_sokoban, tensorflow_datasets' \
  || { echo "setup: the installed stack does not import" >&2; exit 1; }
echo "$accel" > "$accel_file"
echo "$want" > "$stamp"
echo "setup: ready ($venv, $accel)"

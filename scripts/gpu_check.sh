#!/usr/bin/env bash
# Run the export pipeline (smtdims export_and_verify) on the seed examples on an NVIDIA GPU.
#
# Each exportable row of SEED-EXAMPLES.md (1, 2, 3, 10, 13, 14, 16, 19) is exported for
# `cuda`, serialized, then compiled and run on the GPU in a fresh process without smtdims,
# on solver-chosen shapes, and compared with the native function; the equality trap must
# be caught at b = 1. Prints every report; exit 0 only when all of that holds.
#
# Usage: scripts/gpu_check.sh [--samples N] [--rows 1,13]
# Env:   PYTHON       interpreter to use if its jax already sees a GPU (default .venv/bin/python)
#        GPU_VENV     where to create a venv with jax[cuda12] otherwise (default .venv-gpu)
#        Offline machines: point pip at pre-downloaded wheels, e.g. PIP_NO_INDEX=1 PIP_FIND_LINKS=/wheels
# Without an NVIDIA GPU it says so and exits 0 (nothing to check), installing nothing.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

if ! command -v nvidia-smi >/dev/null 2>&1 && ! ls /dev/nvidia[0-9]* >/dev/null 2>&1; then
  echo "gpu_check: SKIPPED: no NVIDIA GPU visible (no nvidia-smi, no /dev/nvidia*)"
  exit 0
fi
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L || true

py="${PYTHON:-}"
if [ -z "$py" ]; then
  if [ -x .venv/bin/python ]; then py=.venv/bin/python; else py=python3; fi
fi

sees_gpu() {
  "$1" -c 'import sys, jax; sys.exit(0 if jax.devices("gpu") else 1)' >/dev/null 2>&1
}

# The jax version the project is tested with: the interpreter's, else the pinned upper bound.
jax_version="$("$py" -c 'import jax; print(jax.__version__)' 2>/dev/null || echo 0.10.2)"

if ! sees_gpu "$py"; then
  venv="${GPU_VENV:-.venv-gpu}"
  if [ ! -x "$venv/bin/python" ] || ! sees_gpu "$venv/bin/python"; then
    echo "gpu_check: installing jax[cuda12]==$jax_version and smtdims into $venv"
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    "$venv/bin/python" -m pip install -q --upgrade pip
    "$venv/bin/python" -m pip install -q -e . "jax[cuda12]==$jax_version"
  fi
  py="$venv/bin/python"
  sees_gpu "$py" || { echo "gpu_check: FAILED: jax in $venv does not see the GPU"; "$py" -c 'import jax; print(jax.devices())'; exit 1; }
fi

export JAX_PLATFORMS=cuda  # the native comparison and the fresh process both run on the GPU
"$py" -c 'import jax; print("gpu_check: jax", jax.__version__, "devices", jax.devices())'
exec "$py" tests/fixtures_pipeline/seed_rows.py --platform cuda "$@"

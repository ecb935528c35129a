#!/usr/bin/env bash
# One command: set up .venv (if needed) with smtdims, then run the seed demo (stock JAX vs smtdims).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[isl]"
exec .venv/bin/python examples/seed_demo.py

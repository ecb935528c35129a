#!/usr/bin/env bash
# One command: set up .venv (if needed) with smtdims, then run the seed demo (stock JAX vs smtdims).
# pip runs only when pyproject.toml changed since the last install here (install_once's stamp; a second
# run goes straight to the demo); SMTDIMS_REINSTALL=1 forces it.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
. scripts/_install.sh
INSTALL_STAMP=demo install_once .venv -e ".[isl]"
exec .venv/bin/python examples/seed_demo.py

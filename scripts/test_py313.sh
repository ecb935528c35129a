#!/usr/bin/env bash
# The equality rule reads CPython's bytecode names (dis): run its tests on Python 3.13 too
# (scripts/test.sh runs 3.11, scripts/test_new_jax.sh 3.12), with the newest JAX.
#   bash scripts/test_py313.sh -q     # pytest arguments pass through
set -euo pipefail
cd "$(dirname "$0")/.."
NEW_JAX=${NEW_JAX:-0.12.0.1}
VENV=${PY313_VENV:-.venv/py313-jax-${NEW_JAX}}  # inside .venv/, which git ignores
if [ ! -x "$VENV/bin/python" ]; then
  PY=""
  for cand in "${PYTHON313:-}" python3.13 "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.13*/bin/python3.13; do
    if [ -n "$cand" ] && "$cand" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 13) else 1)' >/dev/null 2>&1; then
      PY=$cand; break
    fi
  done
  if [ -z "$PY" ]; then
    echo "test_py313: FAILED: no Python 3.13 found (set PYTHON313 or install one with pyenv)" >&2
    exit 3
  fi
  "$PY" -m venv "$VENV"
fi
. scripts/_install.sh
install_once "$VENV" -e ".[test]" "jax==${NEW_JAX}" "jaxlib==${NEW_JAX}"
echo "testing the equality rule on $("$VENV/bin/python" -V) with jax $("$VENV/bin/python" -c 'import jax; print(jax.__version__)')"
exec env JAX_PLATFORMS=cpu "$VENV/bin/python" -m pytest tests/jax/test_equality.py tests/jax/test_audit.py tests/jax/test_dropin.py "$@"

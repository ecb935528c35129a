#!/usr/bin/env bash
# Run the test suite on the newest JAX the package index serves (default jax/jaxlib 0.12.0.1),
# on Python 3.12 or newer (JAX releases after 0.10 need it), in its own venv.
#   bash scripts/test_new_jax.sh                 # the whole suite
#   bash scripts/test_new_jax.sh -k soundness    # any pytest arguments pass through
# Environment: NEW_JAX (default 0.12.0.1), NEW_JAX_VENV (default .venv/jax-$NEW_JAX),
#   PYTHON312 (an interpreter >= 3.12; else python3.13/python3.12 on PATH, else pyenv's versions).
# Without a Python >= 3.12 it says so and fails: CI must not pass without running this suite.
# The venv is created once and reused; jax/jaxlib are pinned in the same pip call as the
# editable install, and the installed versions are checked.
set -euo pipefail
cd "$(dirname "$0")/.."
NEW_JAX=${NEW_JAX:-0.12.0.1}
VENV=${NEW_JAX_VENV:-.venv/jax-${NEW_JAX}}  # inside .venv/, which git ignores

# An interpreter counts only if it runs and is >= 3.12 (pyenv's shims exist on PATH even for
# versions that are not selected, and fail when run).
is_py312() {
  [ -n "$1" ] && "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' >/dev/null 2>&1
}

find_python() {
  local cand
  if [ -n "${PYTHON312:-}" ]; then
    if is_py312 "$PYTHON312"; then echo "$PYTHON312"; return 0; fi
    echo "test_new_jax: PYTHON312=$PYTHON312 is not a working Python >= 3.12" >&2
    return 1
  fi
  for cand in python3.12 python3.13; do
    if is_py312 "$cand"; then command -v "$cand"; return 0; fi
  done
  local root=${PYENV_ROOT:-$HOME/.pyenv}
  for cand in "$root"/versions/3.12*/bin/python3.12 "$root"/versions/3.13*/bin/python3.13; do
    if is_py312 "$cand"; then echo "$cand"; return 0; fi
  done
  return 1
}

if [ ! -x "$VENV/bin/python" ]; then
  if ! PY=$(find_python); then
    echo "test_new_jax: FAILED: no Python >= 3.12 found (set PYTHON312, put python3.12 on PATH," >&2
    echo "  or install one with pyenv); jax ${NEW_JAX} needs it, so this suite cannot run" >&2
    exit 3
  fi
  echo "test_new_jax: creating ${VENV} with ${PY} ($("$PY" -V 2>&1))"
  "$PY" -m venv "$VENV"
fi
is_py312 "$VENV/bin/python" || { echo "test_new_jax: FAILED: ${VENV} is not Python >= 3.12; remove it" >&2; exit 3; }
. scripts/_install.sh
install_once "$VENV" -e ".[test]" "jax==${NEW_JAX}" "jaxlib==${NEW_JAX}"
got=$("$VENV/bin/python" -c 'import jax, jaxlib; print(jax.__version__, jaxlib.__version__)')
if [ "$got" != "${NEW_JAX} ${NEW_JAX}" ]; then
  echo "expected jax/jaxlib ${NEW_JAX}, found ${got}" >&2
  exit 2
fi
echo "testing with jax/jaxlib ${got} on $("$VENV/bin/python" -V 2>&1) in ${VENV}"
exec env JAX_PLATFORMS=cpu "$VENV/bin/python" -m pytest $(parallel "$@") "$@"

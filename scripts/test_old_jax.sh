#!/usr/bin/env bash
# Run the test suite on the oldest supported JAX (default jax/jaxlib 0.7.2), in its own venv.
#   bash scripts/test_old_jax.sh                 # the whole suite
#   bash scripts/test_old_jax.sh -k soundness    # any pytest arguments pass through
# Environment: OLD_JAX (default 0.7.2), OLD_JAX_VENV (default .venv/jax-$OLD_JAX), PYTHON.
# The venv is created once and reused; jax/jaxlib are pinned in the same pip call as the
# editable install so that the test extras cannot pull a newer JAX.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
OLD_JAX=${OLD_JAX:-0.7.2}
VENV=${OLD_JAX_VENV:-.venv/jax-${OLD_JAX}}  # inside .venv/, which git ignores
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
. scripts/_install.sh
install_once "$VENV" -e ".[test]" "jax==${OLD_JAX}" "jaxlib==${OLD_JAX}"
got=$("$VENV/bin/python" -c 'import jax, jaxlib; print(jax.__version__, jaxlib.__version__)')
if [ "$got" != "${OLD_JAX} ${OLD_JAX}" ]; then
  echo "expected jax/jaxlib ${OLD_JAX}, found ${got}" >&2
  exit 2
fi
echo "testing with jax/jaxlib ${got} in ${VENV}"
exec env JAX_PLATFORMS=cpu "$VENV/bin/python" -m pytest $(parallel "$@") "$@"

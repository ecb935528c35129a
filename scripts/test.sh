#!/usr/bin/env bash
# One command: set up .venv (if needed) with smtdims and its test extras, then run the tests.
#   bash scripts/test.sh            # the whole suite
#   bash scripts/test.sh -k seed    # any pytest arguments pass through
# In CI's full mode (--full or SMTDIMS_FULL_TESTS=1) it first runs tests/core where JAX is not installed
# (scripts/test_core.sh, its own venv .venv/core; about a minute and a half on 2 cores, soak tests left to the
# suite); SMTDIMS_CORE_TESTS=0 leaves that step out.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
. scripts/_install.sh
install_once .venv -e ".[test]"
full=${SMTDIMS_FULL_TESTS:-0}
for a in "$@"; do case "$a" in --full) full=1 ;; esac; done
if [ "$full" = 1 ] && [ "${SMTDIMS_CORE_TESTS:-1}" != 0 ]; then
  t0=$SECONDS
  SMTDIMS_FULL_TESTS=0 bash scripts/test_core.sh -q
  echo "test: tests/core without JAX took $((SECONDS - t0)) s"
fi
exec .venv/bin/python -m pytest $(parallel "$@") "$@"

#!/usr/bin/env bash
# One command: set up .venv (if needed) with smtdims and its test extras, then run the tests.
#   bash scripts/test.sh            # the whole suite
#   bash scripts/test.sh -k seed    # any pytest arguments pass through
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
. scripts/_install.sh
install_once .venv -e ".[test]"
exec .venv/bin/python -m pytest $(parallel "$@") "$@"

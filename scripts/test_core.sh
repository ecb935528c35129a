#!/usr/bin/env bash
# The core's tests (tests/core) where JAX is not installed: the reasoner needs nothing of JAX.
# A venv of its own (.venv/core) holds smtdims (editable, --no-deps) with pyproject.toml's dependencies
# less the JAX plugin's (jax, jaxlib, flatbuffers) and the test tools (pytest, hypothesis, islpy,
# pytest-xdist); the script checks that jax cannot be imported there, then runs tests/core. A core test
# that also tries a JAX object is marked needs_jax (or uses pytest.importorskip) and is skipped here.
# scripts/test.sh runs this first in CI's full mode (--full or SMTDIMS_FULL_TESTS=1).
#   bash scripts/test_core.sh            # tests/core, on every core
#   bash scripts/test_core.sh -k parse   # any pytest arguments pass through
# Environment: CORE_VENV (default .venv/core), PYTHON.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=${CORE_VENV:-.venv/core}  # inside .venv/, which git ignores
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
. scripts/_install.sh
# What the core needs and what its tests run with, read from pyproject.toml (one place for the versions).
deps=$("$VENV/bin/python" - <<'EOF'
import re
import tomllib

with open("pyproject.toml", "rb") as f:
    project = tomllib.load(f)["project"]
plugin = {"jax", "jaxlib", "flatbuffers"}  # the JAX plugin's (smtdims_jax): not the core's
tools = {"pytest", "hypothesis", "islpy", "pytest-xdist"}


def name(req: str) -> str:
    return re.match(r"[A-Za-z0-9_.-]+", req).group(0).lower()


reqs = [r for r in project["dependencies"] if name(r) not in plugin]
reqs += [r for r in project["optional-dependencies"]["test"] if name(r) in tools]
print(" ".join(reqs))
EOF
)
# shellcheck disable=SC2086  # one word per requirement
INSTALL_STAMP=deps INSTALL_CHECK="import z3, sympy, pytest, hypothesis, xdist" install_once "$VENV" $deps
INSTALL_STAMP=core INSTALL_CHECK="import smtdims" install_once "$VENV" --no-deps -e .
if "$VENV/bin/python" -c "import jax" >/dev/null 2>&1; then
  echo "test_core: FAILED: jax is importable in $VENV; the core's tests must run without it" >&2
  exit 2
fi
echo "testing the core without JAX: $("$VENV/bin/python" -V), $VENV"
exec "$VENV/bin/python" -m pytest $(parallel "$@") tests/core "$@"

#!/usr/bin/env bash
# Run JAX's own shape-polymorphism tests with smtdims installed (pytest --smtdims).
#   bash scripts/jax_compat.sh /path/to/jax-checkout [pytest args]
# The checkout must be at the tag matching the installed jax (e.g. jax-v0.10.2); its test
# file is copied to a temporary folder and never into this repository.
# Expected with jax 0.10.2: 8 failures, each a bound smtdims proves tighter than JAX's
# test asserts or an unsatisfiable constraint set JAX does not notice (see README, Guarantees).
set -euo pipefail
src=${1:?usage: scripts/jax_compat.sh /path/to/jax-checkout [pytest args]}
shift
cd "$(dirname "$0")/.."
root=$(pwd)
[ -x .venv/bin/python ] || { echo "run scripts/test.sh first (it sets up .venv)" >&2; exit 2; }
.venv/bin/python -m pip install -q absl-py
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$src/tests/shape_poly_test.py" "$work/"
cd "$work"
JAX_PLATFORMS=cpu "$root/.venv/bin/python" -m pytest shape_poly_test.py -q -p no:cacheprovider --smtdims -rf "$@"

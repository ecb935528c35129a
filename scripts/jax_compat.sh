#!/usr/bin/env bash
# Run JAX's own shape-polymorphism tests (tests/shape_poly_test.py) with smtdims installed
# (pytest --smtdims), or stock (--stock), on the jax of a chosen interpreter.
#   bash scripts/jax_compat.sh [OPTIONS] SRC [pytest args]
# SRC: a JAX checkout (the file is taken from its work tree), or GIT_DIR@REV: a git repository
#   (bare mirrors too) and a tag or commit, e.g. /path/to/jax.git@jax-v0.10.2.
# Options:
#   --stock        without smtdims (the baseline to compare with)
#   --new          use the venv scripts/test_new_jax.sh creates (.venv/jax-$NEW_JAX, newest JAX)
#   --python PY    use this interpreter's jax (default .venv/bin/python)
#   --parts        one pytest process per test class (the whole file grows past 3 GB RSS in
#                  one process); each part's summary line, then the totals and the wall time
# Take the file at the tag matching the installed jax where one exists (e.g. jax-v0.10.2);
# for a jax newer than every tag, the newest source. The file is copied to a temporary
# folder and never into this repository.
# Expected with jax 0.10.2: 8 failures, each a bound smtdims proves tighter than JAX's
# test asserts or an unsatisfiable constraint set JAX does not notice (see docs/guarantees.md).
set -euo pipefail
usage="usage: scripts/jax_compat.sh [--stock] [--new | --python PY] [--parts] SRC [pytest args]"
cd "$(dirname "$0")/.."
root=$(pwd)
py=.venv/bin/python
mode=--smtdims
parts=0
while [ $# -gt 0 ]; do
  case "$1" in
    --stock) mode=""; shift ;;
    --new) py=.venv/jax-${NEW_JAX:-0.12.0.1}/bin/python; shift ;;
    --python) py=${2:?$usage}; shift 2 ;;
    --parts) parts=1; shift ;;
    -h|--help) echo "$usage"; exit 0 ;;
    *) break ;;
  esac
done
src=${1:?$usage}
shift
case "$py" in /*) ;; *) py="$root/$py" ;; esac
[ -x "$py" ] || { echo "jax_compat: no interpreter at $py (scripts/test.sh sets up .venv, scripts/test_new_jax.sh the newest JAX's)" >&2; exit 2; }
"$py" -m pip install -q absl-py

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -d "$src" ]; then
  cp "$src/tests/shape_poly_test.py" "$work/"
  from="$src"
else
  gitdir=${src%@*}
  rev=${src##*@}
  [ "$gitdir" != "$src" ] && [ -n "$rev" ] || { echo "jax_compat: SRC is neither a directory nor GIT_DIR@REV: $src" >&2; exit 2; }
  git --git-dir "$gitdir" show "$rev:tests/shape_poly_test.py" > "$work/shape_poly_test.py"
  from="$rev ($(git --git-dir "$gitdir" log -1 --format='%h, %cs' "$rev"))"
fi
echo "jax_compat: shape_poly_test.py from $from; $("$py" -c 'import jax, sys; print(f"jax {jax.__version__}, python {sys.version.split()[0]}")'); ${mode:-stock}"

cd "$work"
run() {  # pytest with the chosen mode on what "$@" names (the file, or a class in it)
  JAX_PLATFORMS=cpu "$py" -m pytest -q -p no:cacheprovider $mode -rf "$@"
}
if [ "$parts" = 0 ]; then
  start=$(date +%s)
  rc=0
  run shape_poly_test.py "$@" || rc=$?
  echo "jax_compat: wall time $(( $(date +%s) - start )) s"
  exit "$rc"
fi

# --parts: the test classes of the file, each in its own process; counts summed from the
# summary lines ("N passed, M failed, K skipped ... in S s").
classes=$(sed -n 's/^class \([A-Za-z0-9_]*\)(jtu\.JaxTestCase).*/\1/p' shape_poly_test.py)
[ -n "$classes" ] || { echo "jax_compat: no test classes found in shape_poly_test.py" >&2; exit 2; }
declare -A total=([passed]=0 [failed]=0 [skipped]=0 [error]=0)
start=$(date +%s)
rc=0
for cls in $classes; do
  t0=$(date +%s)
  prc=0
  run "shape_poly_test.py::$cls" "$@" > "part-$cls.log" 2>&1 || prc=$?
  [ "$prc" = 0 ] || [ "$prc" = 1 ] || [ "$prc" = 5 ] || rc=$prc  # 1: tests failed; 5: none collected
  [ "$prc" = 1 ] && [ "$rc" = 0 ] && rc=1
  grep -E '^FAILED|^ERROR' "part-$cls.log" || true
  line=$(grep -E '^=* ?[0-9]+ (passed|failed|skipped|error)' "part-$cls.log" | tail -1 || true)
  [ -n "$line" ] || line=$(tail -1 "part-$cls.log")
  echo "jax_compat: $cls: ${line//=/} (exit $prc, $(( $(date +%s) - t0 )) s)"
  for k in passed failed skipped error; do
    n=$(grep -oE "[0-9]+ $k" <<<"$line" | grep -oE '^[0-9]+' || true)
    total[$k]=$(( ${total[$k]} + ${n:-0} ))
  done
done
echo "jax_compat: total: ${total[passed]} passed, ${total[failed]} failed, ${total[skipped]} skipped, ${total[error]} errors; wall time $(( $(date +%s) - start )) s"
exit "$rc"

#!/usr/bin/env bash
# The export pipeline on this host's accelerator (a TPU or a GPU), end to end:
#   1. the README's export_and_verify line in a fresh interpreter (the Python API: the program has
#      started no JAX backend, so the pipeline exports on the CPU and the verification process holds
#      the device);
#   2. the same line in a program that already holds the device (one process at a time may hold a
#      TPU: the samples run in that process, and the report says the fresh-process check was not made);
#   3. scripts/accelerator_check.py: every exportable seed row, the equality trap, a flax GPT at t up to
#      512 and a ViT, verified on the device beside JAX's own run of each function;
#   4. `smtdims verify`: the GPT exported on the CPU for cpu and this platform, verified here;
#   5. `smtdims export --like`: the GPT's family inferred from one example batch (dims="auto"), verified here.
# Prints one summary line. Without a TPU or GPU it prints SKIPPED and exits 0. Exit 1 if a check failed.
#
# Usage: scripts/accelerator_check.sh [--samples N]
# Env:   PYTHON  the interpreter (default: .venv/bin/python where it exists, else python3). smtdims runs from
#                this checkout (PYTHONPATH), so an offline host needs only its dependencies: carry z3-solver,
#                flatbuffers (and islpy, flax for the models) as wheels: docs/accelerator.md says how.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
py="${PYTHON:-}"
if [ -z "$py" ]; then
  if [ -x .venv/bin/python ]; then py=.venv/bin/python; else py=python3; fi
fi
export PYTHONPATH="$root:$root/plugins${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1

platform="$("$py" -c 'import jax; print(jax.devices()[0].platform)' 2>/dev/null | tail -1)"
if [ -z "$platform" ]; then
  echo "accelerator_check: FAILED: $py cannot import jax or start a backend"
  "$py" -c 'import jax; print(jax.devices())'
  exit 1
fi
if [ "$platform" = cpu ]; then
  echo "accelerator_check: SKIPPED: JAX sees no TPU or GPU here (devices: cpu)"
  exit 0
fi
echo "accelerator_check: $platform found; $("$py" -c 'import jax, sys; print("jax", jax.__version__, "python", sys.version.split()[0])')"

readme='
import sys, smtdims
fn = lambda x: x.sum(axis=1)
report = smtdims.export_and_verify(fn, "int32[a, b]", constraints=("a >= b", "b >= 16"), fix=True)
print(report.table())
print("readme line:", report.verdict(), "| ran in:", report.ran_in or "-")
sys.exit(0 if report.ok and report.device.startswith(sys.argv[1]) else 1)
'
echo "== 1. the README's line, a fresh interpreter =="
"$py" -c "$readme" "$platform"; rc1=$?

held='
import sys, jax, smtdims
jax.devices()  # this program holds the device before it verifies
report = smtdims.export_and_verify(lambda x: x.sum(axis=1), "int32[a, b]", constraints=("a >= b", "b >= 16"))
print(report.table())
print("held by the program:", report.verdict(), "| ran in:", report.ran_in)
sys.exit(0 if report.ok and report.ran_in == "this process" else 1)
'
echo "== 2. a program that holds the device =="
"$py" -c "$held"; rc2=$?

echo "== 3. seed rows, the trap, a GPT and a ViT =="
"$py" scripts/accelerator_check.py "$@"; rc3=$?

echo "== 4. an artifact made elsewhere: exported (and checked) on the CPU for cpu,$platform, verified here =="
art="$(mktemp -d)/gpt.bin"
JAX_PLATFORMS=cpu "$py" -m smtdims export examples/accelerator_models.py:gpt --spec "int32[b, t]" -c "t <= 512" \
  --platform "cpu,$platform" --samples 3 --out "$art" -q | sed -n 2p
"$py" -m smtdims verify "$art" --against examples/accelerator_models.py:gpt -q; rc4=$?
rm -rf "$(dirname "$art")"

echo "== 5. dims=auto: the GPT from one example batch (2, 7), its family verified on the device =="
"$py" -m smtdims export examples/accelerator_models.py:gpt --like "int32[2, 7]" --samples 3 -q; rc5=$?

echo "accelerator_check: README line $([ $rc1 = 0 ] && echo verified || echo FAILED);" \
     "program holding the device $([ $rc2 = 0 ] && echo verified in-process || echo FAILED);" \
     "suite $([ $rc3 = 0 ] && echo OK || echo FAILED); smtdims verify $([ $rc4 = 0 ] && echo OK || echo FAILED);" \
     "auto export $([ $rc5 = 0 ] && echo verified || echo FAILED)"
[ $rc1 = 0 ] && [ $rc2 = 0 ] && [ $rc3 = 0 ] && [ $rc4 = 0 ] && [ $rc5 = 0 ]

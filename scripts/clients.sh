#!/usr/bin/env bash
# Real clients of jax.export's symbolic shapes, run stock and with smtdims (not in CI: it
# installs jax2onnx, onnxruntime, flax and equinox, and takes a while).
#   bash scripts/clients.sh JAX2ONNX_SRC [pytest args for jax2onnx]
# JAX2ONNX_SRC: a jax2onnx checkout, or GIT_DIR[@REV] (a bare mirror too; REV defaults to the
#   tag v$JAX2ONNX). The PyPI package has no tests: they come from the source, and only its
#   tests/ (plus two helper files) are copied to a temporary folder; the jax2onnx code under
#   test is the installed PyPI release.
# 1. jax2onnx: its generated tests whose name ends in "_dynamic" (the variants that export
#    with a symbolic batch dimension "B"), with pytest, then with pytest --smtdims (the
#    smtdims_pytest plugin installs smtdims for the whole session). Both counts, then every
#    test whose outcome differs, with its message.
# 2. flax and equinox models (convolutions with strides and padding, pooling, attention,
#    MLPs) exported by a driver in this script with symbolic batch and spatial dimensions,
#    stock and with smtdims: the outcome of each export (output shapes and StableHLO text,
#    or the error), then the exported function run at concrete sizes against the native one.
# 3. keras-hub backbones (Keras 3 with the JAX backend, random weights, tiny configs: by default
#    GPT-2, BERT, RoBERTa, DistilBERT, Llama, T5 with int32[b, t] inputs; ResNet, CSPDarkNet, Xception,
#    ViT with float32[b, h, w, 3]; with --all every backbone keras-hub ships that builds tiny and
#    offline, encoder-decoder, speech and image-text ones with an input shape each), called through
#    model.stateless_call and exported by
#    scripts/clients_keras.py, stock and with smtdims, each in a fresh process: the outcome (output
#    shapes, StableHLO text, numbers, or the exception: smtdims' a subclass of stock's, the same
#    message), and the exported function run at two concrete sizes against the native model. Where
#    stock's export fails, export_and_verify(fix=True): the whole fix, verified end to end, then the
#    fixed specification exported on stock JAX and run against the native model. In a venv of its
#    own (keras-hub pulls in tensorflow and tensorflow-text for its tokenizers; about 3 GB). With
#    ONLY=keras the arguments are backbone names or the script's flags (--all: every backbone of
#    --list; --list-all: every keras_hub.models *Backbone class, covered or why not; --timeout S per
#    child process; --json FILE). The last lines count the backbones tried, those that export stock
#    and with smtdims, stock's failures, the fixes found, verified end to end, and whose fixed
#    specification re-exports on stock JAX and agrees with the native model, each with the names.
# Environment: CLIENTS_VENV (default .venv/clients), CLIENTS_JAX (default 0.12.0.1),
#   JAX2ONNX (default 0.16.0), PYTHON312 (as in scripts/test_new_jax.sh),
#   KERAS_VENV (default .venv/keras), ONLY=jax2onnx|models|keras.
# Exit status: 0 when every section shows the same outcome for every test and model stock and with
#   smtdims, and every exported function agrees with the native one (the keras section's fixes are
#   reported, not judged).
set -euo pipefail
usage="usage: scripts/clients.sh JAX2ONNX_SRC [pytest args]   (ONLY=models: no SRC; ONLY=keras: [BACKBONE ...])"
cd "$(dirname "$0")/.."
root=$(pwd)
ONLY=${ONLY:-}
if [ "$ONLY" = models ] || [ "$ONLY" = keras ]; then
  src=""
else
  src=${1:?$usage}
  shift
fi
CLIENTS_JAX=${CLIENTS_JAX:-0.12.0.1}
JAX2ONNX=${JAX2ONNX:-0.16.0}
VENV=${CLIENTS_VENV:-.venv/clients}

is_py312() {
  [ -n "$1" ] && "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' >/dev/null 2>&1
}
find_python() {
  local cand root_=${PYENV_ROOT:-$HOME/.pyenv}
  for cand in "${PYTHON312:-}" python3.12 python3.13 "$root_"/versions/3.12*/bin/python3.12 "$root_"/versions/3.13*/bin/python3.13; do
    if is_py312 "$cand"; then command -v "$cand"; return 0; fi
  done
  return 1
}
if [ "$ONLY" != keras ]; then
  if [ ! -x "$VENV/bin/python" ]; then
    PY=$(find_python) || { echo "clients: no Python >= 3.12 found (set PYTHON312)" >&2; exit 3; }
    "$PY" -m venv "$VENV"
  fi
  py="$root/$VENV/bin/python"
  "$py" -m pip install -q --upgrade pip
  "$py" -m pip install -q -e . "jax==$CLIENTS_JAX" "jaxlib==$CLIENTS_JAX" "jax2onnx==$JAX2ONNX" onnxruntime flax equinox pytest
  "$py" - <<'PY'
import sys
from importlib.metadata import version

print("clients: python " + sys.version.split()[0] + ", "
      + ", ".join(f"{p} {version(p)}" for p in ("jax", "jaxlib", "jax2onnx", "onnxruntime", "flax", "equinox")))
PY
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export JAX_PLATFORMS=cpu
status=0

# Compare two JUnit XML reports: counts of each, then every test whose outcome differs.
compare_junit() {
  "$py" - "$1" "$2" <<'PY'
import sys
import xml.etree.ElementTree as ET


def outcomes(path):
    out = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        kind, msg = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                kind = {"failure": "failed"}.get(child.tag, child.tag)
                msg = (child.get("message") or "").splitlines()[0][:300] if child.get("message") else ""
                break
        out[name] = (kind, msg)
    return out


stock, smt = outcomes(sys.argv[1]), outcomes(sys.argv[2])
for label, res in (("stock", stock), ("smtdims", smt)):
    counts = {k: sum(1 for v in res.values() if v[0] == k) for k in ("passed", "failed", "error", "skipped")}
    print(f"jax2onnx {label}: {len(res)} tests: " + ", ".join(f"{n} {k}" for k, n in counts.items()))
for n in sorted(n for n, v in stock.items() if v[0] in ("failed", "error")):
    print(f"  stock {stock[n][0]}: {n}: {stock[n][1][:160]}")
diff = sorted(n for n in stock.keys() | smt.keys() if stock.get(n, ("absent",))[0] != smt.get(n, ("absent",))[0])
print(f"jax2onnx: {len(diff)} tests with a different outcome")
for n in diff:
    print(f"  {n}: stock {stock.get(n, ('absent', ''))}, smtdims {smt.get(n, ('absent', ''))}")
sys.exit(1 if diff else 0)
PY
}

if [ -z "$ONLY" ] || [ "$ONLY" = jax2onnx ]; then
  mkdir "$work/jax2onnx"
  if [ -d "$src/tests" ]; then  # a checkout (a bare repository has no tests/ folder)
    (cd "$src" && tar -cf - tests logging_config.py pyproject.toml scripts/generate_tests.py) | tar -xf - -C "$work/jax2onnx"
    from=$src
  else
    gitdir=${src%@*}
    rev=v$JAX2ONNX
    [ "$gitdir" != "$src" ] && rev=${src##*@}
    git --git-dir "$gitdir" archive "$rev" tests logging_config.py pyproject.toml scripts/generate_tests.py | tar -xf - -C "$work/jax2onnx"
    from="$rev ($(git --git-dir "$gitdir" log -1 --format='%h, %cs' "$rev"))"
  fi
  echo "clients: jax2onnx tests from $from"
  cd "$work/jax2onnx"
  "$py" scripts/generate_tests.py > generate.log 2>&1 || { tail -20 generate.log; exit 2; }
  # Generation sets JAX_ENABLE_X64 for itself only; the tests run as jax2onnx's CI runs them.
  for mode in stock smtdims; do
    t0=$SECONDS
    flag=(); [ "$mode" = smtdims ] && flag=(--smtdims)
    "$py" -m pytest tests/primitives tests/examples -k dynamic -q -p no:cacheprovider -o addopts="" \
      --disable-warnings --junitxml="$work/$mode.xml" "${flag[@]}" "$@" > "$work/$mode.log" 2>&1 || true
    echo "clients: jax2onnx $mode: $(grep -E '^[0-9]+ (passed|failed)|[0-9]+ passed' "$work/$mode.log" | tail -1) ($((SECONDS - t0)) s)"
  done
  # The smtdims_pytest plugin's summary: who answered JAX's questions, what stayed inconclusive.
  sed -n '/^=* smtdims =*$/,/^=* .*\(passed\|failed\)/p' "$work/smtdims.log" | head -40
  compare_junit "$work/stock.xml" "$work/smtdims.xml" || status=1
  cd "$root"
fi

if [ -z "$ONLY" ] || [ "$ONLY" = models ]; then
  t0=$SECONDS
  "$py" - <<'PY' || status=1
"""flax and equinox models exported with symbolic shapes, stock and with smtdims.

Each case builds a model with fixed parameters and exports it with jax.export under the
given symbolic shape; the outcome (output shapes and the StableHLO text with the scope's
source locations left out, or the exception's type and first line) must be the same stock and with
smtdims, and an exported function must agree with the native one at concrete sizes.
"""
import hashlib
import re

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from flax import linen, nnx
from jax import export

import smtdims

KEY = jax.random.PRNGKey(0)


def nnx_model(make):
    model = make(nnx.Rngs(0))
    return lambda x: model(x)


def linen_model(module, example):
    params = module.init(KEY, example)
    return lambda x: module.apply(params, x)


def eqx_batched(model):
    return lambda x: jax.vmap(model)(x)


def mha_nnx(x):  # self-attention over a symbolic sequence length
    return MHA(x)


MHA = nnx.MultiHeadAttention(num_heads=2, in_features=8, qkv_features=8, decode=False, rngs=nnx.Rngs(0))
# (name, function, symbolic spec, constraints, dtype-shaped example sizes to run at)
CASES = [
    ("nnx.Linear", nnx_model(lambda r: nnx.Linear(6, 4, rngs=r)), "b, 6", (), [{"b": 1}, {"b": 5}]),
    ("nnx.Conv SAME stride 2", nnx_model(lambda r: nnx.Conv(3, 4, (3, 3), strides=2, padding="SAME", rngs=r)),
     "b, h, w, 3", ("h >= 3", "w >= 3"), [{"b": 1, "h": 5, "w": 8}, {"b": 2, "h": 9, "w": 3}]),
    ("nnx.Conv VALID stride 3", nnx_model(lambda r: nnx.Conv(3, 4, (3, 3), strides=3, padding="VALID", rngs=r)),
     "b, h, w, 3", ("h >= 3", "w >= 3"), [{"b": 1, "h": 7, "w": 3}, {"b": 3, "h": 12, "w": 10}]),
    ("nnx.Conv dilated", nnx_model(lambda r: nnx.Conv(3, 2, (3, 3), kernel_dilation=2, padding="VALID", rngs=r)),
     "b, h, w, 3", ("h >= 5", "w >= 5"), [{"b": 1, "h": 5, "w": 9}]),
    ("nnx.avg_pool + max_pool", lambda x: nnx.max_pool(nnx.avg_pool(x, (2, 2), strides=(2, 2)), (3, 3), strides=(2, 2), padding="SAME"),
     "b, h, w, 3", ("h >= 2", "w >= 2"), [{"b": 1, "h": 4, "w": 6}, {"b": 2, "h": 9, "w": 2}]),
    ("nnx.MultiHeadAttention", mha_nnx, "b, t, 8", (), [{"b": 1, "t": 1}, {"b": 2, "t": 7}]),
    ("nnx.LayerNorm + gelu MLP", nnx_model(lambda r: nnx.Sequential(nnx.LayerNorm(8, rngs=r), nnx.Linear(8, 16, rngs=r), nnx.gelu,
                                                                    nnx.Linear(16, 8, rngs=r))),
     "b, t, 8", (), [{"b": 2, "t": 3}]),
    ("linen.Conv SAME stride 2", linen_model(linen.Conv(4, (3, 3), strides=2, padding="SAME"), jnp.ones((1, 8, 8, 3))),
     "b, h, w, 3", ("h >= 3", "w >= 3"), [{"b": 1, "h": 5, "w": 8}]),
    ("linen.ConvTranspose stride 2", linen_model(linen.ConvTranspose(2, (3, 3), strides=(2, 2)), jnp.ones((1, 4, 4, 3))),
     "b, h, w, 3", (), [{"b": 1, "h": 3, "w": 5}]),
    ("linen.Dense on reshape (b, h*w*3)", lambda x: linen_model(linen.Dense(3), jnp.ones((1, 12)))(x.reshape(x.shape[0], -1)),
     "b, 2, 2, 3", (), [{"b": 3}]),
    ("linen patches (ViT-style) h = 4k", lambda x: x.reshape(x.shape[0], x.shape[1] // 4, 4, x.shape[2] // 4, 4, 3).mean(axis=(2, 4)),
     "b, 4*k, 4*m, 3", (), [{"b": 1, "k": 1, "m": 2}, {"b": 2, "k": 3, "m": 1}]),
    ("eqx.nn.Conv2d stride 2 (vmap)", eqx_batched(eqx.nn.Conv2d(3, 4, 3, stride=2, padding=1, key=KEY)),
     "b, 3, h, w", ("h >= 2", "w >= 2"), [{"b": 1, "h": 5, "w": 8}, {"b": 2, "h": 2, "w": 9}]),
    ("eqx.nn.MaxPool2d stride 2 (vmap)", eqx_batched(eqx.nn.MaxPool2d(3, stride=2)),
     "b, 3, h, w", ("h >= 3", "w >= 3"), [{"b": 1, "h": 3, "w": 8}]),
    ("eqx.nn.MLP (vmap)", eqx_batched(eqx.nn.MLP(5, 2, 16, 2, key=KEY)), "b, 5", (), [{"b": 1}, {"b": 4}]),
    ("eqx.nn.MultiheadAttention (vmap)",
     (lambda m: (lambda x: jax.vmap(lambda s: m(s, s, s))(x)))(eqx.nn.MultiheadAttention(2, 8, key=KEY)),
     "b, t, 8", (), [{"b": 1, "t": 3}]),
    ("eqx.nn.Conv1d + slicing [: t//2]", (lambda m: (lambda x: jax.vmap(m)(x)[..., : x.shape[-1] // 2]))(eqx.nn.Conv1d(2, 3, 3, key=KEY)),
     "b, 2, t", ("t >= 4",), [{"b": 1, "t": 4}, {"b": 2, "t": 11}]),
    ("eqx.nn.Linear(3) on a symbolic feature dimension t", eqx_batched(eqx.nn.Linear(3, 2, key=KEY)),
     "b, t", (), []),  # an error, stock and with smtdims
]


def concrete(spec, sizes):
    return tuple(eval(d.strip(), {}, dict(sizes)) for d in spec.split(","))  # "4*k" -> 4 * sizes["k"]


def outcome(fn, spec, constraints):
    shape = export.symbolic_shape(spec, constraints=constraints)
    try:
        exp = export.export(jax.jit(fn))(jax.ShapeDtypeStruct(shape, jnp.float32))
    except Exception as err:  # the outcome, compared stock vs smtdims
        return ("error", f"{type(err).__name__}: {str(err).splitlines()[0][:200]}"), None
    # Source locations name the caller's line: left out (they differ between any two exports).
    text = "\n".join(ln for ln in exp.mlir_module().splitlines() if not ln.startswith("#loc"))
    text = re.sub(r"\s*loc\((?:[^()]|\([^()]*\))*\)", "", text)
    return ("ok", f"{exp.out_avals} hlo {hashlib.sha256(text.encode()).hexdigest()[:12]}"), exp


same = differ = run_ok = run_bad = 0
for name, fn, spec, constraints, sizes in CASES:
    smtdims.uninstall()
    stock, _ = outcome(fn, spec, constraints)
    smtdims.install()
    ours, exp = outcome(fn, spec, constraints)
    smtdims.uninstall()
    if stock == ours:
        same += 1
    else:
        differ += 1
        print(f"  DIFFERENT {name}: stock {stock}; smtdims {ours}")
    if exp is not None:
        for s in sizes:
            x = jax.random.normal(KEY, concrete(spec, s), jnp.float32)
            got, want = np.asarray(exp.call(x)), np.asarray(jax.jit(fn)(x))
            if got.shape == want.shape and np.allclose(got, want, rtol=1e-5, atol=1e-5):
                run_ok += 1
            else:
                run_bad += 1
                print(f"  WRONG RESULT {name} at {s}: {got.shape} vs {want.shape}")
    print(f"  {name}: {ours[0]} {ours[1][:110]}")
print(f"models: {len(CASES)} exports: {same} same outcome stock and with smtdims, {differ} different; "
      f"smtdims' exports run at concrete sizes: {run_ok} agree with native, {run_bad} do not")
raise SystemExit(1 if differ or run_bad else 0)
PY
  echo "clients: models took $((SECONDS - t0)) s"
fi

if [ -z "$ONLY" ] || [ "$ONLY" = keras ]; then
  t0=$SECONDS
  KVENV=${KERAS_VENV:-.venv/keras}
  if [ ! -x "$KVENV/bin/python" ]; then
    PY=$(find_python) || { echo "clients: no Python >= 3.12 found (set PYTHON312)" >&2; exit 3; }
    "$PY" -m venv "$KVENV"
    "$KVENV/bin/python" -m pip install -q --upgrade pip
  fi
  "$KVENV/bin/python" -m pip install -q -e . "jax==$CLIENTS_JAX" "jaxlib==$CLIENTS_JAX" keras keras-hub
  names=()
  [ "$ONLY" = keras ] && names=("$@")  # without ONLY, the arguments are jax2onnx's pytest's
  KERAS_BACKEND=jax "$KVENV/bin/python" scripts/clients_keras.py "${names[@]}" || status=1
  echo "clients: keras took $((SECONDS - t0)) s"
fi
exit "$status"

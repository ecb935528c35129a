"""keras-hub backbones (Keras 3, JAX backend) exported with a symbolic batch and sequence, stock
and with smtdims (run by ``scripts/clients.sh``, section ``keras``; not in CI: it needs
TensorFlow, which keras-hub's tokenizers pull in).

For each backbone (random init, a tiny config: vocabulary 97, one layer, hidden size 16,
position table of 64), in fresh processes:

1. ``jax.export`` stock and with ``smtdims.install()``: the outcome must be the same (output
   shapes and StableHLO text, or the exception: smtdims' class a subclass of stock's, the same
   ``args[0]``), as the drop-in promise says; Keras re-creates the exception as ``type(e)(msg)``.
2. ``smtdims.export_and_verify(fix=True)``: the fix found, verified end to end (the person's fix
   for a position table is ``t <= 64``).

Usage: ``python scripts/clients_keras.py [NAME ...]``; exit 1 when an outcome differs or a fix
is missing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

BACKBONES = ("GPT2Backbone", "BertBackbone", "RobertaBackbone", "DistilBertBackbone")
EXPECTED_FIX = ("t <= 64",)

_CHILD = r'''
import json, os, sys
os.environ.setdefault("KERAS_BACKEND", "jax")
mode, name = sys.argv[1], sys.argv[2]
if mode == "smtdims":
    import smtdims
    smtdims.install()
import jax, jax.numpy as jnp, keras, keras_hub
from jax import export
keras.utils.set_random_seed(0)
model = getattr(keras_hub.models, name)(vocabulary_size=97, num_layers=1, num_heads=2, hidden_dim=16,
                                        intermediate_dim=32, max_sequence_length=64)
names = [i.name for i in model.inputs]

def f(*xs):
    return model(dict(zip(names, xs)))

out = {}
if mode == "fix":
    import smtdims
    rep = smtdims.export_and_verify(f, *(["int32[b, t]"] * len(names)), fix=True, samples=4)
    out["fix"] = list(rep.fix.constraints) if rep.fix is not None else None
    out["ok"] = bool(rep.fix is not None and rep.fix.ok)  # FIXED, and verified end to end
else:
    b, t = export.symbolic_shape("b, t")
    try:
        exp = export.export(jax.jit(f))(*[jax.ShapeDtypeStruct((b, t), jnp.int32) for _ in names])
        out["shapes"] = [str(a.shape) for a in jax.tree.leaves(exp.out_avals)]
        out["mlir"] = exp.mlir_module()
    except Exception as err:
        out["error"] = [c.__module__ + "." + c.__qualname__ for c in type(err).__mro__]
        out["message"] = str(err.args[0]) if err.args else ""
print("RESULT " + json.dumps(out))
'''


def _run(mode: str, name: str) -> dict:
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")
    p = subprocess.run([sys.executable, "-c", _CHILD, mode, name], capture_output=True, text=True, env=env,
                       timeout=900)
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    return {"crash": (p.stderr or p.stdout)[-600:]}


def main(names: list[str]) -> int:
    bad = 0
    for name in names or BACKBONES:
        t0 = time.monotonic()
        stock, ours = _run("stock", name), _run("smtdims", name)
        if "error" in stock:
            same = ("error" in ours and stock["error"][0] in ours["error"]
                    and ours["message"] == stock["message"])
            outcome = f"fails: {stock['error'][0].rsplit('.', 1)[1]}: {stock['message'].splitlines()[0][:70]}"
        else:
            same = ours.get("shapes") == stock.get("shapes") and ours.get("mlir") == stock.get("mlir")
            outcome = f"exports: {stock['shapes']}"
        line = f"{name:20} stock {outcome}; smtdims {'the same' if same else 'DIFFERENT: ' + str(ours)[:200]}"
        if "error" in stock:
            fixed = _run("fix", name)
            found = fixed.get("fix")
            good = fixed.get("ok") and tuple(found or ()) == EXPECTED_FIX
            line += f"; the whole fix: {found} ({'verified' if fixed.get('ok') else 'NOT verified'})"
            bad += not good
        bad += not same
        print(f"{line} [{time.monotonic() - t0:.0f} s]", flush=True)
    print(f"keras: {len(names or BACKBONES)} backbones, {bad} problems")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

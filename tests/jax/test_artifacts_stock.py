"""Artifacts exported with smtdims installed run on stock JAX without smtdims.

The exports below need smtdims (stock JAX cannot decide their shape comparisons); the
serialized bytes are loaded in a fresh interpreter (``python -c``) that never imports
smtdims -- the child asserts that -- and called on several concrete shapes, with
results compared to NumPy computed in the child.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import export, lax  # noqa: E402

import smtdims  # noqa: E402

CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    import jax
    from jax import export
    from jax._src.export import shape_poly, shape_poly_decision
    assert shape_poly._bounds_decision is shape_poly_decision.bounds_decision, "not stock JAX"
    cases = json.loads(sys.argv[1])
    out = {}
    for name, path, shapes in cases:
        exp = export.deserialize(bytearray(open(path, "rb").read()))
        results = []
        for shape in shapes:
            x = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
            results.append(np.asarray(exp.call(x)).tolist())
        out[name] = {"in": str(exp.in_avals), "out": str(exp.out_avals), "results": results}
    leaked = sorted(m for m in sys.modules if m.split(".")[0] in ("smtdims", "smtdims_jax", "smtdims_pytest"))
    print("RESULT " + json.dumps({"out": out, "leaked": leaked}))
""")


def _cases():
    return [
        # seed row 13: stock JAX raises InconclusiveDimensionOperation ('b' >= 'mod(b, 3)')
        ("slice-mod3", lambda x: lax.slice_in_dim(x, 0, x.shape[0] % 3), "b", (), [(n,) for n in range(1, 11)],
         lambda x: x[: x.shape[0] % 3]),
        # needs 'a >= b' from the constraints and b >= 16 (seed row 10)
        ("slice-constrained", lambda x: x[: x.shape[1], :16], "a, b", ("a >= b", "b >= 16"), [(20, 16), (17, 17)],
         lambda x: x[: x.shape[1], :16]),
        ("pad-mod4", lambda x: jnp.pad(x, (0, 3 - x.shape[0] % 4)), "n", (), [(n,) for n in (1, 4, 5, 11)],
         lambda x: np.pad(x, (0, 3 - x.shape[0] % 4))),
    ]


def test_smtdims_export_runs_on_stock_jax_in_a_fresh_process(tmp_path):
    cases = []
    expected = {}
    smtdims.install()
    try:
        for name, fn, spec, constraints, shapes, native in _cases():
            shape = export.symbolic_shape(spec, constraints=constraints)
            exp = export.export(jax.jit(fn))(jax.ShapeDtypeStruct(shape, jnp.int32))
            path = tmp_path / f"{name}.bin"
            path.write_bytes(exp.serialize())
            cases.append((name, str(path), shapes))
            expected[name] = {
                "in": str(exp.in_avals), "out": str(exp.out_avals),
                "results": [native(np.arange(int(np.prod(s)), dtype=np.int32).reshape(s)).tolist() for s in shapes],
            }
    finally:
        smtdims.uninstall()
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps(cases)], capture_output=True, text=True,
                          timeout=300, env=env, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    got = json.loads(line[len("RESULT "):])
    assert got["leaked"] == [], f"the child imported {got['leaked']}"
    assert got["out"] == expected


def test_row13_needs_smtdims_to_export():
    """The artifact above is one stock JAX could not have produced itself."""
    from jax._src.export import shape_poly as sp  # JAX-private: tests only

    smtdims.uninstall()
    shape = export.symbolic_shape("b")
    with pytest.raises(sp.InconclusiveDimensionOperation):
        export.export(jax.jit(lambda x: lax.slice_in_dim(x, 0, x.shape[0] % 3)))(
            jax.ShapeDtypeStruct(shape, jnp.int32))

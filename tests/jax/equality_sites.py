"""JAX's shape checks that ask for the equality of two dimensions, probed with ``c == d`` provable.

Each site is a function of ``x: f32[c]`` and ``y: f32[d]`` under ``c >= d, d >= c``: stock JAX
refuses it (its syntactic ``==`` says the shapes differ), smtdims proves the shapes equal.
``python tests/jax/equality_sites.py`` prints the table row of docs/equality.md for the installed JAX;
``tests/jax/test_equality.py`` asserts every site on every JAX that CI runs.
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax import export, lax

# name -> (function, how JAX asks: "seam" (core.definitely_equal*), "written" (its own ==/!=),
# or "hash" (a set or dict of shapes: stock's answer, since hashes stay syntactic))
SITES = {
    "broadcast (jnp +)": (lambda x, y: x + y, "seam"),
    "lax.add": (lambda x, y: lax.add(x, y), "seam"),
    "jnp.concatenate axis=1": (lambda x, y: jnp.concatenate([x[:, None], y[:, None]], axis=1), "written"),
    "jnp.where": (lambda x, y: jnp.where(x > 0, x, y), "written"),
    "lax.select": (lambda x, y: lax.select(x > 0, x, y), "written"),
    "lax.clamp": (lambda x, y: lax.clamp(x, y, x + 1), "written"),
    "jnp.dot": (lambda x, y: jnp.dot(x, y), "seam"),
    "jnp.einsum": (lambda x, y: jnp.einsum("i,i->i", x, y), "seam"),
    "reshape with -1": (lambda x, y: x.reshape(-1, y.shape[0]), "seam"),
    "matmul": (lambda x, y: x[:, None] @ y[None, :] @ x[:, None], "seam"),
    "lax.pad then add": (lambda x, y: lax.pad(x, 0.0, [(0, 0, 0)]) + y, "seam"),
    "lax.sort (2 operands)": (lambda x, y: lax.sort((x, y), num_keys=1)[1], "written"),
    "lax.cond branches": (lambda x, y: lax.cond(True, lambda: x, lambda: y), "written"),
    "lax.scan carry": (lambda x, y: lax.scan(lambda c, _: (y, None), x, None, length=2)[0], "written"),
    "lax.while_loop carry": (lambda x, y: lax.while_loop(lambda c: False, lambda c: y, x), "written"),
    # JAX compares these shapes by hashing them (a set of shapes): hashes stay stock's, so no proof
    "jnp.stack": (lambda x, y: jnp.stack([x, y]), "hash"),
    "jax.vmap": (lambda x, y: jax.vmap(lambda a, b: a * b)(x, y), "hash"),
}


def specs(c_d: str = "c, d") -> tuple[jax.ShapeDtypeStruct, jax.ShapeDtypeStruct]:
    c, d = export.symbolic_shape(c_d, constraints=("c >= d", "d >= c"))
    return jax.ShapeDtypeStruct((c,), jnp.float32), jax.ShapeDtypeStruct((d,), jnp.float32)


def exports(fn) -> bool:
    try:
        export.export(jax.jit(fn))(*specs())
    except Exception:  # noqa: BLE001 - any refusal
        return False
    return True


def matches_native(fn, sizes=(1, 3, 7)) -> bool:
    exp = export.export(jax.jit(fn))(*specs())
    rng = np.random.default_rng(0)
    for n in sizes:
        x, y = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
        got, want = exp.call(x, y), fn(x, y)
        if not all(np.allclose(g, w, rtol=1e-4, atol=1e-4) for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want))):
            return False
    return True


def main() -> int:
    import smtdims

    smtdims.uninstall()
    stock = {name: exports(fn) for name, (fn, _) in SITES.items()}
    smtdims.install()
    ours = {name: exports(fn) for name, (fn, _) in SITES.items()}
    smtdims.uninstall()
    print(f"jax {jax.__version__}, Python {sys.version.split()[0]}")
    print("| site | asks | stock | smtdims |")
    print("|---|---|---|---|")
    for name, (_, how) in SITES.items():
        print(f"| {name} | {how} | {'exports' if stock[name] else 'refused'} | {'exports' if ours[name] else 'refused'} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

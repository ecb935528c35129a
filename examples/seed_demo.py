"""Symbolic-shape failures users meet, answered by stock JAX and then by smtdims, side by side.

Run: ``bash scripts/demo.sh`` (sets up .venv first) or ``python examples/seed_demo.py``.
"""

from __future__ import annotations

import os
import textwrap

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import export, lax  # noqa: E402

import smtdims  # noqa: E402


def spec(*dims, dtype=jnp.int32):
    return jax.ShapeDtypeStruct(dims, dtype)


def attempt(thunk) -> str:
    try:
        return str(thunk())
    except Exception as err:  # the demo shows errors as answers
        first = str(err).split("\nThis error arises")[0]
        return f"{type(err).__name__}: {first}"


def both(title: str, thunk) -> None:
    print(f"\n## {title}")
    smtdims.uninstall()
    print("  stock JAX: " + textwrap.indent(attempt(thunk), "             ").lstrip())
    smtdims.install()
    print("  smtdims  : " + textwrap.indent(attempt(thunk), "             ").lstrip())


def undetermined():
    a, b = export.symbolic_shape("a, b")
    return export.export(jax.jit(lambda x: 0 if x.shape[0] + 1 >= x.shape[1] else 1))(spec(a, b)).out_avals


def slice_16():
    (b,) = export.symbolic_shape("b")
    return export.export(jax.jit(lambda x: lax.slice_in_dim(x, 0, 16)))(spec(b)).out_avals


def slice_mod_3():
    (b,) = export.symbolic_shape("b")
    f = lambda x: lax.slice_in_dim(x, 0, x.shape[0] % 3)  # noqa: E731
    exp = export.export(jax.jit(f))(spec(b))
    ok = all(np.array_equal(exp.call(np.arange(n, dtype=np.int32)), f(np.arange(n, dtype=np.int32))) for n in range(1, 11))
    return f"{exp.out_avals}; runs for b = 1..10 and matches native: {ok}"


def implied():
    a, b = export.symbolic_shape("a, b", constraints=("a - b >= 8",))
    return f"a >= 9 is {a >= 9}"


def loose_bounds():
    from smtdims_jax.jax_internals import jax_bounds  # what JAX's seam answers, installed or not

    a, d, m = export.symbolic_shape("a, d, m", constraints=("4*d == a - m", "m >= 0", "m <= 3"))
    return f"bounds of a - 2*d = {jax_bounds(a - 2 * d)}"


def equality():
    (b,) = export.symbolic_shape("b")

    def f(x):
        n = x.shape[0]
        halves = jnp.concatenate([lax.slice_in_dim(x, 0, n // 2), lax.slice_in_dim(x, n // 2, n)])
        odd_even = jnp.concatenate([lax.slice_in_dim(x, 0, 2 * (n // 2)), lax.slice_in_dim(x, 0, n % 2)])
        return halves + odd_even

    return export.export(jax.jit(f))(spec(b)).out_avals


def main() -> None:
    print("smtdims demo: symbolic-shape failures, stock JAX vs smtdims")
    both("undetermined comparison: 'a + 1 >= b' while tracing (true for some a, b, false for others)", undetermined)
    both("slice longer than the dimension may be: lax.slice_in_dim(x, 0, 16) on spec 'b' (needs b >= 16)", slice_16)
    both("implied by a constraint: a - b >= 8, so a >= 9", implied)
    both("provable, beyond stock JAX: lax.slice_in_dim(x, 0, x.shape[0] % 3) on spec 'b' (b >= mod(b, 3))", slice_mod_3)
    both("loose bounds (documented by JAX): a - 2*d under 4*d == a - m, 0 <= m <= 3", loose_bounds)
    both("equal sizes spelled differently: x[:n//2] ++ x[n//2:]  +  x[:2*(n//2)] ++ x[:n%2]", equality)
    print("\n## bounds under constraints: smtdims.bounds with batch >= 128, batch <= 1024")
    batch, free = export.symbolic_shape("batch, free", constraints=("batch >= 128", "batch <= 1024"))
    print("  symbolic_dim_bounds(batch) =", smtdims.symbolic_dim_bounds(batch))
    print("  symbolic_dim_bounds(free)  =", smtdims.symbolic_dim_bounds(free))
    print(textwrap.indent(smtdims.bounds(2 * batch + 1).describe(), "  "))
    print("\n## three-valued answers with witnesses: smtdims.decide")
    for q in ("b >= mod(b, 3)", "a + 1 >= b", "b == 2*floordiv(b, 2) + mod(b, 2)"):
        print(textwrap.indent(smtdims.decide(q).describe(), "  "))
    print("\nstats:", smtdims.stats())


if __name__ == "__main__":
    main()

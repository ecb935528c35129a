"""Exports give the same answer every time: two reshapes used to export in some attempts and fail in
others within one process (each attempt one nonlinear check in the Z3 context the whole process shared, so
its outcome depended on the terms earlier queries had created). Nonlinear questions now run in a context of
their own. Answers as a function of the question, without JAX: tests/core/test_determinism.py.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export

import smtdims
from smtdims import options


def pad_to_8(x):  # spec "b, n, 4"
    y = jnp.pad(x, ((0, 0), (0, (-x.shape[1]) % 8), (0, 0)))
    return y.reshape((x.shape[0], -1, 8, x.shape[2])).sum(axis=2)


def trim_to_4(x):  # spec "b, n"
    b, n = x.shape
    return x[:, :n - n % 4].reshape(b, -1, 4)


CASES = [(pad_to_8, "b, n, 4", [(2, 5, 4), (3, 8, 4), (1, 13, 4)]),
         (trim_to_4, "b, n", [(2, 7), (3, 8), (1, 13)])]


def _export(fn, spec):
    jax.clear_caches()
    shape = export.symbolic_shape(spec)  # a fresh scope each time
    return export.export(jax.jit(fn))(jax.ShapeDtypeStruct(shape, jnp.float32))


def _unrelated_queries(i: int) -> None:
    smtdims.bounds(f"a*b - {i}*a", constraints=("a <= 9",))
    smtdims.decide(f"mod(a*b, {i + 2})", "<=", "a*b")
    smtdims.bounds(f"floordiv(a*a + {i}, b)")


@pytest.mark.soak
@pytest.mark.parametrize("fn, spec, shapes", CASES, ids=["pad-to-8", "trim-to-4"])
def test_reshape_exports_every_time(installed, fn, spec, shapes):
    runs = [(None, 10), (4 * options.DEFAULT_BUDGET, 3), (20 * options.DEFAULT_BUDGET, 3)]
    for budget, times in runs:
        with options.scoped(budget=budget):
            for i in range(times):
                _unrelated_queries(i)
                exp = _export(fn, spec)  # raises if the answer flipped
    rng = np.random.default_rng(0)
    for shape in shapes:  # odd and even n
        x = rng.standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(np.asarray(exp.call(x)), np.asarray(fn(x)), rtol=1e-5)


@pytest.mark.parametrize("fn, spec, shapes", CASES, ids=["pad-to-8", "trim-to-4"])
def test_reshape_exports_inside_audit(fn, spec, shapes):
    with smtdims.audit() as report:
        _export(fn, spec)
        _export(fn, spec)
    assert not [r for r in report.records if r.flag == "inconclusive"]

"""The public API at JAX's seam: install/uninstall and enabled(), answers inside JAX, stats, the audit's
JSON. The API without JAX (bounds, decide, their values and errors): tests/core/test_api.py."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import pytest
from jax import export, lax
from jax._src.export import shape_poly as sp

import smtdims
from smtdims.engines import presburger

LOOSE = ("4*d == a - m", "m >= 0", "m <= 3")  # the looseness JAX's documentation shows (tests/core/test_api.py)


def test_looseness_gone_inside_jax(installed):
    a, d, m = export.symbolic_shape("a, d, m", constraints=LOOSE)
    assert sp._bounds_decision(a - 2 * d, sp.BoundsPrecision.BEST) == (3, math.inf)
    assert smtdims.bounds(a - 2 * d) == (3, math.inf)
    a, b = export.symbolic_shape("a, b")
    e = core_max(a, b) - a - core_max(b - a, 0)
    assert sp._bounds_decision(e, sp.BoundsPrecision.BEST) == (0, 0)


def core_max(x, y):
    from jax._src import core

    return core.max_dim(x, y)


def test_stock_is_loose_there(stock):
    a, d, m = export.symbolic_shape("a, d, m", constraints=LOOSE)
    lo, hi = sp._bounds_decision(a - 2 * d, sp.BoundsPrecision.BEST)
    assert lo < 3  # what smtdims fixes; if JAX ever gets this right, this test tells us


def test_install_roundtrip_restores_stock():
    (b,) = export.symbolic_shape("b")

    def f():  # a fresh function each time: JAX may cache a trace made while smtdims was installed
        return lambda x: lax.slice_in_dim(x, 0, x.shape[0] % 3)

    sds = jax.ShapeDtypeStruct((b,), jnp.int32)
    smtdims.uninstall()
    assert not smtdims.is_installed()
    original = sp._bounds_decision, sp._geq_decision, sp._DimExpr.__eq__
    with pytest.raises(Exception, match="inconclusive"):
        export.export(jax.jit(f()))(sds)
    smtdims.install()
    smtdims.install()  # idempotent
    assert smtdims.is_installed()
    export.export(jax.jit(f()))(sds)
    smtdims.uninstall()
    assert (sp._bounds_decision, sp._geq_decision, sp._DimExpr.__eq__) == original
    with pytest.raises(Exception, match="inconclusive"):
        export.export(jax.jit(f()))(sds)
    with smtdims.enabled():
        assert smtdims.is_installed()
        export.export(jax.jit(f()))(sds)
    assert not smtdims.is_installed()


def test_enabled_nests_and_restores_outer_state(installed):
    with smtdims.enabled(equality=False):
        assert smtdims.is_installed()
    assert smtdims.is_installed()


def test_install_validates_budget():
    with pytest.raises(ValueError, match="budget"):
        smtdims.install(budget=0)
    assert not smtdims.is_installed()


def test_stats_count_who_answered(installed):
    smtdims.reset_stats()
    a, b = export.symbolic_shape("a, b", constraints=("a >= 16", "b >= 8"))
    assert a + 2 * b >= 32  # the interval rung decides: no solver
    s = smtdims.stats()
    assert s["solvers_created"] == 0 and s["answers_by_rung"]["interval"] >= 1
    a, b, c = export.symbolic_shape("a, b, c", constraints=("a >= b + c", "c >= b"))
    assert a >= 2 * b  # two elimination steps: stock JAX's procedure (exact) decides, no solver
    s = smtdims.stats()
    assert s["solvers_created"] == 0 and s["stock_answers"] >= 1
    c, d = export.symbolic_shape("c, d", constraints=("c >= d",))
    assert c - d >= (c - d) % 3  # needs an exact procedure: ISL where islpy is installed, else Z3
    s = smtdims.stats()
    exact = "presburger_answers" if presburger.available() else "solver_checks"
    assert s[exact] >= 1
    assert c - d >= (c - d) % 3
    assert smtdims.stats()[exact] == s[exact]  # cached per scope
    with smtdims.options.scoped(presburger=False):
        e, f = export.symbolic_shape("e, f", constraints=("e >= f",))
        assert e - f >= (e - f) % 3
    s = smtdims.stats()
    assert s["solver_checks"] >= 1 and s["solvers_created"] >= 1


def test_jax_dims_and_strings_share_scope_constraints():
    a, b = export.symbolic_shape("a, b", constraints=("a >= b", "b >= 16"))
    assert smtdims.decide(a, ">=", 16).status == "true"
    assert smtdims.decide("a", ">=", 16, scope=a.scope).status == "true"
    assert smtdims.bounds(a - b).lo == 0
    assert smtdims.bounds(a, constraints=("a <= 20",)) == (16, 20)


def test_audit_json_uses_booleans_and_the_infinity_convention():
    """The audit JSON had "answer": "False" (a string) and "[16, inf]": JSON booleans,
    and bounds as [lo, hi] with "inf"/"-inf", as every --json output writes them."""
    import json

    from smtdims.lang.results import json_answer

    assert json_answer("False") is False and json_answer("True") is True
    assert json_answer("[16, inf]") == [16, "inf"] and json_answer("[-inf, 3]") == ["-inf", 3]
    assert json_answer("inconclusive") == "inconclusive"
    b, = export.symbolic_shape("b")
    with smtdims.enabled(), smtdims.audit(show_internal=True) as report:
        export.export(jax.jit(lambda x: x if x.shape[0] == 1 else x + 1))(jax.ShapeDtypeStruct((b,), jnp.int32))
        export.export(jax.jit(lambda x: lax.slice_in_dim(x, 0, x.shape[0] % 3)))(jax.ShapeDtypeStruct((b,), jnp.int32))
    answers = [r["answer"] for r in json.loads(report.to_json())]
    assert False in answers and "False" not in answers and "True" not in answers
    assert all(not isinstance(a, str) or a == "inconclusive" for a in answers), answers

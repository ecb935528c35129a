"""The ladder at JAX's seam: stock JAX's floating point, crashes and endless recursion never
reach the user; the exact copy of stock's procedure; clamped dimensions built without a solver. The ladder
without JAX: tests/core/test_ladder.py."""

from __future__ import annotations

import itertools
import math
import time

import pytest
from jax import export
from jax._src import core
from jax._src.export import shape_poly as sp

import smtdims
from smtdims import options
from smtdims.lang.parser import parse_expr


def _grid_values(expr: str, names: str, size: int = 12):
    """The values of ``expr`` at every valuation of ``names`` in 1..size where it is defined (brute force)."""
    e, vs, out = parse_expr(expr), names.split(","), []
    for point in itertools.product(range(1, size + 1), repeat=len(vs)):
        try:
            out.append(e.evaluate(dict(zip(vs, point))))
        except ZeroDivisionError:
            continue
    return out


# -- stock JAX's floating point at the seam -----------------------------------------------------------------------
def test_stock_float_precision_products(installed):
    scope = export.SymbolicScope((f"a >= {2**32 - 2}", f"b >= {2**32}", f"c <= {2**32 - 1}", f"d <= {2**32 - 1}"))
    a, b, c, d = export.symbolic_shape("a, b, c, d", scope=scope)
    # a*b - c*d == -1 at a = 2**32 - 2, b = 2**32, c = d = 2**32 - 1
    assert (2**32 - 2) * 2**32 - (2**32 - 1) ** 2 == -1
    with pytest.raises(sp.InconclusiveDimensionOperation):
        a * b >= c * d  # noqa: B015
    m = core.max_dim(a * b, c * d)
    assert str(m) == "max(a*b, c*d)"


def test_stock_float_precision_floordiv(installed):
    scope = export.SymbolicScope(("x >= 2724573685", "y >= 2671070627"))
    x, y = export.symbolic_shape("x, y", scope=scope)
    assert (2724573685 * 2671070627) // 2**32 == 1694431700
    with pytest.raises(sp.InconclusiveDimensionOperation):
        (x * y) // 2**32 >= 1694431701  # noqa: B015
    assert (x * y) // 2**32 >= 1694431700


def test_stock_float_precision_bounds(installed):
    scope = export.SymbolicScope(("3*x <= 65535*y", "y <= 4294967295"))
    x, y = export.symbolic_shape("x, y", scope=scope)
    lo, hi = sp._bounds_decision(65535 * x, sp.BoundsPrecision.BEST)
    assert lo == 65535 and hi >= 65535 * 93823560559275 == 6148727041252087125
    assert hi == 65535 * (65535 * 4294967295 // 3)


def test_exact_stock_is_the_installed_procedure_without_floats():
    from smtdims_jax import jax_internals, seam

    rung = seam.exact_stock_rung()
    assert rung is not None
    a, b = export.symbolic_shape("a, b", constraints=("a >= b + 2", "b >= 5"))
    for e in (a - b, a + 3 * b, (a // 3) - b, core.max_dim(a, 2 * b) - a):
        for prec in (sp.BoundsPrecision.FOR_GEQ0_OR_LT0, sp.BoundsPrecision.BEST):
            assert rung(e, prec) == jax_internals.stock_bounds(e, prec)  # small numbers: the same answers
    # its divisions are exact: a constraint's bound on a term (a ceil and a floor, of negative quotients
    # and of ones past 2**53, where stock's float division rounds to 2**63), and a floordiv's bounds
    best = sp.BoundsPrecision.BEST
    for cons, term, want in [
        ("2*floordiv(5 - a, 2) + 7 >= 0", lambda a: (5 - a) // 2, (-3, 2)),  # ceil(-7 / 2)
        ("-2*floordiv(5 - a, 2) - 7 >= 0", lambda a: (5 - a) // 2, (-math.inf, -4)),  # floor(-7 / 2)
        (f"2*a >= {2**64 + 1}", lambda a: a, (2**63 + 1, math.inf)),
        (f"2*a <= {2**64 + 3}", lambda a: a, (1, 2**63 + 1)),
        ("a == 10", lambda a: (3 - a) // 2, (-4, -4)),
    ]:
        (a,) = export.symbolic_shape("a", constraints=(cons,))
        assert rung(term(a), best) == want, cons


# -- stock's crashes never reach the user --------------------------------------------------------------------------
@pytest.mark.parametrize("cons", [("c >= b", "b == 4"), ("b + c >= 10", "b == 4")])
def test_stock_crash_is_a_skipped_rung(installed, cons):
    a, b, c = export.symbolic_shape("a, b, c", scope=export.SymbolicScope(cons))
    with pytest.raises(sp.InconclusiveDimensionOperation) as err:
        c >= a  # noqa: B015
    assert "undetermined" in str(err.value)
    assert str(core.max_dim(c, a)) == "max(c, a)" or str(core.max_dim(c, a)) == "max(a, c)"
    assert c >= b


@pytest.mark.parametrize("constraints", [(), ("t <= 4096",), ("b >= t",)])
def test_building_clamped_dims_creates_no_solver(installed, constraints):
    smtdims.reset_stats()
    for k in (1, 3, 5, 8, 64):
        scope = export.SymbolicScope(constraints)
        b, t = export.symbolic_shape("b, t", scope=scope)
        dims = [core.max_dim(b, k), core.min_dim(b, k) + b, b + k]
        dims += export.symbolic_shape(f"max(b, {k}), min(b, {k}) + b, b + {k}", scope=scope)
        for d in dims:
            for other in (k, b, 1):
                for cmp in (lambda x, y: x >= y, lambda x, y: x <= y, lambda x, y: x > y, lambda x, y: x < y):
                    try:
                        cmp(d, other)
                    except sp.InconclusiveDimensionOperation:
                        pass
                core.max_dim(d, other)
                core.min_dim(d, other)
    assert smtdims.stats()["solvers_created"] == 0, smtdims.stats()


def test_bounds_with_a_divisor_that_may_be_zero_answer_like_stock(installed):
    a, b = export.symbolic_shape("a, b")
    lo, hi = sp._bounds_decision(b % (a - 2), sp.BoundsPrecision.BEST)
    assert (lo, hi) == (-math.inf, math.inf) or all(lo <= v <= hi for v in _grid_values("mod(b, a - 2)", "a,b"))
    with pytest.raises(smtdims.PossibleDivisionByZeroError):
        smtdims.bounds("mod(b, a - 2)")  # the standalone API keeps its documented error


def test_stock_procedure_that_recurses_without_end_is_cut_short(installed):
    """Stock JAX itself ends in RecursionError here; the exact copy stops after its step budget."""
    scope = export.SymbolicScope((f"-a == {10**30 + 8}*a - {12 * 10**30 + 108}",))  # a == 12
    (e,) = export.symbolic_shape("4*mod(2*a + 4*floordiv(3*a, 2) + 10, 8)", scope=scope)
    smtdims.reset_stats()
    t = time.monotonic()
    assert sp._bounds_decision(e, sp.BoundsPrecision.BEST) == (8, 8)
    assert time.monotonic() - t < options.current().deadline
    assert smtdims.stats()["stock_errors"] == 1

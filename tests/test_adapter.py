"""The JAX adapter's own guarantees: memory released with scopes, the stock-trust filter."""

from __future__ import annotations

import gc
import weakref

from jax import export
from jax._src.export import shape_poly as sp
from smtdims_jax import adapter

import smtdims


def test_scopes_and_their_sessions_are_garbage_collected(installed):
    scopes, sessions = [], []
    for _ in range(30):
        a, b = export.symbolic_shape("a, b", constraints=("a >= b",))
        assert a >= a % 3  # needs the solver: a session with a Z3 context
        sessions.append(weakref.ref(adapter.session_for_scope(a.scope)))
        scopes.append(weakref.ref(a.scope))
        del a, b
    gc.collect()
    assert sum(r() is not None for r in scopes) == 0
    assert sum(r() is not None for r in sessions) == 0


def test_stock_is_trusted_exactly_where_it_is_sound():
    a, b = export.symbolic_shape("a, b")
    assert adapter._is_linear_dim(a // 3) and adapter._is_linear_dim(a % 3 - b)
    assert adapter._is_linear_dim(sp._DimExpr._from_operation("max", a, 2 * b, scope=a.scope))
    assert not adapter._is_linear_dim(a % (b + 1))
    assert adapter._is_linear_dim(a * b - 3 * a**2)  # products of variables (all >= 1) are fine
    assert not adapter._is_linear_dim((a % 3) * b)
    assert not adapter._is_linear_dim((a // 2) ** 2)


def test_linear_queries_stock_decides_never_start_a_solver(installed):
    smtdims.reset_stats()
    a, b = export.symbolic_shape("a, b", constraints=("a >= b + 3",))
    assert a - b >= 3 and (a // 2) % 4 < 4 and a + 2 * b >= 3
    assert smtdims.stats()["solvers_created"] == 0
    assert smtdims.stats()["stock_answers"] >= 3


def test_stock_is_not_trusted_where_it_is_unsound(installed):
    # Stock bounds floordiv(b - 10, 3)^2 by squaring the ends of [-3, inf): it claims >= 9,
    # but b = 10 gives 0.
    (b,) = export.symbolic_shape("b")
    e = ((b - 10) // 3) ** 2
    lo, _ = sp._bounds_decision(e, sp.BoundsPrecision.BEST)
    assert lo == 0
    smtdims.uninstall()
    stock_lo, _ = sp._bounds_decision(e, sp.BoundsPrecision.BEST)
    assert stock_lo > 0  # stock's unsound answer; if JAX fixes it, this line tells us

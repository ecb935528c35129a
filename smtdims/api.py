"""Public query functions: :func:`bounds`, :func:`symbolic_dim_bounds`, :func:`decide`.

Inputs may be strings in jax.export syntax, ints, :class:`~smtdims.lang.expr.Expr`, or
JAX symbolic dimensions (converted by the registered host, see :mod:`smtdims.host`;
this module never imports JAX). ``budget`` (Z3 rlimit per check) and ``deadline``
(seconds for the whole call) override the defaults for one call.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from . import clocks, host, options
from .errors import ScopeMismatchError
from .lang.constraints import Constraint, ConstraintSet
from .lang.expr import Expr
from .lang.parser import COMPARISONS, parse_comparison, parse_expr
from .lang.results import Bounds, Decision
from .reasoner import COMPARISON_OPS, Session, session_for

ConstraintsLike = Iterable[str | Constraint] | ConstraintSet


def _host_of(x: Any) -> host.Host | None:
    return host.find(x) if host.looks_like_jax(x) or not isinstance(x, (str, int, Expr)) else None


def _as_expr(x: Any, what: str) -> tuple[Expr, Any]:
    """IR of ``x`` and the JAX scope it came from (or None)."""
    if isinstance(x, Expr):
        return x, None
    if isinstance(x, bool):
        raise TypeError(f"{what}: expected a dimension expression, got the bool {x!r}")
    if isinstance(x, int):
        return Expr.const(x), None
    if isinstance(x, str):
        return parse_expr(x), None
    h = _host_of(x)
    if h is not None and h.is_dim(x):
        return h.to_ir(x), h.scope_of(x)
    if hasattr(x, "__index__"):
        return Expr.const(int(x.__index__())), None
    raise TypeError(
        f"{what}: expected a string like '2*b + 1', an int, or a JAX symbolic dimension; "
        f"got {type(x).__name__}: {x!r}"
    )


def _session(constraints: ConstraintsLike, scope: Any, jax_scopes: list[Any]) -> Session:
    """The session of a public call: the host's own for a scope alone (it keeps one per scope), else the
    registry's (:func:`smtdims.reasoner.session_for`) for the constraints, a scope's first."""
    scopes = [s for s in [scope, *jax_scopes] if s is not None]
    for s in scopes[1:]:
        if s is not scopes[0]:
            raise ScopeMismatchError(
                "Invalid mixing of symbolic scopes: the expressions come from different "
                "jax.export SymbolicScopes; create them with the same scope= argument"
            )
    extra = ConstraintSet.of(constraints)
    if scopes:
        h = _host_of(scopes[0])
        if h is None or not h.is_scope(scopes[0]):
            raise TypeError(f"scope must be a jax.export.SymbolicScope, got {type(scopes[0]).__name__}")
        if not extra.constraints:
            return h.session_for_scope(scopes[0])
        return session_for(ConstraintSet(h.scope_constraints(scopes[0]).constraints + extra.constraints))
    return session_for(extra)


def bounds(expr: Any, constraints: ConstraintsLike = (), scope: Any = None, *,
           budget: int | None = None, deadline: float | None = None) -> Bounds:
    """Tight bounds of ``expr`` for all dimension values (>= 1) meeting the constraints.

    Each end is proven attained (``lo_tight``/``hi_tight`` with a witness valuation) or
    proven unbounded (infinite and tight). Outside the Presburger fragment (products of
    variables) an end may be sound but not tight when the budget or deadline runs out.
    """
    # the deadline covers the whole call: parsing an expanded power and setting up the scope too
    with options.scoped(budget=budget, deadline=deadline), clocks.question():
        e, s = _as_expr(expr, "bounds(expr)")
        return _session(constraints, scope, [s]).bounds(e, readable=True)


def symbolic_dim_bounds(expr: Any, constraints: ConstraintsLike = (), scope: Any = None, *,
                        budget: int | None = None, deadline: float | None = None) -> tuple[int | float, int | float]:
    """The tutorial's API: ``(lo, hi)`` as a plain tuple (``math.inf`` when unbounded)."""
    b = bounds(expr, constraints, scope, budget=budget, deadline=deadline)
    return (b.lo, b.hi)


def decide(
    lhs: Any,
    op: str | None = None,
    rhs: Any = None,
    constraints: ConstraintsLike = (),
    scope: Any = None,
    *,
    budget: int | None = None,
    deadline: float | None = None,
) -> Decision:
    """Whether ``lhs op rhs`` holds for every valuation meeting the constraints.

    ``op`` is one of ``>= <= > < == !=``. ``decide("a + 1 >= b")`` parses the whole
    comparison from one string. The answer is three-valued (true / false /
    undetermined, with a witness valuation for each side) plus "unknown" when the
    budget or deadline runs out (``Decision.reason`` says which).
    """
    with options.scoped(budget=budget, deadline=deadline), clocks.question():
        return _decide(lhs, op, rhs, constraints, scope)


def _decide(lhs: Any, op: str | None, rhs: Any, constraints: ConstraintsLike, scope: Any) -> Decision:
    if op is None and rhs is None:
        if not isinstance(lhs, str):
            raise TypeError("decide(lhs) without op/rhs needs a comparison string like 'a + 1 >= b'")
        le, op, re_ = parse_comparison(lhs, COMPARISONS)
        return _session(constraints, scope, []).decide(le, op, re_)
    if op not in COMPARISON_OPS:
        raise ValueError(f"unknown comparison {op!r}; use one of {', '.join(COMPARISON_OPS)}")
    le, s1 = _as_expr(lhs, "decide(lhs)")
    re_, s2 = _as_expr(rhs, "decide(rhs)")
    return _session(constraints, scope, [s1, s2]).decide(le, op, re_)

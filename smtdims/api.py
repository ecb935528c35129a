"""Public query functions: :func:`bounds`, :func:`symbolic_dim_bounds`, :func:`decide`.

Inputs may be strings in jax.export syntax, ints, :class:`~smtdims.expr.Expr`, or
JAX symbolic dimensions (converted by the JAX adapter, imported only when such an
object is passed, so the reasoner works without JAX).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .constraints import Constraint, ConstraintSet
from .errors import ScopeMismatchError
from .expr import Expr
from .parser import COMPARISONS, parse_comparison, parse_expr
from .reasoner import COMPARISON_OPS, REGISTRY, Session
from .results import Bounds, Decision

ConstraintsLike = Iterable[str | Constraint] | ConstraintSet


def _is_jax_dim(x: Any) -> bool:
    return type(x).__name__ == "_DimExpr" and type(x).__module__.startswith("jax")


def _is_jax_scope(x: Any) -> bool:
    return type(x).__name__ == "SymbolicScope" and type(x).__module__.startswith("jax")


def _adapter():
    from smtdims_jax import adapter  # deferred: only JAX inputs need JAX

    return adapter


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
    if _is_jax_dim(x):
        return _adapter().to_ir(x), x.scope
    if hasattr(x, "__index__"):
        return Expr.const(int(x.__index__())), None
    raise TypeError(
        f"{what}: expected a string like '2*b + 1', an int, or a JAX symbolic dimension; "
        f"got {type(x).__name__}: {x!r}"
    )


def _session(constraints: ConstraintsLike, scope: Any, jax_scopes: list[Any]) -> Session:
    scopes = [s for s in [scope, *jax_scopes] if s is not None]
    for s in scopes[1:]:
        if s is not scopes[0]:
            raise ScopeMismatchError(
                "Invalid mixing of symbolic scopes: the expressions come from different "
                "jax.export SymbolicScopes; create them with the same scope= argument"
            )
    extra = ConstraintSet.of(constraints)
    if scopes:
        if scope is not None and not _is_jax_scope(scope):
            raise TypeError(f"scope must be a jax.export.SymbolicScope, got {type(scope).__name__}")
        base = _adapter().scope_constraints(scopes[0])
        if not extra.constraints:
            return _adapter().session_for_scope(scopes[0])
        return REGISTRY.get(ConstraintSet(base.constraints + extra.constraints))
    return REGISTRY.get(extra)


def bounds(expr: Any, constraints: ConstraintsLike = (), scope: Any = None) -> Bounds:
    """Tight bounds of ``expr`` for all dimension values (>= 1) meeting the constraints.

    Each end is proven attained (``lo_tight``/``hi_tight`` with a witness valuation) or
    proven unbounded (infinite and tight). Outside the Presburger fragment (products of
    variables) an end may be sound but not tight when the solver's budget runs out.
    """
    e, s = _as_expr(expr, "bounds(expr)")
    return _session(constraints, scope, [s]).bounds(e)


def symbolic_dim_bounds(expr: Any, constraints: ConstraintsLike = (), scope: Any = None) -> tuple[int | float, int | float]:
    """The tutorial's API: ``(lo, hi)`` as a plain tuple (``math.inf`` when unbounded)."""
    b = bounds(expr, constraints, scope)
    return (b.lo, b.hi)


def decide(
    lhs: Any,
    op: str | None = None,
    rhs: Any = None,
    constraints: ConstraintsLike = (),
    scope: Any = None,
) -> Decision:
    """Whether ``lhs op rhs`` holds for every valuation meeting the constraints.

    ``op`` is one of ``>= <= > < == !=``. ``decide("a + 1 >= b")`` parses the whole
    comparison from one string. The answer is three-valued (true / false /
    undetermined, with a witness valuation for each side) plus "unknown" when the
    solver's budget runs out.
    """
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

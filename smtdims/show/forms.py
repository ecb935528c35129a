"""Sympy and LaTeX forms of dimension expressions, for ``IPython.display.Math``.

sympy is imported on first use: importing this module costs nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lang.expr import FLOORDIV, MAX, MIN, MOD, Expr, Op, Var
from ..lang.parser import parse_expr

if TYPE_CHECKING:
    import sympy


def to_sympy(e: Expr | str | int) -> sympy.Expr:
    """The sympy form of a dimension expression (variables are positive integers).

    ``floordiv(x, y)`` becomes ``floor(x / y)`` and ``mod`` sympy's ``Mod``, which has
    Python's sign convention, so the two agree for every valuation.
    """
    import sympy

    if isinstance(e, str):
        e = parse_expr(e)
    elif isinstance(e, int):
        return sympy.Integer(e)
    total = sympy.Integer(0)
    for m, c in e.terms:
        prod: sympy.Expr = sympy.Integer(c)
        for a, k in m:
            prod = prod * _atom(a) ** k
        total = total + prod
    return total


def _atom(a: Var | Op) -> sympy.Expr:
    import sympy

    if isinstance(a, Var):
        return sympy.Symbol(a.name, integer=True, positive=True)
    x, y = to_sympy(a.lhs), to_sympy(a.rhs)
    if a.op == FLOORDIV:
        return sympy.floor(x / y)
    if a.op == MOD:
        return sympy.Mod(x, y)
    if a.op == MAX:
        return sympy.Max(x, y)
    assert a.op == MIN, a.op
    return sympy.Min(x, y)


def latex(e: Expr | str | int) -> str:
    """LaTeX of a dimension expression, for ``IPython.display.Math``."""
    import sympy

    return sympy.latex(to_sympy(e))


def comparison_latex(lhs: Expr | str | int, op: str, rhs: Expr | str | int) -> str:
    rel = {">=": r"\geq", "<=": r"\leq", ">": ">", "<": "<", "==": "=", "!=": r"\neq"}[op]
    return f"{latex(lhs)} {rel} {latex(rhs)}"


__all__ = ["comparison_latex", "latex", "to_sympy"]

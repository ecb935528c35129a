"""The ``cases`` rung: bounds of a linear expression of ``floordiv(x, d)``/``mod(x, d)`` with a
symbolic divisor ``d``, by splitting on the few values the quotient takes.

``mod(a + 13, a + 4)`` is nonlinear, so neither ISL nor the linear solver takes it, and Z3's
nonlinear search closes each end with a check per probe (about ten checks a question on JAX's
``DimExprTest``). Yet its quotient ``floordiv(a + 13, a + 4)`` is 1 or 2 for every ``a >= 1``,
and for a fixed quotient ``q`` the question is linear: ``mod(x, d) = x - q*d`` and
``floordiv(x, d) = q`` exactly where ``0 <= x - q*d <= d - 1`` (``d > 0``; for ``d < 0``,
``d + 1 <= x - q*d <= 0``). So: read the quotients the known points have, prove with two linear
questions that no valuation has a quotient outside ``[P, Q]``, and answer each ``q`` in ``[P, Q]``
as a linear question in the scope plus those two constraints (ISL's exact ends, usually).

Soundness. Every valuation meeting the constraints has a quotient ``k`` in ``[P, Q]`` (the two
proofs), meets case ``k``'s constraints (they define floor division for ``d``'s sign, proven by
the interval rung), and there ``e`` equals the case's linear expression. So each value of ``e`` lies
within the bounds of some case that is not empty, and the union of the cases' bounds is sound
(a case that is empty raises in its own scope and is skipped). An end is tight where the case
that gives it has a tight end: its witness meets the case's constraints, hence the scope's, and
is re-checked here with exact arithmetic on ``e`` itself before it is returned.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import options
from ..engines import presburger
from ..errors import UnsatisfiableConstraintsError
from ..lang.constraints import Constraint, ConstraintSet
from ..lang.expr import FLOORDIV, MOD, Expr, Op
from .interval_arith import is_inf
from .protocol import Scope
from .question import BoundsQuestion, End

if TYPE_CHECKING:
    from ..clocks import QuestionState

NAME = "cases"
MAX_QUOTIENTS = 16  # cases at most, each a linear question for ISL: together less than Z3's nonlinear search


def _split(e: Expr) -> tuple[Expr, Expr, list[tuple[Op, int]]] | None:
    """``(x, d, [(atom, coefficient), ...])`` when ``e`` is linear but for top-level terms
    ``c*floordiv(x, d)`` / ``c*mod(x, d)`` of one pair ``(x, d)``, ``x`` and ``d`` linear and ``d``
    not constant; else None."""
    pair: tuple[Expr, Expr] | None = None
    found: list[tuple[Op, int]] = []
    for m, c in e.terms:
        if len(m) != 1 or m[0][1] != 1:
            if m:
                return None
            continue
        a = m[0][0]
        if Expr.atom(a).is_linear():
            continue
        if not isinstance(a, Op) or a.op not in (FLOORDIV, MOD) or a.rhs.as_constant() is not None \
                or not (a.lhs.is_linear() and a.rhs.is_linear()):
            return None
        if pair is None:
            pair = (a.lhs, a.rhs)
        elif pair != (a.lhs, a.rhs):
            return None
        found.append((a, c))
    if pair is None:
        return None
    return pair[0], pair[1], found


def quotient_cases(s: Scope, e: Expr, vals: list[tuple[int, dict[str, int]]],
                   ask: QuestionState) -> tuple[End, End] | None:
    """Both ends of ``e`` in ``s``'s scope by cases on the quotient (module docstring), or None
    where the rung does not apply. Only with ISL: without it each case would be a linear search by
    Z3, and an empty case a Z3 check, not clearly cheaper than the nonlinear search itself."""
    if not s.solver.linear or not vals or not options.current().presburger or not presburger.available():
        return None
    got = _split(e)
    if got is None:
        return None
    x, d, atoms = got
    dlo, dhi = s.interval(d)
    if dlo >= 1:
        sign = 1
    elif dhi <= -1:
        sign = -1
    else:
        return None  # d's sign varies (or may be 0): no single pair of case constraints
    try:
        qs = [x.evaluate(env) // d.evaluate(env) for _, env in vals]
    except ZeroDivisionError:  # not at a point meeting the constraints (d's sign is proven)
        return None
    span = _quotients(s, x, d, sign, min(qs), max(qs), ask)
    if span is None:
        return None
    rest = e
    for a, c in atoms:
        rest = rest - Expr.atom(a) * c
    lows: list[End] = []
    highs: list[End] = []
    for q in range(span[0], span[1] + 1):
        if ask.deadline.expired:
            return None
        r = x - d * q  # x - q*d: mod's value in this case
        # floor(x / d) == q  <=>  0 <= r <= d - 1 (d > 0)  or  d + 1 <= r <= 0 (d < 0)
        low, high = (r, d - 1 - r) if sign > 0 else (r - d - 1, -r)
        case = ConstraintSet(s.constraints.constraints + (
            Constraint(low, ">=", f"{low} >= 0 [floordiv({x}, {d}) == {q}]"),
            Constraint(high, ">=", f"{high} >= 0 [floordiv({x}, {d}) == {q}]"),
        ))
        f = rest
        for a, c in atoms:
            f = f + (Expr.const(q) if a.op == FLOORDIV else r) * c
        sub = s.subscope(case)  # an empty case is skipped (no minimal conflict wanted); e's answer is counted
        try:
            b = sub.bounds(f)
        except UnsatisfiableConstraintsError:
            continue  # no valuation has this quotient
        lows.append(_checked(s, e, b.lo, b.lo_tight, b.lo_witness))
        highs.append(_checked(s, e, b.hi, b.hi_tight, b.hi_witness))
    if not lows:
        return None  # every case empty: the scope's satisfiability says otherwise; the search decides
    lo = min(lows, key=lambda end: (end.value, not end.tight))
    hi = max(highs, key=lambda end: (end.value, end.tight))
    return lo, hi


def _checked(s: Scope, e: Expr, value: int | float, tight: bool, w: dict[str, int] | None) -> End:
    """A case's end as an end of ``e``: tight only with a witness that meets ``s``'s constraints and
    where ``e`` evaluates to the end (exact arithmetic); else the same value, not tight (sound)."""
    if tight and not is_inf(value):
        if w is None or not s.constraints.holds(w):
            return End(value, False, None)
        try:
            if e.evaluate(w) != value:
                return End(value, False, None)
        except ZeroDivisionError:
            return End(value, False, None)
        return End(value, True, w)
    return End(value, tight and is_inf(value), None)


def _quotients(s: Scope, x: Expr, d: Expr, sign: int, p: int, q: int, ask: QuestionState) -> tuple[int, int] | None:
    """``[P, Q]`` holding ``floordiv(x, d)`` at every valuation, proven, at most ``MAX_QUOTIENTS``
    wide; first the known points' own range, then the widest allowed. None when neither is proven."""

    def at_most(k: int) -> bool:  # floor(x/d) <= k  <=>  x/d < k + 1
        return s.holds_everywhere(x - d * (k + 1) - 1 if sign < 0 else d * (k + 1) - x - 1, ">=", ask)[0]

    def at_least(k: int) -> bool:  # floor(x/d) >= k  <=>  x/d >= k
        return s.holds_everywhere(x - d * k if sign > 0 else d * k - x, ">=", ask)[0]

    if q - p + 1 > MAX_QUOTIENTS:
        return None
    hi = q if at_most(q) else p + MAX_QUOTIENTS - 1 if at_most(p + MAX_QUOTIENTS - 1) else None
    if hi is None:
        return None
    lo = p if at_least(p) else hi - MAX_QUOTIENTS + 1 if at_least(hi - MAX_QUOTIENTS + 1) else None
    return None if lo is None else (lo, hi)



def answer(q: BoundsQuestion, scope: Scope) -> str | None:
    """The rung: both ends by cases where :func:`quotient_cases` applies. An end past a proven bound
    (never attained, then) is that bound, not tight."""
    split = quotient_cases(q.focus, q.e, q.values, q.ask)
    if split is None:
        return None
    lo0, hi0 = q.interval
    lo, hi = split
    lo = lo if lo.value >= lo0 else End(lo0, False, None)
    hi = hi if hi.value <= hi0 else End(hi0, False, None)
    q.answer(lo, hi)
    return NAME

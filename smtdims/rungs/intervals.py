"""The interval rung: sound interval bounds of expressions under fixed variable ranges.

:class:`IntervalEvaluator` bounds an expression from its variables' ranges by the rules of
:mod:`smtdims.rungs.interval_arith`, and by rewritings that let intervals cancel, each with its
proof in its docstring: the same value written another way gives another sound interval, and the
two intersect. The ranges themselves come from the constraints (:mod:`smtdims.rungs.propagation`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..lang.expr import FLOORDIV, MAX, MIN, MOD, Atom, Expr, Op, Var
from .interval_arith import (
    INF,
    UNBOUNDED,
    Bound,
    Interval,
    add_interval,
    ceil_div,
    floordiv_interval,
    mod_interval,
    pow_interval,
    scale_interval,
    term_interval,
)
from .protocol import Scope
from .question import SAT, UNSAT, SignQuestion, rel_range

if TYPE_CHECKING:
    from ..clocks import Deadline


_SUM_STRIDE = 512  # terms between deadline checks in a sum's interval (a few milliseconds of work)


# Atoms an evaluator keeps: bounded, as a scope asked about for the whole process (the empty constraint
# set of public calls) would otherwise keep every max/mod it ever saw. Large enough that one
# expression's shared atoms stay memoised while it is evaluated (a DAG of nested max is walked once).
MEMO_ENTRIES = 8_192


class IntervalEvaluator:
    """Interval bounds of expressions under fixed variable ranges (memoised per atom)."""

    def __init__(self, var_ranges: Mapping[str, Interval]):
        self.var_ranges = var_ranges
        self._memo: dict[Atom, Interval] = {}

    @property
    def memo_entries(self) -> int:
        """How many atoms the memo holds (bounded by :data:`MEMO_ENTRIES`; a diagnostics reading)."""
        return len(self._memo)

    def var_range(self, name: str) -> Interval:
        return self.var_ranges.get(name, (1, INF))

    def atom(self, a: Atom, clock: Deadline) -> Interval:
        r = self._memo.get(a)
        if r is not None:
            return r
        if isinstance(a, Var):
            r = self.var_range(a.name)
        else:
            assert isinstance(a, Op)
            x, y = self.expr(a.lhs, clock), self.expr(a.rhs, clock)
            small = a.op in (FLOORDIV, MOD) and self._below_divisor(a.lhs, a.rhs, x, y, clock)
            if a.op == FLOORDIV:
                r = (0, 0) if small else self._shifted(a, floordiv_interval(x, y), y, clock)
            elif a.op == MOD:
                r = x if small else self._shifted(a, mod_interval(x, y), y, clock)
            elif a.op == MAX:
                r = (max(x[0], y[0]), max(x[1], y[1]))
            elif a.op == MIN:
                r = (min(x[0], y[0]), min(x[1], y[1]))
            else:  # pragma: no cover - the IR has no other operations
                raise AssertionError(a.op)
        if not clock.expired:  # a sum cut by the deadline inside it is not the rung's answer
            memo = self._memo
            if len(memo) >= MEMO_ENTRIES:  # the oldest atom first; one asked again is evaluated again
                try:
                    del memo[next(iter(memo))]
                except (StopIteration, KeyError, RuntimeError):  # another thread made room
                    pass
            memo[a] = r
        return r

    def _shifted(self, a: Op, r: Interval, yi: Interval, clock: Deadline) -> Interval:
        """``floordiv(x, y) = c + floordiv(x - c*y, y)`` and ``mod(x, y) = mod(x - c*y, y)`` for an integer c.

        Proof: ``x = c*y + (x - c*y)`` and Python's floor division is exact on the integer
        part. With ``c`` the ratio of a monomial both share, ``x - c*y`` no longer grows with
        it: ``floordiv(a + 13, -a - 4) = -1 + floordiv(9, -a - 4)``, in ``[-3, -2]``.
        """
        x, y = a.lhs, a.rhs
        if y.is_constant or (yi[0] <= 0 <= yi[1]):
            return r
        ys = {m: c for m, c in y.terms if m}
        for m, cx in x.terms:
            cy = ys.get(m)
            if cy is None:
                continue
            c = cx // cy
            rest = self.expr(x - y * c, clock)
            if a.op == FLOORDIV:
                lo, hi = add_interval(floordiv_interval(rest, yi), (c, c))
            else:
                lo, hi = mod_interval(rest, yi)
            return (max(r[0], lo), min(r[1], hi))
        return r

    def _below_divisor(self, x: Expr, y: Expr, xi: Interval, yi: Interval, clock: Deadline) -> bool:
        """Whether ``0 <= x < y`` or ``y < x <= 0`` holds everywhere (then ``x // y == 0``, ``x % y == x``).

        Proof: Python's floor division gives quotient 0 and remainder x exactly when x lies
        between 0 (included) and y (excluded), on the side of y's sign.
        """
        if yi[0] >= 1 and xi[0] >= 0:
            return self.expr(y - x, clock)[0] >= 1
        if yi[1] <= -1 and xi[1] <= 0:
            return self.expr(x - y, clock)[0] >= 1
        return False

    def expr(self, e: Expr, clock: Deadline) -> Interval:
        lo, hi = self._sum(e, clock)
        alt = _cancel_floordiv(e)
        if alt is not None:  # the same value, written so that intervals cancel: intersect
            lo2, hi2 = self._sum(alt, clock)
            lo, hi = max(lo, lo2), min(hi, hi2)
        if lo == -INF or hi == INF:
            lo, hi = self._mod_ends(e, lo, hi, clock)
        if lo == -INF or hi == INF:
            lo, hi = self._scaled_cancel(e, lo, hi, clock)
        return (lo, hi)

    def _scaled_cancel(self, e: Expr, lo: Bound, hi: Bound, clock: Deadline) -> Interval:
        """``L*e`` with ``L`` the lcm that lets every ``c*floordiv(x, k)`` cancel, divided back.

        Proof: ``L*e`` is the same integer as its rewriting (see ``_cancel_floordiv``), so
        ``e`` lies in ``[ceil(lo(L*e)/L), floor(hi(L*e)/L)]``: ``floordiv(t - 1, 4) -
        floordiv(t - 2, 4)`` is in ``[0, 1]``.
        """
        ks = []
        for m, c in e.terms:
            if len(m) == 1 and m[0][1] == 1 and isinstance(m[0][0], Op) and m[0][0].op == FLOORDIV:
                k = m[0][0].rhs.as_constant()
                if k and c % k:
                    ks.append(abs(k) // math.gcd(c, k))
        if not ks:
            return (lo, hi)
        big = math.lcm(*ks)
        if big > 1 << 20:
            return (lo, hi)
        alt = _cancel_floordiv(e * big)
        if alt is None:
            return (lo, hi)
        alo, ahi = self._sum(alt, clock)
        if alo != -INF:
            lo = max(lo, ceil_div(int(alo), big))
        if ahi != INF:
            hi = min(hi, int(ahi) // big)
        return (lo, hi)

    def _mod_ends(self, e: Expr, lo: Bound, hi: Bound, clock: Deadline) -> Interval:
        """Replace a term ``c*mod(x, y)`` (``y`` symbolic, of known sign) by each end of its range.

        Proof: for ``y >= 1``, ``0 <= mod(x, y) <= y - 1`` (``y + 1 <= mod <= 0`` for ``y <= -1``),
        so ``e`` lies between ``e`` with the term at one end and at the other; written with
        ``y`` itself, the ends cancel against the rest of ``e`` (``2*s - mod(-3, 2*s) >= 1``).
        """
        for m, c in e.terms:
            if len(m) != 1 or m[0][1] != 1 or not isinstance(m[0][0], Op) or m[0][0].op != MOD:
                continue
            a = m[0][0]
            if a.rhs.is_constant:
                continue
            ylo, yhi = self.expr(a.rhs, clock)
            if ylo >= 1:
                low_end, high_end = Expr.const(0), a.rhs - 1
            elif yhi <= -1:
                low_end, high_end = a.rhs + 1, Expr.const(0)
            else:
                continue
            rest = e - Expr.atom(a) * c
            at_low, at_high = rest + low_end * c, rest + high_end * c  # e's value at each end of the mod
            ends = (self._sum(at_low, clock), self._sum(at_high, clock))
            lo = max(lo, min(ends[0][0], ends[1][0]))
            hi = min(hi, max(ends[0][1], ends[1][1]))
        return (lo, hi)

    def _sum(self, e: Expr, clock: Deadline) -> Interval:
        """The sum of the terms' intervals.

        Stops early where nothing can change: once both ends are infinite, adding any
        interval leaves ``(-inf, inf)``. A long sum (an expanded power) watches the question's
        deadline every :data:`_SUM_STRIDE` terms and answers ``(-inf, inf)`` past it: sound,
        and the clock that cut it is recorded (``clock.expired``), so the answer is
        not cached as the rung's own.
        """
        total: Interval = (0, 0)
        powers: dict[tuple[Atom, int], Interval] = {}
        for i, (m, c) in enumerate(e.terms):
            if i % _SUM_STRIDE == _SUM_STRIDE - 1 and clock.expired:
                return UNBOUNDED
            if len(m) == 1 and m[0][1] == 1:  # c*atom (most terms): no product of factors to form
                total = add_interval(total, scale_interval(c, *self.atom(m[0][0], clock)))
                if total[0] == -INF and total[1] == INF:
                    return UNBOUNDED
                continue
            ps = []
            for a, k in m:
                p = powers.get((a, k))
                if p is None:
                    p = powers[(a, k)] = pow_interval(self.atom(a, clock), k)
                ps.append(p)
            total = add_interval(total, term_interval(c, ps))
            if total[0] == -INF and total[1] == INF:
                return UNBOUNDED
        return total


def _cancel_floordiv(e: Expr) -> Expr | None:
    """The same value written so that intervals cancel; None when nothing applies.

    ``c*floordiv(x, k)`` with ``k`` dividing ``c`` is ``(c/k)*(x - mod(x, k))``:
    SAME-padding arithmetic (``4*floordiv(h + 3, 4) - h``) then cancels ``h`` ([-1, 2]
    rather than (-inf, inf)). Otherwise ``mod(x, k) = x - k*floordiv(x, k)`` (Python's
    floor division, any constant ``k != 0``) where that cancels terms of ``e``:
    ``b - mod(b, 3)`` becomes ``3*floordiv(b, 3)``, which is >= 0.
    """
    out = _cancel_floordiv_terms(e)
    if out is not None:
        return out
    monos: set | None = None
    for m, c in e.terms:
        if len(m) == 1 and m[0][1] == 1 and isinstance(m[0][0], Op) and m[0][0].op == MOD:
            a = m[0][0]
            k = a.rhs.as_constant()
            if k:
                x = a.lhs
                # The rewrite has fewer terms only where something cancels: with ``x`` not constant
                # and ``|k| >= 2``, ``floordiv(x, k)`` is an atom (neither is a monomial of ``x``), new
                # unless ``e`` has it, and each non-constant monomial of ``x`` not in ``e`` adds a
                # term; with none of them in ``e``, ``e``'s ``n`` terms less the mod, plus the
                # floordiv and at least one of ``x``'s (a constant that merges aside) are ``>= n``.
                # Checked on the monomials, not built: building rewrites only to drop them is a
                # large part of a hard question's interval time.
                if abs(k) >= 2 and not x.is_constant:
                    if monos is None:
                        monos = {mm for mm, _ in e.terms}
                    if ((Op(FLOORDIV, x, a.rhs), 1),) not in monos and not any(mm and mm in monos for mm, _ in x.terms):
                        continue
                alt = e - Expr.atom(a) * c + (x - x.floordiv(k) * k) * c
                if len(alt.terms) < len(e.terms):
                    return alt
    return None


def _cancel_floordiv_terms(e: Expr) -> Expr | None:
    out: Expr | None = None
    for i, (m, c) in enumerate(e.terms):
        if len(m) == 1 and m[0][1] == 1 and isinstance(m[0][0], Op) and m[0][0].op == FLOORDIV:
            k = m[0][0].rhs.as_constant()
            if k and c % k == 0:
                x = m[0][0].lhs
                if out is None:
                    out = Expr(e.terms[:i])
                out = out + (x - x.mod(k)) * (c // k)
                continue
        if out is not None:
            out = out + Expr(((m, c),))
    return out


# -- the rung ------------------------------------------------------------------------------------------------
NAME = "interval"


def answer(q: SignQuestion, scope: Scope) -> str | None:
    """Sides the interval rules settle (``q.interval``: the scope's interval of ``e``). A side true on
    the whole interval holds somewhere: the gate has shown that some valuation meets the constraints."""
    for side in q.open():
        r = rel_range(side.rel, *q.interval)
        if r is not None:
            side.status = SAT if r == "all" else UNSAT
    return NAME

"""Variable ranges from the constraints, and one-step elimination with each constraint.

:func:`propagate_var_ranges` bounds each variable by the interval of the rest of each constraint
it occurs in linearly (a few rounds reach chains like ``a >= b, b >= 16``); :func:`combined_interval`
tightens an expression's interval by eliminating a shared monomial with one constraint at a time.
Both are sound: every valuation that meets the constraints stays inside what they return.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ..lang.constraints import ConstraintSet
from ..lang.expr import Expr, Monomial, Var
from .interval_arith import INF, Interval, ceil_div, mul_interval, pow_interval, scale_interval
from .intervals import IntervalEvaluator

if TYPE_CHECKING:
    from ..clocks import Deadline


_PROPAGATION_ROUNDS = 4


def _linear_var_term(diff: Expr, name: str) -> int | None:
    """The coefficient of ``name`` if it occurs in ``diff`` only as a degree-1 term."""
    coeff = None
    for m, c in diff.terms:
        if len(m) == 1 and m[0][1] == 1 and isinstance(m[0][0], Var) and m[0][0].name == name:
            coeff = c
    return coeff


def propagate_var_ranges(constraints: ConstraintSet, clock: Deadline) -> tuple[dict[str, Interval], bool]:
    """Sound variable ranges implied by the constraints, and whether they proved infeasibility.

    For each constraint ``c*v + rest >= 0`` (or ``== 0``) with ``v`` linear, bounds of
    ``rest`` bound ``v``. A few rounds reach chains like ``a >= b, b >= 16``.
    """
    names = sorted(constraints.variables())
    ranges: dict[str, Interval] = {n: (1, INF) for n in names}
    # max(a, b) <= c bounds a and b. Each part: its variables, its linear form (most parts), else its
    # shape where its atoms are all variables (:class:`_LeaveOneOut`), made once per propagation
    parts = []
    for con in constraints.parts():
        lin = _linear_form(con.diff)
        parts.append((con, sorted(con.diff.variables()), lin, _Shape.of(con.diff) if lin is None else None))
    # A part bounds ``n`` by a function of its other variables' ranges; ranges only narrow, so where
    # none of them changed since the part last bounded ``n``, bounding it again changes nothing.
    # Such visits are skipped (:func:`settled`; a single-variable part is visited once): the same
    # ranges after each round, with fewer visits.
    stamp, changed_at = 0, dict.fromkeys(names, 0)
    bounded_at: list[dict[str, int]] = [{} for _ in parts]  # part -> variable -> stamp when it last bounded it
    for _ in range(_PROPAGATION_ROUNDS):
        changed = False
        ev: IntervalEvaluator | None = None  # made where a part needs it (not on the fast path)
        for (con, vs, lin, shape), done in zip(parts, bounded_at, strict=True):
            if done and settled(vs, done, changed_at):
                continue
            fast = _LeaveOneOut(shape, ranges) if shape is not None else None
            if lin is not None:
                # a linear part (most): _LeaveOneOut's sums, inline: the finite ends of its terms
                # summed, the infinite ones counted
                const, coefs = lin
                lo_fin = hi_fin = const
                lo_inf = hi_inf = 0
                for m, cm in coefs.items():
                    tlo, thi = scale_interval(cm, *ranges[m])
                    if tlo == -INF:
                        lo_inf += 1
                    else:
                        lo_fin += tlo
                    if thi == INF:
                        hi_inf += 1
                    else:
                        hi_fin += thi
            for n in vs:  # a fixed order: ranges after the last round depend on it
                done[n] = stamp
                if lin is not None:  # the rest: the sums without n's term
                    c = coefs[n]
                    tlo, thi = scale_interval(c, *ranges[n])
                    rlo = -INF if lo_inf - (tlo == -INF) else lo_fin - (0 if tlo == -INF else tlo)
                    rhi = INF if hi_inf - (thi == INF) else hi_fin - (0 if thi == INF else thi)
                elif fast is not None:
                    got = fast.rest(n)
                    if got is None:
                        continue
                    c, (rlo, rhi) = got
                else:
                    c = _linear_var_term(con.diff, n)
                    if c is None:
                        continue
                    rest = con.diff - Expr.var(n) * c
                    if n in rest.variables():
                        continue
                    if ev is None:
                        ev = IntervalEvaluator(ranges)
                    rlo, rhi = ev.expr(rest, clock)
                lo, hi = ranges[n]
                # c*v >= -rest  (and for ==, c*v <= -rest too)
                if c > 0:
                    if rhi != INF:
                        lo = max(lo, ceil_div(-int(rhi), c))
                    if con.kind == "==" and rlo != -INF:
                        hi = min(hi, (-int(rlo)) // c)
                else:
                    if rhi != INF:
                        hi = min(hi, (-int(rhi)) // c)
                    if con.kind == "==" and rlo != -INF:
                        lo = max(lo, ceil_div(-int(rlo), c))
                if (lo, hi) != ranges[n]:
                    if lo > hi:
                        return ranges, True
                    ranges[n] = (lo, hi)
                    stamp += 1
                    changed_at[n] = stamp
                    ev = None  # its memo holds the old range
                    changed = True
                    if lin is not None:  # n's term again: its old ends out, its new ones in
                        ulo, uhi = scale_interval(c, lo, hi)
                        lo_inf += (ulo == -INF) - (tlo == -INF)
                        lo_fin += (0 if ulo == -INF else ulo) - (0 if tlo == -INF else tlo)
                        hi_inf += (uhi == INF) - (thi == INF)
                        hi_fin += (0 if uhi == INF else uhi) - (0 if thi == INF else thi)
                    elif fast is not None:
                        fast.update(n)
        if not changed:
            break
    return ranges, False


def settled(vs: list[str], done: dict[str, int], changed_at: dict[str, int]) -> bool:
    """Whether no variable of ``vs`` changed since the part last bounded another one of them (linear
    in ``vs``: the two latest changes; stamps are distinct, 0 where never changed)."""
    first = second = 0
    top = None
    for m in vs:
        t = changed_at[m]
        if t > first:
            first, second, top = t, first, m
        elif t > second:
            second = t
    return all((second if n == top else first) <= done[n] for n in vs)


def _linear_form(diff: Expr) -> tuple[int, dict[str, int]] | None:
    """(constant, {variable: coefficient}) where every term of ``diff`` is a constant or ``c*v``
    (each variable in one term: the terms are distinct monomials), else None."""
    const, coefs = 0, {}
    for m, c in diff.terms:
        if not m:
            const += c
        elif len(m) == 1 and m[0][1] == 1 and isinstance(m[0][0], Var):
            coefs[m[0][0].name] = c
        else:
            return None
    return const, coefs


class _Shape:
    """What :class:`_LeaveOneOut` reads of a constraint that no range changes (its terms, which
    variable is in which): made once per propagation for a part that is not linear."""

    __slots__ = ("terms", "by_var", "linear")

    def __init__(self, diff: Expr):
        self.terms = diff.terms
        self.by_var: dict[str, list[int]] = {}
        self.linear: dict[str, int] = {}  # variable -> index of its degree-1 term
        for i, (m, _) in enumerate(self.terms):
            for a, _k in m:
                self.by_var.setdefault(a.name, []).append(i)
            if len(m) == 1 and m[0][1] == 1:
                self.linear[m[0][0].name] = i

    @classmethod
    def of(cls, diff: Expr) -> _Shape | None:
        """None where an atom is not a variable (the leave-one-out sum is then not the evaluator's)."""
        if any(not isinstance(a, Var) for m, _ in diff.terms for a, _ in m):
            return None
        return cls(diff)


class _LeaveOneOut:
    """The interval of ``diff`` without one term, for every term at once (linear in the terms).

    Only for a constraint whose atoms are all variables: there the evaluator's interval of
    ``rest = diff - c*v`` is exactly the sum of its terms' intervals (no rewriting rule
    applies), so summing the other terms' intervals gives the same interval without building
    ``rest`` (building every rest of an n-term sum is quadratic in n). Small constraints too:
    building the rests would be most of a fresh constraint set's cost.
    """

    def __init__(self, shape: _Shape, ranges: dict[str, Interval]):
        self.ranges = ranges
        self.terms = shape.terms
        self.by_var = shape.by_var
        self.linear = shape.linear
        self.parts = [self._term(i) for i in range(len(self.terms))]
        lo_fin = hi_fin = lo_inf = hi_inf = 0
        for lo, hi in self.parts:
            if lo == -INF:
                lo_inf += 1
            else:
                lo_fin += int(lo)
            if hi == INF:
                hi_inf += 1
            else:
                hi_fin += int(hi)
        self.lo_fin, self.hi_fin, self.lo_inf, self.hi_inf = lo_fin, hi_fin, lo_inf, hi_inf

    def _term(self, i: int) -> Interval:
        m, c = self.terms[i]
        if len(m) == 1 and m[0][1] == 1:  # c*v
            return scale_interval(c, *self.ranges.get(m[0][0].name, (1, INF)))
        term: Interval = (c, c)
        for a, k in m:
            term = mul_interval(term, pow_interval(self.ranges.get(a.name, (1, INF)), k))
        return term

    def rest(self, n: str) -> tuple[int, Interval] | None:
        """(``n``'s coefficient, the interval of the other terms), or None unless ``n`` occurs
        only in one degree-1 term."""
        i = self.linear.get(n)
        if i is None or len(self.by_var[n]) > 1:
            return None
        lo, hi = self.parts[i]
        rlo = -INF if self.lo_inf - (lo == -INF) else self.lo_fin - (0 if lo == -INF else int(lo))
        rhi = INF if self.hi_inf - (hi == INF) else self.hi_fin - (0 if hi == INF else int(hi))
        return self.terms[i][1], (rlo, rhi)

    def update(self, n: str) -> None:
        """``n``'s range changed: the terms with ``n`` again."""
        for i in self.by_var.get(n, ()):
            for sign in (-1, 1):
                lo, hi = self.parts[i]
                if lo == -INF:
                    self.lo_inf += sign
                else:
                    self.lo_fin += sign * int(lo)
                if hi == INF:
                    self.hi_inf += sign
                else:
                    self.hi_fin += sign * int(hi)
                if sign == -1:
                    self.parts[i] = self._term(i)


_COMBINE_LIMIT = 24  # constraints tried per question: one-step elimination, not a search


def _parts_by_monomial(constraints: ConstraintSet, clock: Deadline) -> dict[Monomial, tuple[int, ...]]:
    """For each non-constant monomial, the positions of the constraints' parts whose difference has it."""
    acc: dict[Monomial, list[int]] = {}
    for i, con in enumerate(constraints.parts()):
        for m, _ in con.diff.terms:
            if m:
                acc.setdefault(m, []).append(i)
    return {m: tuple(ix) for m, ix in acc.items()}


def combined_interval(ev: IntervalEvaluator, e: Expr, constraints: ConstraintSet, clock: Deadline) -> Interval:
    """Interval of ``e``, tightened by one-step elimination with each constraint.

    For a constraint ``diff >= 0`` sharing a monomial with ``e`` (coefficients ``ce`` in
    ``e``, ``cc`` in ``diff``), take ``p = |cc|/g > 0`` and ``q = ce*sgn(cc)/g`` with
    ``g = gcd(ce, cc)``, so that ``rest = p*e - q*diff`` no longer has the monomial.
    Proof: ``p*e = q*diff + rest``; if ``q > 0`` then ``q*diff >= 0`` and
    ``e >= ceil(lo(rest)/p)``; if ``q < 0`` then ``e <= floor(hi(rest)/p)``; for
    ``diff == 0`` both hold whatever the sign of ``q``. (``a - b >= 8`` gives ``a >= 9``.)
    """
    lo, hi = ev.expr(e, clock)
    if not constraints.constraints or (lo > -INF and hi < INF and lo == hi):
        return (lo, hi)
    mine = {m: c for m, c in e.terms if m}
    if not mine:
        return (lo, hi)
    tried = 0
    parts = constraints.parts()
    index = constraints.derived("parts_by_monomial", _parts_by_monomial, clock)
    # the parts sharing a monomial with e, in the parts' order: the same parts, tried in the same
    # order, as a scan of all of them, without the scan's cost over hundreds of constraints
    near = sorted({i for m in mine for i in index.get(m, ())})
    for i in near:
        con = parts[i]
        shared = [(mine[m], cc) for m, cc in con.diff.terms if m in mine]
        tried += 1
        if tried > _COMBINE_LIMIT or clock.expired:
            break
        for ce, cc in shared:
            g = math.gcd(ce, cc)
            p, q = abs(cc) // g, (ce // g) * (1 if cc > 0 else -1)
            rlo, rhi = ev.expr(e * p - con.diff * q, clock)
            lower, upper = (q > 0, q < 0) if con.kind == ">=" else (True, True)
            if lower and rlo != -INF:
                lo = max(lo, ceil_div(int(rlo), p))
            if upper and rhi != INF:
                hi = min(hi, int(rhi) // p)
    return (lo, hi)

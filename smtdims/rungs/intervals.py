"""The sound fast path: interval bounds with a little constraint propagation.

Every function here returns an interval that contains every value the expression
takes under the constraints (variables >= 1). Intervals may be loose, never wrong.
Infinite ends are ``-math.inf`` / ``math.inf``; finite ends are Python ints.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..lang.constraints import ConstraintSet
from ..lang.expr import FLOORDIV, MAX, MIN, MOD, Atom, Expr, Monomial, Op, Var
from .question import SAT, UNSAT, SignQuestion, rel_range
from .scope import Scope

if TYPE_CHECKING:
    from ..options import Deadline

Bound = int | float  # int, or +-math.inf
Interval = tuple[Bound, Bound]
INF = math.inf
UNBOUNDED: Interval = (-INF, INF)

_PROPAGATION_ROUNDS = 4
_SUM_STRIDE = 512  # terms between deadline checks in a sum's interval (about 5 ms)


def is_inf(x: Bound) -> bool:
    """Whether an end is infinite. Never converts an int to float (ints may exceed float range)."""
    return isinstance(x, float) and math.isinf(x)


def _mul(a: Bound, b: Bound) -> Bound:
    """Endpoint product of integer intervals: 0 * inf counts as 0; no int is ever made a float."""
    if a == 0 or b == 0:
        return 0
    if is_inf(a) or is_inf(b):
        return INF if (a > 0) == (b > 0) else -INF
    return a * b


def mul_interval(x: Interval, y: Interval) -> Interval:
    cands = [_mul(x[0], y[0]), _mul(x[0], y[1]), _mul(x[1], y[0]), _mul(x[1], y[1])]
    return (min(cands), max(cands))


def pow_interval(x: Interval, e: int) -> Interval:
    lo, hi = x
    if e == 0:
        return (1, 1)
    if e % 2 == 1 or lo >= 0:
        return (_pow(lo, e), _pow(hi, e))  # monotone
    if hi <= 0:
        return (_pow(hi, e), _pow(lo, e))
    return (0, max(_pow(lo, e), _pow(hi, e)))


def _pow(x: Bound, e: int) -> Bound:
    if is_inf(x):
        return INF if x > 0 or e % 2 == 0 else -INF
    return x**e


def _floor_div_bound(a: Bound, b: Bound) -> Bound:
    if not is_inf(b):
        if not is_inf(a):
            return int(a) // int(b)
        return -INF if (a >= 0) != (b >= 0) else INF
    if not is_inf(a):
        return -1 if (a >= 0) != (b >= 0) and a != 0 else 0
    return -INF if (a >= 0) != (b >= 0) else INF


def floordiv_interval(x: Interval, y: Interval) -> Interval:
    if y[0] <= 0 <= y[1]:
        return UNBOUNDED  # the divisor may be 0 (or straddles it): no useful bound
    cands = [_floor_div_bound(a, b) for a in x for b in y]
    return (min(cands), max(cands))


def mod_interval(x: Interval, y: Interval) -> Interval:
    if y[0] >= 1:
        hi = y[1] - 1
        if x[0] >= 0:
            if x[1] < y[0]:
                return x  # mod(x, y) == x when 0 <= x < y
            hi = min(hi, x[1])
        return (0, hi)
    if y[1] <= -1:
        lo = y[0] + 1
        if x[1] <= 0:
            if x[0] > y[1]:
                return x
            lo = max(lo, x[0])
        return (lo, 0)
    return (min(0, y[0] + 1), max(0, y[1] - 1))


def add_interval(x: Interval, y: Interval) -> Interval:
    lo = -INF if (x[0] == -INF or y[0] == -INF) else x[0] + y[0]
    hi = INF if (x[1] == INF or y[1] == INF) else x[1] + y[1]
    return (lo, hi)


def scale_interval(c: int, lo: Bound, hi: Bound) -> Interval:
    """``c*[lo, hi]`` for an integer ``c``: the ends times ``c``, swapped where ``c < 0``. An infinite
    end stays infinite, its sign times ``c``'s (``0*inf`` is 0, as :func:`_mul`), and no int is
    made a float (ints may exceed float range)."""
    if c > 0:
        return (lo if is_inf(lo) else c * lo, hi if is_inf(hi) else c * hi)
    if c < 0:
        return (-hi if is_inf(hi) else c * hi, -lo if is_inf(lo) else c * lo)
    return (0, 0)


# Atoms an evaluator keeps: a scope asked about for the whole process (the empty constraint set of
# public calls) kept every max/mod it ever saw (issue 28's memory line). Large enough that one
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
            lo = max(lo, _ceil_div(int(alo), big))
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
            total = add_interval(total, _term_interval(c, ps))
            if total[0] == -INF and total[1] == INF:
                return UNBOUNDED
        return total


def _term_interval(c: int, factors: list[Interval]) -> Interval:
    """The interval of ``c`` times the factors' product.

    Factors that are all nonnegative (plain dimension variables, >= 1) multiply end by end:
    the product of the lower ends is the least product, of the upper ends the largest
    (``_mul`` keeps the ``0 * inf = 0`` convention of :func:`mul_interval`), and the sign of
    ``c`` orders the two. Otherwise the general corner products.
    """
    if all(f[0] >= 0 for f in factors):
        lo: Bound = 1
        hi: Bound = 1
        for f0, f1 in factors:
            lo, hi = _mul(lo, f0), _mul(hi, f1)
        return scale_interval(c, lo, hi)
    term: Interval = (c, c)
    for f in factors:
        term = mul_interval(term, f)
    return term


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
                # Checked on the monomials, not built: a tenth of a hard query's interval time
                # went to rewrites that were then dropped.
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


def _linear_var_term(diff: Expr, name: str) -> int | None:
    """The coefficient of ``name`` if it occurs in ``diff`` only as a degree-1 term."""
    coeff = None
    for m, c in diff.terms:
        if len(m) == 1 and m[0][1] == 1 and isinstance(m[0][0], Var) and m[0][0].name == name:
            coeff = c
    return coeff


def _ceil_div(a: int, b: int) -> int:
    return -((-a) // b)


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
    # ranges after each round, with a third fewer visits on benchmark 4's sets.
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
                        lo = max(lo, _ceil_div(-int(rhi), c))
                    if con.kind == "==" and rlo != -INF:
                        hi = min(hi, (-int(rlo)) // c)
                else:
                    if rhi != INF:
                        hi = min(hi, (-int(rhi)) // c)
                    if con.kind == "==" and rlo != -INF:
                        lo = max(lo, _ceil_div(-int(rlo), c))
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
    ``rest`` (a 1,000-term sum built 1,000 rests per round: quadratic, seconds). Small
    constraints too: building the rests was most of a fresh constraint set's cost (39 against
    95 us a set on benchmark 4's; the same ranges on 4,000 random sets of sums of products).
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
    # the parts sharing a monomial with e, in the parts' order (the same parts, tried in the same
    # order, as a scan of all of them: at 500 constraints the scan was 1-1.5 ms of a fresh bound)
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
                lo = max(lo, _ceil_div(int(rlo), p))
            if upper and rhi != INF:
                hi = min(hi, int(rhi) // p)
    return (lo, hi)


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

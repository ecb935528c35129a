"""Exact bounds by search: the ``search`` rung's room (the ends of an expression over the integer
points of its constraints, where no cheaper rung closed them).

Each end is closed by guess-then-verify: a proven (sound) bound and an attained value (a
witness) move towards each other with galloping and bisection over solver checks; exact ray
certificates (:mod:`smtdims.rungs.rays`) prove an end infinite without a solver, and Z3's optimiser is
the last resort for a linear end no probe bounded. Every answer is a proven bound; an end is
"tight" only with a witness that attains it or a certificate that none exists.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

from .. import clocks
from ..clocks import REASON_DEADLINE
from ..engines.checks import SAT, UNSAT, CheckResult
from ..engines.encoding import z3_int_or_inf
from ..lang.expr import Expr
from . import rays
from .interval_arith import INF, is_inf
from .protocol import Scope
from .question import BoundsQuestion, End

if TYPE_CHECKING:
    from ..clocks import Deadline, QuestionState

NAME = "search"

UNKNOWN = "unknown"
_SEARCH_STEPS = 40  # checks per end of a nonlinear bound
_SEARCH_STEPS_LINEAR = 400  # incremental checks are cheap; enough for 128-bit-wide ranges
_MAX_PROBE_BITS = 20_000  # about 6,000 decimal digits: Z3 parses such a constant in under half a second
_UNBOUNDED_PROBES = 6  # probes towards an end with no proven bound before calling it "not found"


class EndSearch:
    """The search for the ends of expressions in one scope (its checks, points and constraints)."""

    def __init__(self, scope: Scope):
        self.scope = weakref.proxy(scope)  # the scope owns this object: no reference cycle
        self._recession: rays.Recession | None = None  # built when an end with no proven bound needs it

    def ray(self, f: Expr, witnesses: list[dict[str, int]], clock: Deadline, work: int = rays.RAY_WORK) -> bool:
        """Whether an exact ray certifies ``f`` unbounded below, from the known points (no solver)."""
        return rays.find_ray(f, self.scope.constraints, self.scope.points.base[:4] or witnesses, (), work, clock=clock)

    def end(self, e: Expr, proven: int | float, attained: int, witness: dict[str, int], ask: QuestionState, *,
            lower: bool, ray_tried: bool = False) -> End:
        """One end of ``e``: close a proven bound and an attained value in on each other.

        Work on ``f = sign*e`` (its lower end). With a proven bound: ask whether it is
        attained, then gallop up from it towards the attained value. Without one: an exact
        ray certificate (:mod:`smtdims.rungs.rays`: fixed directions, then one proposed by the
        recession cone's LP), else verify the best attained value and probe geometrically
        further out; then binary search; Z3's optimiser is the last resort for a linear end
        that no probe bounded. A nonlinear end without a proven bound is only probed a few
        times: Z3 cannot prove a nonlinear expression unbounded, so more would only cost time.
        """
        clock = ask.deadline
        sign = 1 if lower else -1
        f = e * sign
        p: int | float = proven * sign if not is_inf(proven) else -INF
        a, w = attained * sign, witness
        linear = self.scope.linear(e)
        far: list[dict[str, int]] = []

        def below(m: int) -> CheckResult:
            if abs(m).bit_length() > _MAX_PROBE_BITS:
                # Z3 reads an integer's decimal text in quadratic time, uninterruptibly (five
                # times the limit's digits take seconds): such a probe is not asked, and the
                # end stays the proven (sound, looser) bound.
                return CheckResult(UNKNOWN, reason=clocks.REASON_INCOMPLETE)
            return self.scope.check(lambda enc: [enc.expr(f) < enc.const(m)], e, ask=ask)

        if p == a:
            return End(a * sign, True, w)
        if is_inf(p) and not ray_tried and self.ray(f, [w], clock):
            return End(-INF if lower else INF, True, None)  # unbounded: no solver needed
        if is_inf(p) and linear and self.recession_ray(f, [*self.scope.points.base[:4], w], ask):
            return End(-INF if lower else INF, True, None)  # one LP proposes the ray, checked exactly
        if not is_inf(p):
            # Is the proven bound attained? Intervals are often exact or nearly (split max/min
            # constraints propagate well), and an unsat check is cheap where a sat one must
            # build a model: at hundreds of variables, about a fifth of the time.
            res = below(p + 1)
            if res.status == SAT and res.model is not None:
                return End(f.evaluate(res.model) * sign, True, res.model)
            if res.status != UNSAT:
                return self._end_result(p, sign, lower)
            p += 1
            if p == a:
                return End(a * sign, True, w)
        if is_inf(p):
            res = below(a)  # guess, then verify
            if res.status == UNSAT:
                return End(a * sign, True, w)
            if res.status != SAT or res.model is None:
                return self._end_result(p, sign, lower)
            a, w = f.evaluate(res.model), res.model
            far.append(res.model)
            if rays.find_ray(f, self.scope.constraints, self.scope.points.base[:4] or [w], far, clock=clock):
                return End(-INF if lower else INF, True, None)
            if not linear and self.recession_ray(f, [*self.scope.points.base[:4], *far], ask):
                return End(-INF if lower else INF, True, None)
        gap, probes, step = max(1, abs(a)), 0, 2
        steps = _SEARCH_STEPS_LINEAR if linear else _SEARCH_STEPS
        if linear and not is_inf(p):
            # galloping (at most log2 of the distance) then bisection (log2 of the range): a fixed
            # cap would leave wide ranges open (10**60-sized coefficients: 340 bits, ~680 checks)
            steps = max(steps, 2 * (a - p).bit_length() + 8)
        for _ in range(steps):
            if p == a or clock.expired:
                break
            if is_inf(p):
                if probes == _UNBOUNDED_PROBES:
                    break
                probes += 1
                m = a - gap
                gap *= 1 << 16  # far out fast: a finite end may lie many orders of magnitude away
            else:
                # gallop up from the proven bound (the end usually lies near it), never past
                # the midpoint: at worst about twice the checks of plain bisection
                m = p + min(step, (a - p + 1) // 2)
            res = below(m)
            if res.status == UNSAT:
                if not is_inf(p):
                    step *= 2
                p = m
            elif res.status == SAT and res.model is not None:
                a, w = f.evaluate(res.model), res.model
                far.append(res.model)
            else:
                break
        if p == a:
            return End(a * sign, True, w)
        if is_inf(p) and rays.find_ray(f, self.scope.constraints, self.scope.points.base[:4], far[-3:], clock=clock):
            return End(-INF if lower else INF, True, None)
        if linear and p != a and not clock.expired:
            # last resort: Z3's optimiser proves a linear end infinite (or finds it) where no ray
            # was found; probes first, as they settle a finite end much sooner (at tens of
            # variables, probes and bisection take less than a tenth of the optimiser's time)
            opt = self.optimize_end(e, "min" if lower else "max", ask)
            if opt is not None:
                return opt
        return self._end_result(p, sign, lower)

    def recession_ray(self, f: Expr, bases: list[dict[str, int]], ask: QuestionState) -> bool:
        """A ray proposed by the recession cone's LP, checked exactly from known feasible points."""
        if self._recession is None:
            self._recession = rays.Recession(self.scope.constraints, self.scope.budget, self.scope.solver.family)
        d = self._recession.direction(f, ask)
        if d is None:
            return False
        names = set(self.scope.constraints.variables()) | f.variables()
        for b in bases:
            full = {v: b.get(v, 1) for v in names}
            if rays.unbounded_below(f, self.scope.constraints, full, d, names,
                                    failing=rays.failing_at(self.scope.constraints, full), clock=ask.deadline):
                return True
        return False

    @staticmethod
    def _end_result(p: int | float, sign: int, lower: bool) -> End:
        if is_inf(p):
            return End(-INF if lower else INF, False, None)
        return End(p * sign, False, None)

    def optimize_end(self, e: Expr, sense: str, ask: QuestionState) -> End | None:
        """Z3's optimiser for one linear end; None when it cannot say (budget, deadline)."""
        (res, value), = self.scope.solver.optimize(e, e.variables(), (sense,), ask=ask).values()
        if res.status != SAT:
            return None
        val = z3_int_or_inf(value)
        if is_inf(val):
            return End(val, True, None)
        if res.model is None or not self.scope.constraints.holds(res.model) or e.evaluate(res.model) != val:
            return None  # never trust an optimum we cannot re-evaluate exactly
        return End(val, True, res.model)


def answer(q: BoundsQuestion, scope: Scope) -> str | None:
    """The last bounds rung: both ends by search where no cheaper rung closed them; always answers.

    Exact ray certificates for both infinite ends first: they need no solver, and a nonlinear check
    on one end must not spend the deadline the other end's ray needs (a small allowance for both
    first: one end with no ray must not spend the deadline the other end's cheap ray needs).
    """
    e, s = q.e, q.focus
    lo0, hi0 = q.interval
    extremes = q.extremes() or _at_hand(e, s)
    if extremes is None:
        start = s.check(lambda enc: [], e, ask=q.ask)
        if start.status != SAT or start.model is None:
            q.answer(End(lo0, False, None), End(hi0, False, None), deterministic=start.reason != REASON_DEADLINE)
            return "interval"
        try:
            v0 = e.evaluate(start.model)
        except ZeroDivisionError:
            q.answer(End(lo0, False, None), End(hi0, False, None))
            return "interval"
        (vmin, wmin), (vmax, wmax) = (v0, start.model), (v0, start.model)
    else:
        (vmin, wmin), (vmax, wmax) = extremes
    ends = ((lo0, 1, wmin), (hi0, -1, wmax))
    clock = q.clock
    rlo, rhi = (is_inf(p) and s.search.ray(e * sign, [wv], clock, rays.RAY_WORK // 8) for p, sign, wv in ends)
    rlo, rhi = (r or (is_inf(p) and s.search.ray(e * sign, [wv], clock))
                for r, (p, sign, wv) in zip((rlo, rhi), ends, strict=True))
    lo = End(-INF, True, None) if rlo else s.search.end(e, lo0, vmin, wmin, q.ask, lower=True, ray_tried=True)
    hi = End(INF, True, None) if rhi else s.search.end(e, hi0, vmax, wmax, q.ask, lower=False, ray_tried=True)
    q.answer(lo, hi, deterministic=not clock.expired)
    return NAME


def _at_hand(e: Expr, s: Scope) -> tuple[tuple[int, dict[str, int]], tuple[int, dict[str, int]]] | None:
    """The least and greatest values of ``e`` at the points at hand where no point is known (none of
    the guesses holds): the satisfiability gate's point, all ones. A check with no facts of its own
    would only find another such point (at hundreds of variables and constraints, a fifth of a bound's time).
    """
    seen = []
    for p in s.points_at_hand(e):
        try:
            seen.append((e.evaluate(p), p))
        except ZeroDivisionError:
            continue
    if not seen:
        return None
    return min(seen, key=lambda x: x[0]), max(seen, key=lambda x: x[0])

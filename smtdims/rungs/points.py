"""The witness-points rung: exact evaluation at valuations already known to satisfy the constraints.

A point is a valuation (every variable an integer >= 1) that meets every constraint,
checked with exact Python arithmetic before it is kept. Evaluating a question at a
point costs microseconds and proves things a solver would otherwise be asked:

- two points where ``e`` has opposite signs prove that no sign bound holds
  (the comparison is undetermined);
- one point where a claimed relation fails refutes it (``==`` is not provable);
- the values at the points are attained: they are candidates for tight bounds
  (guess, then verify with one solver check per end).

Points come from the all-ones valuation, the ends of the ranges that interval
propagation derived and a spread above the low ends: from the constraints alone, never
from models of earlier questions' checks, so that an answer does not depend on which
questions came before. Variables of a question that no constraint mentions are free: they are
filled with a few patterns (all 1, all 2, ascending, one large, ...).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from ..lang.constraints import ConstraintSet
from ..lang.expr import Expr
from .interval_arith import INF, Interval, is_inf
from .protocol import Scope
from .question import SAT, BoundsQuestion, End, SignQuestion, holds

if TYPE_CHECKING:
    from ..clocks import Deadline

_MAX_REMEMBERED = 12
_FREE_FILLS = (1, 2, 3, 8, 64, 1024)
_MAX_SINGLE_FILLS = 8  # free variables that get a fill of their own (one large, the rest 1, ...)
_MAX_FILL_SETS = 64  # lists of fillings a constraint set keeps, by free variables (the questions' other variables)
# Evaluation work per question (valuations times Expr.size): a fraction of a second, a small part of
# the default deadline. Points only ever prove things (undetermined, refuted, attained), so
# evaluating fewer of them is sound; the limit is a count, so the same question evaluates the same
# points. Unlimited, a thousand free variables give thousands of valuations of a thousand-term sum:
# seconds of evaluation.
_POINT_WORK = 200_000
DEADLINE_WORK = 500  # evaluation (under a millisecond) between two readings of the question's deadline
_MAX_SHRUNK = 32  # variables of a witness that shrink tries to make smaller (a thousand take seconds)


class Points:
    """The known satisfying valuations of one constraint set."""

    def __init__(self, constraints: ConstraintSet, ranges: Mapping[str, Interval]):
        self.constraints = constraints
        self.names = sorted(constraints.variables())
        self._named = frozenset(self.names)
        self._fills: dict[tuple[str, ...], list[dict[str, int]]] = {}  # free variables -> their fillings
        # The known points, replaced whole (never changed in place) by :meth:`_keep`: a reader takes
        # the tuple once and sees a consistent set while other threads add, without a lock. Two
        # threads adding at once may lose one point (each replaces the tuple it read); a point is
        # only a witness found again on demand, so losing one costs a check, never an answer.
        self._base: tuple[dict[str, int], ...] = ()
        for guess in guesses(self.names, ranges):
            self._keep(guess)

    @property
    def base(self) -> list[dict[str, int]]:
        return list(self._base)

    def satisfiable(self) -> bool:
        """True when some known point meets the constraints (proof of satisfiability, no solver)."""
        return bool(self._base) or not self.constraints.constraints

    def _keep(self, env: dict[str, int]) -> None:
        if any(n not in env for n in self.names) or not self.constraints.holds(env):
            return
        base = self._base
        if env not in base and len(base) < _MAX_REMEMBERED:
            self._base = (*base, dict(env))

    def valuations(self, free: list[str]) -> Iterator[dict[str, int]]:
        """Every known point, each with a few fillings of the free variables."""
        base = self.base if self.constraints.constraints else [{}]
        fills = self._fills.get(tuple(free))
        if fills is None:
            fills = _fills(free)
            if len(self._fills) >= _MAX_FILL_SETS:
                self._fills.clear()
            self._fills[tuple(free)] = fills
        for p in base:
            for f in fills:
                yield {**f, **p}

    def values(self, e: Expr, clock: Deadline,
               extra_free: frozenset[str] = frozenset()) -> Iterator[tuple[int, dict[str, int]]]:
        """``(e's value, valuation)`` at the known points; valuations with a zero divisor are skipped.

        At most :data:`_POINT_WORK` of evaluation, and none past the question's deadline (``clock``).
        """
        free = sorted((e.variables() | extra_free) - self._named)
        cost = e.size() + len(free) + len(self.names)  # the valuation's dict is built too
        left = check_at = _POINT_WORK
        for env in self.valuations(free):
            left -= cost
            if left < 0:
                return
            # the clock at the first valuation, then after each DEADLINE_WORK of evaluation (reading
            # it at every valuation of a small expression was a tenth of the rung's time)
            if left <= check_at:
                if clock.expired:
                    return
                check_at = left - DEADLINE_WORK
            try:
                yield e.evaluate(env), env
            except ZeroDivisionError:
                continue


def guesses(names: list[str], ranges: Mapping[str, Interval]) -> Iterator[dict[str, int]]:
    """The valuations tried as known points, in order (``names`` sorted): all ones first. Made one
    at a time: the first point stops at the first that holds (the second, on most of
    ``benchmarks/bench_oracle.py``'s sets, where all ones does not). Each is a dict of its own: a
    caller that changes one changes no later guess."""
    if not names:
        yield {}
        return

    def clip(n: str, v: int) -> int:
        lo, hi = ranges.get(n, (1, INF))
        lo = 1 if is_inf(lo) else max(1, int(lo))
        return max(lo, v if is_inf(hi) else min(int(hi), v))

    yield {n: 1 for n in names}
    low = {n: clip(n, 1) for n in names}
    yield dict(low)
    highs = {n: ranges.get(n, (1, INF))[1] for n in names}
    bounded = all(not is_inf(h) for h in highs.values())
    if bounded:
        yield {n: int(h) for n, h in highs.items()}
    k = len(names)
    # distinct values in both orders: a >= b admits only one of them
    up = {n: clip(n, low[n] + 6 + 4 * i) for i, n in enumerate(names)}
    yield dict(up)
    down = {n: clip(n, low[n] + 6 + 4 * (k - 1 - i)) for i, n in enumerate(names)}
    yield dict(down)
    yield {n: clip(n, low[n] + 1) for n in names}
    # far points: many constraints are homogeneous (b >= t) or lower bounds, which scaling keeps;
    # the fourth guess scaled (``up`` where the highs came third, else ``down``)
    fourth = up if bounded else down
    for k in (64, 1024):
        yield {n: clip(n, low[n] * k) for n in names}
        yield {n: clip(n, fourth[n] * k) for n in names}


def first_point(constraints: ConstraintSet, ranges: Mapping[str, Interval]) -> dict[str, int] | None:
    """The first guess that meets the constraints: the first known point (``Points.base[0]``), without
    checking the others."""
    names = sorted(constraints.variables())
    for guess in guesses(names, ranges):
        if constraints.holds(guess):
            return guess
    return None


def _fills(free: list[str]) -> list[dict[str, int]]:
    """The fillings of the free variables ``free``, each once.

    The same filling twice (no free variables: two empty ones; one: its ascending and descending
    fills are both 1) would evaluate every point twice for nothing.
    """
    fills: list[dict[str, int]] = [{v: k for v in free} for k in _FREE_FILLS[:2]]
    if free:
        fills.append({v: i + 1 for i, v in enumerate(free)})
        fills.append({v: len(free) - i for i, v in enumerate(free)})
        for k in _FREE_FILLS[2:]:
            fills.append({v: k for v in free})
        if len(free) > 1:
            for big in (64, 1024):
                for v in free[:_MAX_SINGLE_FILLS]:
                    fills.append({w: (big if w == v else 1) for w in free})
                    fills.append({w: (1 if w == v else big) for w in free})
    seen: set[tuple[int, ...]] = set()
    return [f for f in fills if not (tuple(f.values()) in seen or seen.add(tuple(f.values())))]


def shrink(env: Mapping[str, int], ok, constraints: ConstraintSet, clock: Deadline,
           keep: frozenset[str] = frozenset()) -> dict[str, int]:
    """A smaller valuation that still meets the constraints and ``ok`` (readable witnesses: b = 3, not 64).

    Each variable tries 1..8, then a half and a quarter of its value; every candidate is
    checked exactly, so the result is as valid a witness as ``env``.
    """
    env = dict(env)
    for v in sorted(env)[:_MAX_SHRUNK]:  # each variable costs up to 10 evaluations of everything
        if clock.expired:
            break
        cur = env[v]
        if cur <= 1 or v in keep:
            continue
        for cand in (*range(1, min(cur, 9)), cur // 4, cur // 2):
            if cand < 1 or cand >= cur:
                continue
            trial = {**env, v: cand}
            try:
                if constraints.holds(trial) and ok(trial):
                    env = trial
                    break
            except ZeroDivisionError:
                continue
    return env


# -- the rung ------------------------------------------------------------------------------------------------
NAME = "points"
# coefficient products for a ray tried before ISL's round trip: a millisecond at most, less than that
# round trip costs on a busy machine
_QUICK_RAY_WORK = 2_000


def answer(q: SignQuestion | BoundsQuestion, scope: Scope) -> str | None:
    """Known satisfying valuations: a point where a side holds is its witness (exact evaluation).

    Whether the question has what it needs is asked after the first point and then after each
    point that settled a side: ``q.done()`` reads only the sides and the interval, which a point
    that settles nothing leaves as they were (when they were not enough).

    Bounds not for people: closed where the interval rules and the known points (or a quick exact
    ray, for an end with no proven bound) close both ends, before ISL's round trip (the same exact
    ends; on a busy machine each round trip waits for the scheduler: JAX's DimExprTest closed 240
    of its 264 ISL bounds so). People's bounds keep ISL's least-sum witnesses (:func:`attained`).
    """
    if isinstance(q, BoundsQuestion):
        return None if q.readable else _closed(q)
    first = True
    for value, env in scope.points.values(q.e, q.clock):
        changed = first
        for side in q.open():
            if holds(side.rel, value):
                side.status, side.witness, side.source = SAT, env, scope
                changed = True
        if changed and (not q.open() or q.done()):
            break
        first = False
    return NAME


def _closed(q: BoundsQuestion) -> str | None:
    """Both ends, where each is a proven bound some known point attains, or infinite with an exact
    ray certificate found within a small allowance of work; else None (no solver)."""
    extremes = q.extremes()
    if extremes is None:
        return None
    (vmin, wmin), (vmax, wmax) = extremes
    lo0, hi0 = q.interval
    ends: list[End] = []
    for bound, v, w, sign in ((lo0, vmin, wmin, 1), (hi0, vmax, wmax, -1)):
        if v == bound:
            ends.append(End(v, True, w))
        elif is_inf(bound) and q.focus.search.ray(q.e * sign, [w], q.clock, _QUICK_RAY_WORK):
            ends.append(End(bound, True, None))
        else:
            return None
    q.answer(ends[0], ends[1])
    return NAME if all(end.witness is not None for end in ends) else "search"


def attained(q: BoundsQuestion, scope: Scope) -> str | None:
    """People's bounds where ISL did not answer: both ends proven bounds that known points attain.
    (Other bounds: :func:`answer` closed them before ISL where this would.)"""
    extremes = q.extremes() if q.readable else None
    if extremes is None:
        return None
    (vmin, wmin), (vmax, wmax) = extremes
    if (vmin, vmax) != q.interval:
        return None
    q.answer(End(vmin, True, wmin), End(vmax, True, wmax))
    return NAME

"""The ladder: the one place that orders the work of every question.

Every entry point (:meth:`Session.decide`, :meth:`Session.bounds`,
:meth:`Session.sign_bounds` for JAX's ``_bounds_decision`` at each precision,
:meth:`Session.proves` for provable ``==``) walks the same rungs, cheapest first,
and stops at the first one whose answer is as precise as the caller asked:

1. ``constant``  -- constant folding;
2. ``interval``  -- sound interval rules (:mod:`smtdims.heuristic`);
3. ``points``    -- exact evaluation at known satisfying valuations (:mod:`smtdims.points`):
   two points of opposite sign prove "undetermined", one point refutes a claim;
4. ``stock``     -- a host's own procedure where it is sound (JAX's, registered by the
   adapter; it only sees questions that carry the host's expression);
   ``presburger`` -- exact bounds of small Presburger questions by ISL where islpy is
   installed (:mod:`smtdims.presburger`; witnesses re-checked exactly);
5. ``solver-linear``    -- Z3, incremental, on the Presburger fragment;
6. ``solver-nonlinear`` -- Z3 in a fresh context for the question;
7. ``search``    -- guess-then-verify and binary search for exact bounds (with exact ray
   certificates and Z3's optimiser for infinite linear ends).

The gates are checked once, here: satisfiable constraints (a known point proves it
without a solver) and divisors that may be 0. Each question runs under the budget and
deadline of :mod:`smtdims.options`; ``stats()`` counts which rung answered.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, TypeVar

import z3

from . import options, presburger, rays
from .constraints import ConstraintSet
from .errors import PossibleDivisionByZeroError, UnsatisfiableConstraintsError
from .expr import CACHE_MAX_TERMS, Expr, Var, deep_recursion, nesting, symbolic_divisors
from .heuristic import INF, Interval, IntervalEvaluator, combined_interval, is_inf, propagate_var_ranges
from .options import CONFIG, DEFAULT_BUDGET, DEFAULT_DEADLINE, REASON_DEADLINE
from .points import Points, shrink
from .results import FALSE, TRUE, UNDETERMINED, UNKNOWN, Bounds, Decision
from .smt import COUNTERS, SAT, UNSAT, CheckResult, Encoder, SolverSession, thread_checks, z3_int_or_inf
from .smt import question as smt_question

__all__ = [
    "CONFIG", "DEFAULT_BUDGET", "DEFAULT_DEADLINE", "NEED_BEST", "NEED_SIGN_LEQ", "NEED_SIGN_LT", "REGISTRY",
    "Precision", "Session", "register_stock_rung", "reset_stats", "stats", "sufficient",
]

_A = TypeVar("_A")  # an answer: Decision, bool, Bounds, (Interval, deterministic)
_SEARCH_STEPS = 40  # checks per end of a nonlinear bound
_SEARCH_STEPS_LINEAR = 400  # incremental checks are cheap; enough for 128-bit-wide ranges
_SMALL_WITNESS_MAX_VARS = 32  # beyond this, an undetermined answer's witnesses are left as found
_READABLE_VALUE = 8  # a bound's witness with every value at most this is read at a glance: kept as it is
_WITNESS_CHECKS = 12  # Z3 checks at most, per end, looking for a bound's smallest witness
_MAX_PROBE_BITS = 20_000  # about 6,000 decimal digits: Z3 parses such a constant in ~0.4 s
_UNBOUNDED_PROBES = 6  # probes towards an end with no proven bound before calling it "not found"


class Precision(IntEnum):
    """What a caller needs from bounds, weakest first (JAX's ``BoundsPrecision``, ordered)."""

    SIGN = 0  # enough once lo >= 0 or hi <= 0 (max/min)
    STRICT_SIGN = 1  # enough once lo >= 0 or hi < 0 (comparisons)
    BEST = 2  # as tight as can be proven


NEED_SIGN_LEQ = Precision.SIGN
NEED_SIGN_LT = Precision.STRICT_SIGN
NEED_BEST = Precision.BEST
_LEGACY = {"geq0_or_leq0": Precision.SIGN, "geq0_or_lt0": Precision.STRICT_SIGN, "best": Precision.BEST}

COMPARISON_OPS = (">=", "<=", ">", "<", "==", "!=")
RUNGS = ("constant", "interval", "points", "stock", "presburger", "solver-linear", "solver-nonlinear", "search")
SOLVER_RUNGS = ("solver-linear", "solver-nonlinear", "search")


def precision(need: Any) -> Precision:
    return need if isinstance(need, Precision) else _LEGACY.get(need, Precision(need))


def sufficient(need: Any, lo: float, hi: float) -> bool:
    need = precision(need)
    if need == Precision.SIGN:
        return lo >= 0 or hi <= 0
    if need == Precision.STRICT_SIGN:
        return lo >= 0 or hi < 0
    return lo == hi


# -- counters ------------------------------------------------------------------------------------------
class _Stats:
    def __init__(self) -> None:
        self.lock = options.fork_safe(threading.Lock())
        self._last = threading.local()
        self.reset()

    def last_rung(self) -> str | None:
        """The rung that answered this thread's latest question (for audit mode)."""
        return getattr(self._last, "rung", None)

    def reset(self) -> None:
        with self.lock:
            self.by_rung = dict.fromkeys(RUNGS, 0)
            self.solver_answers = 0
            self.cache_hits = 0
            self.stock_errors = 0
            self.presburger_declined = 0
            self.deadline_answers = 0

    def answered(self, rung: str) -> None:
        self._last.rung = rung
        starts = getattr(self._last, "starts", None)
        # a solver rung counts as a solver answer only if Z3 ran in this question: the search
        # rung often closes both ends with rays and known points alone (issue 29)
        ran = rung in SOLVER_RUNGS and bool(starts) and thread_checks() > starts[-1]
        with self.lock:
            self.by_rung[rung] += 1
            self.solver_answers += ran

    @contextmanager
    def question(self) -> Iterator[None]:
        """Marks where this thread's question began, for :meth:`answered`."""
        starts = self._last.__dict__.setdefault("starts", [])
        starts.append(thread_checks())
        try:
            yield
        finally:
            starts.pop()

    def bump(self, name: str) -> None:
        with self.lock:
            setattr(self, name, getattr(self, name) + 1)


STATS = _Stats()


def stats() -> dict[str, Any]:
    """Who answered since start (or :func:`reset_stats`): counts per rung, and how often Z3 ran."""
    r = dict(STATS.by_rung)
    return {
        "answers_by_rung": r,
        "fast_path_answers": r["constant"] + r["interval"] + r["points"],
        "stock_answers": r["stock"],
        "presburger_answers": r["presburger"],
        "presburger_declined": STATS.presburger_declined,
        "solver_answers": STATS.solver_answers,  # answers of the three Z3 rungs that ran at least one check
        "deadline_answers": STATS.deadline_answers,  # the old name of clock_shaped_answers
        "clock_shaped_answers": STATS.deadline_answers,
        "interrupts": COUNTERS.interrupts,
        "stock_errors": STATS.stock_errors,
        "solver_checks": COUNTERS.solver_checks,
        "solver_unknowns": COUNTERS.solver_unknowns,
        "solvers_created": COUNTERS.solvers_created,
        "fresh_contexts": COUNTERS.fresh_contexts,
        "deadline_hits": COUNTERS.deadline_hits,
        "abandoned_checks": COUNTERS.abandoned_checks,
        "cache_hits": STATS.cache_hits,
    }


def reset_stats() -> None:
    STATS.reset()
    COUNTERS.reset()


# -- the host's rung ------------------------------------------------------------------------------------
StockRung = Callable[[Any, Precision], "Interval | None"]
_STOCK: list[StockRung] = []


def register_stock_rung(fn: StockRung | None) -> None:
    """The host's own procedure (rung 4): ``fn(origin, precision) -> (lo, hi) | None``.

    ``origin`` is the host's expression the question came from; ``fn`` answers only
    where its answer is sound (its module states why) and returns None otherwise.
    ``None`` unregisters.
    """
    _STOCK[:] = [fn] if fn is not None else []


# -- helpers ---------------------------------------------------------------------------------------------
def _relation(op: str, d: z3.ArithRef) -> z3.BoolRef:
    """``lhs op rhs`` as a relation on ``d = lhs - rhs``."""
    return {">=": d >= 0, "<=": d <= 0, ">": d > 0, "<": d < 0, "==": d == 0, "!=": d != 0}[op]


def _holds(op: str, v: int) -> bool:
    return {">=": v >= 0, "<=": v <= 0, ">": v > 0, "<": v < 0, "==": v == 0, "!=": v != 0}[op]


def _interval_decides(op: str, lo: float, hi: float) -> str | None:
    if op == ">=":
        return TRUE if lo >= 0 else FALSE if hi < 0 else None
    if op == ">":
        return TRUE if lo > 0 else FALSE if hi <= 0 else None
    if op == "<=":
        return TRUE if hi <= 0 else FALSE if lo > 0 else None
    if op == "<":
        return TRUE if hi < 0 else FALSE if lo >= 0 else None
    if op == "==":
        return TRUE if lo == hi == 0 else FALSE if (lo > 0 or hi < 0) else None
    if op == "!=":
        return FALSE if lo == hi == 0 else TRUE if (lo > 0 or hi < 0) else None
    raise ValueError(f"unknown comparison {op!r}; use one of {', '.join(COMPARISON_OPS)}")


def sign_reduce(e: Expr) -> Expr:
    """``e`` divided by a positive common factor: the same sign at every valuation.

    Every term of ``e`` shares the factor ``g * v1^k1 * ...`` (``g`` the gcd of the
    coefficients, ``vi`` variables, each >= 1), so ``e = factor * e'`` with ``factor >= 1``
    and ``sign(e) == sign(e')``. Reshapes compare ``b*4*n`` with ``b*32*floordiv(n, 8)``:
    dividing by ``4*b`` makes the question linear.
    """
    if not e.terms or e.is_constant:
        return e
    g = math.gcd(*(c for _, c in e.terms))
    common: dict[Var, int] | None = None
    for m, _ in e.terms:
        here = {a: k for a, k in m if isinstance(a, Var)}
        common = here if common is None else {a: min(k, here[a]) for a, k in common.items() if a in here}
        if not common and g == 1:
            return e
    common = common or {}
    if not common and g == 1:
        return e
    acc: dict = {}
    for m, c in e.terms:
        mono = tuple((a, k - common.get(a, 0)) for a, k in m if k - common.get(a, 0) > 0)
        acc[mono] = acc.get(mono, 0) + c // g
    return Expr._from_dict(acc)


def _sign_interval(lo, hi, rlo, rhi) -> Interval:
    """Bounds of ``e`` tightened by the interval ``[rlo, rhi]`` of ``sign_reduce(e)`` (same sign as ``e``).

    ``e = f * r`` with an integer ``f >= 1``: ``r >= 0`` gives ``e >= 0``; ``r <= -1`` gives ``e <= -1``;
    ``r <= 0`` gives ``e <= 0``.
    """
    if rlo >= 0:
        lo = max(lo, 0)
    if rhi <= -1:
        hi = min(hi, -1)
    elif rhi <= 0:
        hi = min(hi, 0)
    return (lo, hi)


@dataclass(frozen=True)
class _End:
    value: int | float
    tight: bool
    witness: dict[str, int] | None


# -- the session: one constraint set ----------------------------------------------------------------------
class Session:
    """All reasoning about one constraint set. Thread-safe: public methods take ``lock``."""

    def __init__(self, constraints: ConstraintSet, budget: int | None = None, *, parent: Session | None = None):
        self.constraints = constraints
        self.budget = budget if budget is not None else options.current().budget
        self.solver = SolverSession(constraints, self.budget)
        self.lock = options.fork_safe(threading.RLock())  # a fork while another thread holds it: unheld in the child
        self._parent = parent
        self._evaluator: IntervalEvaluator | None = None
        self._points: Points | None = None
        self._infeasible_hint = False
        self._satisfiable_checked = parent is not None  # a focus is a component of a satisfiable set
        self._sat_model: dict[str, int] | None = None
        self._focus: dict[frozenset[int], Session] = {}
        self._interval_cache: dict[Expr, Interval] = {}
        self._stock_record = [0, 0]  # linear questions the stock rung was asked / settled
        self._sign_cache: dict[tuple[Expr, Precision], tuple[Interval, bool]] = {}  # (answer, deterministic)
        self._constraint_nesting: int | None = None  # nesting() of the constraints, on the first question
        self._bounds_cache: dict[Expr, Bounds] = {}
        self._readable_cache: dict[Expr, Bounds] = {}  # the same answers with the smallest witnesses
        self._recession: rays.Recession | None = None  # built when an end with no proven bound needs it
        self._presburger: presburger.Engine | None = None  # ISL's view, built on the first eligible bound
        self._decision_cache: dict[tuple[Expr, str, Expr], Decision] = {}
        self._proof_cache: dict[tuple[Expr, str, Expr], bool] = {}

    # -- rung 2 and 3 state -----------------------------------------------------------------------------
    @property
    def evaluator(self) -> IntervalEvaluator:
        if self._evaluator is None:
            ranges, infeasible = propagate_var_ranges(self.constraints)
            self._infeasible_hint = infeasible
            self._evaluator = IntervalEvaluator(ranges)
        return self._evaluator

    @property
    def points(self) -> Points:
        if self._points is None:
            self._points = Points(self.constraints, self.evaluator.var_ranges)
        return self._points

    def interval(self, e: Expr) -> Interval:
        """Rung 2: sound (possibly loose) bounds of ``e``; no solver. Memoised per expression."""
        r = self._interval_cache.get(e)
        if r is None:
            r = combined_interval(self.evaluator, e, self.constraints)
            # an interval cut by the deadline (a long sum stops at it) is not kept for later questions
            if _cacheable(self._interval_cache, e) and not options.deadline_passed():
                self._interval_cache[e] = r
        return r

    def _sign_interval_of(self, e: Expr) -> Interval:
        """An interval with the sign information of ``e`` (for relations to 0), from ``e`` and ``sign_reduce(e)``."""
        lo, hi = self.interval(e)
        if lo >= 0 or hi <= -1:
            return (lo, hi)
        red = sign_reduce(e)
        return _sign_interval(lo, hi, *self.interval(red)) if red != e else (lo, hi)

    @contextmanager
    def _question(self, *exprs: Expr) -> Iterator[options.Deadline]:
        """One question about ``exprs``: the session's lock, the deadline, recursion room for their nesting."""
        if self._constraint_nesting is None:
            self._constraint_nesting = nesting(*(c.diff for c in self.constraints.constraints))
        depth = max(self._constraint_nesting, nesting(*exprs))
        with self.lock, deep_recursion(depth), options.question() as deadline, smt_question(), STATS.question():
            yield deadline

    # -- solver helpers -----------------------------------------------------------------------------------
    def _linear(self, *exprs: Expr) -> bool:
        return self.solver.linear and all(e.is_linear() for e in exprs)

    def _check(self, build: Callable[[Encoder], list[z3.BoolRef]], *exprs: Expr) -> CheckResult:
        res = self.solver.check(
            build, linear=self._linear(*exprs), model_vars=frozenset().union(*(e.variables() for e in exprs))
        )
        if res.status == SAT:
            if res.model is None or not self.constraints.holds(res.model):
                # witnesses are re-checked with exact Python arithmetic: an encoding bug cannot pass
                return CheckResult("unknown", reason="solver model failed exact re-evaluation")
            # Not kept as a point for later questions: a later answer would then depend on which
            # questions came before (issue 18.3: "unknown" fresh, "undetermined" after another
            # question). Points come from the constraints alone; a model serves its own question.
        return res

    def _readable(self, env: dict[str, int], ok: Callable[[dict[str, int]], bool]) -> dict[str, int]:
        """A smaller witness (``b = 3`` rather than ``b = 64``), re-checked exactly; small scopes only.

        :func:`points.shrink` costs a few exact evaluations of the constraints per variable:
        beyond a few dozen variables that is more than the question itself, and any model is
        as valid a witness. (Z3's optimiser did this before: 100-400 ms at 10 variables.)
        """
        if len(self.constraints.variables()) > _SMALL_WITNESS_MAX_VARS:
            return env
        return shrink(env, ok, self.constraints)

    def _complete(self, env: dict[str, int] | None) -> dict[str, int] | None:
        """A witness from a focus (cone of influence) extended to every constrained variable.

        The focus's variables are unconstrained by the other constraints, so any satisfying
        point of the whole set supplies the rest.
        """
        if env is None or all(v in env for v in self.constraints.variables()):
            return env
        base = self._any_point() or {}
        return {**base, **env}

    def _any_point(self) -> dict[str, int] | None:
        pts = self.points.base
        return pts[0] if pts else self._sat_model

    # -- gates -------------------------------------------------------------------------------------------------
    def ensure_satisfiable(self) -> None:
        """Raise :class:`UnsatisfiableConstraintsError` naming a minimal conflict, once per session.

        A known satisfying point settles it without a solver.
        """
        if self._satisfiable_checked:
            return
        if not self.constraints.constraints or self.points.satisfiable():
            self._satisfiable_checked = True
            return
        res = self._check(lambda enc: [])
        if res.status == UNSAT:
            core = self.solver.unsat_core() or [c.text for c in self.constraints]
            raise UnsatisfiableConstraintsError.from_conflict(core)
        if res.status == SAT:
            self._sat_model = res.model
        if res.status != "unknown" or options.clocked() is None:  # unknown at the budget: answers stay
            self._satisfiable_checked = True  # sound; do not ask on every question (a clock's unknown: ask again)

    def zero_divisor(self, *exprs: Expr) -> tuple[str, dict[str, int] | None] | None:
        """A symbolic divisor of ``exprs`` that may be 0 (with a valuation where it is), or None."""
        for e in exprs:
            for d in symbolic_divisors(e):
                lo, hi = self.interval(d)
                if lo > 0 or hi < 0:
                    continue
                for value, env in self.points.values(d):
                    if value == 0:
                        return str(d), self._complete(env)
                res = self._check(lambda enc, d=d: [enc.expr(d) == 0], d)
                if res.status == SAT:
                    return str(d), self._complete(res.model)
                if res.status != UNSAT:
                    return str(d), None
        return None

    def check_divisors(self, *exprs: Expr) -> None:
        """A symbolic divisor that can be 0 is an error, as in JAX."""
        z = self.zero_divisor(*exprs)
        if z is not None:
            raise PossibleDivisionByZeroError.from_divisor(*z, options.clocked())

    def focus(self, *exprs: Expr) -> Session:
        """The cone of influence: a session for the constraints connected to ``exprs``' variables.

        Sound once the whole set is satisfiable: constraints sharing no variable with the
        question, directly or through other constraints, do not restrict its variables.
        """
        cs = self.constraints.constraints
        if len(cs) < 2:
            return self
        want = set().union(*(e.variables() for e in exprs))
        keep: set[int] = set()
        changed = True
        while changed:
            changed = False
            for i, c in enumerate(cs):
                if i not in keep and c.diff.variables() & want:
                    keep.add(i)
                    want |= c.diff.variables()
                    changed = True
        if len(keep) == len(cs):
            return self
        key = frozenset(keep)
        sub = self._focus.get(key)
        if sub is None:
            sub = Session(ConstraintSet(tuple(cs[i] for i in sorted(keep))), self.budget, parent=self)
            self._focus[key] = sub
        return sub

    # -- decisions ------------------------------------------------------------------------------------------
    def decide(self, lhs: Expr, op: str, rhs: Expr) -> Decision:
        if op not in COMPARISON_OPS:
            raise ValueError(f"unknown comparison {op!r}; use one of {', '.join(COMPARISON_OPS)}")
        return self._answer(self._decision_cache, (lhs, op, rhs), (lhs, rhs), lambda: self._decide(lhs, op, rhs))

    def _answer(self, cache: dict, key: Any, exprs: tuple[Expr, ...], compute: Callable[[], _A],
                deterministic: Callable[[_A], bool] = lambda _: True) -> _A:
        """One question: the cached answer, or ``compute()`` stored when nothing clock-shaped it.

        The one cache policy of every question (decide, proves, sign_bounds, bounds): an answer is
        stored only when no deadline or interrupt shaped it (``options.clocked()`` is
        None and the answer says it is deterministic), so a later question in the scope never
        inherits what a clock cut short; very large expressions are not stored (``_cacheable``).
        """
        with self._question(*exprs):
            hit = cache.get(key)
            if hit is not None:
                STATS.bump("cache_hits")
                return hit
            result = compute()
            if options.clocked() is None and deterministic(result) and _cacheable(cache, *exprs):
                cache[key] = result
            return result

    def _decision(self, lhs: Expr, op: str, rhs: Expr, status: str, by: str, **kw) -> Decision:
        STATS.answered(by)
        if options.clocked() is not None:
            STATS.bump("deadline_answers")
        for k in ("witness_true", "witness_false"):
            if kw.get(k) is not None:
                kw[k] = self._complete(kw[k])
        return Decision(
            str(lhs), op, str(rhs), status,
            constraints=tuple(c.text for c in self.constraints), answered_by=by,
            _context=(self.constraints, self.budget, lhs, op, rhs), **kw,
        )

    def _decide(self, lhs: Expr, op: str, rhs: Expr) -> Decision:
        self.ensure_satisfiable()
        self.check_divisors(lhs, rhs)
        diff = lhs - rhs
        c = diff.as_constant()
        if c is not None:
            return self._decision(lhs, op, rhs, TRUE if _holds(op, c) else FALSE, "constant")
        fast = _interval_decides(op, *self._sign_interval_of(diff))
        if fast is not None:
            return self._decision(lhs, op, rhs, fast, "interval")

        def rel_holds(env: dict[str, int], want: bool) -> bool:
            return _holds(op, diff.evaluate(env)) == want

        w_true = w_false = None
        for value, env in self.points.values(diff):
            if _holds(op, value):
                w_true = w_true or env
            else:
                w_false = w_false or env
            if w_true and w_false:
                return self._decision(lhs, op, rhs, UNDETERMINED, "points",
                                      witness_true=self._readable(w_true, lambda env: rel_holds(env, True)),
                                      witness_false=self._readable(w_false, lambda env: rel_holds(env, False)))
        s = self.focus(diff)
        red = sign_reduce(diff)
        by = "solver-linear" if s._linear(red) else "solver-nonlinear"
        rel = lambda enc: [_relation(op, enc.expr(red))]  # noqa: E731
        neg = lambda enc: [z3.Not(_relation(op, enc.expr(red)))]  # noqa: E731
        holds = CheckResult(SAT, model=w_true) if w_true else s._check(rel, red, diff)
        fails = CheckResult(SAT, model=w_false) if w_false else s._check(neg, red, diff)
        if holds.status == UNSAT and fails.status != UNSAT:
            return self._decision(lhs, op, rhs, FALSE, by, witness_false=fails.model)
        if fails.status == UNSAT and holds.status != UNSAT:
            return self._decision(lhs, op, rhs, TRUE, by, witness_true=holds.model)
        if holds.status == SAT and fails.status == SAT:
            wt = w_true or s._readable(holds.model, lambda env: rel_holds(env, True))
            wf = w_false or s._readable(fails.model, lambda env: rel_holds(env, False))
            return self._decision(lhs, op, rhs, UNDETERMINED, by, witness_true=wt, witness_false=wf)
        reason = holds.reason or fails.reason or options.REASON_INCOMPLETE
        return self._decision(lhs, op, rhs, UNKNOWN, by, reason=reason,
                              witness_true=holds.model, witness_false=fails.model)

    def proves(self, lhs: Expr, op: str, rhs: Expr) -> bool:
        """Whether ``lhs op rhs`` is proven for every valuation: at most one solver check, no witnesses.

        The cheap form of :meth:`decide` for hot paths that only act on a proof (JAX's ``==``).
        """
        return self._answer(self._proof_cache, (lhs, op, rhs), (lhs, rhs), lambda: self._proves(lhs, op, rhs))

    def _proves(self, lhs: Expr, op: str, rhs: Expr) -> bool:
        self.ensure_satisfiable()
        self.check_divisors(lhs, rhs)
        diff = lhs - rhs
        c = diff.as_constant()
        if c is not None:
            STATS.answered("constant")
            return _holds(op, c)
        fast = _interval_decides(op, *self._sign_interval_of(diff))
        if fast is not None:
            STATS.answered("interval")
            return fast == TRUE
        for value, _ in self.points.values(diff):
            if not _holds(op, value):
                STATS.answered("points")
                return False
        s = self.focus(diff)
        red = sign_reduce(diff)
        STATS.answered("solver-linear" if s._linear(red) else "solver-nonlinear")
        return s._check(lambda enc: [z3.Not(_relation(op, enc.expr(red)))], red, diff).status == UNSAT

    # -- bounds for JAX-style callers ---------------------------------------------------------------------
    def sign_bounds(self, e: Expr, need: Any, origin: Any = None, *,
                    zero_divisors: str | Callable[[Any, tuple], None] = "raise") -> Interval:
        """Sound bounds of ``e`` as precise as ``need`` asks, when provable.

        ``origin`` is the host's own expression (for the host's rung). ``zero_divisors``:
        ``"raise"`` (:class:`PossibleDivisionByZeroError`), ``"defined"`` (answer over the
        valuations where ``e`` is defined, as JAX does), or a callable ``(origin, (divisor,
        witness))`` that may raise the host's own error first, then as ``"defined"``.
        """
        need = precision(need)
        c = e.as_constant()
        if c is not None:
            STATS.answered("constant")
            return (c, c)
        lo, hi = self.interval(e)
        if not sufficient(need, lo, hi) and need != Precision.BEST:
            red = sign_reduce(e)
            if red is not e and red != e:
                lo, hi = _sign_interval(lo, hi, *self.interval(red))
        if sufficient(need, lo, hi) and not self._infeasible_hint:
            if not self._satisfiable_checked:
                # The gate, once per session, before any rung answers (a known point proves it
                # for free): in a scope that no valuation satisfies every bound is vacuous, and
                # answering would let an export of an impossible specification succeed.
                with self._question():
                    self.ensure_satisfiable()
            STATS.answered("interval")
            return (lo, hi)
        answer = self._answer(self._sign_cache, (e, need), (e,),
                              lambda: self._sign_bounds(e, need, lo, hi, origin, zero_divisors),
                              deterministic=lambda r: r[1])
        return answer[0]

    def _stock_unprofitable(self) -> bool:
        """After 4 linear questions in this scope where stock settled fewer than 1 in 4, skip it.

        Only for linear questions: there the solver rungs are complete, so skipping stock
        changes the cost of an answer, never the answer (JAX's procedure can spend 30-180 ms
        before giving up).
        """
        tries, wins = self._stock_record
        return tries >= 4 and 4 * wins < tries

    def _stock(self, origin: Any, need: Precision) -> Interval | None:
        if origin is None or not _STOCK:
            return None
        try:
            return _STOCK[0](origin, need)
        except Exception:  # a host rung that fails is skipped: the next rungs answer
            STATS.bump("stock_errors")
            return None

    def _sign_bounds(self, e: Expr, need: Precision, lo, hi, origin: Any, zero_divisors: Any) -> tuple[Interval, bool]:
        self.ensure_satisfiable()
        z = self.zero_divisor(e)
        if z is not None:
            if zero_divisors == "raise":
                raise PossibleDivisionByZeroError.from_divisor(*z, options.clocked())
            if callable(zero_divisors):
                zero_divisors(origin, z)  # the host's own behaviour (JAX raises for some divisions)
            STATS.answered("interval")
            return (lo, hi), True  # sound over the valuations where e is defined
        below = above = False  # e < 0 somewhere / e >= 0 (strict) or e > 0 somewhere, seen at a point
        strict = need == Precision.STRICT_SIGN
        for value, _ in self.points.values(e):
            below |= value < 0
            above |= value >= 0 if strict or need == Precision.BEST else value > 0
            if below and above and need != Precision.BEST:
                STATS.answered("points")
                return (lo, hi), True  # undetermined: no sign bound holds
        linear = self._linear(e)
        if not (linear and self._stock_unprofitable()):
            stock = self._stock(origin, need)
            if stock is not None:
                lo, hi = max(lo, stock[0]), min(hi, stock[1])
                won = sufficient(need, lo, hi)
                if linear:
                    self._stock_record[0] += 1
                    self._stock_record[1] += won
                if won:
                    STATS.answered("stock")
                    return (lo, hi), True
        if need == Precision.BEST:
            b = self._bounds(e, proven=(lo, hi))
            return (b.lo, b.hi), b.deterministic
        self.ensure_satisfiable()
        s = self.focus(e)
        red = sign_reduce(e)
        got = s._presburger_sign(red, below, above, strict)
        if got is not None:
            STATS.answered("presburger")
            can_be_negative, can_be_positive = got
            if not can_be_negative:
                return (max(lo, 0), hi), True
            if not can_be_positive:
                return (lo, min(hi, -1 if strict else 0)), True
            return (lo, hi), True  # ISL found both: no sign bound holds
        STATS.answered("solver-linear" if s._linear(red) else "solver-nonlinear")
        reasons = []
        if not below:
            res = s._check(lambda enc: [enc.expr(red) < 0], red, e)
            if res.status == UNSAT:
                return (max(lo, 0), hi), True
            reasons.append(res.reason)
        if not above:
            res = s._check(lambda enc: [enc.expr(red) >= 0 if strict else enc.expr(red) > 0], red, e)
            if res.status == UNSAT:
                return (lo, min(hi, -1 if strict else 0)), True
            reasons.append(res.reason)
        if any(reasons) and s._isl_clock_stopped(red):
            options.mark_clocked(options.CLOCK_ISL)  # an unknown where ISL, late, would have decided
        return (lo, hi), REASON_DEADLINE not in reasons

    # -- exact bounds ----------------------------------------------------------------------------------------------
    def bounds(self, e: Expr, *, readable: bool = False) -> Bounds:
        """Exact bounds of ``e``. ``readable``: the witnesses shown to people (``smtdims.bounds``,
        the CLI) are the smallest (:meth:`_small_witness`); callers that use only the values (JAX's
        questions, constraint ranges, fixes) do not pay for that."""
        def exact() -> Bounds:
            self.ensure_satisfiable()
            self.check_divisors(e)
            return self._bounds(e)

        def deterministic(b: Bounds) -> bool:
            return b.deterministic

        if not readable:
            return self._answer(self._bounds_cache, e, (e,), exact, deterministic)
        return self._answer(self._readable_cache, e, (e,),
                            lambda: self._readable_bounds(e, self._answer(self._bounds_cache, e, (e,), exact, deterministic)),
                            deterministic)

    def _readable_bounds(self, e: Expr, b: Bounds) -> Bounds:
        """``b`` with the smallest witnesses; not deterministic if a clock cut their search."""
        lo_w = self._small_witness(e, b.lo, b.lo_tight, b.lo_witness)
        hi_w = self._small_witness(e, b.hi, b.hi_tight, b.hi_witness)
        if lo_w == b.lo_witness and hi_w == b.hi_witness:
            return b
        return Bounds(
            b.lo, b.hi, expr=b.expr, constraints=b.constraints, answered_by=b.answered_by,
            context=(self.constraints, self.budget, e),
            lo_tight=b.lo_tight, hi_tight=b.hi_tight, lo_witness=lo_w, hi_witness=hi_w,
            deterministic=b.deterministic and options.clocked() is None, reason=b.reason, budget=b.budget,
            deadline=b.deadline,
        )

    def _mk_bounds(self, e: Expr, lo: _End, hi: _End, by: str, deterministic: bool = True) -> Bounds:
        STATS.answered(by)
        if by != "presburger" and not (lo.tight and hi.tight) and self.focus(e)._isl_clock_stopped(e):
            options.mark_clocked(options.CLOCK_ISL)  # ISL, late, would have given the exact ends
        deterministic = deterministic and options.clocked() is None  # no clock shaped it
        if not deterministic:
            STATS.bump("deadline_answers")
        return Bounds(
            lo.value, hi.value, expr=str(e), constraints=tuple(c.text for c in self.constraints), answered_by=by,
            context=(self.constraints, self.budget, e), lo_tight=lo.tight, hi_tight=hi.tight,
            lo_witness=self._complete(lo.witness), hi_witness=self._complete(hi.witness),
            deterministic=deterministic,
        )

    def _small_witness(self, e: Expr, value: int | float, tight: bool,
                       env: dict[str, int] | None) -> dict[str, int] | None:
        """A witness of a tight end that a reader checks at a glance: ``b = 1, batch = 3``, not
        ``batch = 9216``; ``a = b = 1`` for ``max(a, b) - min(a, b) = 0``, not ``a = b = 1024``.

        Once the end is known (never while it is searched: this changes no bound), first exact
        evaluations only: every variable 1, every variable moved down together, then
        :func:`points.shrink`; then, while a value is still above
        ``_READABLE_VALUE``, the least sum of the variables over the valuations that meet the
        constraints and attain the end, by galloping up from "every variable 1" and bisecting
        (at most ``_WITNESS_CHECKS`` Z3 checks, under the question's budget and deadline).
        Every candidate is re-checked exactly (constraints hold, ``e`` equals the end); a check
        that fails or says unknown keeps the witness found so far. Small scopes only
        (``_SMALL_WITNESS_MAX_VARS``), as for decisions.
        """
        if env is None or not tight or is_inf(value) or len(env) > _SMALL_WITNESS_MAX_VARS:
            return env

        def attains(w: dict[str, int]) -> bool:
            try:
                return e.evaluate(w) == value
            except ZeroDivisionError:
                return False

        def valid(w: dict[str, int]) -> bool:
            try:
                return self.constraints.holds(w) and attains(w)
            except ZeroDivisionError:
                return False

        names = sorted(env)
        ones = dict.fromkeys(names, 1)
        if valid(ones):
            return ones
        down = min(env.values(), default=1) - 1  # every variable moved down together: a - b, max(a, b) - min(a, b)
        if down > 0 and valid(shifted := {v: x - down for v, x in env.items()}):
            env = shifted
        env = shrink(env, attains, self.constraints)
        if max(env.values(), default=1) <= _READABLE_VALUE or options.deadline_passed():
            return env
        # sum <= lo is refuted: only all-ones has sum len(names); no valuation goes below the variables' ranges
        floor = sum(max(1, int(low)) if not is_inf(low) else 1 for low in (self.interval(Expr.var(v))[0] for v in names))
        lo, best, step = max(len(names), floor - 1), sum(env.values()), 1
        for _ in range(_WITNESS_CHECKS):
            if lo + 1 >= best or options.deadline_passed():
                break
            m = lo + max(1, min(step, (best - lo) // 2))

            def build(enc: Encoder, m: int = m) -> list[z3.BoolRef]:
                xs = [enc.var(v) for v in names]
                return [enc.expr(e) == enc.const(value), sum(xs[1:], xs[0]) <= enc.const(m)]

            res = self._check(build, e)
            if res.status == UNSAT:
                lo, step = m, step * 2
            elif res.status == SAT and res.model is not None and all(v in res.model for v in names):
                cand = {v: res.model[v] for v in names}
                if not valid(cand):
                    break  # never trust a model exact arithmetic refutes
                env, best = cand, sum(cand.values())
            else:
                break
        return env

    def _bounds(self, e: Expr, proven: Interval | None = None) -> Bounds:
        self.ensure_satisfiable()
        c = e.as_constant()
        if c is not None:
            w = self._any_point() if self.constraints.constraints else {}
            # attained only if some valuation meets the constraints: tight once a point is known
            return self._mk_bounds(e, _End(c, w is not None, w), _End(c, w is not None, w), "constant")
        vals = list(self.points.values(e))
        s = self.focus(e)
        # ISL first where it applies: its answer is exact and cheaper than the interval rules
        exact = s._presburger_bounds(e, proven or (-INF, INF), vals)
        if exact is not None:
            return self._mk_bounds(e, *exact, "presburger")
        lo0, hi0 = self.interval(e)
        if proven is not None:
            lo0, hi0 = max(lo0, proven[0]), min(hi0, proven[1])
        if vals:
            (vmin, wmin), (vmax, wmax) = min(vals, key=lambda x: x[0]), max(vals, key=lambda x: x[0])
            if vmin == lo0 and vmax == hi0:
                return self._mk_bounds(e, _End(vmin, True, wmin), _End(vmax, True, wmax), "points")
        if not vals:
            start = s._check(lambda enc: [], e)
            if start.status != SAT or start.model is None:
                return self._mk_bounds(e, _End(lo0, False, None), _End(hi0, False, None), "interval",
                                       deterministic=start.reason != REASON_DEADLINE)
            try:
                v0 = e.evaluate(start.model)
            except ZeroDivisionError:
                return self._mk_bounds(e, _End(lo0, False, None), _End(hi0, False, None), "interval")
            (vmin, wmin), (vmax, wmax) = (v0, start.model), (v0, start.model)
        # exact ray certificates for both infinite ends first: they need no solver, and a
        # nonlinear check on one end must not spend the deadline the other end's ray needs
        # (a small allowance for both first: one end with no ray must not spend the deadline
        # the other end's cheap ray needs)
        ends = ((lo0, 1, wmin), (hi0, -1, wmax))
        rlo, rhi = (is_inf(p) and s._ray(e * sign, [wv], rays.RAY_WORK // 8) for p, sign, wv in ends)
        rlo, rhi = (r or (is_inf(p) and s._ray(e * sign, [wv])) for r, (p, sign, wv) in zip((rlo, rhi), ends, strict=True))
        lo = _End(-INF, True, None) if rlo else s._end(e, lo0, vmin, wmin, lower=True, ray_tried=True)
        hi = _End(INF, True, None) if rhi else s._end(e, hi0, vmax, wmax, lower=False, ray_tried=True)
        return self._mk_bounds(e, lo, hi, "search", deterministic=not options.deadline_passed())

    def _isl_engine(self, e: Expr) -> presburger.Engine | None:
        """This scope's ISL engine when the rung is on, islpy is installed and ``e`` is linear."""
        if not options.current().presburger or not self._linear(e) or options.deadline_passed():
            return None
        if self._presburger is None:
            if not presburger.available():
                return None
            self._presburger = presburger.Engine(self.constraints)
        return self._presburger

    def _isl_clock_stopped(self, e: Expr) -> bool:
        """Whether ISL would have answered ``e`` exactly here but a clock stopped it (:func:`presburger.clock_stopped`)."""
        return options.current().presburger and self._linear(e) and \
            presburger.clock_stopped(self._presburger, self.constraints, e)

    def _presburger_sign(self, red: Expr, below: bool, above: bool, strict: bool) -> tuple[bool, bool] | None:
        """(``red < 0`` somewhere, ``red >= 0`` (strict) / ``> 0`` somewhere) by ISL, or None.

        A side already seen at a known point is not asked again.
        """
        eng = self._isl_engine(red)
        if eng is None:
            return None
        neg = True if below else eng.satisfiable(red, "<")
        if neg is None:
            return None
        if not neg:
            return False, True  # never negative: e >= 0 is proven, the other side is not needed
        pos = True if above else eng.satisfiable(red, ">=" if strict else ">")
        if pos is None:
            return None
        return neg, pos

    def _presburger_bounds(self, e: Expr, proven: Interval, vals: list[tuple[int, dict[str, int]]]) -> tuple[_End, _End] | None:
        """Both ends from ISL (:mod:`smtdims.presburger`), if they agree with everything known here."""
        eng = self._isl_engine(e)
        if eng is None:
            return None
        known = {v: env for v, env in vals}
        got = eng.bounds(e, known)
        if got is None:
            return None
        lo, hi, w_lo, w_hi = got
        if not (proven[0] <= lo <= hi <= proven[1]) or (known and not lo <= min(known) <= max(known) <= hi):
            STATS.bump("presburger_declined")  # disagrees with a proven bound or a known point
            return None
        return _End(lo, True, w_lo), _End(hi, True, w_hi)

    def _ray(self, f: Expr, witnesses: list[dict[str, int]], work: int = rays.RAY_WORK) -> bool:
        """Whether an exact ray certifies ``f`` unbounded below, from the known points (no solver)."""
        return rays.find_ray(f, self.constraints, self.points.base[:4] or witnesses, (), work)

    def _end(self, e: Expr, proven: int | float, attained: int, witness: dict[str, int], *, lower: bool,
             ray_tried: bool = False) -> _End:
        """One end of ``e``: close a proven bound and an attained value in on each other.

        Work on ``f = sign*e`` (its lower end). With a proven bound: ask whether it is
        attained, then gallop up from it towards the attained value. Without one: an exact
        ray certificate (:mod:`smtdims.rays`: fixed directions, then one proposed by the
        recession cone's LP), else verify the best attained value and probe geometrically
        further out; then binary search; Z3's optimiser is the last resort for a linear end
        that no probe bounded. A nonlinear end without a proven bound is only probed a few
        times: Z3 cannot prove a nonlinear expression unbounded, so more would only cost time.
        """
        sign = 1 if lower else -1
        f = e * sign
        p: int | float = proven * sign if not is_inf(proven) else -INF
        a, w = attained * sign, witness
        linear = self._linear(e)
        far: list[dict[str, int]] = []

        def below(m: int) -> CheckResult:
            if abs(m).bit_length() > _MAX_PROBE_BITS:
                # Z3 reads an integer's decimal text in quadratic time, uninterruptibly (a
                # 30,000-digit probe of a^100000 took 9 s): such a probe is not asked, and the
                # end stays the proven (sound, looser) bound.
                return CheckResult(UNKNOWN, reason=options.REASON_INCOMPLETE)
            return self._check(lambda enc: [enc.expr(f) < enc.const(m)], e)

        if p == a:
            return _End(a * sign, True, w)
        if is_inf(p) and not ray_tried and self._ray(f, [w]):
            return _End(-INF if lower else INF, True, None)  # unbounded: no solver needed
        if is_inf(p) and linear and self._recession_ray(f, [*self.points.base[:4], w]):
            return _End(-INF if lower else INF, True, None)  # one LP proposes the ray, checked exactly
        if not is_inf(p):
            # Is the proven bound attained? Intervals are often exact or nearly (split max/min
            # constraints propagate well), and an unsat check is cheap where a sat one must
            # build a model: at 200 variables about 2 ms against 10 ms.
            res = below(p + 1)
            if res.status == SAT and res.model is not None:
                return _End(f.evaluate(res.model) * sign, True, res.model)
            if res.status != UNSAT:
                return self._end_result(p, sign, lower)
            p += 1
            if p == a:
                return _End(a * sign, True, w)
        if is_inf(p):
            res = below(a)  # guess, then verify
            if res.status == UNSAT:
                return _End(a * sign, True, w)
            if res.status != SAT or res.model is None:
                return self._end_result(p, sign, lower)
            a, w = f.evaluate(res.model), res.model
            far.append(res.model)
            if rays.find_ray(f, self.constraints, self.points.base[:4] or [w], far):
                return _End(-INF if lower else INF, True, None)
            if not linear and self._recession_ray(f, [*self.points.base[:4], *far]):
                return _End(-INF if lower else INF, True, None)
        gap, probes, step = max(1, abs(a)), 0, 2
        steps = _SEARCH_STEPS_LINEAR if linear else _SEARCH_STEPS
        if linear and not is_inf(p):
            # galloping (at most log2 of the distance) then bisection (log2 of the range): a fixed
            # cap would leave wide ranges open (10**60-sized coefficients: 340 bits, ~680 checks)
            steps = max(steps, 2 * (a - p).bit_length() + 8)
        for _ in range(steps):
            if p == a or options.deadline_passed():
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
            return _End(a * sign, True, w)
        if is_inf(p) and rays.find_ray(f, self.constraints, self.points.base[:4], far[-3:]):
            return _End(-INF if lower else INF, True, None)
        if linear and p != a and not options.deadline_passed():
            # last resort: Z3's optimiser proves a linear end infinite (or finds it) where no ray
            # was found; probes first, as they settle a finite end much sooner (50 variables /
            # 100 constraints: 38 ms of probes and bisection against 525 ms in the optimiser)
            opt = self._optimize_end(e, "min" if lower else "max")
            if opt is not None:
                return opt
        return self._end_result(p, sign, lower)

    def _recession_ray(self, f: Expr, bases: list[dict[str, int]]) -> bool:
        """A ray proposed by the recession cone's LP, checked exactly from known feasible points."""
        if self._recession is None:
            self._recession = rays.Recession(self.constraints, self.budget)
        d = self._recession.direction(f)
        if d is None:
            return False
        names = set(self.constraints.variables()) | f.variables()
        for b in bases:
            full = {v: b.get(v, 1) for v in names}
            if rays.unbounded_below(f, self.constraints, full, d, names):
                return True
        return False

    @staticmethod
    def _end_result(p: int | float, sign: int, lower: bool) -> _End:
        if is_inf(p):
            return _End(-INF if lower else INF, False, None)
        return _End(p * sign, False, None)

    def _optimize_end(self, e: Expr, sense: str) -> _End | None:
        """Z3's optimiser for one linear end; None when it cannot say (budget, deadline)."""
        (res, value), = self.solver.optimize(e, e.variables(), (sense,)).values()
        if res.status != SAT:
            return None
        val = z3_int_or_inf(value)
        if is_inf(val):
            return _End(val, True, None)
        if res.model is None or not self.constraints.holds(res.model) or e.evaluate(res.model) != val:
            return None  # never trust an optimum we cannot re-evaluate exactly
        return _End(val, True, res.model)


# Per-scope caches are bounded by entries and by the size of what they keep (expr.CACHE_MAX_TERMS).
_CACHE_ENTRIES = 100_000


def _cacheable(cache: dict, *exprs: Expr) -> bool:
    return len(cache) < _CACHE_ENTRIES and all(len(e.terms) <= CACHE_MAX_TERMS for e in exprs)


class SessionRegistry:
    """Sessions keyed by constraint set and budget; bounded so memory cannot grow without limit."""

    def __init__(self, capacity: int = 256):
        self.capacity = capacity
        self._lock = options.fork_safe(threading.Lock())
        self._sessions: OrderedDict[tuple[ConstraintSet, int], Session] = OrderedDict()

    def get(self, constraints: ConstraintSet, budget: int | None = None) -> Session:
        budget = budget if budget is not None else options.current().budget
        key = (constraints, budget)
        with self._lock:
            s = self._sessions.get(key)
            if s is None:
                s = Session(constraints, budget)
                self._sessions[key] = s
                if len(self._sessions) > self.capacity:
                    self._sessions.popitem(last=False)
            else:
                self._sessions.move_to_end(key)
            return s

    def clear(self) -> None:
        with self._lock:
            self._sessions.clear()


REGISTRY = SessionRegistry()

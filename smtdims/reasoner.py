"""The ladder: the one place that orders the work of every question.

Every entry point (:meth:`Session.decide`, :meth:`Session.bounds`,
:meth:`Session.sign_bounds` for JAX's ``_bounds_decision`` at each precision,
:meth:`Session.proves` for provable ``==``) walks the same rungs, cheapest first,
and stops at the first one whose answer is as precise as the caller asked:

1. ``constant``  -- constant folding;
2. ``interval``  -- sound interval rules (:mod:`smtdims.rungs.intervals`);
3. ``points``    -- exact evaluation at known satisfying valuations (:mod:`smtdims.rungs.points`):
   two points of opposite sign prove "undetermined", one point refutes a claim;
4. ``stock``     -- a host's own procedure where it is sound (JAX's, registered by the
   adapter; it only sees questions that carry the host's expression);
   ``presburger`` -- exact bounds of small Presburger questions by ISL where islpy is
   installed (:mod:`smtdims.engines.presburger`; witnesses re-checked exactly);
   ``cases``  -- exact bounds with a symbolic divisor, by cases on the few values its
   quotient takes, each a Presburger question (:mod:`smtdims.rungs.cases`);
5. ``solver-linear``    -- Z3, incremental, on the Presburger fragment;
6. ``solver-nonlinear`` -- Z3 in a fresh context for the question;
7. ``search``    -- guess-then-verify and binary search for exact bounds (with exact ray
   certificates and Z3's optimiser for infinite linear ends).

The ladder is data (:mod:`smtdims.rungs.table`): one table lists every rung, cheapest first,
and the kinds of question each answers (a decision or proof, a sign question, exact bounds:
:mod:`smtdims.rungs.question`); each rung is a module whose ``answer(question, scope)`` asks only
the scope's public surface (:class:`smtdims.rungs.scope.Scope`, which :class:`Session`
implements), and one driver (:meth:`Session.walk`) walks a kind's ladder until the caller has
what it needs.

The gates are checked once, here: satisfiable constraints (a known point proves it
without a solver) and divisors that may be 0. Each question runs under the budget and
deadline of :mod:`smtdims.options`; ``stats()`` counts which rung answered.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, TypeVar

import z3

from . import options
from .engines import presburger
from .engines.smt import COUNTERS, COUNTS_LOCK, SAT, UNSAT, Z3_WORKERS, CheckResult, Encoder, SolverSession
from .errors import PossibleDivisionByZeroError, UnsatisfiableConstraintsError
from .lang.constraints import ConstraintSet
from .lang.expr import CACHE_MAX_TERMS, Expr, SizedMemo, deep_recursion, nesting, symbolic_divisors
from .lang.results import FALSE, TRUE, UNDETERMINED, UNKNOWN, Bounds, Decision
from .options import CONFIG, DEFAULT_BUDGET, DEFAULT_DEADLINE, REASON_DEADLINE
from .rungs import stock as stock_rung
from .rungs.intervals import Interval, IntervalEvaluator, combined_interval, is_inf, propagate_var_ranges
from .rungs.points import Points, shrink
from .rungs.presburger import READABLE_VALUE
from .rungs.question import (
    COMPARISON_OPS,
    NEGATED,
    BoundsQuestion,
    End,
    Precision,
    Side,
    SignQuestion,
    all_settled,
    holds,
    one_refuted,
    precision,
    sign_interval,
    sign_reduce,
    sufficient,
)
from .rungs.search import EndSearch
from .rungs.table import BOUNDS, DECISION, LADDERS, SIGN

__all__ = [
    "CONFIG", "DEFAULT_BUDGET", "DEFAULT_DEADLINE", "NEED_BEST", "NEED_SIGN_LEQ", "NEED_SIGN_LT", "REGISTRY",
    "NEGATED", "READABLE_VALUE", "Precision", "Session", "precision", "register_stock_rung", "reset_stats", "stats",
    "sufficient",
]

_A = TypeVar("_A")  # an answer: Decision, bool, Bounds, (Interval, deterministic)
_Q = TypeVar("_Q", SignQuestion, BoundsQuestion)
_SMALL_WITNESS_MAX_VARS = 32  # beyond this, an undetermined answer's witnesses are left as found
_WITNESS_CHECKS = 12  # Z3 checks at most, per end, looking for a bound's smallest witness


NEED_SIGN_LEQ = Precision.SIGN
NEED_SIGN_LT = Precision.STRICT_SIGN
NEED_BEST = Precision.BEST
# The names answers are counted under in stats() (always listed, 0 until one answers); a rung added to
# the table with a name of its own is counted from its first answer.
RUNGS = ("constant", "interval", "points", "stock", "presburger", "cases", "solver-linear", "solver-nonlinear", "search")
SOLVER_RUNGS = ("solver-linear", "solver-nonlinear", "search")


# -- counters ------------------------------------------------------------------------------------------
class _Stats:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        with COUNTS_LOCK:
            self.by_rung = dict.fromkeys(RUNGS, 0)
            self.solver_answers = 0
            self.cache_hits = 0
            self.stock_errors = 0
            self.presburger_declined = 0
            self.deadline_answers = 0

    def answered(self, rung: str) -> None:
        q = options.this_question()
        if q is not None:
            q.rung = rung
        # a solver rung counts as a solver answer only if Z3 ran in this question: the search
        # rung often closes both ends with rays and known points alone (issue 29)
        ran = rung in SOLVER_RUNGS and q is not None and bool(q.starts) and q.checks > q.starts[-1]
        with COUNTS_LOCK:
            self.by_rung[rung] = self.by_rung.get(rung, 0) + 1
            self.solver_answers += ran

    def bump(self, name: str) -> None:
        with COUNTS_LOCK:
            setattr(self, name, getattr(self, name) + 1)


class _SessionQuestion:
    """:meth:`Session._question`'s block: its blocks entered in order, left in reverse.

    A class, not a generator around a ``with`` of three blocks: every question enters it (4.1 us
    a question before). None of the blocks handles exceptions (each only restores its state),
    so each is left with no exception passed, whether the question raised or not.
    """

    __slots__ = ("_blocks",)

    def __init__(self, blocks: tuple[Any, ...]):
        self._blocks = blocks

    def __enter__(self) -> None:
        entered = 0
        try:
            for block in self._blocks:
                block.__enter__()
                entered += 1
        except BaseException:
            self._leave(entered)
            raise

    def __exit__(self, *exc: object) -> None:
        self._leave(len(self._blocks))

    def _leave(self, entered: int) -> None:
        """Leave the first ``entered`` blocks, innermost first; each is left even if one before it
        raised (as nested ``with`` statements do), and the first such error is raised after."""
        blocks, err = self._blocks, None
        for i in range(entered - 1, -1, -1):
            try:
                blocks[i].__exit__(None, None, None)
            except BaseException as exc:  # e.g. an after-question hook: the lock is released all the same
                err = err or exc
        if err is not None:
            raise err


STATS = _Stats()


def prestart_workers() -> None:
    """Start the ISL worker's process and one Z3 worker's now, without waiting for them.

    For runs that will ask many questions (``pytest --smtdims``, ``smtdims run``): each process
    takes about 0.1 s to import its engine, paid in the first questions that need it unless it
    starts beside the program's own imports and pytest's collection. JAX's ``DimExprTest`` waited
    for both starts in its first floordiv bounds. Costs two idle processes where no question
    ever needs them; a worker that cannot start turns its rung off as it would on first use.
    """
    if options.current().presburger:
        presburger.prestart()
    Z3_WORKERS.prestart()


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
        "workers_down": COUNTERS.workers_down,
        "heap_trims": COUNTERS.heap_trims,
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


# -- the session: one constraint set ----------------------------------------------------------------------
def _frozen_ranges(constraints: ConstraintSet) -> tuple[Mapping[str, Interval], bool]:
    """:func:`propagate_var_ranges`, read-only: the sessions of one constraint set share it."""
    ranges, infeasible = propagate_var_ranges(constraints)
    return MappingProxyType(ranges), infeasible


def _points(constraints: ConstraintSet) -> Points:
    return Points(constraints, constraints.derived("ranges", _frozen_ranges)[0])


class Session:
    """All reasoning about one constraint set. Thread-safe: public methods take ``lock``."""

    def __init__(self, constraints: ConstraintSet, budget: int | None = None, *, parent: Session | None = None):
        self.constraints = constraints
        self.budget = budget if budget is not None else options.current().budget
        self.solver = SolverSession(constraints, self.budget, parent.solver.family if parent is not None else None)
        self.lock = options.fork_safe(threading.RLock())  # a fork while another thread holds it: unheld in the child
        self._parent = parent
        self._evaluator: IntervalEvaluator | None = None
        self._points: Points | None = None
        self._infeasible_hint = False
        self._satisfiable_checked = parent is not None  # a focus is a component of a satisfiable set
        # Whether the gate proved that some valuation meets every constraint (a known point, a model,
        # ISL's point). Unproven (the gate's check said unknown), the bounds and true/false answers
        # still hold (vacuously if none does), but no valuation is claimed (:meth:`_claimed`).
        self._sat_proven = False
        self._sat_reason = ""  # why the gate's check said unknown (options.REASON_*)
        self._sat_model: dict[str, int] | None = None
        # A rung's own sub-question (smtdims.rungs.cases): its unsatisfiable scope names no minimal conflict
        # (checks nobody reads) and its answers are not counted (the question that asked it is).
        self.internal = False
        self._focus: dict[frozenset[int], Session] = {}
        self._interval_cache = _ScopeCache()  # Expr -> Interval
        self._stock_record = [0, 0]  # linear questions the stock rung was asked / settled (record_stock)
        self._sign_cache = _ScopeCache()  # (Expr, Precision) -> (Interval, deterministic)
        self._constraint_nesting: int | None = None  # nesting() of the constraints, on the first question
        self._bounds_cache = _ScopeCache()  # Expr -> Bounds
        self._readable_cache = _ScopeCache()  # Expr -> Bounds: the same answers with the smallest witnesses
        self.search = EndSearch(self)  # the bound search, in a room of its own (smtdims.rungs.search)
        self._presburger: presburger.Engine | None = None  # ISL's view, built on the first eligible bound
        self._decision_cache = _ScopeCache()  # (lhs, op, rhs) -> Decision
        self._proof_cache = _ScopeCache()  # (lhs, op, rhs) -> bool

    @property
    def caches(self) -> dict[str, _ScopeCache]:
        """The answer caches by kind (``interval``, ``sign``, ``bounds``, ``readable``, ``decision``,
        ``proof``), each with ``held`` (its size in ``Expr.size()`` units): a diagnostics view of what
        a scope keeps, bounded by :data:`CACHE_ENTRIES` and :data:`CACHE_SIZE`. Read, never write."""
        return {k[1:].removesuffix("_cache"): v for k, v in vars(self).items() if isinstance(v, _ScopeCache)}

    # -- rung 2 and 3 state -----------------------------------------------------------------------------
    @property
    def evaluator(self) -> IntervalEvaluator:
        if self._evaluator is None:
            ranges, infeasible = self.constraints.derived("ranges", _frozen_ranges)
            self._infeasible_hint = infeasible
            self._evaluator = IntervalEvaluator(ranges)
        return self._evaluator

    @property
    def points(self) -> Points:
        if self._points is None:
            # Points depend on the constraints alone (never on earlier questions' models), so one
            # set's are shared by its sessions; the evaluator is the session's (its memo grows with
            # the session's questions).
            self._points = self.constraints.derived("points", _points)
        return self._points

    def interval(self, e: Expr) -> Interval:
        """Rung 2: sound (possibly loose) bounds of ``e``; no solver. Memoised per expression."""
        r = self._interval_cache.get(e)
        if r is None:
            r = combined_interval(self.evaluator, e, self.constraints)
            # an interval cut by the deadline (a long sum stops at it) is not kept for later questions
            if not options.deadline_passed():
                _store(self._interval_cache, e, r, e)
        return r

    def _sign_interval_of(self, e: Expr) -> Interval:
        """An interval with the sign information of ``e`` (for relations to 0), from ``e`` and ``sign_reduce(e)``."""
        lo, hi = self.interval(e)
        if lo >= 0 or hi <= -1:
            return (lo, hi)
        red = sign_reduce(e)
        return sign_interval(lo, hi, *self.interval(red)) if red != e else (lo, hi)

    def _question(self, *exprs: Expr) -> _SessionQuestion:
        """One question about ``exprs``: the session's lock, recursion room for their nesting, the
        deadline, the question's fresh contexts and counters."""
        if self._constraint_nesting is None:
            self._constraint_nesting = nesting(*(c.diff for c in self.constraints.constraints))
        depth = max(self._constraint_nesting, nesting(*exprs))
        return _SessionQuestion((self.lock, deep_recursion(depth), options.session_question()))

    # -- solver helpers -----------------------------------------------------------------------------------
    def linear(self, *exprs: Expr) -> bool:
        """Whether the constraints and ``exprs`` are all linear (the shared incremental solver's fragment)."""
        return self.solver.linear and all(e.is_linear() for e in exprs)

    def check(self, build: Callable[[Encoder], list[z3.BoolRef]], *exprs: Expr) -> CheckResult:
        """A solver check of the constraints and ``build``'s facts; a model is re-checked exactly."""
        res = self.solver.check(
            build, linear=self.linear(*exprs), model_vars=frozenset().union(*(e.variables() for e in exprs))
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

    def _complete(self, env: dict[str, int] | None, base: dict[str, int] | None = None) -> dict[str, int] | None:
        """A witness from a focus (cone of influence) extended to every constrained variable.

        The focus's variables are unconstrained by the other constraints, so any satisfying
        point of the whole set (``base``, else a known one) supplies the rest. Where the gate did
        not prove the set satisfiable, the focus's witness may meet only its part of the
        constraints: it is returned only if the whole valuation meets every constraint (exact
        arithmetic), else None.
        """
        if env is None:
            return None
        if not all(v in env for v in self.constraints.variables()):
            env = {**(base or self.any_point() or {}), **env}
        elif self.sat_proven:
            return env
        return env if self.sat_proven or self._meets_all(env) else None

    def _meets_all(self, env: dict[str, int]) -> bool:
        """Whether ``env`` values every constrained variable and meets every constraint (exactly)."""
        try:
            return all(v in env for v in self.constraints.variables()) and self.constraints.holds(env)
        except (KeyError, ZeroDivisionError):
            return False

    @property
    def sat_proven(self) -> bool:
        """Whether some valuation is known to meet every constraint of the scope (a focus: its parent's)."""
        return self._parent.sat_proven if self._parent is not None else self._sat_proven

    def _claimed(self, *witnesses: dict[str, int] | None) -> tuple[bool, list[dict[str, int] | None]]:
        """``(proven, completed)``: whether the scope is known satisfiable, and ``witnesses`` (from this
        session or a focus) completed to whole valuations, each kept only where it meets every constraint.

        Why: a witness, a tight end and "undetermined" claim that some valuation exists. A focus answers
        for the whole scope only when the whole is satisfiable (:meth:`focus`); where the gate could not
        prove it, a claim stands only on a witness that, completed, meets every constraint: that
        valuation proves the scope satisfiable, and then completes the answer's other witnesses.
        """
        if self.sat_proven:
            return True, [self._complete(w) for w in witnesses]
        done = [self._complete(w) for w in witnesses]
        base = next((w for w in done if w is not None), None)
        if base is None:
            return False, done
        return True, [d if d is not None or w is None else self._complete(w, base) for w, d in zip(witnesses, done, strict=True)]

    def _unproven_reason(self) -> str:
        return f"{options.REASON_SATISFIABILITY}: {self._sat_reason or options.REASON_INCOMPLETE}"

    def any_point(self) -> dict[str, int] | None:
        """A valuation known to meet every constraint, if one is."""
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
            self._satisfiable_checked = self._sat_proven = True
            return
        isl = self.isl_engine(Expr.const(0))
        got = isl.conflict() if isl is not None else None
        if got is not None:
            point, core = got
            if core is not None:
                raise UnsatisfiableConstraintsError.from_conflict(core)
            self._sat_model, self._satisfiable_checked, self._sat_proven = point, True, True
            return
        res = self.check(lambda enc: [])
        if res.status == UNSAT:
            core = (None if self.internal else self.solver.unsat_core()) or [c.text for c in self.constraints]
            raise UnsatisfiableConstraintsError.from_conflict(core)
        if res.status == SAT:
            self._sat_model, self._sat_proven = res.model, True  # _check re-checked the model exactly
        else:
            # Unknown: the answers stay sound (vacuously if no valuation exists), but none may claim a
            # valuation it has not checked against every constraint (_claimed)
            self._sat_reason = res.reason or options.REASON_INCOMPLETE
        if res.status != "unknown" or options.clocked() is None:  # unknown at the budget: deterministic,
            self._satisfiable_checked = True  # do not ask on every question (a clock's unknown: ask again)

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
                res = self.check(lambda enc, d=d: [enc.expr(d) == 0], d)
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

    def subscope(self, constraints: ConstraintSet) -> Session:
        """A scope of a rung's own (a case of :mod:`smtdims.rungs.cases`), same budget: its unsatisfiable
        constraints name no minimal conflict (checks nobody reads) and its answers are not counted
        (the question that asked it is)."""
        sub = Session(constraints, self.budget)
        sub.internal = True
        return sub

    def count(self, event: str) -> None:
        """Count an event of a rung in ``smtdims.stats()`` (``presburger_declined``)."""
        STATS.bump(event)

    # -- decisions ------------------------------------------------------------------------------------------
    def decide(self, lhs: Expr, op: str, rhs: Expr) -> Decision:
        if op not in COMPARISON_OPS:
            raise ValueError(f"unknown comparison {op!r}; use one of {', '.join(COMPARISON_OPS)}")
        return self._answer(self._decision_cache, (lhs, op, rhs), (lhs, rhs), lambda: self._decide(lhs, op, rhs))

    def _answer(self, cache: _ScopeCache, key: Any, exprs: tuple[Expr, ...], compute: Callable[[], _A],
                deterministic: Callable[[_A], bool] = lambda _: True) -> _A:
        """One question: the cached answer, or ``compute()`` stored when nothing clock-shaped it.

        The one cache policy of every question (decide, proves, sign_bounds, bounds): an answer is
        stored only when no deadline or interrupt shaped it (``options.clocked()`` is
        None and the answer says it is deterministic), so a later question in the scope never
        inherits what a clock cut short; very large expressions are not stored (``_store``).
        """
        # A stored answer needs no question block (lock, deadline, contexts): a dict read is atomic,
        # and only answers no clock shaped are stored. A third of benchmark 1b's questions end here.
        hit = cache.get(key)
        if hit is not None:
            STATS.bump("cache_hits")
            return hit
        with self._question(*exprs):
            hit = cache.get(key)  # another thread may have answered it meanwhile
            if hit is not None:
                STATS.bump("cache_hits")
                return hit
            result = compute()
            if options.clocked() is None and deterministic(result):
                _store(cache, key, result, *exprs)
            return result

    def _decision(self, lhs: Expr, op: str, rhs: Expr, status: str, by: str, **kw) -> Decision:
        STATS.answered(by)
        if options.clocked() is not None:
            STATS.bump("deadline_answers")
        proven, (kw["witness_true"], kw["witness_false"]) = self._claimed(kw.get("witness_true"), kw.get("witness_false"))
        if not proven and status == UNDETERMINED:
            # "true somewhere and false somewhere" claims valuations; the witnesses meet only the
            # question's part of the constraints, and the rest may have no valuation at all
            status, kw["reason"] = UNKNOWN, self._unproven_reason()
        return Decision(
            str(lhs), op, str(rhs), status,
            constraints=tuple(c.text for c in self.constraints), answered_by=by,
            _context=(self.constraints, self.budget, lhs, op, rhs), **kw,
        )

    def walk(self, q: _Q, kind: str) -> _Q:
        """The one driver, for every kind of question (``decision``, ``sign``, ``bounds``): each rung
        of the kind's ladder answers what it can; the walk stops at the first that leaves ``q`` done."""
        ladder = LADDERS[kind]
        for rung in ladder:
            by = rung.answer(q, self)
            if by is not None and (q.done() or rung is ladder[-1]):
                q.by = by
                break
        return q

    def _decide(self, lhs: Expr, op: str, rhs: Expr) -> Decision:
        self.ensure_satisfiable()
        self.check_divisors(lhs, rhs)
        diff = lhs - rhs
        yes, fails = Side(op), Side(NEGATED[op])
        q = self.walk(SignQuestion(diff, [yes, fails], self._sign_interval_of(diff), all_settled), DECISION)

        def readable(side: Side, want: bool) -> dict[str, int] | None:
            if side.witness is None or side.source is None:
                return side.witness
            return side.source._readable(side.witness, lambda env: holds(op, diff.evaluate(env)) == want)

        if yes.status == UNSAT and fails.status != UNSAT:
            return self._decision(lhs, op, rhs, FALSE, q.by, witness_false=fails.witness)
        if fails.status == UNSAT and yes.status != UNSAT:
            return self._decision(lhs, op, rhs, TRUE, q.by, witness_true=yes.witness)
        if yes.status == SAT and fails.status == SAT:
            return self._decision(lhs, op, rhs, UNDETERMINED, q.by,
                                  witness_true=readable(yes, True), witness_false=readable(fails, False))
        reason = yes.reason or fails.reason or options.REASON_INCOMPLETE
        return self._decision(lhs, op, rhs, UNKNOWN, q.by, reason=reason,
                              witness_true=yes.witness, witness_false=fails.witness)

    def proves(self, lhs: Expr, op: str, rhs: Expr) -> bool:
        """Whether ``lhs op rhs`` is proven for every valuation: at most one solver check, no witnesses.

        The cheap form of :meth:`decide` for hot paths that only act on a proof (JAX's ``==``).
        """
        return self._answer(self._proof_cache, (lhs, op, rhs), (lhs, rhs), lambda: self._proves(lhs, op, rhs))

    def _proves(self, lhs: Expr, op: str, rhs: Expr) -> bool:
        self.ensure_satisfiable()
        self.check_divisors(lhs, rhs)
        proven, by = self.holds_everywhere(lhs - rhs, op)
        STATS.answered(by)
        return proven

    def holds_everywhere(self, diff: Expr, op: str) -> tuple[bool, str]:
        """(whether ``diff op 0`` is proven at every valuation, the rung that settled it): the work of
        :meth:`proves` for a rung's own sub-question (:mod:`smtdims.rungs.cases`), inside the caller's
        question: no lock, no answer counted, no satisfiability or divisor check (the caller's)."""
        fails = Side(NEGATED[op])
        q = self.walk(SignQuestion(diff, [fails], self._sign_interval_of(diff), all_settled), DECISION)
        return fails.status == UNSAT, q.by

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
                lo, hi = sign_interval(lo, hi, *self.interval(red))
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

    def stock_unprofitable(self) -> bool:
        """After 4 linear questions in this scope where stock settled fewer than 1 in 4, skip it.

        Only for linear questions: there the solver rungs are complete, so skipping stock
        changes the cost of an answer, never the answer (JAX's procedure can spend 30-180 ms
        before giving up).
        """
        tries, wins = self._stock_record
        return tries >= 4 and 4 * wins < tries

    def record_stock(self, settled: bool) -> None:
        """One more linear question asked of the host's procedure, and whether it settled it."""
        self._stock_record[0] += 1
        self._stock_record[1] += settled

    def stock(self, origin: Any, need: Precision) -> Interval | None:
        """The host's own procedure's bounds of its expression ``origin``, where it is sound."""
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
        if need == Precision.BEST:
            q = SignQuestion(e, [], (lo, hi), lambda q: sufficient(need, *q.interval), origin, need)
            by = stock_rung.answer(q, self)
            if by is not None and q.done():
                STATS.answered(by)
                return q.interval, True
            b = self._bounds(e, proven=q.interval)
            return (b.lo, b.hi), b.deterministic
        strict = need == Precision.STRICT_SIGN
        below, above = Side("<"), Side(">=" if strict else ">")
        q = self.walk(SignQuestion(e, [below, above], (lo, hi), one_refuted, origin, need), SIGN)
        STATS.answered(q.by)
        lo, hi = q.interval
        if below.status == UNSAT:
            return (max(lo, 0), hi), True
        if above.status == UNSAT:
            return (lo, min(hi, -1 if strict else 0)), True
        if q.reasons and self.focus(e)._isl_clock_stopped(sign_reduce(e)):
            options.mark_clocked(options.CLOCK_ISL)  # an unknown where ISL, late, would have decided
        return (lo, hi), REASON_DEADLINE not in q.reasons

    # -- exact bounds ----------------------------------------------------------------------------------------------
    def bounds(self, e: Expr, *, readable: bool = False) -> Bounds:
        """Exact bounds of ``e``. ``readable``: the witnesses shown to people (``smtdims.bounds``,
        the CLI) are the smallest (:meth:`_small_witness`); callers that use only the values (JAX's
        questions, constraint ranges, fixes) do not pay for that."""
        def exact() -> Bounds:
            self.ensure_satisfiable()
            self.check_divisors(e)
            return self._bounds(e, readable=readable)

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

    def _mk_bounds(self, e: Expr, lo: End, hi: End, by: str, deterministic: bool = True) -> Bounds:
        if not self.internal:
            STATS.answered(by)
        if by != "presburger" and not (lo.tight and hi.tight) and self.focus(e)._isl_clock_stopped(e):
            options.mark_clocked(options.CLOCK_ISL)  # ISL, late, would have given the exact ends
        deterministic = deterministic and options.clocked() is None  # no clock shaped it
        if not deterministic and not self.internal:
            STATS.bump("deadline_answers")
        proven, (lo_w, hi_w) = self._claimed(lo.witness, hi.witness)
        # a tight end claims a valuation attains it: where the scope is not known satisfiable, only
        # with a witness that meets every constraint (an infinite end: once some valuation does)
        lo_tight = lo.tight and proven and (lo_w is not None or lo.witness is None)
        hi_tight = hi.tight and proven and (hi_w is not None or hi.witness is None)
        dropped = (lo.tight and not lo_tight) or (hi.tight and not hi_tight)
        reason = self._unproven_reason() if dropped else None
        return Bounds(
            lo.value, hi.value, expr=str(e), constraints=tuple(c.text for c in self.constraints), answered_by=by,
            context=(self.constraints, self.budget, e), lo_tight=lo_tight, hi_tight=hi_tight,
            lo_witness=lo_w, hi_witness=hi_w,
            deterministic=deterministic, reason=reason,
        )

    def _small_witness(self, e: Expr, value: int | float, tight: bool,
                       env: dict[str, int] | None) -> dict[str, int] | None:
        """A witness of a tight end that a reader checks at a glance: ``b = 1, batch = 3``, not
        ``batch = 9216``; ``a = b = 1`` for ``max(a, b) - min(a, b) = 0``, not ``a = b = 1024``.

        Once the end is known (never while it is searched: this changes no bound), first exact
        evaluations only: every variable 1, every variable moved down together, then
        :func:`points.shrink`; then, while a value is still above
        ``READABLE_VALUE``, the least sum of the variables over the valuations that meet the
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

        eng = self.focus(e).isl_engine(e) if isinstance(value, int) else None
        given = eng.given_least(e, value) if eng is not None else None
        if given is not None and all(env.get(v) == x for v, x in given.items()):
            # The cone of influence's part is ISL's least-sum point for this end: no valuation of
            # those variables with a smaller sum attains it, so every step below (all ones, moving
            # down, shrinking one variable) can only fail on them; the other variables (no
            # constraint links them to these) may still shrink.
            return shrink(env, attains, self.constraints, keep=frozenset(given)) if len(given) < len(env) else env
        names = sorted(env)
        ones = dict.fromkeys(names, 1)
        if valid(ones):
            return ones
        down = min(env.values(), default=1) - 1  # every variable moved down together: a - b, max(a, b) - min(a, b)
        if down > 0 and valid(shifted := {v: x - down for v, x in env.items()}):
            env = shifted
        env = shrink(env, attains, self.constraints)
        if max(env.values(), default=1) <= READABLE_VALUE or options.deadline_passed():
            return env
        # ISL finds the least sum in one call where it takes the question (the focus's engine: the
        # one that answered the bounds, holding the least-sum witnesses it gave with them); Z3
        # searches for it otherwise. The focus's point covers the cone of influence; the other
        # variables keep their values here (no constraint links them), and the whole is re-checked.
        least = eng.least_witness(e, value) if eng is not None else None
        if least is not None and least.keys() <= env.keys():
            cand = {**env, **least}
            if valid(cand):
                return cand if sum(cand.values()) < sum(env.values()) else env
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

            res = self.check(build, e)
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

    def _bounds(self, e: Expr, proven: Interval | None = None, readable: bool = False) -> Bounds:
        """The bounds ladder (:data:`smtdims.rungs.table.LADDERS`): constant, points, ISL, cases, search."""
        self.ensure_satisfiable()
        q = self.walk(BoundsQuestion(self, e, proven, readable), BOUNDS)
        assert q.ends is not None  # the search, last, always answers
        return self._mk_bounds(e, *q.ends, q.by, deterministic=q.deterministic)

    def isl_engine(self, e: Expr) -> presburger.Engine | None:
        """This scope's ISL engine when the rung is on, islpy is installed and ``e`` is linear."""
        if not options.current().presburger or not self.linear(e) or options.deadline_passed():
            return None
        if self._presburger is None:
            if not presburger.available():
                return None
            self._presburger = presburger.Engine(self.constraints)
        return self._presburger

    def _isl_clock_stopped(self, e: Expr) -> bool:
        """Whether ISL would have answered ``e`` exactly here but a clock stopped it (:func:`presburger.clock_stopped`)."""
        return options.current().presburger and self.linear(e) and \
            presburger.clock_stopped(self._presburger, self.constraints, e)

# Per-scope caches are bounded by entries and by the size of the expressions they keep (Expr.size(),
# as the parse memos count); a full cache forgets its oldest entries (insertion order) for the new
# one, and an expression of size over CACHE_MAX_TERMS is not kept. Why both: a scope that is asked
# again and again (the empty constraint set of public calls) grew by about 21 objects an answer with
# no bound short of 100,000 entries; bounded at 4,096 entries, its interval cache still held 75,000
# objects after 4,000 fuzz questions (about 100 an entry: the keys are the questions' expressions),
# and the long memory line rose with it (issue 28). A forgotten answer is computed again, the same.
CACHE_ENTRIES = 1_024
CACHE_SIZE = 20_000  # about 2 tracked objects a unit: at most a few MiB a cache


class _ScopeCache(dict):
    """A scope's answers, with the size of each entry's expressions (``sizes``) and their total (``held``)."""

    __slots__ = ("held", "sizes")

    def __init__(self) -> None:
        super().__init__()
        self.held = 0
        self.sizes: dict[Any, int] = {}

    def clear(self) -> None:
        super().clear()
        self.sizes.clear()
        self.held = 0


def _store(cache: _ScopeCache, key: Any, value: Any, *exprs: Expr) -> None:
    """``cache[key] = value`` unless ``exprs`` are too large to keep, making room in a full cache."""
    n = 0
    for e in exprs:
        if len(e.terms) > CACHE_MAX_TERMS:  # before size(): a huge sum is not walked for nothing
            return
        n += e.size()
    if n > CACHE_MAX_TERMS:
        return
    while len(cache) >= CACHE_ENTRIES or (cache and cache.held + n > CACHE_SIZE):
        try:
            old = next(iter(cache))
            del cache[old]
            cache.held -= cache.sizes.pop(old, 0)
        except (StopIteration, KeyError, RuntimeError):  # another thread changed it: room was made
            break
    if key not in cache:
        cache.sizes[key] = n
        cache.held += n
    cache[key] = value


class SessionRegistry:
    """Sessions keyed by constraint set and budget; bounded so memory cannot grow without limit.

    A session keeps its answers (about 0.4 MB after a few large questions); 32 recent constraint
    sets cover a notebook's or a script's working set (JAX's scopes keep their own sessions, not
    these), and a session asked again after eviction answers the same, only not from its cache.
    The least-recently-used memo of the parse caches keeps them (its lock is the registry's): a
    session is cheap to make (its state is built on first use), so two threads that race on a new
    set may both make one, and both get the one kept.
    """

    def __init__(self, capacity: int = 32):
        self.capacity = capacity
        self._memo = SizedMemo(lambda key: Session(*key), entries=capacity, total=capacity, size=lambda _: 1)

    def get(self, constraints: ConstraintSet, budget: int | None = None) -> Session:
        return self._memo((constraints, budget if budget is not None else options.current().budget))

    def clear(self) -> None:
        self._memo.cache_clear()


REGISTRY = SessionRegistry()

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
the scope's public surface (:class:`smtdims.rungs.scope.Scope`: the facts, gates and engines of
:class:`smtdims.scope.ConstraintScope`, which :class:`Session` extends with the walk and the
sub-questions of the whole ladder), and one driver (:meth:`Session.walk`) walks a kind's ladder
until the caller has what it needs.

The gates are asked once, here, before any rung answers: satisfiable constraints (a known point
proves it without a solver) and divisors that may be 0. Each question runs under the budget and
deadline of :mod:`smtdims.options`; ``stats()`` counts which rung answered.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import z3

from . import options
from .engines import presburger
from .engines.smt import COUNTERS, SAT, UNSAT, Z3_WORKERS, Encoder
from .errors import PossibleDivisionByZeroError
from .lang.constraints import ConstraintSet
from .lang.expr import Expr, SizedMemo
from .lang.results import FALSE, TRUE, UNDETERMINED, UNKNOWN, Bounds, Decision
from .options import CONFIG, DEFAULT_BUDGET, DEFAULT_DEADLINE, REASON_DEADLINE
from .rungs import stock as stock_rung
from .rungs.intervals import Interval, is_inf
from .rungs.points import shrink
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
    sufficient,
)
from .rungs.table import BOUNDS, DECISION, LADDERS, SIGN
from .scope import (
    _SMALL_WITNESS_MAX_VARS,
    STATS,
    ConstraintScope,
    _ScopeCache,
    _store,
    register_stock_rung,
)

__all__ = [
    "CONFIG", "DEFAULT_BUDGET", "DEFAULT_DEADLINE", "NEED_BEST", "NEED_SIGN_LEQ", "NEED_SIGN_LT", "REGISTRY",
    "NEGATED", "READABLE_VALUE", "Precision", "Session", "precision", "register_stock_rung", "reset_stats", "stats",
    "sufficient",
]

_A = TypeVar("_A")  # an answer: Decision, bool, Bounds, (Interval, deterministic)
_Q = TypeVar("_Q", SignQuestion, BoundsQuestion)
_WITNESS_CHECKS = 12  # Z3 checks at most, per end, looking for a bound's smallest witness


NEED_SIGN_LEQ = Precision.SIGN
NEED_SIGN_LT = Precision.STRICT_SIGN
NEED_BEST = Precision.BEST


def _wants_small(value: int | float, tight: bool, env: dict[str, int] | None) -> bool:
    """Whether an end's witness is one :meth:`Session._small_witness` makes smaller: a tight finite
    end's, in a small scope."""
    return env is not None and tight and not is_inf(value) and len(env) <= _SMALL_WITNESS_MAX_VARS


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


# -- the session: the walk over one scope ------------------------------------------------------------
class Session(ConstraintScope):
    """All reasoning about one constraint set: the walk of the ladder over its scope
    (:class:`smtdims.scope.ConstraintScope`), the questions and their caches. Thread-safe: a
    question holds ``lock``."""

    def __init__(self, constraints: ConstraintSet, budget: int | None = None, *, parent: Session | None = None):
        super().__init__(constraints, budget, parent=parent)
        self._sign_cache = _ScopeCache()  # (Expr, Precision) -> (Interval, deterministic)
        self._bounds_cache = _ScopeCache()  # Expr -> Bounds
        self._readable_cache = _ScopeCache()  # Expr -> Bounds: the same answers with the smallest witnesses
        self._decision_cache = _ScopeCache()  # (lhs, op, rhs) -> Decision
        self._proof_cache = _ScopeCache()  # (lhs, op, rhs) -> bool

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
        budget, deadline = options.limits_in_force()
        return Decision(
            str(lhs), op, str(rhs), status,
            constraints=tuple(c.text for c in self.constraints), answered_by=by, budget=budget, deadline=deadline,
            _context=(self.constraints, self.budget, lhs, op, rhs), _clock=options.clocked(), **kw,
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
        q = self.walk(SignQuestion(diff, [yes, fails], self._sign_interval_of(diff), all_settled, options.asking()), DECISION)

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
        proven, by = self.holds_everywhere(lhs - rhs, op, options.asking())
        STATS.answered(by)
        return proven

    def holds_everywhere(self, diff: Expr, op: str, ask: options.Question) -> tuple[bool, str]:
        """(whether ``diff op 0`` is proven at every valuation, the rung that settled it): the work of
        :meth:`proves` for a rung's own sub-question (:mod:`smtdims.rungs.cases`), inside the caller's
        question ``ask``: no lock, no answer counted, no satisfiability or divisor check (the caller's)."""
        fails = Side(NEGATED[op])
        q = self.walk(SignQuestion(diff, [fails], self._sign_interval_of(diff), all_settled, ask), DECISION)
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
            red = self.sign_reduced(e)
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
            q = SignQuestion(e, [], (lo, hi), lambda q: sufficient(need, *q.interval), options.asking(), origin, need)
            by = stock_rung.answer(q, self)
            if by is not None and q.done():
                STATS.answered(by)
                return q.interval, True
            b = self._bounds(e, proven=q.interval)
            return (b.lo, b.hi), b.deterministic
        strict = need == Precision.STRICT_SIGN
        below, above = Side("<"), Side(">=" if strict else ">")
        q = self.walk(SignQuestion(e, [below, above], (lo, hi), one_refuted, options.asking(), origin, need), SIGN)
        STATS.answered(q.by)
        lo, hi = q.interval
        if below.status == UNSAT:
            return (max(lo, 0), hi), True
        if above.status == UNSAT:
            return (lo, min(hi, -1 if strict else 0)), True
        if q.reasons and (f := self.focus(e))._isl_clock_stopped(f.sign_reduced(e)):
            options.mark_clocked(options.CLOCK_ISL)  # an unknown where ISL, late, would have decided
        return (lo, hi), REASON_DEADLINE not in q.reasons

    # -- exact bounds ----------------------------------------------------------------------------------------------
    def bounds(self, e: Expr, *, readable: bool = False) -> Bounds:
        """Exact bounds of ``e``. ``readable``: the witnesses shown to people (``smtdims.bounds``,
        the CLI) are the smallest (:meth:`_small_witness`); callers that use only the values (JAX's
        questions, constraint ranges, fixes) do not pay for that."""
        def exact() -> Bounds:
            self.ensure_satisfiable(make_points=not readable)
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
        ends = ((b.lo, b.lo_tight, b.lo_witness), (b.hi, b.hi_tight, b.hi_witness))
        # the focus's ISL engine, looked up once for both ends
        eng = self.focus(e).isl_engine(e, options.clock()) if any(_wants_small(*end) for end in ends) else None
        lo_w, hi_w = (self._small_witness(e, *end, eng) for end in ends)
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
        budget, deadline = options.limits_in_force()
        return Bounds(
            lo.value, hi.value, expr=str(e), constraints=tuple(c.text for c in self.constraints), answered_by=by,
            context=(self.constraints, self.budget, e), lo_tight=lo_tight, hi_tight=hi_tight,
            lo_witness=lo_w, hi_witness=hi_w,
            deterministic=deterministic, reason=reason, budget=budget, deadline=deadline, clocked=options.clocked(),
        )

    def _small_witness(self, e: Expr, value: int | float, tight: bool, env: dict[str, int] | None,
                       eng: presburger.Engine | None) -> dict[str, int] | None:
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
        if not _wants_small(value, tight, env):
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

        eng = eng if isinstance(value, int) else None
        given = eng.given_least(e, value) if eng is not None else None
        if given is not None and all(env.get(v) == x for v, x in given.items()):
            # The cone of influence's part is ISL's least-sum point for this end: no valuation of
            # those variables with a smaller sum attains it, so every step below (all ones, moving
            # down, shrinking one variable) can only fail on them; the other variables (no
            # constraint links them to these) may still shrink.
            if len(given) < len(env):
                return shrink(env, attains, self.constraints, options.clock(), keep=frozenset(given))
            return env
        names = sorted(env)
        ones = dict.fromkeys(names, 1)
        if valid(ones):
            return ones
        down = min(env.values(), default=1) - 1  # every variable moved down together: a - b, max(a, b) - min(a, b)
        if down > 0 and valid(shifted := {v: x - down for v, x in env.items()}):
            env = shifted
        env = shrink(env, attains, self.constraints, options.clock())
        if max(env.values(), default=1) <= READABLE_VALUE or options.deadline_passed():
            return env
        # ISL finds the least sum in one call where it takes the question (the focus's engine: the
        # one that answered the bounds, holding the least-sum witnesses it gave with them); Z3
        # searches for it otherwise. The focus's point covers the cone of influence; the other
        # variables keep their values here (no constraint links them), and the whole is re-checked.
        least = eng.least_witness(e, value, clock=options.clock()) if eng is not None else None
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

            res = self.check(build, e, ask=options.asking())
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
        q = self.walk(BoundsQuestion(self, e, proven, readable, options.asking()), BOUNDS)
        assert q.ends is not None  # the search, last, always answers
        return self._mk_bounds(e, *q.ends, q.by, deterministic=q.deterministic)


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

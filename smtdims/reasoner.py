"""The session: the one door to one constraint set, and the one way to get it.

Which module does what: this one holds :class:`Session`, the door every caller outside the reasoner
asks (:meth:`Session.decide`, :meth:`Session.proves` for provable ``==``, :meth:`Session.sign_bounds`
for JAX's ``_bounds_decision`` at each precision, :meth:`Session.bounds`, a model and an unsat core),
and :data:`REGISTRY`, where sessions are kept; :mod:`smtdims.scope` holds the scope a session keeps
(:class:`smtdims.scope.ConstraintScope`: the facts, gates and engines of the constraint set);
:mod:`smtdims.ladder` holds the walk of the ladder (:func:`smtdims.ladder.walk`) and
:mod:`smtdims.rungs.table` the ladder itself, as data.

**Getting a Session: one rule.** Code asks :func:`session_for` (``session_for(constraints, budget)``)
for a constraint set's session: the registry's, one per constraint set and budget, so every caller
that asks about the same set shares its answer caches. The same set plus a few constraints is a
block: ``with session.assuming(*constraints) as s:`` (:meth:`Session.assuming`, modelled on TVM's
``ConstraintContext``) yields the session of the larger set, fetched from the same registry, and
changes nothing in ``session``. A set the code tries on its way to an answer (a fix's trial, a
subset of the constraints) is asked with ``trial=True``: kept apart in the registry (a smaller
least-recently-used tier), so trials never push out the sets people ask about. ``Session(...)``
directly is for a session that must not be shared: a host keeps one per scope of its own (the JAX
plugin's ``session_for_scope``), a benchmark or test that wants an empty cache.

Every question walks the same rungs, cheapest first, and stops at the first one whose answer is as
precise as the caller asked:

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
the scope's public surface (:class:`smtdims.rungs.protocol.Scope`, the Protocol that
:class:`smtdims.scope.ConstraintScope` implements), and one driver (:func:`smtdims.ladder.walk`)
walks a kind's ladder until the caller has what it needs.

:class:`Session` holds its scope as a member (``scope``) and answers each call in one question block
(the scope's lock, one deadline) with its answer cache; every model it returns is re-checked exactly
(:meth:`smtdims.scope.ConstraintScope.solve`). The gates are asked once per question, here, before
any rung answers: satisfiable constraints (a known point proves it without a solver) and divisors
that may be 0. Each question runs under the budget and deadline of :mod:`smtdims.options`;
``stats()`` counts which rung answered.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

import z3

from . import clocks, ladder, options
from .clocks import REASON_DEADLINE
from .engines import presburger
from .engines.checks import SAT, UNSAT, Z3_WORKERS, CheckResult
from .engines.counters import COUNTERS
from .engines.encoding import Encoder
from .engines.implications import Implications
from .errors import PossibleDivisionByZeroError
from .gate import small_witness, wants_small
from .ladder import STATS
from .lang.constraints import Constraint, ConstraintSet
from .lang.expr import Expr
from .lang.memos import SizedMemo
from .lang.results import FALSE, TRUE, UNDETERMINED, UNKNOWN, Bounds, Decision
from .options import CONFIG, DEFAULT_BUDGET, DEFAULT_DEADLINE
from .rungs import stock as stock_rung
from .rungs.interval_arith import Interval
from .rungs.presburger import READABLE_VALUE
from .rungs.question import (
    COMPARISON_OPS,
    NEGATED,
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
from .rungs.table import DECISION, SIGN
from .scope import AnswerCache, ConstraintScope, register_stock_rung

__all__ = [
    "COMPARISON_OPS", "CONFIG", "DEFAULT_BUDGET", "DEFAULT_DEADLINE", "NEED_BEST", "NEED_SIGN_LEQ", "NEED_SIGN_LT",
    "REGISTRY", "NEGATED", "READABLE_VALUE", "Precision", "Session", "precision", "register_stock_rung", "reset_stats",
    "session_for", "stats", "sufficient",
]

_A = TypeVar("_A")  # an answer: Decision, bool, Bounds, (Interval, deterministic)
Build = Callable[[Encoder], list[z3.BoolRef]]


NEED_SIGN_LEQ = Precision.SIGN
NEED_SIGN_LT = Precision.STRICT_SIGN
NEED_BEST = Precision.BEST


def prestart_workers() -> None:
    """Start the ISL worker's process and one Z3 worker's now, without waiting for them.

    For runs that will ask many questions (``pytest --smtdims``, ``smtdims run``): each process
    takes a fraction of a second to import its engine, paid in the first questions that need it unless it
    starts beside the program's own imports and pytest's collection. Costs two idle processes where
    no question ever needs them; a worker that cannot start turns its rung off as it would on first
    use.
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


def _deterministic(b: Bounds) -> bool:
    return b.deterministic


# -- the session: the one door to one constraint set ----------------------------------------------------
class Session:
    """All reasoning about one constraint set, through a few calls: :meth:`decide`, :meth:`proves`,
    :meth:`sign_bounds`, :meth:`bounds`, :meth:`model`, :meth:`unsat_core`, :meth:`implications` (and
    :meth:`interval`, the cheap sound bounds); :meth:`assuming` is the session of the same set plus a
    few constraints. Got from :func:`session_for` (the registry's). It holds the scope
    (:class:`smtdims.scope.ConstraintScope`: facts, gates, engines) and the answer caches; each call is
    one question block. Thread-safe: a question holds the scope's lock."""

    def __init__(self, constraints: ConstraintSet, budget: int | None = None):
        self.scope = ConstraintScope(constraints, budget)
        self.constraints = constraints
        self.budget = self.scope.budget
        self._sign_cache = AnswerCache()  # (Expr, Precision) -> (Interval, deterministic)
        self._bounds_cache = AnswerCache()  # Expr -> Bounds
        self._readable_cache = AnswerCache()  # Expr -> Bounds: the same answers with the smallest witnesses
        self._decision_cache = AnswerCache()  # (lhs, op, rhs) -> Decision
        self._proof_cache = AnswerCache()  # (lhs, op, rhs) -> bool

    @property
    def caches(self) -> dict[str, AnswerCache]:
        """The answer caches by kind (``interval``, ``sign``, ``bounds``, ``readable``, ``decision``,
        ``proof``), each with ``held`` (its size in ``Expr.size()`` units): a diagnostics view of what
        a session keeps, bounded by :data:`smtdims.scope.CACHE_ENTRIES` and ``CACHE_SIZE``. Read, never write."""
        mine = {k[1:].removesuffix("_cache"): v for k, v in vars(self).items() if isinstance(v, AnswerCache)}
        return {"interval": self.scope.interval_cache, **mine}

    @contextmanager
    def assuming(self, *constraints: Constraint | str, budget: int | None = None) -> Iterator[Session]:
        """A block under this session's constraints plus ``constraints``: ``with session.assuming(c) as s:``
        (TVM's ``ConstraintContext``). ``s`` is the session of the set ``self.constraints + constraints``
        (in that order; texts are parsed), at this session's budget unless ``budget`` is given, fetched
        from the registry as a trial set (:func:`session_for` with ``trial=True``), so a set assumed
        again finds its answers cached.

        Sound by construction: ``s`` is a session of its own over a new constraint set, whose answers
        hold exactly where every constraint of this session and ``constraints`` hold; nothing of this
        session (its constraints, scope, gates, caches, Z3 side) is changed, so there is nothing to take
        back when the block ends, and this session's answers never see the assumptions. Questions in
        the block are asked of ``s``; ``self`` is unchanged inside the block and after it.
        """
        extra = tuple(c if isinstance(c, Constraint) else Constraint.parse(c) for c in constraints)
        yield session_for(ConstraintSet(self.constraints.constraints + extra),
                          self.budget if budget is None else budget, trial=True)

    def interval(self, e: Expr) -> Interval:
        """Sound (possibly loose) bounds of ``e`` by the interval rules; no solver, no question."""
        return self.scope.interval(e)

    def var_ranges(self) -> Mapping[str, Interval]:
        """Each variable's sound range, propagated from the constraints (no solver)."""
        return self.scope.evaluator.var_ranges

    def known_points(self) -> list[dict[str, int]]:
        """Valuations known to meet every constraint (from the constraints alone, never a question's model)."""
        return self.scope.points.base

    # -- decisions ------------------------------------------------------------------------------------------
    def decide(self, lhs: Expr, op: str, rhs: Expr) -> Decision:
        if op not in COMPARISON_OPS:
            raise ValueError(f"unknown comparison {op!r}; use one of {', '.join(COMPARISON_OPS)}")
        return self._answer(self._decision_cache, (lhs, op, rhs), (lhs, rhs), lambda: self._decide(lhs, op, rhs))

    def _answer(self, cache: AnswerCache, key: Any, exprs: tuple[Expr, ...], compute: Callable[[], _A],
                deterministic: Callable[[_A], bool] = lambda _: True) -> _A:
        """One question: the cached answer, or ``compute()`` stored when nothing clock-shaped it.

        The one cache policy of every question (decide, proves, sign_bounds, bounds): an answer is
        stored only when no deadline or interrupt shaped it (``clocks.clocked()`` is
        None and the answer says it is deterministic), so a later question in the scope never
        inherits what a clock cut short; very large expressions are not stored (``AnswerCache.put``).
        """
        # A stored answer needs no question block (lock, deadline, contexts): a dict read is atomic,
        # and only answers no clock shaped are stored.
        hit = cache.get(key)
        if hit is not None:
            STATS.bump("cache_hits")
            return hit
        with self.scope.question(*exprs):
            hit = cache.get(key)  # another thread may have answered it meanwhile
            if hit is not None:
                STATS.bump("cache_hits")
                return hit
            result = compute()
            if clocks.clocked() is None and deterministic(result):
                cache.put(key, result, *exprs)
            return result

    def _decision(self, lhs: Expr, op: str, rhs: Expr, status: str, by: str, **kw) -> Decision:
        STATS.answered(by)
        if clocks.clocked() is not None:
            STATS.bump("deadline_answers")
        gate = self.scope.gate
        proven, (kw["witness_true"], kw["witness_false"]) = gate.claimed(kw.get("witness_true"), kw.get("witness_false"))
        if not proven and status == UNDETERMINED:
            # "true somewhere and false somewhere" claims valuations; the witnesses meet only the
            # question's part of the constraints, and the rest may have no valuation at all
            status, kw["reason"] = UNKNOWN, gate.unproven_reason()
        budget, deadline = clocks.limits_in_force()
        return Decision(
            str(lhs), op, str(rhs), status,
            constraints=tuple(c.text for c in self.constraints), answered_by=by, budget=budget, deadline=deadline,
            _context=(self.constraints, self.budget, lhs, op, rhs), _clock=clocks.clocked(), **kw,
        )

    def _decide(self, lhs: Expr, op: str, rhs: Expr) -> Decision:
        scope = self.scope
        scope.gate.ensure()
        scope.gate.check_divisors(lhs, rhs)
        diff = lhs - rhs
        yes, fails = Side(op), Side(NEGATED[op])
        q = ladder.walk(SignQuestion(diff, [yes, fails], scope.sign_interval(diff), all_settled, clocks.asking()),
                        DECISION, scope)

        def readable(side: Side, want: bool) -> dict[str, int] | None:
            if side.witness is None or side.source is None:
                return side.witness
            return side.source.gate.readable(side.witness, lambda env: holds(op, diff.evaluate(env)) == want)

        if yes.status == UNSAT and fails.status != UNSAT:
            return self._decision(lhs, op, rhs, FALSE, q.by, witness_false=fails.witness)
        if fails.status == UNSAT and yes.status != UNSAT:
            return self._decision(lhs, op, rhs, TRUE, q.by, witness_true=yes.witness)
        if yes.status == SAT and fails.status == SAT:
            return self._decision(lhs, op, rhs, UNDETERMINED, q.by,
                                  witness_true=readable(yes, True), witness_false=readable(fails, False))
        reason = yes.reason or fails.reason or clocks.REASON_INCOMPLETE
        return self._decision(lhs, op, rhs, UNKNOWN, q.by, reason=reason,
                              witness_true=yes.witness, witness_false=fails.witness)

    def proves(self, lhs: Expr, op: str, rhs: Expr) -> bool:
        """Whether ``lhs op rhs`` is proven for every valuation: at most one solver check, no witnesses.

        The cheap form of :meth:`decide` for hot paths that only act on a proof (JAX's ``==``).
        """
        return self._answer(self._proof_cache, (lhs, op, rhs), (lhs, rhs), lambda: self._proves(lhs, op, rhs))

    def _proves(self, lhs: Expr, op: str, rhs: Expr) -> bool:
        self.scope.gate.ensure()
        self.scope.gate.check_divisors(lhs, rhs)
        proven, by = ladder.holds_everywhere(self.scope, lhs - rhs, op, clocks.asking())
        STATS.answered(by)
        return proven

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
        scope = self.scope
        lo, hi = scope.interval(e)
        if not sufficient(need, lo, hi) and need != Precision.BEST:
            red = scope.sign_reduced(e)
            if red is not e and red != e:
                lo, hi = sign_interval(lo, hi, *scope.interval(red))
        if sufficient(need, lo, hi) and not scope.infeasible_hint:
            if not scope.gate.checked:
                # The gate, once per scope, before any rung answers (a known point proves it
                # for free): in a scope that no valuation satisfies every bound is vacuous, and
                # answering would let an export of an impossible specification succeed.
                with scope.question():
                    scope.gate.ensure()
            STATS.answered("interval")
            return (lo, hi)
        answer = self._answer(self._sign_cache, (e, need), (e,),
                              lambda: self._sign_bounds(e, need, lo, hi, origin, zero_divisors),
                              deterministic=lambda r: r[1])
        return answer[0]

    def _sign_bounds(self, e: Expr, need: Precision, lo, hi, origin: Any, zero_divisors: Any) -> tuple[Interval, bool]:
        scope = self.scope
        scope.gate.ensure()
        z = scope.gate.zero_divisor(e)
        if z is not None:
            if zero_divisors == "raise":
                raise PossibleDivisionByZeroError.from_divisor(*z, clocks.clocked())
            if callable(zero_divisors):
                zero_divisors(origin, z)  # the host's own behaviour (JAX raises for some divisions)
            STATS.answered("interval")
            return (lo, hi), True  # sound over the valuations where e is defined
        if need == Precision.BEST:
            q = SignQuestion(e, [], (lo, hi), lambda q: sufficient(need, *q.interval), clocks.asking(), origin, need)
            by = stock_rung.answer(q, scope)
            if by is not None and q.done():
                STATS.answered(by)
                return q.interval, True
            b = ladder.exact_bounds(scope, e, proven=q.interval)  # the gates passed above
            return (b.lo, b.hi), b.deterministic
        strict = need == Precision.STRICT_SIGN
        below, above = Side("<"), Side(">=" if strict else ">")
        q = ladder.walk(SignQuestion(e, [below, above], (lo, hi), one_refuted, clocks.asking(), origin, need), SIGN, scope)
        STATS.answered(q.by)
        lo, hi = q.interval
        if below.status == UNSAT:
            return (max(lo, 0), hi), True
        if above.status == UNSAT:
            return (lo, min(hi, -1 if strict else 0)), True
        if q.reasons and (f := scope.focus(e)).isl_clock_stopped(f.sign_reduced(e)):
            clocks.mark_clocked(clocks.CLOCK_ISL)  # an unknown where ISL, late, would have decided
        return (lo, hi), REASON_DEADLINE not in q.reasons

    # -- exact bounds ----------------------------------------------------------------------------------------------
    def bounds(self, e: Expr, *, readable: bool = False) -> Bounds:
        """Exact bounds of ``e``. ``readable``: the witnesses shown to people (``smtdims.bounds``,
        the CLI) are the smallest (:func:`smtdims.gate.small_witness`); callers that use only the
        values (JAX's questions, constraint ranges, fixes) do not pay for that. One question block,
        one pass of the gates, whichever caches answer."""
        if not readable:
            return self._answer(self._bounds_cache, e, (e,), lambda: self._exact_bounds(e, False), _deterministic)
        return self._answer(self._readable_cache, e, (e,), lambda: self._readable_bounds(e), _deterministic)

    def _exact_bounds(self, e: Expr, readable: bool) -> Bounds:
        """The gates (people's bounds let ISL pass the first, before the known points are made), then
        the bounds ladder; inside the caller's question block."""
        self.scope.gate.ensure(make_points=not readable)
        self.scope.gate.check_divisors(e)
        return ladder.exact_bounds(self.scope, e, readable=readable)

    def _readable_bounds(self, e: Expr) -> Bounds:
        """The exact bounds (the bounds cache's, else computed and kept there under the same policy as
        :meth:`_answer`'s) with the smallest witnesses; not deterministic if a clock cut their search."""
        b = self._bounds_cache.get(e)
        if b is not None:
            STATS.bump("cache_hits")
        else:
            b = self._exact_bounds(e, True)
            if clocks.clocked() is None and b.deterministic:
                self._bounds_cache.put(e, b, e)
        ends = ((b.lo, b.lo_tight, b.lo_witness), (b.hi, b.hi_tight, b.hi_witness))
        # the focus's ISL engine, looked up once for both ends
        scope = self.scope
        eng = scope.focus(e).isl_engine(e, clocks.clock()) if any(wants_small(*end) for end in ends) else None
        lo_w, hi_w = (small_witness(scope, e, *end, eng) for end in ends)
        if lo_w == b.lo_witness and hi_w == b.hi_witness:
            return b
        return Bounds(
            b.lo, b.hi, expr=b.expr, constraints=b.constraints, answered_by=b.answered_by,
            context=(self.constraints, self.budget, e),
            lo_tight=b.lo_tight, hi_tight=b.hi_tight, lo_witness=lo_w, hi_witness=hi_w,
            deterministic=b.deterministic and clocks.clocked() is None, reason=b.reason, budget=b.budget,
            deadline=b.deadline,
        )

    # -- models and conflicts ------------------------------------------------------------------------------------
    def question(self, *exprs: Expr) -> Any:
        """A block that makes several calls one question (one lock, one deadline, the fresh solver
        contexts kept between its checks): a caller's search that asks :meth:`model` again and again."""
        return self.scope.question(*exprs)

    def model(self, build: Build, *exprs: Expr, names: Iterable[str] = ()) -> CheckResult:
        """A valuation that meets the constraints and ``build``'s facts: ``sat`` with a model re-checked
        exactly against every constraint (``build``'s own facts are the caller's to re-check),
        ``unsat`` where none exists (proven), else ``unknown``. ``exprs``: those ``build`` encodes (the
        shared linear solver takes the check where they and the constraints are linear); the model
        values their variables, ``names`` and the constraints'."""
        scope = self.scope
        want = frozenset(names).union(*(e.variables() for e in exprs))
        with scope.question(*exprs):
            return scope.solve(build, linear=scope.linear(*exprs), names=want, ask=clocks.asking())

    def unsat_core(self, build: Build | None = None, *exprs: Expr) -> list[str] | None:
        """A small subset of the constraints (by text; implicit ``v >= 1`` facts as
        ``'v >= 1 (dimension variable)'``) unsatisfiable with ``build``'s facts; None if satisfiable or
        unknown. In a Z3 context of its own: the question's facts never reach the shared solver."""
        with self.scope.question(*exprs):
            return self.scope.solver.unsat_core(build, ask=clocks.asking())

    def implications(self) -> Implications:
        """Which of the constraints the others imply, for a report over the whole set: an incremental
        solver of its own (its own Z3 context: a report's many checks stay out of the scope's), whose
        checks run under the caller's question (its clock, its counts) and this session's budget."""
        return Implications(self.constraints, self.budget, clocks.asking())

    # -- the gate's valuation (the fix pipeline's box reads it) --------------------------------------------------
    def ensure_satisfiable(self) -> None:
        """The satisfiability gate in a question of its own: :class:`UnsatisfiableConstraintsError`
        names a minimal conflict; unknown leaves :attr:`sat_proven` False."""
        with self.scope.question():
            self.scope.gate.ensure()

    @property
    def sat_proven(self) -> bool:
        """Whether some valuation is known to meet every constraint."""
        return self.scope.gate.proven

    def any_point(self) -> dict[str, int] | None:
        """A valuation known to meet every constraint, if one is (a known point, else the gate's)."""
        return self.scope.any_point()


class SessionRegistry:
    """Sessions keyed by constraint set and budget; bounded so memory cannot grow without limit.

    A session keeps its answers (about 0.4 MB after a few large questions); 32 recent constraint
    sets cover a notebook's or a script's working set (JAX's scopes keep their own sessions, not
    these), and a session asked again after eviction answers the same, only not from its cache.
    Trial sets (a fix's, a subset's: ``trial=True``, and :meth:`Session.assuming`) are kept in a
    smaller tier of their own (``trials``), so that a search over dozens of them never pushes out
    the sets people ask about, nor keeps more than a few Z3 sides alive (:mod:`smtdims.engines.memory`
    keeps 16 families built). Either tier looks in the other first, so a set kept in one is not made
    again for the other (a trial set later asked as a person's moves to the people's tier).
    The least-recently-used memos of the parse caches keep them (their locks are the registry's): a
    session is cheap to make (its state is built on first use), so two threads that race on a new
    set may both make one, and both get the one kept.
    """

    def __init__(self, capacity: int = 32, trials: int = 8):
        self.capacity = capacity
        self._memo = SizedMemo(None, entries=capacity, total=capacity, size=lambda _: 1)
        self._trials = SizedMemo(None, entries=trials, total=trials, size=lambda _: 1)

    def get(self, constraints: ConstraintSet, budget: int | None = None, *, trial: bool = False) -> Session:
        key = (constraints, budget if budget is not None else options.current().budget)
        mine, other = (self._trials, self._memo) if trial else (self._memo, self._trials)
        s = mine.peek(key)
        if s is None:
            s = other.peek(key)
            if s is None or not trial:  # a trial set found in the people's tier stays there
                s = mine.keep(key, s if s is not None else Session(*key))
        return s

    def clear(self) -> None:
        self._memo.cache_clear()
        self._trials.cache_clear()


REGISTRY = SessionRegistry()


def session_for(constraints: ConstraintSet, budget: int | None = None, *, trial: bool = False) -> Session:
    """The one way to a constraint set's :class:`Session`: the registry's, one per constraint set and
    budget (None: the budget of :mod:`smtdims.options` in force), its answers cached for every caller
    that asks about the same set. ``trial``: a set the code tries on its way to an answer (a fix's, a
    subset of the constraints), kept in the registry's smaller tier of trials; the same set plus a
    few constraints is :meth:`Session.assuming`."""
    return REGISTRY.get(constraints, budget, trial=trial)

"""A scope: what is known about one constraint set, and how to ask about it (issue 43.2).

What a rung may ask (:class:`smtdims.rungs.scope.Scope`) is answered here: the facts (the variables'
ranges, the known satisfying points, interval bounds), the cone of influence, the solver check whose
models are re-checked exactly, the engines (Z3, ISL, the host's own procedure) and the gates
(constraints that some valuation meets, divisors that may be 0). The walk of the ladder is not here:
:class:`smtdims.reasoner.Session` adds it (the questions, their caches, the sub-questions a rung may
ask of the whole ladder), as TVM's ``Analyzer`` stands over its sub-analyzers. Thread-safe: a question
holds ``lock``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Self

import z3

from . import options
from .engines import presburger
from .engines.smt import COUNTS_LOCK, SAT, UNSAT, CheckResult, Encoder, SolverSession
from .errors import PossibleDivisionByZeroError, UnsatisfiableConstraintsError
from .lang.constraints import Constraint, ConstraintSet
from .lang.expr import CACHE_MAX_TERMS, Expr, deep_recursion, nesting, symbolic_divisors
from .rungs.intervals import Interval, IntervalEvaluator, combined_interval, propagate_var_ranges
from .rungs.points import Points, first_point, shrink
from .rungs.question import Precision, proven_positive, sign_interval, sign_reduce
from .rungs.search import EndSearch

_FOCUS_MEMO = 1024  # variable sets whose focus a scope keeps (then it starts over)
_UNKNOWN: Any = object()  # not in a memo
_SMALL_WITNESS_MAX_VARS = 32  # beyond this, an undetermined answer's witnesses are left as found

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
    """:meth:`ConstraintScope._question`'s block: its blocks entered in order, left in reverse.

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


# -- the session: one constraint set ----------------------------------------------------------------------
def _frozen_ranges(constraints: ConstraintSet, clock: options.Deadline) -> tuple[Mapping[str, Interval], bool]:
    """:func:`propagate_var_ranges`, read-only: the sessions of one constraint set share it."""
    ranges, infeasible = propagate_var_ranges(constraints, clock)
    return MappingProxyType(ranges), infeasible


def _first_point(constraints: ConstraintSet, clock: options.Deadline) -> dict[str, int] | None:
    return first_point(constraints, constraints.derived("ranges", _frozen_ranges, clock)[0])


def _points(constraints: ConstraintSet, clock: options.Deadline) -> Points:
    return Points(constraints, constraints.derived("ranges", _frozen_ranges, clock)[0])


class ConstraintScope:
    """The facts, gates and engines of one constraint set (the walk: :class:`smtdims.reasoner.Session`)."""

    def __init__(self, constraints: ConstraintSet, budget: int | None = None, *, parent: Self | None = None):
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
        self._focus: dict[frozenset[int], Self] = {}
        self._focus_of: dict[frozenset[str], Self | None] = {}  # a question's variables -> focus() (None: itself)
        self._interval_cache = _ScopeCache()  # Expr -> Interval
        self._stock_record = [0, 0]  # linear questions the stock rung was asked / settled (record_stock)
        self._constraint_nesting: int | None = None  # nesting() of the constraints, on the first question
        self.search = EndSearch(self)  # the bound search, in a room of its own (smtdims.rungs.search)
        self._presburger: presburger.Engine | None = None  # ISL's view, built on the first eligible bound
        self._hand: tuple[dict[str, int] | None, list[dict[str, int]]] | None = None  # points_at_hand's, per gate model


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
            ranges, infeasible = self.constraints.derived("ranges", _frozen_ranges, options.clock())
            self._infeasible_hint = infeasible
            self._evaluator = IntervalEvaluator(ranges)
        return self._evaluator

    @property
    def points(self) -> Points:
        if self._points is None:
            # Points depend on the constraints alone (never on earlier questions' models), so one
            # set's are shared by its sessions; the evaluator is the session's (its memo grows with
            # the session's questions).
            self._points = self.constraints.derived("points", _points, options.clock())
        return self._points

    def interval(self, e: Expr) -> Interval:
        """Rung 2: sound (possibly loose) bounds of ``e``; no solver. Memoised per expression."""
        r = self._interval_cache.get(e)
        if r is None:
            clock = options.clock()
            r = combined_interval(self.evaluator, e, self.constraints, clock)
            # an interval cut by the deadline (a long sum stops at it) is not kept for later questions
            if not clock.expired:
                _store(self._interval_cache, e, r, e)
        return r

    def _sign_interval_of(self, e: Expr) -> Interval:
        """An interval with the sign information of ``e`` (for relations to 0), from ``e`` and ``sign_reduce(e)``."""
        lo, hi = self.interval(e)
        if lo >= 0 or hi <= -1:
            return (lo, hi)
        red = self.sign_reduced(e)
        return sign_interval(lo, hi, *self.interval(red)) if red != e else (lo, hi)

    def sign_reduced(self, e: Expr) -> Expr:
        """``e`` divided by its common factor proven >= 1 (:func:`smtdims.rungs.question.sign_reduce`),
        the atoms' positivity proven by the interval rules: the same sign at every valuation."""
        return sign_reduce(e, proven_positive(self.interval))

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

    def check(self, build: Callable[[Encoder], list[z3.BoolRef]], *exprs: Expr, ask: options.Question) -> CheckResult:
        """A solver check of the constraints and ``build``'s facts for the question ``ask``; a model is
        re-checked exactly. ``exprs``: the first is the one ``build`` encodes (whether the shared linear
        solver takes the check is read from it); every one names variables the model gives."""
        res = self.solver.check(
            build, linear=self.linear(*exprs[:1]), ask=ask, model_vars=frozenset().union(*(e.variables() for e in exprs))
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
        return shrink(env, ok, self.constraints, options.clock())

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

    def points_made(self) -> bool:
        return self._points is not None or self.constraints.has_derived("points")

    def first_point(self) -> dict[str, int] | None:
        """The first known point (``points.base[0]``), without making the others where they are not
        made: all ones where it meets the constraints (no ranges needed), else the first of the
        guesses that does (a witness completed from it, or a gate passed by it, cost the whole set
        of points before: a fifth of a fresh scope's first exact bounds)."""
        if self.points_made():
            pts = self.points.base
            return pts[0] if pts else None
        ones = dict.fromkeys(self.constraints.variables(), 1)
        if self.constraints.holds(ones):
            return ones
        return self.constraints.derived("first point", _first_point, options.clock())

    def any_point(self) -> dict[str, int] | None:
        """A valuation known to meet every constraint, if one is: the first known point before the
        gate's (a focus's witness completed from it does not depend on how the gate was passed)."""
        p = self.first_point()
        return dict(p) if p is not None else self._sat_model

    def points_at_hand(self, e: Expr) -> list[dict[str, int]]:
        """See :meth:`smtdims.rungs.scope.Scope.points_at_hand`. ``e``'s other variables (no
        constraint restricts them) are 1."""
        free = dict.fromkeys(e.variables() - self.constraints.variables(), 1)
        if self.points_made() and self.points.base:
            return [{**free, **p} for p in self.points.base]
        root = self
        while root._parent is not None:
            root = root._parent
        model = root._sat_model
        hand = self._hand
        if hand is None or hand[0] is not model:
            # The candidates depend on the gate's model alone (set once, never changed in place), and
            # checking them is the constraints' evaluation: 0.5-0.7 ms a candidate at 500 constraints
            # (benchmark 5), twice per bound question; kept until the model changes.
            names = self.constraints.variables()
            out: list[dict[str, int]] = []
            for p in (dict.fromkeys(names, 1), model):
                if p is not None and names <= p.keys():
                    p = {v: p[v] for v in names}
                    if p not in out and self.constraints.holds(p):
                        out.append(p)
            hand = self._hand = (model, out)
        return [{**free, **p} for p in hand[1]]

    def least_of(self, points: list[dict[str, int]]) -> dict[str, int] | None:
        """The one of ``points`` (valuations that meet the constraints) with every variable at its
        least value (1, or its range's low), if one is: then no other valuation has as small a sum
        of the variables (each of its variables is at least as large, one larger), so it is the
        least-sum witness of its value, the one ISL would give (people's bounds skip ISL's search
        for it: 125 of benchmark 4's 293 finite ends).

        The ranges are the root's, read where the gate made them: a variable's range is derived from
        the constraints that hold it and their variables' ranges, all in a focus's component, so
        they are sound over a focus's constraints too."""
        root = self
        while root._parent is not None:
            root = root._parent
        ranges: Mapping[str, Interval] = {}
        if root.constraints.has_derived("ranges"):
            ranges = root.constraints.derived("ranges", _frozen_ranges, options.clock())[0]
        for p in points:
            if all(x == 1 or (n in ranges and x == ranges[n][0]) for n, x in p.items()):
                return p
        return None

    # -- gates -------------------------------------------------------------------------------------------------
    def ensure_satisfiable(self, *, make_points: bool = True) -> None:
        """Raise :class:`UnsatisfiableConstraintsError` naming a minimal conflict, once per session.

        A known satisfying point settles it without a solver. Without ``make_points`` (people's
        bounds, which ISL answers without the known points): where they are not made yet, the first
        known point (:meth:`first_point`: the ranges and the guesses up to the first that holds),
        else ISL's point of the constraints (their set, built once, serves the bounds too), settles
        it before the points are made (all of them: about a fifth of a fresh scope's first exact
        bounds, benchmark 4 cold).
        """
        if self._satisfiable_checked:
            return
        guessed = False  # the guesses were checked (none holds): the points would hold none either
        if self.constraints.constraints and not make_points and not self.points_made():
            first = self.first_point()
            if first is not None:
                self._sat_model, self._satisfiable_checked, self._sat_proven = dict(first), True, True
                return
            guessed = True
            isl = self.isl_engine(Expr.const(0), options.clock())
            got = isl.point(clock=options.clock()) if isl is not None else None
            if got is not None and got[0] is not None:  # re-checked exactly (else: ISL's conflict, Z3)
                self._sat_model, self._satisfiable_checked, self._sat_proven = got[0], True, True
                return
        if not self.constraints.constraints or (not guessed and self.points.satisfiable()):
            self._satisfiable_checked = self._sat_proven = True
            return
        isl = self.isl_engine(Expr.const(0), options.clock())
        got = isl.conflict(clock=options.clock()) if isl is not None else None
        if got is not None:
            point, core = got
            if core is not None:
                raise UnsatisfiableConstraintsError.from_conflict(core)
            self._sat_model, self._satisfiable_checked, self._sat_proven = point, True, True
            return
        res = self.check(lambda enc: [], ask=options.asking())
        if res.status == UNSAT:
            core = (None if self.internal else self.solver.unsat_core(ask=options.asking())) or [c.text for c in self.constraints]
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
                for value, env in self.points.values(d, options.clock()):
                    if value == 0:
                        return str(d), self._complete(env)
                res = self.check(lambda enc, d=d: [enc.expr(d) == 0], d, ask=options.asking())
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

    def focus(self, *exprs: Expr) -> Self:
        """The cone of influence: a session for the constraints connected to ``exprs``' variables.

        Sound once the whole set is satisfiable: constraints sharing no variable with the
        question, directly or through other constraints, do not restrict its variables.
        """
        cs = self.constraints.constraints
        if len(cs) < 2:
            return self
        names = exprs[0].variables() if len(exprs) == 1 else frozenset().union(*(e.variables() for e in exprs))
        # the focus depends on the variables alone: kept per variable set (the bounds, their rung and
        # their readable witnesses each ask for it)
        got = self._focus_of.get(names, _UNKNOWN)
        if got is _UNKNOWN:
            got = self._focus_uncached(cs, names)
            if len(self._focus_of) >= _FOCUS_MEMO:
                self._focus_of.clear()
            # the scope itself kept as None: a reference to itself would keep a dropped scope (and its
            # solver's share of the Z3 context) alive until the cycle collector runs
            self._focus_of[names] = None if got is self else got
            return got
        return self if got is None else got

    def _focus_uncached(self, cs: tuple[Constraint, ...], names: frozenset[str]) -> Self:
        # the constraints reachable from the names through shared variables: one pass over the
        # variable index (rescanning every constraint until nothing changed was 0.5-1.2 ms at 500)
        by_var = self.constraints.by_variable()
        want, todo = set(names), list(names)
        keep: set[int] = set()
        while todo:
            for i in by_var.get(todo.pop(), ()):
                if i not in keep:
                    keep.add(i)
                    for v in cs[i].diff.variables():
                        if v not in want:
                            want.add(v)
                            todo.append(v)
        if len(keep) == len(cs):
            return self
        key = frozenset(keep)
        sub = self._focus.get(key)
        if sub is None:
            sub = type(self)(ConstraintSet(tuple(cs[i] for i in sorted(keep))), self.budget, parent=self)
            self._focus[key] = sub
        return sub

    def subscope(self, constraints: ConstraintSet) -> Self:
        """A scope of a rung's own (a case of :mod:`smtdims.rungs.cases`), same budget: its unsatisfiable
        constraints name no minimal conflict (checks nobody reads) and its answers are not counted
        (the question that asked it is)."""
        sub = type(self)(constraints, self.budget)
        sub.internal = True
        return sub

    def count(self, event: str) -> None:
        """Count an event of a rung in ``smtdims.stats()`` (``presburger_declined``)."""
        STATS.bump(event)

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

    def isl_engine(self, e: Expr, clock: options.Deadline) -> presburger.Engine | None:
        """This scope's ISL engine when the rung is on, islpy is installed, ``e`` is linear and the
        question's deadline (``clock``) has not passed."""
        if not options.current().presburger or not self.linear(e) or clock.expired:
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

"""A scope: what is known about one constraint set, and how to ask about it.

What a rung may ask (:class:`smtdims.rungs.protocol.Scope`) is answered here: the facts (the variables'
ranges, the known satisfying points, interval bounds), the cone of influence, the solver check whose
models are re-checked exactly, the engines (Z3, ISL, the host's own procedure), the gates
(:class:`smtdims.gate.Gate`) and the rungs' sub-questions of the whole ladder (:mod:`smtdims.ladder`).
Callers outside the reasoner ask a :class:`smtdims.reasoner.Session` (got from
:func:`smtdims.reasoner.session_for`), which holds a scope, its answer caches and the questions, as
TVM's ``Analyzer`` holds its sub-analyzers. The Z3 side of a scope's constraint set is its ``solver``
(:class:`smtdims.engines.z3side.Z3Side`). Thread-safe: a question holds ``lock``
(:meth:`ConstraintScope.question`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Self

import z3

from . import clocks, forking, ladder, options
from .engines import presburger
from .engines.checks import SAT, CheckResult
from .engines.encoding import Encoder
from .engines.z3side import Z3Side
from .gate import Gate
from .ladder import STATS
from .lang.constraints import Constraint, ConstraintSet
from .lang.expr import Expr, nesting
from .lang.memos import CACHE_MAX_TERMS
from .lang.recursion import deep_recursion
from .lang.results import Bounds
from .rungs.interval_arith import Interval
from .rungs.intervals import IntervalEvaluator
from .rungs.points import Points, first_point
from .rungs.propagation import combined_interval, propagate_var_ranges
from .rungs.question import Precision, proven_positive, sign_interval, sign_reduce
from .rungs.search import EndSearch

_FOCUS_MEMO = 1024  # variable sets whose focus a scope keeps (then it starts over)
_UNKNOWN: Any = object()  # not in a memo


# -- a question's block -------------------------------------------------------------------------------
class _QuestionBlock:
    """:meth:`ConstraintScope.question`'s block: its blocks entered in order, left in reverse.

    A class, not a generator around a ``with`` of three blocks: every question enters it. None of
    the blocks handles exceptions (each only restores its state), so each is left with no exception
    passed, whether the question raised or not.
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
# again and again (the empty constraint set of public calls) would grow with every answer, and
# bounded by entries alone its keys (the questions' expressions, about 100 objects an entry) still
# made the long memory line rise. A forgotten answer is computed again, the same.
CACHE_ENTRIES = 1_024
CACHE_SIZE = 20_000  # about 2 tracked objects a unit: at most a few MiB a cache


class AnswerCache(dict):
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

    def put(self, key: Any, value: Any, *exprs: Expr) -> None:
        """``self[key] = value`` unless ``exprs`` are too large to keep, making room when full."""
        n = 0
        for e in exprs:
            if len(e.terms) > CACHE_MAX_TERMS:  # before size(): a huge sum is not walked for nothing
                return
            n += e.size()
        if n > CACHE_MAX_TERMS:
            return
        while len(self) >= CACHE_ENTRIES or (self and self.held + n > CACHE_SIZE):
            try:
                old = next(iter(self))
                del self[old]
                self.held -= self.sizes.pop(old, 0)
            except (StopIteration, KeyError, RuntimeError):  # another thread changed it: room was made
                break
        if key not in self:
            self.sizes[key] = n
            self.held += n
        self[key] = value


# -- the scope: one constraint set ------------------------------------------------------------------------
def frozen_ranges(constraints: ConstraintSet, clock: clocks.Deadline) -> tuple[Mapping[str, Interval], bool]:
    """:func:`propagate_var_ranges`, read-only: the scopes of one constraint set share it."""
    ranges, infeasible = propagate_var_ranges(constraints, clock)
    return MappingProxyType(ranges), infeasible


def _first_point(constraints: ConstraintSet, clock: clocks.Deadline) -> dict[str, int] | None:
    return first_point(constraints, constraints.derived("ranges", frozen_ranges, clock)[0])


def _points(constraints: ConstraintSet, clock: clocks.Deadline) -> Points:
    return Points(constraints, constraints.derived("ranges", frozen_ranges, clock)[0])


class ConstraintScope:
    """The facts, gates and engines of one constraint set, and the rungs' sub-questions of the ladder
    (callers outside the reasoner ask through :class:`smtdims.reasoner.Session`)."""

    def __init__(self, constraints: ConstraintSet, budget: int | None = None, *, parent: Self | None = None):
        self.constraints = constraints
        self.budget = budget if budget is not None else options.current().budget
        self.solver = Z3Side(constraints, self.budget, parent.solver.family if parent is not None else None)
        self.lock = forking.fork_safe(threading.RLock())  # a fork while another thread holds it: unheld in the child
        self.parent = parent  # the scope a focus was taken of
        self._evaluator: IntervalEvaluator | None = None
        self._points: Points | None = None
        self.infeasible_hint = False  # the range propagation found the constraints infeasible
        self.gate = Gate(self, checked=parent is not None)  # a focus is a component of a satisfiable set
        # A rung's own sub-question (smtdims.rungs.cases): its unsatisfiable scope names no minimal conflict
        # (checks nobody reads) and its answers are not counted (the question that asked it is).
        self.internal = False
        self._focus: dict[frozenset[int], Self] = {}
        self._focus_of: dict[frozenset[str], Self | None] = {}  # a question's variables -> focus() (None: itself)
        self._interval_cache = AnswerCache()  # Expr -> Interval
        self._stock_record = [0, 0]  # linear questions the stock rung was asked / settled (record_stock)
        self._constraint_nesting: int | None = None  # nesting() of the constraints, on the first question
        self.search = EndSearch(self)  # the bound search, in a room of its own (smtdims.rungs.search)
        self._presburger: presburger.Engine | None = None  # ISL's view, built on the first eligible bound
        self._hand: tuple[dict[str, int] | None, list[dict[str, int]]] | None = None  # points_at_hand's, per gate model

    @property
    def interval_cache(self) -> AnswerCache:
        """The interval rules' answers (a diagnostics view, read only: :attr:`smtdims.reasoner.Session.caches`)."""
        return self._interval_cache

    # -- rung 2 and 3 state -----------------------------------------------------------------------------
    @property
    def evaluator(self) -> IntervalEvaluator:
        if self._evaluator is None:
            ranges, infeasible = self.constraints.derived("ranges", frozen_ranges, clocks.clock())
            self.infeasible_hint = infeasible
            self._evaluator = IntervalEvaluator(ranges)
        return self._evaluator

    @property
    def points(self) -> Points:
        if self._points is None:
            # Points depend on the constraints alone (never on earlier questions' models), so one
            # set's are shared by its scopes; the evaluator is the scope's (its memo grows with
            # the scope's questions).
            self._points = self.constraints.derived("points", _points, clocks.clock())
        return self._points

    def interval(self, e: Expr) -> Interval:
        """Rung 2: sound (possibly loose) bounds of ``e``; no solver. Memoised per expression."""
        r = self._interval_cache.get(e)
        if r is None:
            clock = clocks.clock()
            r = combined_interval(self.evaluator, e, self.constraints, clock)
            # an interval cut by the deadline (a long sum stops at it) is not kept for later questions
            if not clock.expired:
                self._interval_cache.put(e, r, e)
        return r

    def sign_interval(self, e: Expr) -> Interval:
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

    def question(self, *exprs: Expr) -> _QuestionBlock:
        """One question about ``exprs``: the scope's lock, recursion room for their nesting, the
        deadline, the question's fresh contexts and counters. Every question of a session opens it,
        once; a rung's sub-question in a scope of its own opens its own (:meth:`bounds`)."""
        if self._constraint_nesting is None:
            self._constraint_nesting = nesting(*(c.diff for c in self.constraints.constraints))
        depth = max(self._constraint_nesting, nesting(*exprs))
        return _QuestionBlock((self.lock, deep_recursion(depth), clocks.outer_question()))

    # -- solver helpers -----------------------------------------------------------------------------------
    def linear(self, *exprs: Expr) -> bool:
        """Whether the constraints and ``exprs`` are all linear (the shared incremental solver's fragment)."""
        return self.solver.linear and all(e.is_linear() for e in exprs)

    def check(self, build: Callable[[Encoder], list[z3.BoolRef]], *exprs: Expr, ask: clocks.QuestionState) -> CheckResult:
        """A solver check of the constraints and ``build``'s facts for the question ``ask``; a model is
        re-checked exactly. ``exprs``: the first is the one ``build`` encodes (whether the shared linear
        solver takes the check is read from it); every one names variables the model gives."""
        return self.solve(build, linear=self.linear(*exprs[:1]), names=frozenset().union(*(e.variables() for e in exprs)),
                          ask=ask)

    def solve(self, build: Callable[[Encoder], list[z3.BoolRef]], *, linear: bool, names: frozenset[str],
              ask: clocks.QuestionState) -> CheckResult:
        """:meth:`check` with the shared linear solver's choice (``linear``) and the model's variables
        (``names``, beside the constraints') given: the one place every model is re-checked exactly."""
        res = self.solver.check(build, linear=linear, ask=ask, model_vars=names)
        if res.status == SAT:
            if res.model is None or not self.constraints.holds(res.model):
                # witnesses are re-checked with exact Python arithmetic: an encoding bug cannot pass
                return CheckResult("unknown", reason="solver model failed exact re-evaluation")
            # Not kept as a point for later questions: a later answer would then depend on which
            # questions came before ("unknown" fresh, "undetermined" after another question).
            # Points come from the constraints alone; a model serves its own question.
        return res

    def points_made(self) -> bool:
        return self._points is not None or self.constraints.has_derived("points")

    def first_point(self) -> dict[str, int] | None:
        """The first known point (``points.base[0]``), without making the others where they are not
        made: all ones where it meets the constraints (no ranges needed), else the first of the
        guesses that does (a witness completed from it, or a gate passed by it, need not pay for the
        whole set of points: a large part of a fresh scope's first exact bounds)."""
        if self.points_made():
            pts = self.points.base
            return pts[0] if pts else None
        ones = dict.fromkeys(self.constraints.variables(), 1)
        if self.constraints.holds(ones):
            return ones
        return self.constraints.derived("first point", _first_point, clocks.clock())

    def any_point(self) -> dict[str, int] | None:
        """A valuation known to meet every constraint, if one is: the first known point before the
        gate's (a focus's witness completed from it does not depend on how the gate was passed)."""
        p = self.first_point()
        return dict(p) if p is not None else self.gate.model

    def points_at_hand(self, e: Expr) -> list[dict[str, int]]:
        """See :meth:`smtdims.rungs.protocol.Scope.points_at_hand`. ``e``'s other variables (no
        constraint restricts them) are 1."""
        free = dict.fromkeys(e.variables() - self.constraints.variables(), 1)
        if self.points_made() and self.points.base:
            return [{**free, **p} for p in self.points.base]
        model = self.root().gate.model
        hand = self._hand
        if hand is None or hand[0] is not model:
            # The candidates depend on the gate's model alone (set once, never changed in place), and
            # checking them is the constraints' evaluation (about half a millisecond a candidate at 500
            # constraints), twice per bound question; kept until the model changes.
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
        for it).

        The ranges are the root's, read where the gate made them: a variable's range is derived from
        the constraints that hold it and their variables' ranges, all in a focus's component, so
        they are sound over a focus's constraints too."""
        root = self.root()
        ranges: Mapping[str, Interval] = {}
        if root.constraints.has_derived("ranges"):
            ranges = root.constraints.derived("ranges", frozen_ranges, clocks.clock())[0]
        for p in points:
            if all(x == 1 or (n in ranges and x == ranges[n][0]) for n, x in p.items()):
                return p
        return None

    def root(self) -> Self:
        """The whole scope a focus was taken of (itself if it is one)."""
        root = self
        while root.parent is not None:
            root = root.parent
        return root

    def focus(self, *exprs: Expr) -> Self:
        """The cone of influence: a scope for the constraints connected to ``exprs``' variables.

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
        # variable index (not a rescan of every constraint until nothing changes)
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
        changes the cost of an answer, never the answer (JAX's procedure can spend far longer than
        the solver before giving up).
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

    def isl_engine(self, e: Expr, clock: clocks.Deadline) -> presburger.Engine | None:
        """This scope's ISL engine when the rung is on, islpy is installed, ``e`` is linear and the
        question's deadline (``clock``) has not passed."""
        if not options.current().presburger or not self.linear(e) or clock.expired:
            return None
        if self._presburger is None:
            if not presburger.available():
                return None
            self._presburger = presburger.Engine(self.constraints)
        return self._presburger

    def isl_clock_stopped(self, e: Expr) -> bool:
        """Whether ISL would have answered ``e`` exactly here but a clock stopped it (:func:`presburger.clock_stopped`)."""
        return options.current().presburger and self.linear(e) and \
            presburger.clock_stopped(self._presburger, self.constraints, e)

    # -- the rungs' sub-questions of the whole ladder ------------------------------------------------------
    def holds_everywhere(self, diff: Expr, op: str, ask: clocks.QuestionState) -> tuple[bool, str]:
        """See :func:`smtdims.ladder.holds_everywhere`: a rung's proof inside the caller's question."""
        return ladder.holds_everywhere(self, diff, op, ask)

    def bounds(self, e: Expr) -> Bounds:
        """Exact bounds of ``e`` in this scope (a rung's case, :meth:`subscope`): one question of its
        own, its gates first (an empty case raises :class:`UnsatisfiableConstraintsError`)."""
        with self.question(e):
            self.gate.ensure()
            self.gate.check_divisors(e)
            return ladder.exact_bounds(self, e)

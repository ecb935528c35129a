"""The walk of the ladder over a scope, and the answers it builds; who answered (``stats()``).

One driver (:func:`walk`) walks a kind's ladder (:data:`smtdims.rungs.table.LADDERS`) over a scope
and stops at the first rung that leaves the question done. The walk's own sub-questions stand here
too, beside it: a rung's proof (:func:`holds_everywhere`) and exact bounds in a scope the gates have
passed (:func:`exact_bounds`). Functions of the scope they walk, not methods: the scope
(:class:`smtdims.scope.ConstraintScope`) and the session over it (:class:`smtdims.reasoner.Session`)
both call them, and this module imports neither (it reads the scope through the rungs' Protocol).
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

from . import clocks
from .engines.counters import COUNTS_LOCK
from .lang.expr import Expr
from .lang.results import Bounds
from .rungs.interval_arith import Interval
from .rungs.protocol import Scope
from .rungs.question import NEGATED, BoundsQuestion, End, Side, SignQuestion, all_settled
from .rungs.table import BOUNDS, DECISION, LADDERS

_Q = TypeVar("_Q", SignQuestion, BoundsQuestion)


class WalkedScope(Scope, Protocol):
    """What the walk reads of a scope beyond the rungs' Protocol (:class:`smtdims.scope.ConstraintScope`)."""

    internal: bool
    gate: Any  # its gates (smtdims.gate.Gate), named by role: gate.py reads the scope through this Protocol
    parent: Any  # the scope a focus was taken of (None for a whole scope)

    def first_point(self) -> dict[str, int] | None: ...

    def sign_interval(self, e: Expr) -> Interval: ...

    def isl_clock_stopped(self, e: Expr) -> bool: ...

# The names answers are counted under in stats() (always listed, 0 until one answers); a rung added to
# the table with a name of its own is counted from its first answer.
RUNGS = ("constant", "interval", "points", "stock", "presburger", "cases", "solver-linear", "solver-nonlinear", "search")
SOLVER_RUNGS = ("solver-linear", "solver-nonlinear", "search")


class Stats:
    """Who answered since start (or :meth:`reset`), and how often a cache or a clock shaped it."""

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
        q = clocks.this_question()
        if q is not None:
            q.rung = rung
        # a solver rung counts as a solver answer only if Z3 ran in this question: the search
        # rung often closes both ends with rays and known points alone
        ran = rung in SOLVER_RUNGS and q is not None and bool(q.starts) and q.checks > q.starts[-1]
        with COUNTS_LOCK:
            self.by_rung[rung] = self.by_rung.get(rung, 0) + 1
            self.solver_answers += ran

    def bump(self, name: str) -> None:
        with COUNTS_LOCK:
            setattr(self, name, getattr(self, name) + 1)


STATS = Stats()


def walk(q: _Q, kind: str, scope: WalkedScope) -> _Q:
    """The one driver, for every kind of question (``decision``, ``sign``, ``bounds``): each rung
    of the kind's ladder answers what it can; the walk stops at the first that leaves ``q`` done."""
    ladder = LADDERS[kind]
    for rung in ladder:
        by = rung.answer(q, scope)
        if by is not None and (q.done() or rung is ladder[-1]):
            q.by = by
            break
    return q


def holds_everywhere(scope: WalkedScope, diff: Expr, op: str, ask: clocks.QuestionState) -> tuple[bool, str]:
    """(whether ``diff op 0`` is proven at every valuation, the rung that settled it): a proof for the
    caller's question ``ask``: no lock, no answer counted, no satisfiability or divisor check (the
    caller's)."""
    fails = Side(NEGATED[op])
    q = walk(SignQuestion(diff, [fails], scope.sign_interval(diff), all_settled, ask), DECISION, scope)
    return fails.status == "unsat", q.by


def exact_bounds(scope: WalkedScope, e: Expr, proven: Interval | None = None, readable: bool = False) -> Bounds:
    """The bounds ladder (constant, points, ISL, cases, search) in a scope whose gates the caller
    has run (satisfiability, divisors), inside the caller's question."""
    q = walk(BoundsQuestion(scope, e, proven, readable, clocks.asking()), BOUNDS, scope)
    assert q.ends is not None  # the search, last, always answers
    return make_bounds(scope, e, *q.ends, q.by, deterministic=q.deterministic)


def make_bounds(scope: WalkedScope, e: Expr, lo: End, hi: End, by: str, deterministic: bool = True) -> Bounds:
    """The answer value of a bounds question: its ends as claimed (:meth:`smtdims.gate.Gate.claimed`),
    what shaped it, the limits in force."""
    if not scope.internal:
        STATS.answered(by)
    if by != "presburger" and not (lo.tight and hi.tight) and scope.focus(e).isl_clock_stopped(e):
        clocks.mark_clocked(clocks.CLOCK_ISL)  # ISL, late, would have given the exact ends
    deterministic = deterministic and clocks.clocked() is None  # no clock shaped it
    if not deterministic and not scope.internal:
        STATS.bump("deadline_answers")
    proven, (lo_w, hi_w) = scope.gate.claimed(lo.witness, hi.witness)
    # a tight end claims a valuation attains it: where the scope is not known satisfiable, only
    # with a witness that meets every constraint (an infinite end: once some valuation does)
    lo_tight = lo.tight and proven and (lo_w is not None or lo.witness is None)
    hi_tight = hi.tight and proven and (hi_w is not None or hi.witness is None)
    dropped = (lo.tight and not lo_tight) or (hi.tight and not hi_tight)
    reason = scope.gate.unproven_reason() if dropped else None
    budget, deadline = clocks.limits_in_force()
    return Bounds(
        lo.value, hi.value, expr=str(e), constraints=tuple(c.text for c in scope.constraints), answered_by=by,
        context=(scope.constraints, scope.budget, e), lo_tight=lo_tight, hi_tight=hi_tight,
        lo_witness=lo_w, hi_witness=hi_w,
        deterministic=deterministic, reason=reason, budget=budget, deadline=deadline, clocked=clocks.clocked(),
    )

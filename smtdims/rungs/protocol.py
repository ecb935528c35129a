"""The rungs' Protocol: what a rung may ask of the scope it answers in, the whole public surface
between rungs and scope (the one module named ``scope`` is :mod:`smtdims.scope`, which implements it).

A scope is what is known about one constraint set (:class:`smtdims.scope.ConstraintScope`
implements its facts, gates and engines, and the sub-questions ``holds_everywhere`` and ``bounds``
through the walk of :mod:`smtdims.ladder`; :class:`smtdims.reasoner.Session` holds one and is the
door for every caller outside the reasoner). A rung reads facts
(known points, interval bounds), narrows to the cone of influence, asks the engines (a checked
solver call, ISL, the host's own procedure) and asks sub-questions; it never reaches into the
scope's caches, locks or statistics. Why a Protocol here rather than the class: the rungs stand
below the walk that orders them (the floors of ``tests/docs/test_structure.py``), as TVM's
sub-analyzers stand below its ``Analyzer``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

import z3

from ..engines import presburger
from ..engines.checks import CheckResult
from ..engines.encoding import Encoder
from ..engines.z3side import Z3Side
from ..lang.constraints import ConstraintSet
from ..lang.expr import Expr
from ..lang.results import Bounds
from .interval_arith import Interval
from .question import Precision

if TYPE_CHECKING:
    from ..clocks import Deadline, QuestionState


class KnownPoints(Protocol):
    """What a rung reads of the known points (:class:`smtdims.rungs.points.Points`)."""

    @property
    def base(self) -> list[dict[str, int]]:
        """Valuations of the constrained variables that meet every constraint."""

    def values(self, e: Expr, clock: Deadline) -> Iterator[tuple[int, dict[str, int]]]:
        """``e``'s value at each known point (its free variables filled), with the point; none
        once ``clock`` (the question's deadline) has passed."""


class Scope(Protocol):
    constraints: ConstraintSet
    budget: int
    solver: Z3Side
    # The search for exact ends in this scope (an EndSearch of smtdims.rungs.search, which stands on
    # this Protocol: named here by its role, not its type, so that neither module imports the other).
    search: Any

    @property
    def points(self) -> KnownPoints:
        """Known valuations that meet every constraint (from the constraints alone)."""

    def points_made(self) -> bool:
        """Whether :attr:`points` are made already (making them costs a dozen exact checks and the ranges)."""

    def interval(self, e: Expr) -> Interval:
        """Sound (possibly loose) bounds of ``e`` by the interval rules; no solver."""

    def sign_reduced(self, e: Expr) -> Expr:
        """``e`` divided by a common factor proven >= 1, its divisions reduced alike: the same sign at
        every valuation (:func:`smtdims.rungs.question.sign_reduce`)."""

    def focus(self, *exprs: Expr) -> Scope:
        """The cone of influence: the scope of the constraints connected to ``exprs``' variables."""

    def linear(self, *exprs: Expr) -> bool:
        """Whether the constraints and ``exprs`` are all linear (the shared incremental solver's fragment)."""

    def check(self, build: Callable[[Encoder], list[z3.BoolRef]], *exprs: Expr, ask: QuestionState) -> CheckResult:
        """A solver check of the constraints and ``build``'s facts for the question ``ask``; a model
        is re-checked exactly. The first of ``exprs`` is the one ``build`` encodes (the shared linear
        solver takes the check where it and the constraints are linear); every one names variables
        the model gives."""

    def isl_engine(self, e: Expr, clock: Deadline) -> presburger.Engine | None:
        """This scope's ISL engine where the rung is on, islpy is installed, ``e`` is linear and the
        question's deadline (``clock``) has not passed."""

    def stock(self, origin: Any, need: Precision) -> Interval | None:
        """The host's own procedure's bounds of its expression ``origin``, where it is sound."""

    def stock_unprofitable(self) -> bool:
        """Whether the host's procedure rarely settles linear questions in this scope."""

    def record_stock(self, settled: bool) -> None:
        """One more linear question asked of the host's procedure, and whether it settled it."""

    def any_point(self) -> dict[str, int] | None:
        """A valuation known to meet every constraint, if one is."""

    def points_at_hand(self, e: Expr) -> list[dict[str, int]]:
        """Valuations of the constraints' and ``e``'s variables that meet every constraint, at hand
        without making :attr:`points`: the known points where made and one holds, else all ones
        (where it meets them) and the satisfiability gate's point."""

    def least_of(self, points: list[dict[str, int]]) -> dict[str, int] | None:
        """The one of ``points`` (valuations that meet the constraints) with every variable at its
        least value, if one is: the one valuation with the least sum of the variables."""

    def holds_everywhere(self, diff: Expr, op: str, ask: QuestionState) -> tuple[bool, str]:
        """A rung's own sub-question (of the question ``ask``): whether ``diff op 0`` is proven, and the
        rung that settled it."""

    def subscope(self, constraints: ConstraintSet) -> Scope:
        """A scope of the rung's own (a case), same budget; its answers are not counted."""

    def bounds(self, e: Expr) -> Bounds:
        """Exact bounds of ``e`` in this scope (the whole ladder)."""

    def count(self, event: str) -> None:
        """Count an event in ``smtdims.stats()`` (``presburger_declined``, ``stock_errors``)."""

"""What a rung is asked: a sign question (which of its sides can hold) or a bounds question (both ends).

A decision, a proof and JAX's sign questions are one kind of question: which of its sides can hold
(``e >= 0`` and ``e < 0``, ...). A rung answers the sides it can (a point where a side holds is its
witness, an interval that excludes it refutes it, the solver checks what is left); ``enough`` says
when the caller has what it needs. Exact bounds ask for both ends of ``e``; a rung that closes them
sets ``ends``. The walk of :mod:`smtdims.rungs.table` stops at the first rung that leaves a question
``done``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING, Any

import z3

from ..engines.smt import SAT, UNSAT
from ..lang.expr import Expr, Var
from ..lang.results import FALSE, TRUE

if TYPE_CHECKING:
    from ..options import Deadline, Question

# As in smtdims.rungs.intervals (which stands on this module): an end is an int or +-math.inf.
INF = math.inf
Interval = tuple[int | float, int | float]

COMPARISON_OPS = (">=", "<=", ">", "<", "==", "!=")
NEGATED = {">=": "<", "<": ">=", "<=": ">", ">": "<=", "==": "!=", "!=": "=="}  # op -> its negation


class Precision(IntEnum):
    """What a caller needs from bounds, weakest first (JAX's ``BoundsPrecision``, ordered)."""

    SIGN = 0  # enough once lo >= 0 or hi <= 0 (max/min)
    STRICT_SIGN = 1  # enough once lo >= 0 or hi < 0 (comparisons)
    BEST = 2  # as tight as can be proven


_LEGACY = {"geq0_or_leq0": Precision.SIGN, "geq0_or_lt0": Precision.STRICT_SIGN, "best": Precision.BEST}


def precision(need: Any) -> Precision:
    return need if isinstance(need, Precision) else _LEGACY.get(need, Precision(need))


def sufficient(need: Any, lo: float, hi: float) -> bool:
    need = precision(need)
    if need == Precision.SIGN:
        return lo >= 0 or hi <= 0
    if need == Precision.STRICT_SIGN:
        return lo >= 0 or hi < 0
    return lo == hi


def relation(op: str, d: z3.ArithRef) -> z3.BoolRef:
    """``lhs op rhs`` as a relation on ``d = lhs - rhs``."""
    return {">=": d >= 0, "<=": d <= 0, ">": d > 0, "<": d < 0, "==": d == 0, "!=": d != 0}[op]


def holds(op: str, v: int) -> bool:
    return {">=": v >= 0, "<=": v <= 0, ">": v > 0, "<": v < 0, "==": v == 0, "!=": v != 0}[op]


def interval_decides(op: str, lo: float, hi: float) -> str | None:
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


def rel_range(rel: str, lo: float, hi: float) -> str | None:
    """Whether ``v rel 0`` holds for every ``v`` in ``[lo, hi]`` ("all"), for none ("none"), or neither."""
    verdict = interval_decides(rel, lo, hi)
    return "all" if verdict == TRUE else "none" if verdict == FALSE else None


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


def sign_interval(lo, hi, rlo, rhi) -> Interval:
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
class End:
    """One end of a bound: its value, whether it is exact (``tight``), and a valuation attaining it."""

    value: int | float
    tight: bool
    witness: dict[str, int] | None


@dataclass
class Side:
    """One side of a sign question: can ``e rel 0`` hold at some valuation of the constraints?"""

    rel: str
    status: str | None = None  # SAT | UNSAT | UNKNOWN; None: no rung has answered it yet
    witness: dict[str, int] | None = None
    reason: str = ""
    source: Any = None  # the scope whose constraints the witness satisfies (a focus's: partial)


@dataclass
class SignQuestion:
    """What every decision, proof and sign bound asks: which of its sides can hold.

    ``decide`` asks two sides (the relation and its negation), ``proves`` one (the negation), JAX's
    sign questions two (``e < 0`` and ``e >= 0`` or ``e > 0``). A rung answers the sides it can;
    ``enough`` says when the caller has what it needs, and the walk stops there.
    """

    e: Expr
    sides: list[Side]
    interval: Interval  # proven bounds of e; the stock rung tightens them
    enough: Callable[[SignQuestion], bool]
    ask: Question  # the question being answered (its clock, its checks): what the rungs hand down
    origin: Any = None  # the host's own expression: the stock rung's question
    need: Precision = Precision.BEST
    by: str = ""  # the rung whose answer settled the question
    reasons: list[str] = field(default_factory=list)  # why solver checks came back unknown

    @property
    def clock(self) -> Deadline:
        """The question's deadline: what a rung reads before more work (never an ambient clock)."""
        return self.ask.deadline

    def open(self) -> list[Side]:
        return [side for side in self.sides if side.status is None]

    def done(self) -> bool:
        return self.enough(self)


def all_settled(q: SignQuestion) -> bool:
    return all(side.status in (SAT, UNSAT) for side in q.sides)


def one_refuted(q: SignQuestion) -> bool:
    """A sign bound is proven once one side cannot hold; none is once both can."""
    return any(side.status == UNSAT for side in q.sides) or all_settled(q)


class BoundsQuestion:
    """Both exact ends of ``e``: what the rungs share (the known points' values, the cone of
    influence, the interval rules' bounds narrowed by the caller's), each computed once, on first use.

    ``readable``: for people (``smtdims.bounds``, the CLI): ISL then gives its least-sum witnesses
    with the ends, so the quick close by points is skipped. A rung that closes both ends sets
    ``ends`` (and ``deterministic`` where a clock shaped them).
    """

    def __init__(self, scope: Any, e: Expr, proven: Interval | None, readable: bool, ask: Question) -> None:
        self.scope, self.e, self.proven, self.readable, self.ask = scope, e, proven, readable, ask
        self.ends: tuple[End, End] | None = None
        self.deterministic = True
        self._values: list[tuple[int, dict[str, int]]] | None = None
        self._interval: Interval | None = None
        self._focus: Any = None

    @property
    def clock(self) -> Deadline:
        """The question's deadline: what a rung reads before more work (never an ambient clock)."""
        return self.ask.deadline

    def done(self) -> bool:
        return self.ends is not None

    def answer(self, lo: End, hi: End, deterministic: bool = True) -> None:
        self.ends, self.deterministic = (lo, hi), deterministic

    @property
    def values(self) -> list[tuple[int, dict[str, int]]]:
        """``e``'s values at the known points (with the points): attained values, exactly."""
        if self._values is None:
            self._values = list(self.scope.points.values(self.e, self.clock))
        return self._values

    @property
    def focus(self) -> Any:
        """The cone of influence's scope (:meth:`Scope.focus`)."""
        if self._focus is None:
            self._focus = self.scope.focus(self.e)
        return self._focus

    @property
    def interval(self) -> Interval:
        """The interval rules' bounds of ``e``, narrowed by the caller's proven bounds."""
        if self._interval is None:
            lo, hi = self.scope.interval(self.e)
            self._interval = (lo, hi) if self.proven is None else (max(lo, self.proven[0]), min(hi, self.proven[1]))
        return self._interval

    def extremes(self) -> tuple[tuple[int, dict[str, int]], tuple[int, dict[str, int]]] | None:
        """The least and greatest known values with their points, or None where no point is known."""
        vals = self.values
        if not vals:
            return None
        return min(vals, key=lambda x: x[0]), max(vals, key=lambda x: x[0])

    def proven_or_all(self) -> Interval:
        return self.proven or (-INF, INF)

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
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING, Any

import z3

from ..engines.checks import SAT, UNSAT
from ..lang.expr import FLOORDIV, MOD, Atom, Expr, Monomial, Op, Var
from ..lang.polynomial import ExpansionTooLarge
from ..lang.results import FALSE, TRUE
from .interval_arith import INF, Interval

if TYPE_CHECKING:
    from ..clocks import Deadline, QuestionState


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


Positive = Callable[[Atom], bool]
"""Whether an atom other than a variable is proven >= 1 at every valuation (a scope's interval rules)."""


def proven_positive(interval: Callable[[Expr], Interval]) -> Positive:
    """The :data:`Positive` test of a scope: the interval rules' lower bound of the atom is at least 1."""
    return lambda a: interval(Expr.atom(a))[0] >= 1


def common_factor(terms: Iterable[tuple[Monomial, int]], positive: Positive | None = None) -> tuple[int, dict[Atom, int]]:
    """``(g, powers)``: the largest factor ``g * a1^k1 * ...`` of every term that is >= 1 at every valuation.

    ``g`` is the gcd of the coefficients (>= 1; 0 where there are no terms), each ``ai`` an atom in
    every term at its least power there: a variable (>= 1 by the semantics), or another atom that
    ``positive`` proves >= 1 (none without it: ``floordiv(n, 8)`` is 0 at ``n = 1``, ``min(-a, -1)``
    is negative). A constant term leaves only ``g``.
    """
    terms = list(terms)
    g = math.gcd(*(c for _, c in terms))
    common: dict[Atom, int] | None = None
    for m, _ in terms:
        if common is None:
            common = dict(m)
        else:
            powers = dict(m)
            common = {a: min(k, powers[a]) for a, k in common.items() if a in powers}
        if not common:
            return g, {}
    common = common or {}
    return g, {a: k for a, k in common.items() if isinstance(a, Var) or (positive is not None and positive(a))}


def divide_common(x: Expr, g: int, powers: dict[Atom, int]) -> Expr:
    """``x`` divided by the factor ``g * a1^k1 * ...`` that :func:`common_factor` found in every term of
    ``x`` (exact: ``g`` divides every coefficient, each ``ai^ki`` every monomial)."""
    out: dict[Monomial, int] = {}
    for m, c in x.terms:
        rest = tuple((a, k - powers.get(a, 0)) for a, k in m if k - powers.get(a, 0) > 0)
        out[rest] = out.get(rest, 0) + c // g
    return Expr.from_coefficients(out)


def _factor_expr(g: int, powers: dict[Atom, int]) -> Expr:
    out = Expr.const(g)
    for a, k in powers.items():
        out = out * Expr.atom(a) ** k
    return out


def reduce_divisions(e: Expr, positive: Positive | None = None) -> Expr:
    """``e`` with every ``floordiv``/``mod`` by a symbolic divisor reduced by the common factor of
    its operands: the same value at every valuation where ``e`` is defined (``e`` itself where
    nothing reduces).

    The rules, for ``f = g * a1^k1 * ...`` the :func:`common_factor` of every term of both operands
    (so ``f >= 1`` at every valuation: ``g >= 1`` and each ``ai >= 1``):

    * ``floordiv(f*x, f*y) = floordiv(x, y)``
    * ``mod(f*x, f*y) = f*mod(x, y)``

    Proof: where the division is defined, ``f*y != 0``, so ``y != 0``, and as real numbers
    ``(f*x) / (f*y) = x / y`` (``f != 0``): the floors agree, ``floordiv(f*x, f*y) = floor(x / y)``.
    Python's remainder is ``mod(u, v) = u - v*floor(u / v)``, so ``mod(f*x, f*y) = f*x - f*y*floor(x / y)
    = f*(x - y*floor(x / y)) = f*mod(x, y)``. Signs: ``y`` may be negative (``mod(8*t, -128*b)`` is
    ``8*mod(t, -16*b)``, in ``(-128*b, 0]`` both ways); only ``f != 0`` is used, and ``f >= 1`` is asked
    so that the rewrite never defines a division the original leaves undefined (``f = 0`` with
    ``y != 0``) and :func:`sign_reduce` may divide the factor ``f`` out of a sum afterwards. Example:
    JAX's reshape of ``(b, t + mod(-t, 16), 8)`` into ``(b, -1, 16, 8)`` asks for
    ``mod(8*b*mod(-t, 16) + 8*b*t, -128*b) == 0``; with ``f = 8*b`` it is
    ``8*b*mod(mod(-t, 16) + t, -16)``, whose sign is that of a linear expression.

    A division by a constant ``m != 0`` sheds the multiples of ``m`` in its dividend, so that the same
    division written with another offset is one atom (a conv's patch count ``floordiv(h - 8, 8) + 1``
    is JAX's ``floordiv(h, 8)``, and their products cancel):

    * ``floordiv(m*q + r, m) = q + floordiv(r, m)``
    * ``mod(m*q + r, m) = mod(r, m)``

    where ``q`` collects the terms whose coefficients ``m`` divides and the constant's multiple of
    ``m`` (the constant left in ``r`` is in ``[0, |m|)``). Proof: ``q`` is an integer at every
    valuation, and as real numbers ``(m*q + r)/m = q + r/m``, so the floors differ by exactly ``q``;
    ``mod(u, m) = u - m*floor(u/m)`` then gives ``m*q + r - m*q - m*floor(r/m) = mod(r, m)``.

    Inner divisions first (bottom-up), each atom rewritten once; a product that would expand past
    the limits (:class:`ExpansionTooLarge`) leaves ``e`` as it is.
    """
    if not any(isinstance(a, Op) and a.op in (FLOORDIV, MOD) and (not a.rhs.is_constant or _multiples(a) is not None)
               for a in e.atoms()):
        return e
    memo: dict[Op, Expr | None] = {}
    try:
        out = _reduced(e, positive, memo)
    except ExpansionTooLarge:
        return e
    return e if out is None else out


def _reduced(e: Expr, positive: Positive | None, memo: dict[Op, Expr | None]) -> Expr | None:
    """``e`` with its atoms rewritten (:func:`reduce_divisions`), or None where none changed. Only the
    terms holding a changed atom are multiplied out again (an expanded power has thousands of terms)."""
    changed: dict[int, Expr] = {}
    for i, (m, c) in enumerate(e.terms):
        news = [_reduced_atom(a, positive, memo) if isinstance(a, Op) else None for a, _ in m]
        if any(n is not None for n in news):
            term = Expr.const(c)
            for (a, k), new in zip(m, news, strict=True):
                term = term * ((Expr.atom(a) if new is None else new) ** k)
            changed[i] = term
    if not changed:
        return None
    acc: dict[Monomial, int] = {}
    for i, (m, c) in enumerate(e.terms):
        for mm, cc in changed[i].terms if i in changed else ((m, c),):
            acc[mm] = acc.get(mm, 0) + cc
    return Expr.from_coefficients(acc)


def _reduced_atom(a: Op, positive: Positive | None, memo: dict[Op, Expr | None]) -> Expr | None:
    if a in memo:
        return memo[a]
    lhs, rhs = _reduced(a.lhs, positive, memo), _reduced(a.rhs, positive, memo)
    out = None
    x = a.lhs if lhs is None else lhs
    y = a.rhs if rhs is None else rhs
    factor: Expr | None = None
    m = y.as_constant()
    if a.op in (FLOORDIV, MOD) and m is not None and m != 0:
        split = _split_multiples(x, m)
        if split is not None:
            q, r = split
            out = r.floordiv(y) + q if a.op == FLOORDIV else r.mod(y)
            memo[a] = out
            return out
    if a.op in (FLOORDIV, MOD) and not y.is_constant:
        g, powers = common_factor((*x.terms, *y.terms), positive)
        if g > 1 or powers:
            if a.op == MOD:
                factor = _factor_expr(g, powers)
            x, y = divide_common(x, g, powers), divide_common(y, g, powers)
    if factor is not None or x is not a.lhs or y is not a.rhs:
        out = getattr(x, a.op)(y)
        if factor is not None:
            out = factor * out
    memo[a] = out
    return out


def _multiples(a: Op) -> tuple[Expr, Expr] | None:
    """:func:`_split_multiples` of a division by a constant (None: another division, or nothing to shed)."""
    m = a.rhs.as_constant()
    return _split_multiples(a.lhs, m) if m else None


def _split_multiples(x: Expr, m: int) -> tuple[Expr, Expr] | None:
    """``(q, r)`` with ``x == m*q + r``: ``q`` the terms whose coefficients ``m`` divides (divided) and
    the constant's multiple of ``m``, so that ``r``'s constant is in ``[0, |m|)``; None where ``q`` is 0."""
    c0 = x.constant_part()
    rest = c0 % abs(m)
    q = Expr.from_coefficients({mono: c // m for mono, c in x.terms if mono and c % m == 0}) + (c0 - rest) // m
    if not q.terms:
        return None
    return q, x - q * m


def sign_reduce(e: Expr, positive: Positive | None = None) -> Expr:
    """``e`` divided by a positive common factor: the same sign at every valuation (``e`` itself where
    nothing divides).

    First every division by a symbolic divisor is reduced by its operands' common factor
    (:func:`reduce_divisions`: the same value). Then every term of ``e`` shares the factor
    ``f = g * a1^k1 * ...`` (:func:`common_factor`: ``g`` the gcd of the coefficients, each ``ai`` a
    variable or an atom ``positive`` proves >= 1), so ``e = f * e'`` with ``f >= 1`` and
    ``sign(e) == sign(e')``. Reshapes compare ``b*4*n`` with ``b*32*floordiv(n, 8)``: dividing by
    ``4*b`` makes the question linear; and ask ``mod(8*b*t + 8*b*mod(-t, 16), -128*b) == 0``, which
    is ``8*b*mod(t + mod(-t, 16), -16)``, of the sign of ``mod(t + mod(-t, 16), -16)``.
    """
    e = reduce_divisions(e, positive)
    if not e.terms or e.is_constant:
        return e
    g, powers = common_factor(e.terms, positive)
    if not powers and g == 1:
        return e
    return divide_common(e, g, powers)


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
    ask: QuestionState  # the question being answered (its clock, its checks): what the rungs hand down
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

    def __init__(self, scope: Any, e: Expr, proven: Interval | None, readable: bool, ask: QuestionState) -> None:
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

"""Exact certificates that an expression is unbounded: a feasible ray along which it decreases.

Z3's optimiser proves a linear end infinite when it finishes, and its luck varies (one
``Optimize`` call spent its whole budget on ``floordiv(a + 2, -5) + ...``); for products
of variables Z3 cannot prove an end infinite at all. A ray is a proof that needs no
solver: a point ``p`` and an integer direction ``d`` such that, for every large
enough integer ``t``,

- ``p + t*d`` has every variable ``>= 1`` and meets every constraint, and
- ``e(p + t*d)`` is a polynomial in ``t`` with a negative leading coefficient,

so ``e`` takes arbitrarily small values. The evaluation is exact: each subterm's value
along the ray is a polynomial in ``t`` (integer coefficients) from some ``t`` on, or
the certificate is refused (``None``), never guessed. ``max``/``min`` pick the
eventually larger/smaller side; ``floordiv``/``mod`` by a constant ``k`` need ``k`` to
divide every non-constant coefficient; a symbolic divisor refuses.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from ..lang.bigints import text_int
from ..lang.constraints import Constraint, ConstraintSet
from ..lang.expr import FLOORDIV, MAX, MIN, MOD, Atom, Expr, Op, Var

if TYPE_CHECKING:
    from ..clocks import Deadline, QuestionState

_MAX_SINGLE_DIRECTIONS = 16
_MAX_DEGREE = 2048
Poly = tuple[int, ...]  # coefficients of t^0, t^1, ...; no trailing zeros


def _norm(c: list[int]) -> Poly:
    while c and c[-1] == 0:
        c.pop()
    return tuple(c)


def _add(x: Poly, y: Poly, k: int = 1) -> Poly:
    out = list(x) + [0] * max(0, len(y) - len(x))
    for i, c in enumerate(y):
        out[i] += k * c
    return _norm(out)


class _Work:
    """What one ray search may still spend: coefficient products (deterministic), and the deadline.

    Each product of two coefficients costs one unit. A search that runs out refuses (no
    certificate: sound); running out is decided by the count, not by a clock, so the same
    question refuses the same rays. The question's clock is watched as well (reading it past the
    deadline marks the answer as clock-shaped).
    """

    __slots__ = ("left", "clock")

    def __init__(self, units: int, clock: Deadline):
        self.left = units
        self.clock = clock

    def spend(self, units: int) -> bool:
        self.left -= units
        return self.left >= 0 and not self.clock.expired


RAY_WORK = 1_000_000  # coefficient products per ray search: a fraction of a second of exact arithmetic


def _mul(x: Poly, y: Poly, work: _Work | None = None) -> Poly | None:
    if not x or not y:
        return ()
    if len(x) + len(y) - 2 > _MAX_DEGREE:
        return None
    if work is not None and not work.spend(len(x) * len(y)):
        return None
    if len(x) == 1 or len(y) == 1:
        k, z = (x[0], y) if len(x) == 1 else (y[0], x)
        return tuple(k * c for c in z)  # a nonzero constant times a normalised polynomial: normalised
    out = [0] * (len(x) + len(y) - 1)
    for i, a in enumerate(x):
        if a:
            for j, b in enumerate(y):
                out[i + j] += a * b
    return _norm(out)


def _pow(x: Poly, k: int, work: _Work | None = None) -> Poly | None:
    result: Poly | None = (1,)
    base: Poly | None = x
    while k and result is not None and base is not None:
        if k & 1:
            result = _mul(result, base, work)
        k >>= 1
        if k:
            base = _mul(base, base, work)
    return result


def _eventually_geq(x: Poly, y: Poly) -> bool:
    """Whether ``x(t) >= y(t)`` for every large enough t."""
    d = _add(x, y, -1)
    return not d or d[-1] > 0


def _eventual_quotient(x: Poly, y: Poly) -> int | None:
    """The constant ``c`` with ``floor(x(t) / y(t)) == c`` for all large t, when ``deg x <= deg y``.

    ``floor(x/y) == c`` iff ``c*y <= x < (c+1)*y`` (``y > 0``) or ``c*y >= x > (c+1)*y`` (``y < 0``);
    ``x/y`` tends to ``lead(x)/lead(y)`` (or 0), so c is within one of its floor.
    """
    if len(x) > len(y):
        return None
    guess = x[-1] // y[-1] if x and len(x) == len(y) else 0
    pos = y[-1] > 0
    for c in (guess - 1, guess, guess + 1):
        cy, c1y = _add((), y, c), _add((), y, c + 1)
        if pos and _eventually_geq(x, cy) and _eventually_geq(c1y, _add(x, (1,))):
            return c
        if not pos and _eventually_geq(cy, x) and _eventually_geq(x, _add(c1y, (1,))):
            return c
    return None


class _AlongRay:
    """Exact values of expressions along ``p + t*d`` as polynomials in ``t``, within ``work``."""

    def __init__(self, p: Mapping[str, int], d: Mapping[str, int], work: _Work):
        self.p, self.d = p, d
        self.work = work
        self._memo: dict[Op, Poly | None] = {}
        self._powers: dict[Var | Op, list[Poly]] = {}  # [a^0, a^1, ...]

    def expr(self, e: Expr) -> Poly | None:
        total: Poly = ()
        for m, c in e.terms:
            term: Poly | None = (c,)
            for a, k in m:
                xk = self.power(a, k)
                term = _mul(term, xk, self.work) if term is not None and xk is not None else None
                if term is None:
                    return None
            total = _add(total, term)
        return total

    def power(self, a: Var | Op, k: int) -> Poly | None:
        """``a^k`` along the ray. Every power up to ``k`` is kept: an expanded power such as
        ``(a - b)^300`` asks for all of them, in either order, and each then costs one product."""
        x = self.atom(a)
        if x is None or k == 1:
            return x
        if len(x) + (len(x) - 1) * (k - 1) > _MAX_DEGREE + 1:
            return None
        known = self._powers.setdefault(a, [(1,), x])
        while len(known) <= k:
            nxt = _mul(known[-1], x, self.work)
            if nxt is None:
                return None
            known.append(nxt)
        return known[k]

    def atom(self, atom: Var | Op) -> Poly | None:
        if isinstance(atom, Var):
            return _norm([self.p.get(atom.name, 1), self.d.get(atom.name, 0)])
        if atom in self._memo:
            return self._memo[atom]
        r = self._op(atom)
        self._memo[atom] = r
        return r

    def _op(self, op: Op) -> Poly | None:
        x = self.expr(op.lhs)
        if x is None:
            return None
        if op.op in (FLOORDIV, MOD):
            k = op.rhs.as_constant()
            if k is None:  # a symbolic divisor: constant along the ray, or an eventually constant quotient
                y = self.expr(op.rhs)
                if y is None:
                    return None
                if len(y) > 1:
                    q = _eventual_quotient(x, y)
                    if q is None:
                        return None
                    return _norm([q]) if op.op == FLOORDIV else _add(x, y, -q)  # x % y == x - y*(x // y)
                k = y[0] if y else 0
            if not k or any(c % k for c in x[1:]):
                return None
            # k divides every t-coefficient: floor((c0 + k*q(t)) / k) = floor(c0 / k) + q(t); mod = mod(c0, k)
            c0 = x[0] if x else 0
            if op.op == MOD:
                return _norm([c0 % k])
            return _norm([c0 // k, *(c // k for c in x[1:])])
        y = self.expr(op.rhs)
        if y is None:
            return None
        x_wins = _eventually_geq(x, y) == (op.op == MAX)
        assert op.op in (MAX, MIN)
        return x if x_wins else y


def failing_at(constraints: ConstraintSet, p: Mapping[str, int]) -> frozenset[int]:
    """Positions of the constraints that do not hold at ``p`` (a zero divisor counts as failing)."""
    return frozenset(constraints.failing(p))


def unbounded_below(e: Expr, constraints: ConstraintSet, p: Mapping[str, int], d: Mapping[str, int],
                    names: Iterable[str] | None = None, work: _Work | None = None,
                    failing: frozenset[int] | None = None, *, clock: Deadline) -> bool:
    """Whether ``p + t*d`` certifies that ``e`` is unbounded below under ``constraints`` (exact).

    False also when ``work`` (default: a fresh :data:`RAY_WORK`) runs out: no certificate.
    ``failing``: :func:`failing_at` ``p``, when the caller tries many directions from one point.
    Then only the constraints that mention a variable ``d`` moves are followed along the ray.
    Why that is exact: a constraint none of whose variables move has the same value at every
    point of the ray, its value at ``p``; it holds along the ray iff it holds at ``p``. (Why it is
    worth doing: at hundreds of constraints, following every one along each direction tried takes a
    large part of a bounds query.)
    """
    names = names if names is not None else set(constraints.variables()) | set(e.variables())
    for v in names:
        if d.get(v, 0) < 0 or (d.get(v, 0) == 0 and p.get(v, 1) < 1):
            return False
    ray = _AlongRay(p, d, work if work is not None else _Work(RAY_WORK, clock))
    f = ray.expr(e)
    if f is None or len(f) < 2 or f[-1] >= 0:
        return False
    follow: Iterable[Constraint] = constraints
    if failing is not None:
        index = constraints.by_variable()
        moved = sorted({i for v, x in d.items() if x for i in index.get(v, ())})
        if not failing <= set(moved):
            return False  # a constraint that fails at p and stays put fails all along the ray
        follow = (constraints.constraints[i] for i in moved)
    for c in follow:
        g = ray.expr(c.diff)
        if g is None:
            return False
        if c.kind == "==" and g:
            return False
        if not _eventually_geq(g, ()):
            return False
    return True


def scale(e: Expr, constraints: ConstraintSet) -> int:
    """A step that every constant divisor divides along any integer direction (product of divisors)."""
    ks: list[int] = []
    for x in (e, *(c.diff for c in constraints)):
        for a in x.atoms():
            if isinstance(a, Op) and a.op in (FLOORDIV, MOD):
                k = a.rhs.as_constant()
                if k:
                    ks.append(abs(k))
    prod = math.prod(ks) if ks else 1
    return prod if prod <= 10**12 else math.lcm(*ks)


def find_ray(e: Expr, constraints: ConstraintSet, bases: Iterable[Mapping[str, int]],
             towards: Iterable[Mapping[str, int]] = (), work: int = RAY_WORK, *, clock: Deadline) -> bool:
    """Try a few rays from known points: along each variable, along all of them, and towards far models.

    ``work``: coefficient products the search may spend (see :class:`_Work`).
    """
    names = sorted(set(constraints.variables()) | set(e.variables()))
    if not names:
        return False
    k = scale(e, constraints)
    bases = [dict(b) for b in bases]
    dirs: list[dict[str, int]] = [{v: k for v in names}]
    # along single variables: those of e first, a bounded number in all (each try is exact but costs a pass)
    singles = sorted(e.variables()) + [v for v in names if v not in e.variables()]
    dirs += [{v: (k if v == w else 0) for v in names} for w in singles[:_MAX_SINGLE_DIRECTIONS]]
    for m in towards:
        for b in bases[:3]:
            diff = {v: m.get(v, 1) - b.get(v, 1) for v in names}
            if all(x >= 0 for x in diff.values()) and any(diff.values()):
                g = math.gcd(*diff.values())
                dirs.append({v: k * x // g for v, x in diff.items()})
    # costly directions last (all variables at once through an expanded power is quadratic in
    # the degree per term), and one allowance for the whole search, of which one direction may
    # take at most half of what is left: a costly one cannot starve the cheap ones after it
    dirs.sort(key=lambda d: max(_cost(e, d, work, clock), _COSTLY))
    allowance = _Work(work, clock)
    for base in [*bases, *towards]:  # a far model is itself a good base
        full = {v: base.get(v, 1) for v in names}
        extra = _symbolic_scale(e, constraints, full)  # symbolic divisors that stay constant along a ray
        failing = failing_at(constraints, full)
        for d in dirs:
            for dd in (d, {v: x * extra for v, x in d.items()}) if extra > 1 else (d,):
                if allowance.left <= 0 or clock.expired:
                    return False
                allowed = max(1, allowance.left // 2)
                share = _Work(allowed, clock)
                found = unbounded_below(e, constraints, full, dd, names, share, failing, clock=clock)
                allowance.left -= allowed - max(share.left, 0)
                if found:
                    return True
    return False


_COSTLY = 50_000  # directions estimated to cost less keep their order


def _cost(e: Expr, d: Mapping[str, int], cap: int, clock: Deadline) -> int:
    """About the coefficient products of ``e`` along direction ``d`` (degree in ``t`` of each factor).

    Counted up to ``cap`` (the search's allowance: past it every direction is refused alike,
    so the order among them does not matter), and not past the deadline (the order is then moot).
    """
    total = 0
    moves: dict[Atom, bool] = {}
    for i, (m, _) in enumerate(e.terms):
        if total > cap or (i % 512 == 511 and clock.expired):
            return total
        deg = 0
        for a, k in m:
            mv = moves.get(a)
            if mv is None:
                mv = moves[a] = (d.get(a.name, 0) != 0 if isinstance(a, Var)
                                 else any(d.get(v, 0) for v in Expr.atom(a).variables()))
            g = k if mv else 0
            total += (1 + deg) * (1 + g)
            deg += g
    return total


def _symbolic_scale(e: Expr, constraints: ConstraintSet, at: Mapping[str, int]) -> int:
    """The product of the symbolic divisors' values at ``at`` (a divisor constant along a ray keeps it)."""
    prod = 1
    for x in (e, *(c.diff for c in constraints)):
        for a in x.atoms():
            if isinstance(a, Op) and a.op in (FLOORDIV, MOD) and a.rhs.as_constant() is None:
                try:
                    v = abs(a.rhs.evaluate(at))
                except (ZeroDivisionError, KeyError):
                    continue
                if v > 1:
                    prod *= v
                if prod > 10**12:
                    return 1
    return prod


# -- directions from the recession cone ------------------------------------------------------------------------
# Slopes of expressions along a direction d, as SMT-LIB real terms: a variable's slope is d_v,
# floordiv(x, k) has slope(x)/k, mod(x, k) has slope 0 (it stays bounded), max/min the larger/
# smaller slope. Products and symbolic divisors have no linear slope: a constraint holding one is
# left out. Nothing here needs to be right: a proposed direction is only used after
# unbounded_below has checked it exactly from a feasible point.
def _slope(e: Expr, memo: dict[Op, str | None]) -> str | None:
    parts: list[str] = []
    for m, c in e.terms:
        if not m:
            continue
        if len(m) != 1 or m[0][1] != 1:
            return None
        a = m[0][0]
        if isinstance(a, Var):
            s: str | None = _smt_name(a.name)
        else:
            if a not in memo:
                memo[a] = _slope_op(a, memo)
            s = memo[a]
        if s is None or abs(c) >= _BIG:
            return None
        if s != "0.0":
            parts.append(s if c == 1 else f"(* {_smt_real(c)} {s})")
    if not parts:
        return "0.0"
    return parts[0] if len(parts) == 1 else f"(+ {' '.join(parts)})"


def _slope_op(a: Op, memo: dict[Op, str | None]) -> str | None:
    x = _slope(a.lhs, memo)
    if x is None:
        return None
    if a.op in (FLOORDIV, MOD):
        k = a.rhs.as_constant()
        if not k or abs(k) >= _BIG:
            return None
        return "0.0" if a.op == MOD or x == "0.0" else f"(/ {x} {_smt_real(k)})"
    y = _slope(a.rhs, memo)
    if y is None or len(x) + len(y) > _MAX_SLOPE_TEXT:  # each max/min writes both sides twice
        return None
    rel = ">=" if a.op == MAX else "<="
    return f"(ite ({rel} {x} {y}) {x} {y})"


_BIG = 10**1000  # coefficients are written as decimal text (Python refuses str() past 4300 digits)
_MAX_SLOPE_TEXT = 4000


@functools.lru_cache(maxsize=4096)
def _smt_name(name: str) -> str:
    """``name``'s real in the LP's SMT-LIB text: :func:`smtdims.engines.encoding.symbol` of kind ``d``, quoted.
    Cached: the LP's text names each variable once per constraint that holds it (at 500 constraints,
    the import and the quoting were a third of writing the text)."""
    from ..engines.encoding import symbol

    return f"|{symbol(name, 'd')}|"


def _smt_real(c: int) -> str:
    return f"{c}.0" if c >= 0 else f"(- {-c}.0)"


class Recession:
    """Proposes a direction along which ``f`` decreases and every constraint stays met (an LP).

    The cone is built once per constraint set, in the shared Z3 context (a context of its own
    costs milliseconds), from one SMT-LIB script (hundreds of constraints cost tens of times more
    through the Python API than parsed as text); a question pushes ``slope(f) <= -1`` and asks for a
    rational model. Its variables are named ``d:v``, apart from the solvers' ``v``.
    """

    def __init__(self, constraints: ConstraintSet, budget: int, family: int | None = None):
        from ..engines import memory

        self.constraints = constraints
        self.budget = budget
        self._solver = None
        self._ctx = None
        self._reals: dict[str, object] = {}  # name -> its z3.Real in the LP's context, made once
        self._names = sorted(constraints.variables())
        self._family = memory.new_family() if family is None else family  # its session's: released together

    @property
    def _z3_ctx(self) -> object:  # a z3.Context (z3 is imported lazily here)
        return self._ctx

    def _release(self) -> None:
        """Drop the LP (``memory.touch`` bounds how many Z3 sides live at once); rebuilt on next use."""
        self._solver = self._ctx = None
        self._reals = {}

    def _start(self) -> None:
        from ..engines import checks, context

        memo: dict[Op, str | None] = {}
        lines = [f"(declare-const {_smt_name(n)} Real)" for n in self._names]
        lines += [f"(assert (>= {_smt_name(n)} 0.0))" for n in self._names]
        for c in self.constraints.parts():
            s = _slope(c.diff, memo)
            if s is not None and s != "0.0":
                lines.append(f"(assert ({'>=' if c.kind == '>=' else '='} {s} 0.0))")
        self._ctx = context.shared_context()
        self._reals = {}
        self._solver = checks.make_solver(self._ctx, self.budget)
        self._solver.from_string("\n".join(lines))

    def _real(self, name: str):
        """The LP's variable for ``name`` (z3.Real, in the LP's context): made once, not per question."""
        import z3

        r = self._reals.get(name)
        if r is None:
            r = self._reals[name] = z3.Real(_smt_name(name)[1:-1], self._ctx)
        return r

    def direction(self, f: Expr, ask: QuestionState) -> dict[str, int] | None:
        """An integer direction (every component >= 0) with ``slope(f) <= -1``, or None (one LP check,
        under the question ``ask``'s deadline)."""
        import z3

        from ..engines import checks, context, counters, encoding, memory

        extra = sorted(v for v in f.variables() if v not in self.constraints.variables())
        s = _slope(f, {})
        if s is None or s == "0.0":
            return None
        with context.Z3_LOCK:
            if self._solver is None or self._ctx is not context.shared_context():  # first use, or released
                self._start()
            memory.touch(self, self._family)
            # held here, not read from self after the check: a check the deadline interrupts retires
            # the shared context, which releases this LP (self._solver = None) inside run_check
            solver, ctx = self._solver, self._ctx
            assert solver is not None and ctx is not None
            solver.push()
            try:
                # the query's own variables through decls: a declaration made by from_string
                # outlives the pop, so the next question could not declare it again
                decls = {_smt_name(n)[1:-1]: self._real(n) for n in f.variables()}
                goal = z3.parse_smt2_string(f"(assert (<= {s} (- 1.0)))", decls=decls, ctx=ctx)
                solver.add(*goal, *(decls[_smt_name(n)[1:-1]] >= 0 for n in extra))
                counters.COUNTERS.checked(ask)
                r, _ = checks.run_check(solver, ctx, ask=ask)
                if r != z3.sat:
                    return None
                m = solver.model()
                names = (*self._names, *extra)
                texts = encoding.model_numerals(m, (self._real(n) for n in names))
                values = {}
                for n, t in zip(names, texts, strict=True):
                    if t is None:
                        return None  # not a rational: no direction proposed (a ray is only ever checked exactly)
                    p, _, q = t.partition("/")
                    values[n] = (text_int(p), text_int(q) if q else 1)
            finally:
                solver.pop()
        den = math.lcm(*(q for _, q in values.values())) if values else 1
        d = {n: p * (den // q) for n, (p, q) in values.items()}
        g = math.gcd(*d.values()) if d else 0
        if not g:
            return None
        k = scale(f, self.constraints)
        return {n: k * x // g for n, x in d.items()}

"""A small immutable IR for dimension expressions, independent of JAX.

An expression is a polynomial: a sum of integer-weighted monomials, each a
product of atoms raised to positive powers. Atoms are variables or the
operations ``floordiv``, ``mod``, ``max``, ``min`` applied to expressions.
Keeping sums and products normalised gives syntactic equality, cheap constant
detection and a cheap test for the linear (Presburger) fragment.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

FLOORDIV = "floordiv"
MOD = "mod"
MAX = "max"
MIN = "min"
OPERATIONS = (FLOORDIV, MOD, MAX, MIN)


@dataclass(frozen=True, slots=True)
class Var:
    """A dimension variable: an integer >= 1."""

    name: str

    def __str__(self) -> str:
        return self.name

    def sort_key(self) -> tuple:
        return (0, self.name)


@dataclass(frozen=True, slots=True)
class Op:
    """``floordiv``, ``mod``, ``max`` or ``min`` of two expressions (Python semantics)."""

    op: str
    lhs: Expr
    rhs: Expr
    # memoised: expressions are hashed and sorted constantly on the hot path
    _hash: int | None = field(default=None, compare=False, repr=False)
    _text: str | None = field(default=None, compare=False, repr=False)

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            h = hash((self.op, self.lhs, self.rhs))
            object.__setattr__(self, "_hash", h)
        return h

    def __str__(self) -> str:
        t = self._text
        if t is None:
            t = f"{self.op}({self.lhs}, {self.rhs})"
            object.__setattr__(self, "_text", t)
        return t

    def sort_key(self) -> tuple:
        return (1, str(self))


Atom = Var | Op
# A monomial: atoms with exponents >= 1, sorted; () is the constant monomial 1.
Monomial = tuple[tuple[Atom, int], ...]


def _mono_key(m: Monomial) -> tuple:
    return (-sum(e for _, e in m), tuple((a.sort_key(), e) for a, e in m))


@dataclass(frozen=True, slots=True)
class Expr:
    """A normalised polynomial over atoms; build it with the operators, not the constructor."""

    terms: tuple[tuple[Monomial, int], ...]
    _hash: int | None = field(default=None, compare=False, repr=False)
    _vars: frozenset[str] | None = field(default=None, compare=False, repr=False)  # memoised

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            h = hash(self.terms)
            object.__setattr__(self, "_hash", h)
        return h

    # -- construction ---------------------------------------------------------
    @staticmethod
    def const(value: int) -> Expr:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"dimension constants must be integers, got {value!r}")
        return Expr((((), value),) if value else ())

    @staticmethod
    def var(name: str) -> Expr:
        return Expr(((((Var(name), 1),), 1),))

    @staticmethod
    def atom(atom: Atom) -> Expr:
        return Expr(((((atom, 1),), 1),))

    @staticmethod
    def _from_dict(coeffs: Mapping[Monomial, int]) -> Expr:
        items = [(m, c) for m, c in coeffs.items() if c != 0]
        items.sort(key=lambda mc: _mono_key(mc[0]))
        return Expr(tuple(items))

    @staticmethod
    def lift(x: ExprLike) -> Expr:
        if isinstance(x, Expr):
            return x
        return Expr.const(x)

    # -- inspection -------------------------------------------------------------
    def as_constant(self) -> int | None:
        if not self.terms:
            return 0
        if len(self.terms) == 1 and self.terms[0][0] == ():
            return self.terms[0][1]
        return None

    @property
    def is_constant(self) -> bool:
        return self.as_constant() is not None

    def as_var(self) -> str | None:
        if len(self.terms) == 1:
            m, c = self.terms[0]
            if c == 1 and len(m) == 1 and m[0][1] == 1 and isinstance(m[0][0], Var):
                return m[0][0].name
        return None

    def constant_part(self) -> int:
        for m, c in self.terms:
            if m == ():
                return c
        return 0

    def atoms(self) -> set[Atom]:
        """All atoms, including those nested inside operations."""
        out: set[Atom] = set()
        for m, _ in self.terms:
            for a, _ in m:
                if a not in out:
                    out.add(a)
                    if isinstance(a, Op):
                        out |= a.lhs.atoms() | a.rhs.atoms()
        return out

    def variables(self) -> frozenset[str]:
        v = self._vars
        if v is None:
            v = frozenset(a.name for a in self.atoms() if isinstance(a, Var))
            object.__setattr__(self, "_vars", v)
        return v

    def is_linear(self) -> bool:
        """True in the Presburger fragment: degree <= 1 and every divisor a nonzero constant."""
        for m, _ in self.terms:
            if len(m) > 1 or (m and m[0][1] != 1):
                return False
            for a, _ in m:
                if isinstance(a, Op):
                    if a.op in (FLOORDIV, MOD):
                        d = a.rhs.as_constant()
                        if d is None or d == 0:
                            return False
                    elif not a.rhs.is_linear():
                        return False
                    if not a.lhs.is_linear():
                        return False
        return True

    def depth(self) -> int:
        best = 0
        for m, _ in self.terms:
            for a, _ in m:
                if isinstance(a, Op):
                    best = max(best, 1 + max(a.lhs.depth(), a.rhs.depth()))
        return best

    # -- arithmetic ---------------------------------------------------------------
    def __add__(self, other: ExprLike) -> Expr:
        other = Expr.lift(other)
        acc = dict(self.terms)
        for m, c in other.terms:
            acc[m] = acc.get(m, 0) + c
        return Expr._from_dict(acc)

    __radd__ = __add__

    def __neg__(self) -> Expr:
        return Expr(tuple((m, -c) for m, c in self.terms))

    def __sub__(self, other: ExprLike) -> Expr:
        return self + (-Expr.lift(other))

    def __rsub__(self, other: ExprLike) -> Expr:
        return Expr.lift(other) - self

    def __mul__(self, other: ExprLike) -> Expr:
        other = Expr.lift(other)
        acc: dict[Monomial, int] = {}
        for m1, c1 in self.terms:
            for m2, c2 in other.terms:
                m = _mono_mul(m1, m2)
                acc[m] = acc.get(m, 0) + c1 * c2
        return Expr._from_dict(acc)

    __rmul__ = __mul__

    def __pow__(self, exponent: int) -> Expr:
        if isinstance(exponent, bool) or not isinstance(exponent, int) or exponent < 0:
            raise ValueError(f"exponents must be non-negative integers, got {exponent!r}")
        result = Expr.const(1)
        for _ in range(exponent):
            result = result * self
        return result

    def floordiv(self, other: ExprLike) -> Expr:
        return _binary(FLOORDIV, self, Expr.lift(other))

    def mod(self, other: ExprLike) -> Expr:
        return _binary(MOD, self, Expr.lift(other))

    def max(self, other: ExprLike) -> Expr:
        return _binary(MAX, self, Expr.lift(other))

    def min(self, other: ExprLike) -> Expr:
        return _binary(MIN, self, Expr.lift(other))

    __floordiv__ = floordiv
    __mod__ = mod

    # -- evaluation -----------------------------------------------------------------
    def evaluate(self, env: Mapping[str, int]) -> int:
        """Exact value under ``env``; raises ZeroDivisionError for a zero divisor."""
        total = 0
        for m, c in self.terms:
            prod = c
            for a, e in m:
                prod *= _eval_atom(a, env) ** e
            total += prod
        return total

    def substitute(self, env: Mapping[str, Expr]) -> Expr:
        result = Expr.const(0)
        for m, c in self.terms:
            prod = Expr.const(c)
            for a, e in m:
                if isinstance(a, Var):
                    base = env.get(a.name, Expr.atom(a))
                else:
                    base = _binary(a.op, a.lhs.substitute(env), a.rhs.substitute(env))
                prod = prod * base**e
            result = result + prod
        return result

    # -- printing ---------------------------------------------------------------------
    def __str__(self) -> str:
        if not self.terms:
            return "0"
        parts: list[str] = []
        for i, (m, c) in enumerate(self.terms):
            body = "*".join(f"{a}^{e}" if e != 1 else str(a) for a, e in m)
            mag = abs(c)
            if not body:
                text = int_text(mag)
            elif mag == 1:
                text = body
            else:
                text = f"{int_text(mag)}*{body}"
            if i == 0:
                parts.append(text if c > 0 else f"-{text}")
            else:
                parts.append(f" + {text}" if c > 0 else f" - {text}")
        return "".join(parts)

    def __repr__(self) -> str:
        return f"Expr({str(self)!r})"


ExprLike = Expr | int


def _mono_mul(m1: Monomial, m2: Monomial) -> Monomial:
    if not m1:
        return m2
    if not m2:
        return m1
    acc: dict[Atom, int] = dict(m1)
    for a, e in m2:
        acc[a] = acc.get(a, 0) + e
    return tuple(sorted(acc.items(), key=lambda ae: ae[0].sort_key()))


def _binary(op: str, lhs: Expr, rhs: Expr) -> Expr:
    lc, rc = lhs.as_constant(), rhs.as_constant()
    if lc is not None and rc is not None:
        if op in (FLOORDIV, MOD) and rc == 0:
            raise ZeroDivisionError(f"{op}({lhs}, {rhs}) divides by zero")
        return Expr.const(_apply(op, lc, rc))
    if op in (FLOORDIV, MOD) and rc is not None:
        if rc == 0:
            raise ZeroDivisionError(f"{op}({lhs}, {rhs}) divides by zero")
        if rc == 1:
            return lhs if op == FLOORDIV else Expr.const(0)
        if rc == -1:
            return -lhs if op == FLOORDIV else Expr.const(0)
    if op in (MAX, MIN) and lhs == rhs:
        return lhs
    return Expr.atom(Op(op, lhs, rhs))


def _apply(op: str, x: int, y: int) -> int:
    if op == FLOORDIV:
        return x // y
    if op == MOD:
        return x % y
    if op == MAX:
        return max(x, y)
    return min(x, y)


def _eval_atom(a: Atom, env: Mapping[str, int]) -> int:
    if isinstance(a, Var):
        try:
            return env[a.name]
        except KeyError:
            raise KeyError(f"no value for dimension variable {a.name!r}") from None
    return _apply(a.op, a.lhs.evaluate(env), a.rhs.evaluate(env))


def var(name: str) -> Expr:
    return Expr.var(name)


def const(value: int) -> Expr:
    return Expr.const(value)


def symbolic_divisors(e: Expr) -> list[Expr]:
    """The non-constant divisors of every ``floordiv``/``mod`` in ``e`` (nested ones included)."""
    out: list[Expr] = []
    for a in sorted(e.atoms(), key=lambda a: a.sort_key()):
        if isinstance(a, Op) and a.op in (FLOORDIV, MOD) and not a.rhs.is_constant and a.rhs not in out:
            out.append(a.rhs)
    return out


def int_text(value: int) -> str:
    """Decimal text of any int (Python's ``str`` refuses more than 4,300 digits)."""
    if -_BIG < value < _BIG:
        return str(value)
    if value < 0:
        return "-" + int_text(-value)
    hi, lo = divmod(value, _BIG)
    return int_text(hi) + str(lo).zfill(4000)


_BIG = 10**4000


def all_variables(exprs: Iterable[Expr]) -> frozenset[str]:
    out: frozenset[str] = frozenset()
    for e in exprs:
        out |= e.variables()
    return out


_RECURSION = {"users": 0, "saved": 0}
_RECURSION_LOCK = threading.Lock()


@contextmanager
def deep_recursion(limit: int = 20_000) -> Iterator[None]:
    """Expressions nested a few hundred levels deep recurse further than Python's default.

    Counted across threads, so one thread cannot restore the limit while another is deep.
    """
    with _RECURSION_LOCK:
        if _RECURSION["users"] == 0:
            _RECURSION["saved"] = sys.getrecursionlimit()
            if _RECURSION["saved"] < limit:
                sys.setrecursionlimit(limit)
        _RECURSION["users"] += 1
    try:
        yield
    finally:
        with _RECURSION_LOCK:
            _RECURSION["users"] -= 1
            if _RECURSION["users"] == 0:
                sys.setrecursionlimit(_RECURSION["saved"])

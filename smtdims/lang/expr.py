"""A small immutable IR for dimension expressions, independent of JAX.

An expression is a polynomial: a sum of integer-weighted monomials, each a
product of atoms raised to positive powers. Atoms are variables or the
operations ``floordiv``, ``mod``, ``max``, ``min`` applied to expressions.
Keeping sums and products normalised gives syntactic equality, cheap constant
detection and a cheap test for the linear (Presburger) fragment. The expansion of sums,
products and powers, under its limits, is :mod:`smtdims.lang.polynomial`'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from . import polynomial
from .bigints import readable_int

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
    _depth: int | None = field(default=None, compare=False, repr=False)  # see nesting()

    def __post_init__(self) -> None:
        # hashed when built, bottom-up: hashing a deep expression later would recurse through
        # tuple hashes in C, which Python 3.12+ bounds by a fixed C recursion limit whatever
        # sys.setrecursionlimit says (300 nested max() raised RecursionError there)
        object.__setattr__(self, "_hash", hash((self.op, self.lhs, self.rhs)))

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            h = hash((self.op, self.lhs, self.rhs))
            object.__setattr__(self, "_hash", h)
        return h

    def __str__(self) -> str:
        t = self._text
        if t is None:
            _fill_texts(self)
            t = self._text
        return t  # type: ignore[return-value]

    def sort_key(self) -> tuple:
        return (1, str(self))


def _fill_texts(root: Op) -> None:
    """Memoise the text of ``root`` and of every operation nested in it, innermost first.

    Without recursion: Python 3.12 bounds C-level recursion separately from
    ``sys.setrecursionlimit``, and ``str()`` of 200 nested ``min`` ran out of it.
    """
    stack: list[tuple[Op, bool]] = [(root, False)]
    while stack:
        op, ready = stack.pop()
        if op._text is not None:
            continue
        if ready:  # every nested operation's text is memoised: one level of str() each
            object.__setattr__(op, "_text", f"{op.op}({op.lhs}, {op.rhs})")
            continue
        stack.append((op, True))
        for side in (op.lhs, op.rhs):
            for m, _ in side.terms:
                for a, _ in m:
                    if isinstance(a, Op) and a._text is None:
                        stack.append((a, False))


Atom = Var | Op
# A monomial: atoms with exponents >= 1, sorted; () is the constant monomial 1.
Monomial = tuple[tuple[Atom, int], ...]


def _same_structure(a: Expr, b: Expr) -> bool:
    """``a == b`` without recursion (both hashed already: a differing hash ends it early)."""
    stack: list[tuple[object, object]] = [(a, b)]
    while stack:
        x, y = stack.pop()
        if x is y:
            continue
        if type(x) is not type(y) or hash(x) != hash(y):
            return False
        if isinstance(x, Var):
            if x.name != y.name:  # type: ignore[union-attr]
                return False
        elif isinstance(x, Op):
            if x.op != y.op:  # type: ignore[union-attr]
                return False
            stack += [(x.lhs, y.lhs), (x.rhs, y.rhs)]  # type: ignore[union-attr]
        else:
            tx, ty = x.terms, y.terms  # type: ignore[union-attr]
            if len(tx) != len(ty):
                return False
            for (mx, cx), (my, cy) in zip(tx, ty, strict=True):
                if cx != cy or len(mx) != len(my):
                    return False
                for (ax, kx), (ay, ky) in zip(mx, my, strict=True):
                    if kx != ky:
                        return False
                    stack.append((ax, ay))
    return True


@dataclass(frozen=True, slots=True)
class Expr:
    """A normalised polynomial over atoms; build it with the operators, not the constructor."""

    terms: tuple[tuple[Monomial, int], ...]
    _hash: int | None = field(default=None, compare=False, repr=False)
    _vars: frozenset[str] | None = field(default=None, compare=False, repr=False)  # memoised
    _size: int | None = field(default=None, compare=False, repr=False)  # memoised
    _atoms: frozenset[Atom] | None = field(default=None, compare=False, repr=False)  # memoised
    _text: str | None = field(default=None, compare=False, repr=False)  # memoised
    _linear: bool | None = field(default=None, compare=False, repr=False)  # memoised (asked per rung and engine)

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            h = hash(self.terms)
            object.__setattr__(self, "_hash", h)
        return h

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Expr):
            return NotImplemented
        if hash(self) != hash(other):
            return False
        try:
            return self.terms == other.terms
        except RecursionError:
            # a deep expression: tuple comparison recurses in C, which Python 3.12+ bounds by a
            # fixed limit whatever sys.setrecursionlimit says; compare with an explicit stack
            return _same_structure(self, other)

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
    def from_coefficients(coeffs: Mapping[Monomial, int]) -> Expr:
        """The normalised sum of ``coeffs``' monomials times their coefficients (zeros dropped)."""
        return Expr(polynomial.normalised(coeffs))

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

    def atoms(self) -> frozenset[Atom]:
        """All atoms, including those nested inside operations (memoised: an expanded power has
        tens of thousands of terms, and every rung asks)."""
        got = self._atoms
        if got is None:
            out: set[Atom] = set()
            for m, _ in self.terms:
                for a, _ in m:
                    if a not in out:
                        out.add(a)
                        if isinstance(a, Op):
                            out |= a.lhs.atoms() | a.rhs.atoms()
            got = frozenset(out)
            object.__setattr__(self, "_atoms", got)
        return got

    def variables(self) -> frozenset[str]:
        v = self._vars
        if v is None:
            v = frozenset(a.name for a in self.atoms() if isinstance(a, Var))
            object.__setattr__(self, "_vars", v)
        return v

    def size(self) -> int:
        """The cost of one :meth:`evaluate`: terms and factors, each operation's operands counted
        every time it occurs (evaluation does not share them). May be astronomically large for a
        deeply shared expression, and is then cheap to compute all the same (memoised)."""
        n = self._size
        if n is None:
            n = 0
            for m, _ in self.terms:
                n += 1
                for a, _ in m:
                    n += 1 + (a.lhs.size() + a.rhs.size() if isinstance(a, Op) else 0)
            object.__setattr__(self, "_size", n)
        return n

    def is_linear(self) -> bool:
        """True in the Presburger fragment: degree <= 1 and every divisor a nonzero constant."""
        lin = self._linear
        if lin is None:
            lin = self._is_linear()
            object.__setattr__(self, "_linear", lin)
        return lin

    def _is_linear(self) -> bool:
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
        small, big = (self, other) if len(self.terms) <= len(other.terms) else (other, self)
        if len(small.terms) <= polynomial.FEW_TERMS < len(big.terms):
            return Expr(polynomial.add_few(big.terms, small.terms))
        acc = dict(self.terms)
        for m, c in other.terms:
            acc[m] = acc.get(m, 0) + c
        return Expr.from_coefficients(acc)

    __radd__ = __add__

    @staticmethod
    def sum(parts: Iterable[ExprLike]) -> Expr:
        """``parts`` added in one pass (repeated ``+`` sorts the whole sum at every step)."""
        acc: dict[Monomial, int] = {}
        for p in parts:
            for m, c in Expr.lift(p).terms:
                acc[m] = acc.get(m, 0) + c
        return Expr.from_coefficients(acc)

    def __neg__(self) -> Expr:
        return Expr(tuple((m, -c) for m, c in self.terms))

    def __sub__(self, other: ExprLike) -> Expr:
        return self + (-Expr.lift(other))

    def __rsub__(self, other: ExprLike) -> Expr:
        return Expr.lift(other) - self

    def __mul__(self, other: ExprLike) -> Expr:
        other = Expr.lift(other)
        if not self.terms or not other.terms:
            return Expr(())
        for x, y in ((self, other), (other, self)):
            k = y.as_constant()
            if k is not None:  # scaling keeps the order of the terms
                return x if k == 1 else Expr(tuple((m, c * k) for m, c in x.terms))
        return Expr(polynomial.product(self.terms, other.terms))

    __rmul__ = __mul__

    def __pow__(self, exponent: int) -> Expr:
        """The expanded power (:func:`smtdims.lang.polynomial.power`, which refuses an expansion past
        its limits with :class:`~smtdims.lang.polynomial.ExpansionTooLarge`)."""
        if isinstance(exponent, bool) or not isinstance(exponent, int) or exponent < 0:
            raise ValueError(f"exponents must be non-negative integers, got {exponent!r}")
        if exponent == 0:
            return Expr.const(1)
        if exponent == 1 or not self.terms:
            return self
        return Expr(polynomial.power(self.terms, exponent))

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
        if len(self.terms) > _SHORT_SUM:
            return _evaluate_many(self, env)
        total = 0
        for m, c in self.terms:
            prod = c
            for a, e in m:
                x = _eval_atom(a, env)
                prod *= x if e == 1 else x**e
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
        text = self._text
        if text is None:
            text = _render(self)
            object.__setattr__(self, "_text", text)
        return text

    def __repr__(self) -> str:
        return f"Expr({str(self)!r})"


ExprLike = Expr | int
_SHORT_SUM = 8  # a sum of more terms is evaluated with each atom's value and each power computed once


def _evaluate_many(e: Expr, env: Mapping[str, int]) -> int:
    """:meth:`Expr.evaluate` for a long sum: each atom's value and each power computed once (an
    expanded power has thousands of terms over a few atoms)."""
    values: dict[Atom, int] = {}
    powers: dict[tuple[Atom, int], int] = {}
    total = 0
    for m, c in e.terms:
        prod = c
        for a, k in m:
            p = powers.get((a, k))
            if p is None:
                x = values.get(a)
                if x is None:
                    x = values[a] = _eval_atom(a, env)
                p = powers[(a, k)] = x**k
            prod *= p
        total += prod
    return total


def _render(e: Expr) -> str:
    """The text of ``e`` (jax.export syntax, which smtdims' parser reads back)."""
    if not e.terms:
        return "0"
    parts: list[str] = []
    for i, (m, c) in enumerate(e.terms):
        body = "*".join(f"{a}^{k}" if k != 1 else str(a) for a, k in m)
        mag = abs(c)
        if not body:
            text = readable_int(mag)
            if " " in text and len(e.terms) > 1:  # 10^5000 - 1 as one term
                text = f"({text})"
        elif mag == 1:
            text = body
        else:
            coeff = readable_int(mag)
            text = f"({coeff})*{body}" if " " in coeff else f"{coeff}*{body}"
        if i == 0:
            parts.append(text if c > 0 else f"-{text}")
        else:
            parts.append(f" + {text}" if c > 0 else f" - {text}")
    return "".join(parts)


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
    symbolic = [a for a in e.atoms() if isinstance(a, Op) and a.op in (FLOORDIV, MOD) and not a.rhs.is_constant]
    for a in sorted(symbolic, key=lambda a: a.sort_key()):  # only these sorted: most expressions have none
        if a.rhs not in out:
            out.append(a.rhs)
    return out


def all_variables(exprs: Iterable[Expr]) -> frozenset[str]:
    out: frozenset[str] = frozenset()
    for e in exprs:
        out |= e.variables()
    return out


def _nested_ops(op: Op) -> list[Op]:
    return [a for side in (op.lhs, op.rhs) for m, _ in side.terms for a, _ in m if isinstance(a, Op)]


def nesting(*exprs: Expr) -> int:
    """How deeply operations nest in ``exprs`` (0: polynomials of variables); without recursion,
    memoised per operation. ``floordiv(max(a, b), 2)`` is 2."""
    best = 0
    for e in exprs:
        for m, _ in e.terms:
            for root, _ in m:
                if not isinstance(root, Op):
                    continue
                stack = [(root, False)]
                while stack:
                    op, ready = stack.pop()
                    if op._depth is not None:
                        continue
                    inner = _nested_ops(op)
                    if ready:
                        object.__setattr__(op, "_depth", 1 + max((x._depth or 0 for x in inner), default=0))
                        continue
                    stack.append((op, True))
                    stack.extend((x, False) for x in inner if x._depth is None)
                best = max(best, root._depth or 0)
    return best

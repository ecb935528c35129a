"""A small immutable IR for dimension expressions, independent of JAX.

An expression is a polynomial: a sum of integer-weighted monomials, each a
product of atoms raised to positive powers. Atoms are variables or the
operations ``floordiv``, ``mod``, ``max``, ``min`` applied to expressions.
Keeping sums and products normalised gives syntactic equality, cheap constant
detection and a cheap test for the linear (Presburger) fragment.
"""

from __future__ import annotations

import bisect
import functools
import math
import operator
import os
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any

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


def _mono_key(m: Monomial) -> tuple:
    if len(m) == 1:  # the common monomial, without the generators (every sum sorts its terms by this)
        a, e = m[0]
        return (-e, ((a.sort_key(), e),))
    return (-sum(e for _, e in m), tuple((a.sort_key(), e) for a, e in m))


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
        if len(small.terms) <= _FEW_TERMS < len(big.terms):
            return _add_few(big, small)
        acc = dict(self.terms)
        for m, c in other.terms:
            acc[m] = acc.get(m, 0) + c
        return Expr._from_dict(acc)

    __radd__ = __add__

    @staticmethod
    def sum(parts: Iterable[ExprLike]) -> Expr:
        """``parts`` added in one pass (repeated ``+`` sorts the whole sum at every step)."""
        acc: dict[Monomial, int] = {}
        for p in parts:
            for m, c in Expr.lift(p).terms:
                acc[m] = acc.get(m, 0) + c
        return Expr._from_dict(acc)

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
        if len(self.terms) == 1 and len(other.terms) == 1:  # a monomial by a monomial (parsing c*a*b^2)
            (m1, c1), = self.terms
            (m2, c2), = other.terms
            return Expr(((_mono_mul(m1, m2), c1 * c2),))
        work = len(self.terms) * len(other.terms)
        if work > MAX_PRODUCTS:
            raise ExpansionTooLarge(_too_large(f"a product of {len(self.terms):,} by {len(other.terms):,} terms",
                                               f"{work:,} products", f"{MAX_PRODUCTS:,} products"))
        acc: dict = {}
        atoms = _few_atoms(self, other)
        if atoms is not None:  # exponent vectors: a product is a tuple sum, no sorting per monomial
            xs, ys = _vectors(atoms, self), _vectors(atoms, other)
            for v, c in xs:
                for w, d in ys:
                    key = tuple(map(operator.add, v, w))
                    acc[key] = acc.get(key, 0) + c * d
                if len(acc) > MAX_TERMS:
                    break
        else:
            for m1, c1 in self.terms:
                for m2, c2 in other.terms:
                    m = _mono_mul(m1, m2)
                    acc[m] = acc.get(m, 0) + c1 * c2
                if len(acc) > MAX_TERMS:
                    break
        if len(acc) > MAX_TERMS:
            raise ExpansionTooLarge(_too_large(f"a product of {len(self.terms):,} by {len(other.terms):,} terms",
                                               f"more than {MAX_TERMS:,} terms", f"{MAX_TERMS:,} terms"))
        return _from_vectors(atoms, acc) if atoms is not None else Expr._from_dict(acc)

    __rmul__ = __mul__

    def __pow__(self, exponent: int) -> Expr:
        """The expanded power, by the multinomial theorem (about one step per term of the result).

        Refused (:class:`ExpansionTooLarge`) before the work when the expansion could have more
        than :data:`MAX_TERMS` terms (``(a + b + c)^500`` has 125,751) and squaring does not
        keep it smaller.
        """
        if isinstance(exponent, bool) or not isinstance(exponent, int) or exponent < 0:
            raise ValueError(f"exponents must be non-negative integers, got {exponent!r}")
        if exponent == 0:
            return Expr.const(1)
        if exponent == 1 or not self.terms:
            return self
        n, t = exponent, len(self.terms)
        if t == 1:
            (m, c), = self.terms
            return Expr(((tuple((a, k * n) for a, k in m), c**n),))
        bound = math.comb(n + t - 1, t - 1)
        if bound > MAX_TERMS:
            # the bound counts distinct products of the terms; equal monomials can make the result
            # smaller ((1 + a + a^2)^200): square and multiply, each product checked as it comes
            result, base = Expr.const(1), self
            try:
                while n:
                    if n & 1:
                        result = result * base
                    n >>= 1
                    if n:
                        base = base * base
            except ExpansionTooLarge:
                raise ExpansionTooLarge(_too_large(f"the power ^{exponent} of {t} terms", f"up to {bound:,} terms",
                                                   f"{MAX_TERMS:,} terms")) from None
            return result
        acc: dict = {}
        atoms = _few_atoms(self, self)
        if atoms is not None:
            parts: list = _vectors(atoms, self)
            unit: object = (0,) * len(atoms)

            def scaled(v, k):
                return tuple(x * k for x in v)

            join = lambda v, w: tuple(map(operator.add, v, w))  # noqa: E731
        else:
            parts, unit = list(self.terms), ()

            def scaled(m, k):
                return tuple((a, e * k) for a, e in m)

            join = _mono_mul
        pows = []  # pows[j][k] = c_j^k
        for _, c in parts:
            row = [1]
            for _ in range(n):
                row.append(row[-1] * c)
            pows.append(row)

        def expand(j: int, left: int, mono, coeff: int) -> None:
            # the terms whose exponents of parts j.. sum to ``left``: n!/(k1!...kt!) = prod C(left, kj)
            if j == t - 1:
                key = join(mono, scaled(parts[j][0], left))
                acc[key] = acc.get(key, 0) + coeff * pows[j][left]
                return
            for k in range(left, -1, -1):
                expand(j + 1, left - k, join(mono, scaled(parts[j][0], k)) if k else mono,
                       coeff * math.comb(left, k) * pows[j][k])

        expand(0, n, unit, 1)
        return _from_vectors(atoms, acc) if atoms is not None else Expr._from_dict(acc)

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
        if len(self.terms) > _FEW_TERMS:
            return self._evaluate_many(env)
        total = 0
        for m, c in self.terms:
            prod = c
            for a, e in m:
                x = _eval_atom(a, env)
                prod *= x if e == 1 else x**e
            total += prod
        return total

    def _evaluate_many(self, env: Mapping[str, int]) -> int:
        """:meth:`evaluate` for a long sum: each atom's value and each power computed once
        (an expanded ``(3*a + 3*b - c)^154`` has 12,091 terms over three atoms: 5x faster)."""
        values: dict[Atom, int] = {}
        powers: dict[tuple[Atom, int], int] = {}
        total = 0
        for m, c in self.terms:
            prod = c
            for a, e in m:
                p = powers.get((a, e))
                if p is None:
                    x = values.get(a)
                    if x is None:
                        x = values[a] = _eval_atom(a, env)
                    p = powers[(a, e)] = x**e
                prod *= p
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
            text = self._render()
            object.__setattr__(self, "_text", text)
        return text

    def _render(self) -> str:
        if not self.terms:
            return "0"
        parts: list[str] = []
        for i, (m, c) in enumerate(self.terms):
            body = "*".join(f"{a}^{e}" if e != 1 else str(a) for a, e in m)
            mag = abs(c)
            if not body:
                text = readable_int(mag)
                if " " in text and len(self.terms) > 1:  # 10^5000 - 1 as one term
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

    def __repr__(self) -> str:
        return f"Expr({str(self)!r})"


ExprLike = Expr | int


_FEW_TERMS = 8  # a sum with this few terms is merged into a large one, not re-sorted with it


def _add_few(big: Expr, few: Expr) -> Expr:
    """``big + few`` by insertion: a sort key for about log(n) monomials, not all n
    (``e - 1`` on 16,000 expanded terms took 0.2 s re-sorting)."""
    terms = list(big.terms)
    index = {m: i for i, (m, _) in enumerate(terms)}
    inserts = []
    for m, c in few.terms:
        i = index.get(m)
        if i is not None:
            terms[i] = (m, terms[i][1] + c)
        else:
            inserts.append((m, c))
    out = [t for t in terms if t[1]]
    for m, c in inserts:
        out.insert(bisect.bisect_left(out, _mono_key(m), key=lambda t: _mono_key(t[0])), (m, c))
    return Expr(tuple(out))


def _mono_mul(m1: Monomial, m2: Monomial) -> Monomial:
    if not m1:
        return m2
    if not m2:
        return m1
    acc: dict[Atom, int] = dict(m1)
    for a, e in m2:
        acc[a] = acc.get(a, 0) + e
    return tuple(sorted(acc.items(), key=lambda ae: ae[0].sort_key()))


# Limits on expansion, checked before the work is done. The expanded form is the IR, and every
# later step (intervals, points, Z3's encoding) costs time in proportion to its terms: 20,000
# terms expand in about 0.3 s, so a question about them can still be answered in time.
MAX_TERMS = 20_000  # terms of a product or power
MAX_PRODUCTS = 200_000  # term-by-term products of one multiplication
# Caches (a scope's answers, the Z3 encoder's terms) keep expressions of at most this many terms: an
# expanded power of 12,000 terms costs megabytes as a key (its text and Z3 terms with it), and asking
# it again costs less than keeping every such question alive (the large-input fuzz grew to 1.1 GB).
CACHE_MAX_TERMS = 2_000
# What the text-to-IR memos keep in all (each), in Expr.size() units (terms and factors, operands of
# max/mod... included; about 2 tracked objects a unit): a process that parsed many large expressions
# must not keep them all alive for the garbage collector to walk (SizedMemo). Counted in terms (50,000),
# nested operands went uncounted, and the memos' objects kept growing after their totals stopped
# (149,000 objects after 3,000 fuzz questions, 230,000 after 6,000; issue 28).
PARSE_CACHE_SIZE = 30_000


_ABSENT = object()


class SizedMemo:
    """A thread-safe, least-recently-used memo of ``fn(key)`` that keeps at most ``entries`` results of
    ``total`` size (``size(result)``) together, none of size more than :data:`CACHE_MAX_TERMS`.

    Why not ``functools.lru_cache``: it keeps any result. The parse caches kept 8,192 expanded powers of
    thousands of terms each: 700,000 tuples alive in a long-running process (a fresh-vs-warm fuzz run),
    whose every full garbage collection then took 0.3-0.9 s, inside whichever call triggered it (9 of
    20,000 answers past deadline + 1 s). Parsing such an expression again costs milliseconds.
    """

    def __init__(self, fn: Callable[[Any], Any] | None, entries: int, total: int, size: Callable[[Any], int]):
        """``fn`` None: a store whose values the caller computes (:meth:`peek`, then :meth:`keep`)."""
        from ..options import fork_safe

        self._fn, self._entries, self._total, self._size = fn, entries, total, size
        self._data: OrderedDict[Any, tuple[Any, int]] = OrderedDict()
        self._held = 0  # size held
        self._lock = fork_safe(threading.Lock())
        if fn is not None:
            functools.update_wrapper(self, fn)

    def __call__(self, key: Any) -> Any:
        hit = self.peek(key, _ABSENT)
        if hit is not _ABSENT:
            return hit
        if self._fn is None:
            raise TypeError("this SizedMemo computes nothing: peek(key), then keep(key, value)")
        return self.keep(key, self._fn(key))  # an exception is not memoised (as with lru_cache)

    def peek(self, key: Any, default: Any = None) -> Any:
        """The result kept for ``key`` (now the most recently used), else ``default``; computes nothing."""
        with self._lock:
            hit = self._data.get(key)
            if hit is None:
                return default
            self._data.move_to_end(key)
            return hit[0]

    def keep(self, key: Any, value: Any) -> Any:
        """Keep ``value`` for ``key`` unless one is kept already, and return the one kept: threads
        that raced to compute it all get one value. A value too large to keep is returned, not kept."""
        n = self._size(value)
        if n > CACHE_MAX_TERMS:
            return value
        with self._lock:
            kept = self._data.get(key)
            if kept is None:
                self._data[key] = (value, n)
                self._held += n
            else:  # another thread computed it meanwhile: every caller gets the one kept
                value = kept[0]
            while len(self._data) > self._entries or self._held > self._total:
                self._held -= self._data.popitem(last=False)[1][1]
        return value

    def __len__(self) -> int:
        return len(self._data)

    @property
    def held(self) -> int:
        """The total size of the kept results (at most ``total``)."""
        return self._held

    def entries(self) -> list[tuple[Any, int]]:
        """``(result, size)`` of each kept result, least recently used first: a copy, for diagnostics."""
        with self._lock:
            return list(self._data.values())

    def cache_clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._held = 0


def sized_memo(entries: int, total: int, size: Callable[[Any], int]) -> Callable[[Callable[[Any], Any]], SizedMemo]:
    """Decorator form of :class:`SizedMemo`."""
    return lambda fn: SizedMemo(fn, entries, total, size)


class ExpansionTooLarge(ValueError):
    """A product or power whose expansion exceeds :data:`MAX_TERMS` or :data:`MAX_PRODUCTS`."""


def _too_large(what: str, size: str, limit: str) -> str:
    return (f"{what} expands to {size}, more than the limit of {limit}; no dimension expression "
            "needs one so large (name a factor as a new variable with a constraint instead)")


_VECTOR_ATOMS = 8  # up to this many atoms, monomials are multiplied as exponent vectors


def _few_atoms(x: Expr, y: Expr) -> list[Atom] | None:
    """The atoms of ``x`` and ``y`` in sort order, when there are few enough for exponent vectors."""
    atoms: set[Atom] = set()
    for e in (x, y):
        for m, _ in e.terms:
            for a, _ in m:
                atoms.add(a)
        if len(atoms) > _VECTOR_ATOMS:
            return None
    return sorted(atoms, key=lambda a: a.sort_key())


def _vectors(atoms: list[Atom], x: Expr) -> list[tuple[tuple[int, ...], int]]:
    """``x``'s terms as exponent vectors over ``atoms`` (which hold every atom of ``x``)."""
    idx = {a: i for i, a in enumerate(atoms)}
    out = []
    for m, c in x.terms:
        v = [0] * len(atoms)
        for a, k in m:
            v[idx[a]] = k
        out.append((tuple(v), c))
    return out


def _from_vectors(atoms: list[Atom], acc: Mapping[tuple[int, ...], int]) -> Expr:
    """The normalised expression of exponent vectors over ``atoms`` (in sort order).

    The atoms' ranks order monomials as their sort keys do, so the key below sorts as
    :func:`_mono_key` would, without building a key per atom.
    """
    items = [(v, c) for v, c in acc.items() if c]
    items.sort(key=lambda vc: (-sum(vc[0]), tuple((i, k) for i, k in enumerate(vc[0]) if k)))
    return Expr(tuple((tuple((atoms[i], k) for i, k in enumerate(v) if k), c) for v, c in items))


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


def int_text(value: int) -> str:
    """Decimal text of any int (Python's ``str`` refuses more than 4,300 digits)."""
    if -_BIG < value < _BIG:
        return str(value)
    if value < 0:
        return "-" + int_text(-value)
    hi, lo = divmod(value, _BIG)
    return int_text(hi) + str(lo).zfill(4000)


_BIG = 10**4000


def text_int(text: str) -> int:
    """Inverse of :func:`int_text`: the int of decimal text of any length."""
    if len(text) <= 4000:
        return int(text)
    neg = text.startswith("-")
    digits = text[1:] if neg else text
    value = 0
    for i in range(0, len(digits), 4000):
        chunk = digits[i:i + 4000]
        value = value * 10 ** len(chunk) + int(chunk)
    return -value if neg else value


READABLE_DIGITS = 100  # below 10**100 an int prints as Python prints it
_READABLE = 10**READABLE_DIGITS
_NEAR = 10**6  # a remainder this small next to a power still reads at a glance
_LEAD = 20  # at most this many leading digits (bits) before the power


def readable_int(value: int) -> str:
    """Exact text of any int that a reader takes in at a glance and smtdims' parser reads back.

    Below 10**100 (:data:`READABLE_DIGITS` digits) as Python prints it; beyond, ``10^5000``,
    ``5*10^4999``, ``10^5000 - 1`` or ``3*2^20000 + 7`` (``m*B^k + r`` with base 10 or 2, ``m``
    and ``r`` short) when such a form exists, else the decimal digits (:func:`int_text`).
    Why: Python's ``str`` refuses ints past 4,300 digits (``sys.set_int_max_str_digits`` is
    process-wide, so a library may not lift it), and a 5,000-digit line helps nobody. A form
    with a remainder contains a space: put it in parentheses inside a product or after ``-``.
    """
    if -_READABLE < value < _READABLE:
        return str(value)
    if value < 0:
        text = readable_int(-value)
        return f"-({text})" if " " in text else f"-{text}"
    if value & (value - 1) == 0:  # a power of two: no decimal search through a million bits
        return f"2^{value.bit_length() - 1}"
    forms = [f for f in (_near_power(value, 10), _near_power(value, 2)) if f is not None]
    return min(forms, key=len) if forms else int_text(value)


def _near_power(value: int, base: int) -> str | None:
    """``m*base^k + r`` (shortest ``m`` first, ``|r| < 10**6``) for ``value > 0``, or None."""
    if base == 2:
        size = value.bit_length()
    else:  # the number of decimal digits, from the bit length (off by at most one)
        size = int(value.bit_length() * 0.30102999566398120) + 1
        if value < 10 ** (size - 1):
            size -= 1
    # value = m*base^k + r with base^k0 | base^k gives value = r (mod base^k0), k0 the smallest k
    # tried: unless that residue is within _NEAR of 0 or of base^k0, no k fits (one division for
    # the typical coefficient, where the loop cost 45 us: 1.4 s to print an expanded 190th power)
    k0 = size - _LEAD
    if k0 > 0 and base**k0 > 2 * _NEAR:
        low = value % base**k0
        if _NEAR <= low <= base**k0 - _NEAR:
            return None
    for lead in range(1, _LEAD + 1):
        k = size - lead
        if k <= 0:
            return None
        power = base**k
        m = value // power
        for mm in (m, m + 1):
            r = value - mm * power
            if -_NEAR < r < _NEAR and mm > 0:
                kk = k
                while mm % base == 0:  # 10*10^k is 10^(k+1)
                    mm //= base
                    kk += 1
                head = f"{base}^{kk}" if mm == 1 else f"{mm}*{base}^{kk}"
                return head if r == 0 else f"{head} + {r}" if r > 0 else f"{head} - {-r}"
    return None


def all_variables(exprs: Iterable[Expr]) -> frozenset[str]:
    out: frozenset[str] = frozenset()
    for e in exprs:
        out |= e.variables()
    return out


_RECURSION = {"users": 0, "saved": 0}
_RECURSION_LOCK = threading.Lock()


def _after_fork_in_child() -> None:
    """Other threads' deep calls did not survive a fork (one may have held the lock): start over."""
    global _RECURSION_LOCK
    _RECURSION_LOCK = threading.Lock()
    _RECURSION["users"] = 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


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


FRAMES_PER_LEVEL = 12  # Python frames one nesting level costs, at most (measured: the parser ~6, atoms() 2)
_FRAMES_SPARE = 300  # frames kept free for what a question calls besides the recursion (Z3's API, JAX)


def _stack_within(n: int) -> bool:
    """Whether the caller's stack is at most ``n`` frames deep (one C-level walk, not a Python loop)."""
    if n < 0:
        return False
    try:
        sys._getframe(n + 1)  # counted from deep_recursion's frame, as the stack it measures
    except ValueError:
        return True
    return False


_AS_IS = nullcontext()  # reusable: the recursion limit stays as it is


def deep_recursion(depth: int | None = None, limit: int = 20_000) -> AbstractContextManager[None]:
    """Room for expressions nested ``depth`` levels deep (``None``: unknown, assume deep).

    Python's recursion limit is process-wide: raising it changes every other thread's limit too.
    So it is raised only when the stack now in use plus ``FRAMES_PER_LEVEL`` frames per level does
    not fit under it (200 nested ``max`` under the default limit of 1,000); the expressions of real
    programs nest a few levels and leave the limit as it is. When raised, it is counted across
    threads, so one thread cannot restore the limit while another is deep. (Every question enters
    this: the common case returns a shared no-op context, and the stack is measured by one C call.)
    """
    if depth is not None and _stack_within(sys.getrecursionlimit() - depth * FRAMES_PER_LEVEL - _FRAMES_SPARE):
        return _AS_IS
    return _raised_recursion(limit)


@contextmanager
def _raised_recursion(limit: int) -> Iterator[None]:
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

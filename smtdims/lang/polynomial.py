"""Sums, products and powers of normalised polynomials, under the expansion limits.

A polynomial here is the term tuple an :class:`~smtdims.lang.expr.Expr` holds: ``(monomial,
coefficient)`` pairs, no zero coefficient, sorted by :func:`mono_key`; a monomial is ``(atom,
exponent)`` pairs with exponents >= 1, sorted by the atoms' ``sort_key()``; ``()`` is the monomial 1.
The kernels take and return such tuples, so the expression classes stay one thing and this module
needs nothing of them but ``sort_key``.

Why limits: the expanded form is the IR, and every later step (intervals, points, Z3's encoding)
costs time in proportion to its terms; 20,000 terms still leave time to answer a question about
them. Products and powers that would exceed the limits are refused (:class:`ExpansionTooLarge`)
before the work, or as soon as a partial product passes them.
"""

from __future__ import annotations

import bisect
import math
import operator
from collections.abc import Mapping
from typing import Any

MAX_TERMS = 20_000  # terms of a product or power
MAX_PRODUCTS = 200_000  # term-by-term products of one multiplication

Atom = Any  # a dimension variable or an operation (smtdims.lang.expr.Atom): anything with sort_key()
Monomial = tuple[tuple[Atom, int], ...]
Terms = tuple[tuple[Monomial, int], ...]

FEW_TERMS = 8  # a sum with this few terms is merged into a large one, not re-sorted with it
_VECTOR_ATOMS = 8  # up to this many atoms, monomials are multiplied as exponent vectors


class ExpansionTooLarge(ValueError):
    """A product or power whose expansion exceeds :data:`MAX_TERMS` or :data:`MAX_PRODUCTS`."""


def too_large(what: str, size: str, limit: str) -> str:
    return (f"{what} expands to {size}, more than the limit of {limit}; no dimension expression "
            "needs one so large (name a factor as a new variable with a constraint instead)")


def mono_key(m: Monomial) -> tuple:
    """The sort key of a monomial in a sum: higher degree first, then the atoms' order."""
    if len(m) == 1:  # the common monomial, without the generators (every sum sorts its terms by this)
        a, e = m[0]
        return (-e, ((a.sort_key(), e),))
    return (-sum(e for _, e in m), tuple((a.sort_key(), e) for a, e in m))


def mono_mul(m1: Monomial, m2: Monomial) -> Monomial:
    if not m1:
        return m2
    if not m2:
        return m1
    acc: dict[Atom, int] = dict(m1)
    for a, e in m2:
        acc[a] = acc.get(a, 0) + e
    return tuple(sorted(acc.items(), key=lambda ae: ae[0].sort_key()))


def normalised(coeffs: Mapping[Monomial, int]) -> Terms:
    """The terms of ``coeffs`` in sum order, zero coefficients dropped."""
    items = [(m, c) for m, c in coeffs.items() if c != 0]
    items.sort(key=lambda mc: mono_key(mc[0]))
    return tuple(items)


def add_few(big: Terms, few: Terms) -> Terms:
    """``big + few`` by insertion: a sort key for about log(n) monomials, not all n (re-sorting a
    long expanded sum for ``e - 1`` cost far more than the addition)."""
    terms = list(big)
    index = {m: i for i, (m, _) in enumerate(terms)}
    inserts = []
    for m, c in few:
        i = index.get(m)
        if i is not None:
            terms[i] = (m, terms[i][1] + c)
        else:
            inserts.append((m, c))
    out = [t for t in terms if t[1]]
    for m, c in inserts:
        out.insert(bisect.bisect_left(out, mono_key(m), key=lambda t: mono_key(t[0])), (m, c))
    return tuple(out)


def product(x: Terms, y: Terms) -> Terms:
    """``x * y`` for two polynomials that are not constants (the caller scales by a constant)."""
    if len(x) == 1 and len(y) == 1:  # a monomial by a monomial (parsing c*a*b^2)
        (m1, c1), = x
        (m2, c2), = y
        return ((mono_mul(m1, m2), c1 * c2),)
    work = len(x) * len(y)
    if work > MAX_PRODUCTS:
        raise ExpansionTooLarge(too_large(f"a product of {len(x):,} by {len(y):,} terms",
                                          f"{work:,} products", f"{MAX_PRODUCTS:,} products"))
    acc: dict = {}
    atoms = _few_atoms(x, y)
    if atoms is not None:  # exponent vectors: a product is a tuple sum, no sorting per monomial
        xs, ys = _vectors(atoms, x), _vectors(atoms, y)
        for v, c in xs:
            for w, d in ys:
                key = tuple(map(operator.add, v, w))
                acc[key] = acc.get(key, 0) + c * d
            if len(acc) > MAX_TERMS:
                break
    else:
        for m1, c1 in x:
            for m2, c2 in y:
                m = mono_mul(m1, m2)
                acc[m] = acc.get(m, 0) + c1 * c2
            if len(acc) > MAX_TERMS:
                break
    if len(acc) > MAX_TERMS:
        raise ExpansionTooLarge(too_large(f"a product of {len(x):,} by {len(y):,} terms",
                                          f"more than {MAX_TERMS:,} terms", f"{MAX_TERMS:,} terms"))
    return _from_vectors(atoms, acc) if atoms is not None else normalised(acc)


def power(x: Terms, n: int) -> Terms:
    """``x ** n`` for ``n >= 2`` and ``x`` not 0, by the multinomial theorem (about one step per term
    of the result).

    Refused before the work when the expansion could have more than :data:`MAX_TERMS` terms
    (``(a + b + c)^500`` has 125,751) and squaring does not keep it smaller.
    """
    t = len(x)
    if t == 1:
        (m, c), = x
        return ((tuple((a, k * n) for a, k in m), c**n),)
    bound = math.comb(n + t - 1, t - 1)
    if bound > MAX_TERMS:
        return _power_by_squaring(x, n, bound)
    acc: dict = {}
    atoms = _few_atoms(x, x)
    if atoms is not None:
        parts: list = _vectors(atoms, x)
        unit: object = (0,) * len(atoms)

        def scaled(v, k):
            return tuple(e * k for e in v)

        join = lambda v, w: tuple(map(operator.add, v, w))  # noqa: E731
    else:
        parts, unit = list(x), ()

        def scaled(m, k):
            return tuple((a, e * k) for a, e in m)

        join = mono_mul
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
    return _from_vectors(atoms, acc) if atoms is not None else normalised(acc)


def _power_by_squaring(x: Terms, n: int, bound: int) -> Terms:
    """``x ** n`` by square and multiply, each product checked against the limits as it comes.

    The multinomial bound counts distinct products of the terms; equal monomials can make the
    result smaller (``(1 + a + a^2)^200``). ``x`` has two terms or more, so no partial product is a
    constant or a monomial.
    """
    exponent = n
    result: Terms | None = None
    base = x
    try:
        while n:
            if n & 1:
                result = base if result is None else product(result, base)
            n >>= 1
            if n:
                base = product(base, base)
    except ExpansionTooLarge:
        raise ExpansionTooLarge(too_large(f"the power ^{exponent} of {len(x)} terms", f"up to {bound:,} terms",
                                          f"{MAX_TERMS:,} terms")) from None
    assert result is not None
    return result


def _few_atoms(x: Terms, y: Terms) -> list[Atom] | None:
    """The atoms of ``x`` and ``y`` in sort order, when there are few enough for exponent vectors."""
    atoms: set[Atom] = set()
    for terms in (x, y):
        for m, _ in terms:
            for a, _ in m:
                atoms.add(a)
        if len(atoms) > _VECTOR_ATOMS:
            return None
    return sorted(atoms, key=lambda a: a.sort_key())


def _vectors(atoms: list[Atom], x: Terms) -> list[tuple[tuple[int, ...], int]]:
    """``x``'s terms as exponent vectors over ``atoms`` (which hold every atom of ``x``)."""
    idx = {a: i for i, a in enumerate(atoms)}
    out = []
    for m, c in x:
        v = [0] * len(atoms)
        for a, k in m:
            v[idx[a]] = k
        out.append((tuple(v), c))
    return out


def _from_vectors(atoms: list[Atom], acc: Mapping[tuple[int, ...], int]) -> Terms:
    """The normalised terms of exponent vectors over ``atoms`` (in sort order).

    The atoms' ranks order monomials as their sort keys do, so the key below sorts as
    :func:`mono_key` would, without building a key per atom.
    """
    items = [(v, c) for v, c in acc.items() if c]
    items.sort(key=lambda vc: (-sum(vc[0]), tuple((i, k) for i, k in enumerate(vc[0]) if k)))
    return tuple((tuple((atoms[i], k) for i, k in enumerate(v) if k), c) for v, c in items)

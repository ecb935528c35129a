"""Sound arithmetic on integer intervals whose ends may be infinite.

An interval ``(lo, hi)`` holds every value an expression can take; it may be loose, never wrong.
Finite ends are Python ints (never floats: dimension values may exceed the float range), infinite
ends are ``-math.inf`` / ``math.inf``, and ``0 * inf`` counts as 0 (an end times a factor that is
exactly 0 is 0).
"""

from __future__ import annotations

import math

Bound = int | float  # int, or +-math.inf
Interval = tuple[Bound, Bound]
INF = math.inf
UNBOUNDED: Interval = (-INF, INF)


def is_inf(x: Bound) -> bool:
    """Whether an end is infinite. Never converts an int to float (ints may exceed float range)."""
    return isinstance(x, float) and math.isinf(x)


def _mul(a: Bound, b: Bound) -> Bound:
    """Endpoint product of integer intervals: 0 * inf counts as 0; no int is ever made a float."""
    if a == 0 or b == 0:
        return 0
    if is_inf(a) or is_inf(b):
        return INF if (a > 0) == (b > 0) else -INF
    return a * b


def mul_interval(x: Interval, y: Interval) -> Interval:
    cands = [_mul(x[0], y[0]), _mul(x[0], y[1]), _mul(x[1], y[0]), _mul(x[1], y[1])]
    return (min(cands), max(cands))


def pow_interval(x: Interval, e: int) -> Interval:
    lo, hi = x
    if e == 0:
        return (1, 1)
    if e % 2 == 1 or lo >= 0:
        return (_pow(lo, e), _pow(hi, e))  # monotone
    if hi <= 0:
        return (_pow(hi, e), _pow(lo, e))
    return (0, max(_pow(lo, e), _pow(hi, e)))


def _pow(x: Bound, e: int) -> Bound:
    if is_inf(x):
        return INF if x > 0 or e % 2 == 0 else -INF
    return x**e


def _floor_div_bound(a: Bound, b: Bound) -> Bound:
    if not is_inf(b):
        if not is_inf(a):
            return int(a) // int(b)
        return -INF if (a >= 0) != (b >= 0) else INF
    if not is_inf(a):
        return -1 if (a >= 0) != (b >= 0) and a != 0 else 0
    return -INF if (a >= 0) != (b >= 0) else INF


def floordiv_interval(x: Interval, y: Interval) -> Interval:
    if y[0] <= 0 <= y[1]:
        return UNBOUNDED  # the divisor may be 0 (or straddles it): no useful bound
    cands = [_floor_div_bound(a, b) for a in x for b in y]
    return (min(cands), max(cands))


def mod_interval(x: Interval, y: Interval) -> Interval:
    if y[0] >= 1:
        hi = y[1] - 1
        if x[0] >= 0:
            if x[1] < y[0]:
                return x  # mod(x, y) == x when 0 <= x < y
            hi = min(hi, x[1])
        return (0, hi)
    if y[1] <= -1:
        lo = y[0] + 1
        if x[1] <= 0:
            if x[0] > y[1]:
                return x
            lo = max(lo, x[0])
        return (lo, 0)
    return (min(0, y[0] + 1), max(0, y[1] - 1))


def add_interval(x: Interval, y: Interval) -> Interval:
    lo = -INF if (x[0] == -INF or y[0] == -INF) else x[0] + y[0]
    hi = INF if (x[1] == INF or y[1] == INF) else x[1] + y[1]
    return (lo, hi)


def scale_interval(c: int, lo: Bound, hi: Bound) -> Interval:
    """``c*[lo, hi]`` for an integer ``c``: the ends times ``c``, swapped where ``c < 0``. An infinite
    end stays infinite, its sign times ``c``'s (``0*inf`` is 0, as :func:`_mul`), and no int is
    made a float (ints may exceed float range)."""
    if c > 0:
        return (lo if is_inf(lo) else c * lo, hi if is_inf(hi) else c * hi)
    if c < 0:
        return (-hi if is_inf(hi) else c * hi, -lo if is_inf(lo) else c * lo)
    return (0, 0)


def ceil_div(a: int, b: int) -> int:
    return -((-a) // b)


def term_interval(c: int, factors: list[Interval]) -> Interval:
    """The interval of ``c`` times the factors' product.

    Factors that are all nonnegative (plain dimension variables, >= 1) multiply end by end:
    the product of the lower ends is the least product, of the upper ends the largest
    (``_mul`` keeps the ``0 * inf = 0`` convention of :func:`mul_interval`), and the sign of
    ``c`` orders the two. Otherwise the general corner products.
    """
    if all(f[0] >= 0 for f in factors):
        lo: Bound = 1
        hi: Bound = 1
        for f0, f1 in factors:
            lo, hi = _mul(lo, f0), _mul(hi, f1)
        return scale_interval(c, lo, hi)
    term: Interval = (c, c)
    for f in factors:
        term = mul_interval(term, f)
    return term

"""A division whose operands share a factor proven >= 1 is reduced by it (``sign_reduce``).

``mod(f*x, f*y) = f*mod(x, y)`` and ``floordiv(f*x, f*y) = floordiv(x, y)`` for ``f >= 1`` (the proof:
``smtdims.rungs.question.reduce_divisions``). What these guard:

* the rewrite is an identity: random factors (constants, products of variables, atoms the interval
  rules prove >= 1), random operands and divisors (positive and negative constants, symbolic), nested
  and inside sums, compared with the original at random valuations, exactly, undefined where the
  original is; ``sign_reduce`` keeps the sign;
* a factor that may be 0 or negative (``mod(a, 3)``, ``min(-a, -1)``) is never cancelled;
* the family a pad-to-a-multiple layer asks (``mod(c*b*mod(-t, k) + c*b*t, c*k*b) == 0``) is proven
  by the linear rungs, on the default budget, for several coefficients and factors; the false ones
  nearby are refuted or undetermined, never "true", and every answer agrees with brute force.
"""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import smtdims
from smtdims import PossibleDivisionByZeroError
from smtdims.lang.constraints import ConstraintSet
from smtdims.lang.expr import Expr
from smtdims.lang.parser import parse_expr
from smtdims.lang.results import FALSE, TRUE, UNDETERMINED
from smtdims.reasoner import Session
from smtdims.rungs.question import proven_positive, reduce_divisions, sign_reduce

SETTINGS = dict(deadline=None, derandomize=True, database=None, max_examples=300,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
NAMES = ("a", "b", "t")


def _value(e: Expr, env: dict[str, int]) -> int | None:
    try:
        return e.evaluate(env)
    except ZeroDivisionError:
        return None


def _valuations(rng: random.Random, n: int = 60):
    for _ in range(n):
        yield {v: rng.choice((1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 31, 64, 97, 1000)) for v in NAMES}


@st.composite
def _polys(draw, depth: int = 1) -> Expr:
    """A small polynomial over ``NAMES`` with integer coefficients, possibly holding a mod/floordiv."""
    terms = []
    for _ in range(draw(st.integers(1, 3))):
        term = Expr.const(draw(st.integers(-9, 9)))
        for v in draw(st.lists(st.sampled_from(NAMES), max_size=2)):
            term = term * Expr.var(v)
        if depth and draw(st.booleans()) and draw(st.booleans()):
            inner = draw(_polys(depth - 1))
            k = draw(st.sampled_from((2, 3, -4, 16, -16)))
            term = term * (inner.mod(k) if draw(st.booleans()) else inner.floordiv(k))
        terms.append(term)
    return Expr.sum(terms)


@st.composite
def _factors(draw) -> Expr:
    """A factor >= 1 at every valuation: a positive constant times variables (and ``max(a, 2)``)."""
    f = Expr.const(draw(st.sampled_from((1, 2, 3, 8, 12))))
    for v in draw(st.lists(st.sampled_from(NAMES), max_size=3)):
        f = f * Expr.var(v)
    if draw(st.booleans()) and draw(st.booleans()):
        f = f * Expr.var("a").max(2)
    return f


@st.composite
def _divisors(draw) -> Expr:
    kind = draw(st.sampled_from(("positive", "negative", "symbolic")))
    if kind == "positive":
        return Expr.const(draw(st.integers(1, 20)))
    if kind == "negative":
        return Expr.const(-draw(st.integers(1, 20)))
    d = draw(_polys(0))
    return d if d.as_constant() != 0 else Expr.var("t")


@settings(**SETTINGS)
@given(_factors(), _polys(), _divisors(), _polys(), st.sampled_from(("mod", "floordiv", "both")),
       st.integers(-3, 3), st.integers(0, 2**32))
def test_reducing_a_division_by_a_common_factor_keeps_every_value(f, x, y, rest, op, c, seed):
    parts = []
    if op in ("mod", "both"):
        parts.append((f * x).mod(f * y))
    if op in ("floordiv", "both"):
        parts.append((f * x).floordiv(f * y) * c)
    e = Expr.sum(parts) + rest
    outer = (e * f).mod(f * (y + Expr.var("b")))  # the division nested in another one sharing the factor
    session = Session(ConstraintSet.of(()))
    positive = proven_positive(session.interval)
    for q in (e, outer, e * f):
        red, signed = reduce_divisions(q, positive), sign_reduce(q, positive)
        for env in _valuations(random.Random(seed)):
            want = _value(q, env)
            assert _value(red, env) == want, (str(q), str(red), env)
            if want is not None:  # the sign reduction is defined where the original is (f >= 1)
                got = _value(signed, env)
                assert got is not None and (got > 0) - (got < 0) == (want > 0) - (want < 0), (str(q), str(signed), env)


def test_the_pad_question_reduces_to_a_linear_one():
    e = parse_expr("mod(8*b*mod(-t, 16) + 8*b*t, -128*b)")
    assert str(reduce_divisions(e)) == "8*b*mod(t + mod(-t, 16), -16)"
    assert str(sign_reduce(e)) == "mod(t + mod(-t, 16), -16)" and sign_reduce(e).is_linear()
    assert str(sign_reduce(parse_expr("floordiv(3*b*h*t + 3*b*h, 6*b*h*t)"))) == "floordiv(t + 1, 2*t)"
    assert str(reduce_divisions(parse_expr("mod(b^2*t, b)"))) == "0"
    # a division by a constant is left as it is (the linear engines take it either way)
    assert reduce_divisions(parse_expr("mod(8*t, 16)")) == parse_expr("mod(8*t, 16)")


@pytest.mark.parametrize("text", [
    "mod(t*mod(a, 3), 16*mod(a, 3)) - 5",  # mod(a, 3) may be 0: not a factor
    "mod(a, 3)*t - 16*mod(a, 3)",  # dividing it out would make 0 (at a = 3) the sign of t - 16
    "min(-a, -1)*t - 16*min(-a, -1)",  # negative: dividing it out would flip the sign
    "mod(t*min(-a, -1), 16*min(-a, -1))",
])
def test_a_factor_that_may_be_zero_or_negative_is_never_cancelled(text):
    e = parse_expr(text)
    session = Session(ConstraintSet.of(()))
    for red in (reduce_divisions(e, proven_positive(session.interval)), session.scope.sign_reduced(e)):
        assert red == e, (text, str(red))


def test_an_atom_proven_positive_is_a_factor_and_one_that_is_not_is_refused_by_the_gate():
    q = "mod(floordiv(n, 8)*t + floordiv(n, 8)*mod(-t, 16), 16*floordiv(n, 8))"
    session = Session(ConstraintSet.of(["n >= 8"]))
    assert str(session.scope.sign_reduced(parse_expr(q))) == "mod(t + mod(-t, 16), 16)"
    d = smtdims.decide(q, "==", "0", constraints=["n >= 8"])
    assert d.status == TRUE and d.answered_by == "solver-linear", d
    # without the constraint floordiv(n, 8) is 0 at n = 1: the division by 16*floordiv(n, 8) is refused
    with pytest.raises(PossibleDivisionByZeroError):
        smtdims.decide(q, "==", "0")


def _family():
    """(question, whether it holds everywhere): pad-to-a-multiple remainders and their neighbours."""
    out = []
    for c, k, f in itertools.product((1, 3, 8), (5, 16), ("b", "b*h", "2*b^2*h")):
        pad = f"mod(-t, {k})"
        out += [
            (f"mod({c}*{f}*{pad} + {c}*{f}*t, {c * k}*{f})", True),
            (f"mod({c}*{f}*{pad} + {c}*{f}*t, -{c * k}*{f})", True),
            (f"mod({c}*{f}*t, {c * k}*{f})", False),  # t alone is not a multiple of k
            (f"mod({c}*{f}*{pad} + {c}*{f}*t + {c}*{f}, {c * k}*{f})", False),  # one past a multiple
        ]
    return out


def _brute_force(text: str) -> set[bool]:
    e = parse_expr(text)
    names = sorted(e.variables())
    seen = set()
    for values in itertools.product((1, 2, 3, 4, 5, 6, 15, 16, 17, 31, 32, 33), repeat=len(names)):
        seen.add(e.evaluate(dict(zip(names, values, strict=True))) == 0)
    return seen


@pytest.mark.parametrize(("text", "true"), _family())
def test_the_pad_family_is_decided_exactly_and_never_wrongly(text, true):
    d = smtdims.decide(text, "==", "0")
    seen = _brute_force(text)
    if true:
        assert seen == {True}
        assert d.status == TRUE and d.answered_by in ("solver-linear", "points", "interval"), d
    else:
        assert d.status != TRUE, d
        assert d.status in (FALSE, UNDETERMINED), d
        assert d.status == (FALSE if seen == {False} else UNDETERMINED), (d, seen)
    session = Session(ConstraintSet.of(()))
    assert session.proves(parse_expr(text), "==", Expr.const(0)) is true

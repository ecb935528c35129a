"""The ISL rung (smtdims.presburger): exact where it answers, and never trusted blindly.

Its answers are checked like any other: witnesses re-evaluated exactly, ends compared with
known satisfying points. These tests make ISL lie, run out of its quota, or be missing, and
check that the ladder then answers through Z3 with the same exact bounds.
"""

from __future__ import annotations

import math

import pytest

import smtdims
from smtdims import ConstraintSet, options, parse_expr, presburger, reasoner
from smtdims.reasoner import Session

pytestmark = pytest.mark.skipif(not presburger.available(), reason="islpy is not installed")

CASES = [
    ("floordiv(a + 3, 4) - mod(b, 3)", ["a <= 20", "b >= 2*a - 30"], None),
    ("max(a, b) - min(a, 2*b)", ["a + b <= 12"], None),
    ("a - 2*b", ["c >= b", "a >= c", "u <= 10"], None),
    # negative divisors (Python's floor semantics) and nesting, which ISL gets as text
    ("mod(mod(a - 10, -3) + 7, 4) + floordiv(-a, -2) - mod(floordiv(b, -5), 6)", ["a <= 40", "b <= 3*a"], None),
    ("mod(mod(mod(mod(mod(a + 1000, 7), 6), 5), 4), 3)", [], None),
]



@pytest.mark.parametrize("expr, cons, _", CASES)
def test_isl_and_z3_give_the_same_exact_bounds(expr, cons, _):
    e = parse_expr(expr)
    with options.scoped(presburger=True):
        b1 = Session(ConstraintSet.of(cons)).bounds(e)
    with options.scoped(presburger=False):
        b2 = Session(ConstraintSet.of(cons)).bounds(e)
    assert b1.answered_by == "presburger" and b2.answered_by != "presburger"
    assert (b1.lo, b1.hi) == (b2.lo, b2.hi)
    assert b1.lo_tight and b1.hi_tight
    cs = ConstraintSet.of(cons)
    for end, w in ((b1.lo, b1.lo_witness), (b1.hi, b1.hi_witness)):
        if not math.isinf(end):
            assert cs.holds(w) and e.evaluate(w) == end


def _lying(monkeypatch, lie):
    real = presburger.Engine.bounds

    def bounds(self, e, known=None):
        got = real(self, e, known)
        return lie(got) if got is not None else None

    monkeypatch.setattr(presburger.Engine, "bounds", bounds)


def test_a_witness_that_does_not_attain_the_end_declines_the_answer(monkeypatch):
    e = parse_expr("a + b")
    cs = ConstraintSet.of(["a <= 5", "b <= 7"])
    # ISL's own witness check runs inside Engine.bounds; here the lie comes after it, as a
    # wrong end with an unrelated witness: the consistency check must catch the known point a=b=1
    _lying(monkeypatch, lambda got: (got[0] + 1, got[1], {"a": 1, "b": 2}, got[3]))
    reasoner.reset_stats()
    b = Session(cs).bounds(e)
    assert (b.lo, b.hi) == (2, 12) and b.answered_by != "presburger"
    assert smtdims.stats()["presburger_declined"] == 1


def test_a_wrong_witness_inside_the_engine_is_refused(monkeypatch):
    monkeypatch.setattr(presburger, "_sample", lambda *a, **k: {"a": 3, "b": 3})
    eng = presburger.Engine(ConstraintSet.of(["a <= 5", "b <= 7"]))
    assert eng.bounds(parse_expr("a + b")) is None  # the sampled point gives 6, not 2 or 12
    assert eng.bounds(parse_expr("a + b"), {2: {"a": 1, "b": 1}, 12: {"a": 5, "b": 7}}) is not None


def test_isl_out_of_quota_falls_back_to_z3(monkeypatch):
    isl, ctx = presburger._isl()
    ctx.set_max_operations(1)
    try:
        e = parse_expr("floordiv(a + 3, 4) - mod(b, 3)")
        cs = ConstraintSet.of(["a <= 20", "b >= 2*a - 30"])
        assert presburger.Engine(cs).bounds(e) is None
        b = Session(cs).bounds(e)
        assert b.answered_by == "search" and b.lo_tight and b.hi_tight
    finally:
        ctx.set_max_operations(presburger.OPERATIONS)


def test_without_islpy_the_ladder_uses_z3(monkeypatch):
    monkeypatch.setitem(presburger._STATE, "isl", None)
    b = Session(ConstraintSet.of(["a <= 5"])).bounds(parse_expr("3*a - 1"))
    assert (b.lo, b.hi) == (2, 14) and b.answered_by != "presburger"


def test_only_small_presburger_questions_are_eligible():
    eng = presburger.Engine(ConstraintSet.of(["a <= 5"]))
    assert eng.eligible(parse_expr("a + floordiv(b, 3)"))
    assert not eng.eligible(parse_expr("a*b"))  # nonlinear
    assert not eng.eligible(parse_expr("floordiv(a, b)"))  # symbolic divisor
    assert not eng.eligible(parse_expr(" + ".join(f"x{i}" for i in range(presburger.MAX_VARS))))
    many = " + ".join(f"max(a, {i})" for i in range(presburger.MAX_CASES + 1))
    assert not eng.eligible(parse_expr(many))  # case splits grow exponentially
    deep = "a"
    for _ in range(presburger.MAX_DEPTH + 1):
        deep = f"mod({deep} + 1000, 7)"
    assert not eng.eligible(parse_expr(deep))  # one existential variable per level
    assert not eng.eligible(parse_expr(f"a + {10**presburger.MAX_DIGITS}"))  # decimal text for ISL


def test_any_variable_name_reaches_isl():
    # names ISL would read as keywords or could not read at all
    cs = ConstraintSet.of(["and <= 4", "δ >= 2*and"])
    b = Session(cs).bounds(parse_expr("δ - and"))
    assert b.answered_by == "presburger" and (b.lo, b.hi) == (1, math.inf)


def test_the_option_validates_its_value():
    with pytest.raises(ValueError, match="presburger must be True or False"):
        options.set_defaults(presburger="no")

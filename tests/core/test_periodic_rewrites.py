"""``periodic_rewrites``: a length that refers to itself (an overlap-add's, a padded one's) as ``m*k + c``.

Checked against brute force on families of such equations, not on the examples that motivated them:
every rewrite offered holds at each of its first sizes, covers every size of its residue class from its
first one up to the limit looked at, and starts where the equation's count is not clamped at zero.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from smtdims.answers.equations import equation_fixes, periodic_rewrites
from smtdims.lang.constraints import ConstraintSet
from smtdims.lang.parser import parse_expr
from smtdims.reasoner import Session

LIMIT = 600


def _solutions(lhs: str, rhs: str) -> set[int]:
    diff = parse_expr(lhs) - parse_expr(rhs)
    return {n for n in range(1, LIMIT) if diff.evaluate({"n": n}) == 0}


def _check(lhs: str, rhs: str) -> list[tuple[str, str, str]]:
    got = periodic_rewrites(Session(ConstraintSet()), parse_expr(lhs), parse_expr(rhs))
    sols = _solutions(lhs, rhs)
    for v, text, _ in got:
        assert v == "n"
        new = parse_expr(text)
        (w,) = new.variables()
        first, step = new.evaluate({w: 1}), new.evaluate({w: 2}) - new.evaluate({w: 1})
        sizes = list(range(first, LIMIT, step))
        assert step >= 2 and sizes and set(sizes) <= sols, (lhs, rhs, text, sorted(set(sizes) - sols)[:5])
    return got


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 80), st.integers(2, 24))
def test_overlap_add_lengths(win, hop):
    """``frame`` then overlap-add: the output length ``hop*max(0, floordiv(n - win, hop) + 1) + win - hop``
    equals the input's exactly on ``n = win + hop*j`` (j >= 0); the rewrite starts at one frame."""
    lhs, rhs = "n", f"{hop}*max(0, floordiv(n - {win}, {hop}) + 1) + {win - hop}"
    got = _check(lhs, rhs)
    assert [t for _, t, _ in got] == [str(parse_expr(f"{hop}*n + ({win - hop})"))], got
    assert min(_solutions(lhs, rhs) - {win - hop}) == win  # zero frames (win - hop) is a solution, not the start


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 64))
def test_padded_to_a_multiple(m):
    """``pad`` to a multiple of m then compared with the original: ``n == m*floordiv(n + m - 1, m)``."""
    got = _check("n", f"{m}*floordiv(n + {m - 1}, {m})")
    assert [t for _, t, _ in got] == [f"{m}*n"], got


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 12), st.integers(-20, 20), st.integers(1, 3), st.integers(-6, 6))
def test_whatever_is_offered_holds_everywhere(m, shift, scale, const):
    """Any one-variable equation of the family: what is offered is true (the prover decides; brute force
    checks the first sizes); equations with no periodic solution set get nothing."""
    _check(f"{scale}*n", f"{scale * m}*floordiv(n + {shift}, {m}) + {const}")


def test_the_overlap_add_of_the_issue_and_the_equation_fixes_order():
    s = Session(ConstraintSet())
    lhs, rhs = parse_expr("n"), parse_expr("16*max(0, floordiv(n - 64, 16) + 1) + 48")
    assert periodic_rewrites(s, lhs, rhs) == [("n", "16*n + 48", "so that the equation holds: n in 64, 80, ...")]
    fixes = equation_fixes(s, lhs, rhs)
    spec = [f for f in fixes if f[0] == "spec"]
    assert spec and spec[0][1] == "16*n + 48" and spec[0][4] < min(f[4] for f in fixes if f[0] != "spec")
    # two variables, or none that is divided: nothing
    assert periodic_rewrites(s, parse_expr("n"), parse_expr("16*floordiv(m, 16)")) == []
    assert periodic_rewrites(s, parse_expr("n"), parse_expr("2*m")) == []
    # no size holds it: nothing
    assert periodic_rewrites(s, parse_expr("n"), parse_expr("4*floordiv(n, 4) + 5")) == []

"""``interval_form``: a one-variable constraint as the bounds a person writes, only where equivalent.

Checked against brute force: wherever it answers, the bounds admit exactly the values 1..399 that the
constraint admits; where the solution set has a hole (a divisibility), it answers None.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from smtdims.answers.equations import interval_form
from smtdims.lang.constraints import Constraint, ConstraintSet

LIMIT = 400


def _holds(text: str, v: int) -> bool:
    c = Constraint.parse(text)
    got = c.diff.evaluate({"w": v})
    return got == 0 if c.kind == "==" else got >= 0


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(["", "-"]), st.integers(-3, 3), st.integers(2, 5), st.integers(2, 5), st.sampled_from(["==", "<=", ">="]),
       st.integers(-9, 9))
def test_interval_form_is_equivalent_by_brute_force(sign, shift, k1, k2, op, value):
    text = f"floordiv(floordiv({sign}w + {shift}, {k1}), {k2}) {op} {value}"
    try:
        got = interval_form(text, ConstraintSet())
    except Exception as err:  # noqa: BLE001 - a constraint no valuation meets is refused, not rewritten
        assert "no valuation" in str(err).lower() or "unsatisfiable" in str(err).lower(), err
        return
    if got is None:
        return
    bounds = [Constraint.parse(t) for t in got]
    for v in range(1, LIMIT):  # a necessary condition of equivalence over all integers >= 1
        assert all(b.diff.evaluate({"w": v}) >= 0 for b in bounds) == _holds(text, v), (text, got, v)


def test_the_strided_convolutions_and_a_divisibility():
    assert interval_form("floordiv(floordiv(-w, 2), 2) == -7", ConstraintSet()) == ("w >= 25", "w <= 28")
    assert interval_form("floordiv(w - 400, 160) >= 2", ConstraintSet()) == ("w >= 720",)
    assert interval_form("mod(w, 8) == 0", ConstraintSet()) is None  # holes: no interval says it
    assert interval_form("w <= 4", ConstraintSet()) is None  # plain already
    assert interval_form("floordiv(w, 2) == floordiv(v, 3)", ConstraintSet()) is None  # two variables
    # under the other constraints: w >= 27 leaves 27..28
    assert interval_form("floordiv(floordiv(-w, 2), 2) == -7", ConstraintSet.of(["w >= 27"])) == ("w >= 27", "w <= 28")

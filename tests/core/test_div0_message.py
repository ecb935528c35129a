"""A divisor that was not proven nonzero is not said to be 0 (the message claims only what was shown)."""

from __future__ import annotations

import pytest

import smtdims

# 2a^3 + 7 + 3a*max(...) is never 0 for a, b >= 1 (3a must divide 2a^3 + 7, so a is 1 or 7, and neither
# gives an integer b); proving it takes the nonlinear solver more than a budget of 30,000.
HARD = "2*a^3 + 3*a*max(-a*b - 3, 4*a*b - 3*a^2 - 7) + 7"


def test_a_divisor_the_solver_gave_up_on_may_be_0_and_is_not_said_to_be():
    assert all(eval(HARD.replace("^", "**"), {"a": a, "b": b, "max": max}) != 0  # noqa: S307 - our own text
               for a in range(1, 40) for b in range(1, 40))
    with pytest.raises(smtdims.PossibleDivisionByZeroError) as info:
        smtdims.bounds(f"mod(a*b, {HARD})", [], budget=30_000, deadline=30)
    err = info.value
    assert err.witness is None and err.deterministic
    assert "may be 0: the solver gave up before proving it nonzero" in str(err) and "can be 0" not in str(err)


def test_a_divisor_that_is_0_somewhere_says_where():
    with pytest.raises(smtdims.PossibleDivisionByZeroError) as info:
        smtdims.bounds("floordiv(a, b - 1)", [], deadline=30)
    err = info.value
    assert err.witness is not None and err.witness["b"] == 1
    assert "can be 0 (for example at " in str(err)

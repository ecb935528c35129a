"""Memory is bounded by what is in use, not by how many scopes were ever asked about (issue 28).

A session's Z3 side (its solvers and encoded terms in the shared context, a recession cone's LP)
costs 0.1-4 MB of Z3 memory; at most ``smt.LIVE_Z3_FAMILIES`` scopes' worth of them (a scope with its
focus sessions) live at once, the least recently used released and rebuilt on its next use, with the
same answers.
"""

from __future__ import annotations

import gc
import weakref

import pytest

from smtdims import ConstraintSet, options, parse_expr, smt
from smtdims.reasoner import Session


def _constraints(i: int) -> ConstraintSet:
    return ConstraintSet.of(["c <= a + b", "a + c >= 3*b", f"a + b + c <= {60 + i}"])


def _question(i: int) -> tuple:
    """True, and proven only by combining constraints: the interval and point rungs leave it to a
    solver (ISL is off in these tests: Z3 proves it)."""
    return parse_expr("3*a"), ">=", parse_expr(f"b + c - {i % 3}")


def _started(sessions: list[Session]) -> int:
    return sum(s.solver._z3_ctx is not None for s in sessions)


@pytest.fixture
def four_live(monkeypatch):
    monkeypatch.setattr(smt, "LIVE_Z3_FAMILIES", 4)
    with options.scoped(presburger=False):
        yield


def test_at_most_the_limit_of_z3_sides_live_and_answers_do_not_change(four_live):
    sessions = [Session(_constraints(i)) for i in range(12)]
    first = []
    for i, s in enumerate(sessions):
        d = s.decide(*_question(i))
        assert d.status == "true" and d.answered_by == "solver-linear"
        first.append(d.status)
        assert _started(sessions) <= 4
    assert _started(sessions) == 4  # the four most recent
    assert sessions[0].solver._z3_ctx is None  # released: its next check rebuilds it
    again = [Session(_constraints(i)).decide(*_question(i)).status for i in range(12)]
    assert again == first
    # a released session answers a new question (its solver rebuilt) as a fresh one does
    q = (parse_expr("4*a"), ">=", parse_expr("2*b + c"))
    assert sessions[0].decide(*q).status == Session(_constraints(0)).decide(*q).status
    assert sessions[0].solver._z3_ctx is not None


def _living_in(ctx: object, sessions: list[Session]) -> list[bool]:
    return [s.solver._z3_ctx is ctx for s in sessions]


def test_a_retired_shared_context_is_freed_with_every_session_in_it(four_live):
    sessions = [Session(_constraints(i)) for i in range(3)]
    for i, s in enumerate(sessions):
        s.decide(*_question(i))
    old = smt.shared_context()
    assert _living_in(old, sessions) == [True] * 3
    gone = weakref.ref(old)
    smt.retire_shared(old)
    assert _living_in(None, sessions) == [True] * 3
    del old
    gc.collect()
    assert gone() is None, "a session that is not asked again kept the retired context (and its terms) alive"
    assert sessions[1].decide(*_question(4)).status == "true"


def test_families_whose_objects_are_gone_do_not_push_out_live_ones(four_live):
    sessions = [Session(_constraints(i)) for i in range(3)]
    for i, s in enumerate(sessions):
        s.decide(*_question(i))
    for i in range(10):  # short-lived sessions (as explain's temporary solvers are), dropped at once
        Session(_constraints(10 + i)).decide(*_question(i))
    gc.collect()
    Session(_constraints(30)).decide(*_question(0))
    assert _living_in(smt.shared_context(), sessions) == [True] * 3

"""One way to a Session: ``session_for`` (the registry's, one per constraint set and budget) and the
``assuming`` block (the same set plus a few constraints, the outer session unchanged)."""

from __future__ import annotations

import pytest

from smtdims.errors import UnsatisfiableConstraintsError
from smtdims.lang.constraints import Constraint, ConstraintSet
from smtdims.lang.parser import parse_expr
from smtdims.lang.results import FALSE, TRUE, UNDETERMINED
from smtdims.reasoner import REGISTRY, Session, SessionRegistry, session_for


def test_session_for_is_the_registrys_one_session_per_set_and_budget():
    cs = ConstraintSet.of(["a >= 3", "b <= a"])
    s = session_for(cs)
    assert s is session_for(ConstraintSet.of(["a >= 3", "b <= a"])) is REGISTRY.get(cs)
    assert session_for(cs, 1_000) is not s and session_for(cs, 1_000).budget == 1_000
    assert s.constraints == cs


def test_assuming_adds_constraints_and_leaves_the_outer_session_as_it_was():
    a, b = parse_expr("a"), parse_expr("b")
    outer = session_for(ConstraintSet.of(["a >= 3"]))
    before = outer.decide(a, ">=", parse_expr("5"))
    assert before.status == UNDETERMINED
    with outer.assuming("a >= 5", Constraint.parse("b <= a")) as s:
        assert isinstance(s, Session) and s is not outer
        assert [c.text for c in s.constraints] == ["a >= 3", "a >= 5", "b <= a"]  # old + extra, in order
        assert s.budget == outer.budget
        assert s.decide(a, ">=", parse_expr("5")).status == TRUE
        assert s.decide(b, ">", a).status == FALSE
        assert s.bounds(a).lo == 5
        # inside the block the outer session still answers under its own constraints
        assert outer.decide(a, ">=", parse_expr("5")).status == UNDETERMINED
    assert [c.text for c in outer.constraints] == ["a >= 3"]
    assert outer.decide(a, ">=", parse_expr("5")).status == UNDETERMINED
    assert outer.bounds(a).lo == 3


def test_an_assumed_set_comes_from_the_registry_and_is_found_again():
    outer = session_for(ConstraintSet.of(["c >= 2"]))
    with outer.assuming("c <= 9") as s1:
        pass
    with outer.assuming("c <= 9") as s2:
        assert s2 is s1  # its answers are cached for the next trial of the same set
    with outer.assuming("c <= 9", budget=1_000) as s3:
        assert s3 is not s1 and s3.budget == 1_000
    # a set a person asked about already is that person's session
    person = session_for(ConstraintSet.of(["c >= 2", "c <= 7"]))
    with outer.assuming("c <= 7") as s4:
        assert s4 is person


def test_assuming_a_contradiction_raises_in_the_block_only():
    outer = session_for(ConstraintSet.of(["d >= 4"]))
    with outer.assuming("d <= 2") as s, pytest.raises(UnsatisfiableConstraintsError):
        s.bounds(parse_expr("d"))
    assert outer.bounds(parse_expr("d")).lo == 4


def test_trials_never_push_out_the_sets_people_ask_about():
    reg = SessionRegistry(capacity=2, trials=2)
    people = [reg.get(ConstraintSet.of([f"x >= {i}"])) for i in (1, 2)]
    trials = [reg.get(ConstraintSet.of([f"y >= {i}"]), trial=True) for i in range(1, 10)]
    assert [reg.get(ConstraintSet.of([f"x >= {i}"])) for i in (1, 2)] == people  # still kept, the same
    assert reg.get(ConstraintSet.of(["y >= 9"]), trial=True) is trials[-1]  # the newest trials are kept
    assert reg.get(ConstraintSet.of(["y >= 1"]), trial=True) is not trials[0]  # the oldest forgotten
    # a trial set later asked by a person is the same session, now in the people's tier
    t = reg.get(ConstraintSet.of(["z >= 1"]), trial=True)
    assert reg.get(ConstraintSet.of(["z >= 1"])) is t
    reg.clear()
    assert reg.get(ConstraintSet.of(["z >= 1"])) is not t

"""The points rung's bookkeeping: the same answers as the plain loop, the deadline still read.

The points rung (``points.answer``) asks whether the question has what it needs only after the first point and after a
point that settled a side; ``Points.values`` reads the deadline at the first valuation and then after
each ``DEADLINE_WORK`` of evaluation. Both must leave every answer as the plain loop gave it.
"""

from __future__ import annotations

import random
import time

from smtdims import clocks, options
from smtdims.errors import SmtdimsError
from smtdims.lang.constraints import ConstraintSet
from smtdims.lang.parser import parse_expr
from smtdims.reasoner import Session
from smtdims.rungs import points
from smtdims.rungs.points import DEADLINE_WORK
from smtdims.rungs.question import (
    NEGATED,
    SAT,
    Precision,
    Side,
    SignQuestion,
    all_settled,
    holds,
    one_refuted,
)
from tests import strategies as S


def _plain_by_points(session, q):
    """The plain loop, the reference: ``q.enough`` asked after every point."""
    for value, env in session.scope.points.values(q.e, q.clock):
        for side in q.open():
            if holds(side.rel, value):
                side.status, side.witness, side.source = SAT, env, session
        if not q.open() or q.enough(q):
            break
    return "points"


def _question(e, kind):
    if kind == "sign":
        return SignQuestion(e, [Side("<"), Side(">=")], (-float("inf"), float("inf")), one_refuted,
                            clocks.asking(), need=Precision.STRICT_SIGN)
    return SignQuestion(e, [Side(">="), Side(NEGATED[">="])], (-float("inf"), float("inf")), all_settled,
                        clocks.asking())


def test_same_sides_and_witnesses_as_the_plain_loop():
    rng = random.Random("points-rung")
    compared = 0
    for _ in range(300):
        case = S.random_case(rng, S.GenConfig(linear=None, max_depth=1, max_vars=3))
        try:
            cs = ConstraintSet.of(case.constraint_texts)
            e = parse_expr(case.expr_text) - parse_expr(case.rhs_text)
        except SmtdimsError:
            continue
        s = Session(cs)
        for kind in ("sign", "decision"):
            a, b = _question(e, kind), _question(e, kind)
            points.answer(a, s.scope)
            _plain_by_points(s, b)
            assert [(x.status, x.witness) for x in a.sides] == [(x.status, x.witness) for x in b.sides], case.describe()
            compared += 1
    assert compared > 300


def test_values_read_the_deadline():
    s = Session(ConstraintSet.of(["b >= t"]))
    e = parse_expr("b - 2*t + h")
    assert list(s.scope.points.values(e, clocks.clock()))  # points exist
    with options.scoped(deadline=0.001), clocks.question() as d:
        time.sleep(0.01)
        assert list(s.scope.points.values(e, d)) == []  # read at the first valuation
    # the clock is the one passed, not the thread's question: an expired one stops them outside any
    late = clocks.Deadline(0.001)
    time.sleep(0.01)
    assert list(s.scope.points.values(e, late)) == [] and late.clocked == clocks.CLOCK_DEADLINE


def test_values_stop_within_the_deadline_work():
    """A deadline that passes mid-loop is noticed within DEADLINE_WORK of evaluation."""
    s = Session(ConstraintSet.of(["b >= t"]))
    e = parse_expr("b - 2*t + h")
    cost = e.size() + 1 + 2
    with options.scoped(deadline=3600), clocks.question() as d:
        got = 0
        for _ in s.scope.points.values(e, d):
            got += 1
            if got == 2:
                d.fire()  # the deadline passes now
        assert got <= 2 + DEADLINE_WORK // cost + 1


def test_the_first_known_point_without_making_the_points():
    """``first_point`` and ``any_point`` before the points are made (all ones where it meets the
    constraints, else the first guess that does, the others not checked) give the first known point,
    as after: a witness completed from it, or the gate's point, is the same either way."""
    rng = random.Random(4407)
    unmade = 0
    for _ in range(300):
        case = S.random_case(rng, S.GenConfig(linear=None, max_depth=1, max_vars=3))
        texts = case.constraint_texts
        try:
            fresh = Session(ConstraintSet.of(texts))
            made = Session(ConstraintSet.of(texts))
            base = made.scope.points.base
        except SmtdimsError:
            continue
        got = fresh.any_point()
        assert got == (base[0] if base else None), texts
        assert fresh.scope.first_point() == (base[0] if base else None), texts
        unmade += not fresh.scope.points_made()
    assert unmade > 200  # the case this tests: answered without making the points

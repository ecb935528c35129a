"""Rung 1, ``constant``: constant folding. A constant expression's sign and bounds are its value."""

from __future__ import annotations

from .protocol import Scope
from .question import SAT, UNSAT, BoundsQuestion, End, SignQuestion, holds

NAME = "constant"


def answer(q: SignQuestion | BoundsQuestion, scope: Scope) -> str | None:
    c = q.e.as_constant()
    if c is None:
        return None
    if isinstance(q, BoundsQuestion):
        # attained only if some valuation meets the constraints: tight where the gate proved one exists
        # (then a point is known); the scope drops the claim otherwise
        w = scope.any_point() if scope.constraints.constraints else {}
        q.answer(End(c, True, w), End(c, True, w))
        return NAME
    for side in q.open():
        side.status = SAT if holds(side.rel, c) else UNSAT
    return NAME

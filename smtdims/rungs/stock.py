"""Rung 4, ``stock``: the host's own procedure (JAX's, registered by the adapter), where it is sound.

It sees only questions that carry the host's own expression (``q.origin``), and tightens the
question's interval; a side the tightened interval excludes cannot hold. Skipped for linear
questions in a scope where it rarely settles them (:meth:`Scope.stock_unprofitable`): there the
solver rungs are complete, so skipping it changes the cost of an answer, never the answer.
"""

from __future__ import annotations

from .protocol import Scope
from .question import UNSAT, SignQuestion, rel_range, sufficient

NAME = "stock"


def answer(q: SignQuestion, scope: Scope) -> str | None:
    linear = scope.linear(q.e)
    if linear and scope.stock_unprofitable():
        return None
    got = scope.stock(q.origin, q.need)
    if got is None:
        return None
    lo, hi = q.interval = (max(q.interval[0], got[0]), min(q.interval[1], got[1]))
    won = sufficient(q.need, lo, hi)
    if linear:
        scope.record_stock(won)
    if won:
        for side in q.open():
            if rel_range(side.rel, lo, hi) == "none":
                side.status = UNSAT
    return NAME

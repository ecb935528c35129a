"""Rungs 5 and 6, ``solver-linear`` and ``solver-nonlinear``: Z3 on the cone of influence.

The expression is divided by its positive common factor first (:func:`sign_reduce`: the same sign
everywhere), which makes ``b*4*n`` against ``b*32*floordiv(n, 8)`` linear. The scope's check
re-evaluates every model exactly, so a side is SAT only with a witness that meets the constraints.
"""

from __future__ import annotations

from .question import SignQuestion, relation, sign_reduce
from .scope import Scope

NAME = "solver"


def answer(q: SignQuestion, scope: Scope) -> str | None:
    s = scope.focus(q.e)
    red = sign_reduce(q.e)
    for side in q.open():
        res = s.check(lambda enc, rel=side.rel: [relation(rel, enc.expr(red))], red, q.e, ask=q.ask)
        side.status, side.witness, side.source, side.reason = res.status, res.model, s, res.reason
        if res.reason:
            q.reasons.append(res.reason)
        if q.done():
            break
    return "solver-linear" if s.linear(red) else "solver-nonlinear"

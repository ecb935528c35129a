"""Rungs 5 and 6, ``solver-linear`` and ``solver-nonlinear``: Z3 on the cone of influence.

The expression is divided by its positive common factor first (:meth:`Scope.sign_reduced`: the same
sign everywhere), which makes ``b*4*n`` against ``b*32*floordiv(n, 8)`` linear, and so is a division
whose operands share it: ``mod(8*b*t + 8*b*mod(-t, 16), -128*b)`` has the sign of
``mod(t + mod(-t, 16), -16)``. Whether the check runs in the shared linear solver is read from the
reduced expression, the one the check encodes. The scope's check re-evaluates every model exactly
against the constraints, and here against the question's own expression: a side is SAT only with a
witness where it holds.
"""

from __future__ import annotations

from ..engines.checks import SAT, UNKNOWN
from .protocol import Scope
from .question import SignQuestion, holds, relation

NAME = "solver"
REASON_WITNESS = "solver model failed exact re-evaluation of the question"


def answer(q: SignQuestion, scope: Scope) -> str | None:
    s = scope.focus(q.e)
    red = s.sign_reduced(q.e)
    for side in q.open():
        res = s.check(lambda enc, rel=side.rel: [relation(rel, enc.expr(red))], red, q.e, ask=q.ask)
        status, witness, reason = res.status, res.model, res.reason
        if status == SAT and not _holds_at(q, side.rel, witness):
            status, witness, reason = UNKNOWN, None, REASON_WITNESS  # the reduction is an identity: never here
        side.status, side.witness, side.source, side.reason = status, witness, s, reason
        if reason:
            q.reasons.append(reason)
        if q.done():
            break
    return "solver-linear" if s.linear(red) else "solver-nonlinear"


def _holds_at(q: SignQuestion, rel: str, env: dict[str, int] | None) -> bool:
    try:
        return env is not None and holds(rel, q.e.evaluate(env))
    except (KeyError, ZeroDivisionError):
        return False

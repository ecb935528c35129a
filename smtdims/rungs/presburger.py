"""Rung 4b, ``presburger``: ISL on small Presburger questions (:mod:`smtdims.engines.presburger`).

Signs: "no" is ISL's proof, "yes" costs precision only if wrong. Bounds: both ends with witnesses
(least-sum ones for people), kept only where they agree with everything known here (the caller's
proven bounds, the values at the known points); the engine re-checks its witnesses exactly.
"""

from __future__ import annotations

from .protocol import Scope
from .question import SAT, UNSAT, BoundsQuestion, End, SignQuestion

NAME = "presburger"
READABLE_VALUE = 8  # a bound's witness with every value at most this is read at a glance: kept as it is


def answer(q: SignQuestion | BoundsQuestion, scope: Scope) -> str | None:
    if isinstance(q, BoundsQuestion):
        return _bounds(q)
    s = scope.focus(q.e)
    red = s.sign_reduced(q.e)
    eng = s.isl_engine(red, q.clock)
    if eng is None:
        return None
    for side in q.open():
        sat = eng.satisfiable(red, side.rel, clock=q.clock)
        if sat is None:
            return None
        side.status = SAT if sat else UNSAT
        if q.done():
            break
    return NAME


def _bounds(q: BoundsQuestion) -> str | None:
    s, e = q.focus, q.e
    eng = s.isl_engine(e, q.clock)
    if eng is None:
        return None
    if q.readable:
        # People's bounds: ISL's least-sum witness of every end, whatever points are known (a known
        # point spares ISL's witness only for other bounds); the values at the points at hand check
        # ISL's ends (the points are not made for this alone: about a fifth of a fresh scope's question)
        at_hand = s.points_at_hand(e)
        seen = [e.evaluate(p) for p in at_hand]
        # the one least-sum valuation of all, where at hand: ISL's least-sum witness of the end it attains
        least = s.least_of(at_hand)
        got = eng.bounds(e, None if least is None else {e.evaluate(least): least}, clock=q.clock, least=True)
    else:
        known = {v: env for v, env in q.values}
        seen = list(known)
        got = eng.bounds(e, known, clock=q.clock)
    if got is None:
        return None
    lo, hi, w_lo, w_hi = got
    proven = q.proven_or_all()
    if not (proven[0] <= lo <= hi <= proven[1]) or (seen and not lo <= min(seen) <= max(seen) <= hi):
        s.count("presburger_declined")  # disagrees with a proven bound or a known point
        return None
    q.answer(End(lo, True, w_lo), End(hi, True, w_hi))
    return NAME

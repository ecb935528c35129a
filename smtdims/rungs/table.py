"""THE TABLE: every rung, cheapest first, and the questions each answers. Adding a rung is a module
with ``NAME`` and ``answer(question, scope)`` (:mod:`smtdims.rungs.protocol` is all it may ask) and one
line here; the walk (:func:`smtdims.ladder.walk`) is the same for every kind of question.

Three kinds of question walk it: ``decision`` (``decide``, provable ``==``, a rung's own
sub-question: two sides, or one), ``sign`` (JAX's sign questions at a sign precision) and ``bounds``
(both exact ends). A rung answers what it can and returns its name, or None where it does not
apply; the walk stops at the first rung that leaves the question ``done()`` (the last one always
answers).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import cases, constant, intervals, points, presburger, search, solver, stock
from .protocol import Scope

DECISION, SIGN, BOUNDS = "decision", "sign", "bounds"


@dataclass(frozen=True)
class Rung:
    name: str
    answer: Callable[[Any, Scope], str | None]
    kinds: frozenset[str]  # the questions it stands in the ladder of


def _rung(name: str, answer: Callable[[Any, Scope], str | None], *kinds: str) -> Rung:
    return Rung(name, answer, frozenset(kinds))


TABLE: tuple[Rung, ...] = (
    _rung(constant.NAME, constant.answer, DECISION, BOUNDS),
    # sign questions reach the ladder only where the interval rules did not settle them (the cheap path)
    _rung(intervals.NAME, intervals.answer, DECISION),
    _rung(points.NAME, points.answer, DECISION, SIGN, BOUNDS),
    # the host's procedure needs the host's expression: decisions carry none
    _rung(stock.NAME, stock.answer, SIGN),
    # ISL's round trip does not pay off for decisions: the shared linear solver takes a fraction of a millisecond
    _rung(presburger.NAME, presburger.answer, SIGN, BOUNDS),
    # people's bounds that ISL did not answer: known points at proven bounds (the others: closed above)
    _rung(points.NAME, points.attained, BOUNDS),
    _rung(cases.NAME, cases.answer, BOUNDS),
    _rung(solver.NAME, solver.answer, DECISION, SIGN),
    _rung(search.NAME, search.answer, BOUNDS),
)

LADDERS: dict[str, tuple[Rung, ...]] = {kind: tuple(r for r in TABLE if kind in r.kinds) for kind in (DECISION, SIGN, BOUNDS)}

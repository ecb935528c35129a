"""Typed refusals: a refused export is read once into its kinds, in the loop's order;
each kind carries what JAX asked and owns its fixes; the loop dispatches on the type."""

from __future__ import annotations

from smtdims_jax.pipeline.fixes import Attempt, candidates, last_resort, refusal_key
from smtdims_jax.pipeline.refusals import (
    BroadcastMismatch,
    Inconclusive,
    Indivisible,
    UnprovenEquation,
    UnreadableRemainder,
    refusals_of,
)

from smtdims.lang.constraints import ConstraintSet
from smtdims.lang.parser import parse_expr
from smtdims.reasoner import Session

E = parse_expr
BROADCAST = "add got incompatible shapes for broadcasting: (b, 3), (c, 3)."
REMAINDER = "Cannot divide evenly the sizes of shapes (b, 3) and (2, -1). The remainder mod(3*b, 2) should be 0."


def _kinds(refusals) -> list[str]:
    return [type(r).__name__ for r in refusals]


def test_the_kinds_in_the_loops_order():
    q, eqs = (E("a"), E("16")), ((E("b"), E("c")),)
    assert _kinds(refusals_of(q, eqs, BROADCAST)) == ["Inconclusive", "UnprovenEquation", "BroadcastMismatch"]
    assert _kinds(refusals_of(None, (), REMAINDER + "\n" + BROADCAST)) == ["Indivisible", "BroadcastMismatch"]
    assert _kinds(refusals_of(None, (), "int() argument must be ... '_DimExpr'")) == ["ConstantNeeded"]
    # a dimension used as a number is what stopped the export, whatever JAX asked before: its words come
    # first (its fix, a pinned size, is tried before an earlier equation's), the equation after it
    assert _kinds(refusals_of(None, eqs, "requires a constant")) == ["ConstantNeeded", "UnprovenEquation"]
    assert _kinds(refusals_of(q, eqs, "requires a constant")) == ["Inconclusive", "UnprovenEquation"]
    assert refusals_of(None, (), "some other error") == ()
    assert refusals_of(None, (), BROADCAST)[0] == BroadcastMismatch(E("b"), E("c"))
    assert refusals_of(None, (), REMAINDER)[0] == Indivisible(E("3*b"), 2)
    assert refusals_of(None, (), "The remainder mod(b, c) should be 0") == (UnreadableRemainder("mod(b, c)"),)


def test_each_kind_owns_its_fixes():
    s = Session(ConstraintSet.of([]))
    rewrites = [(p.kind, p.text, p.variable) for group, _ in Indivisible(E("3*b"), 2).fixes(s) for p in group]
    assert ("spec", "2*b", "b") in rewrites
    fixes = [(p.kind, p.text, p.variable) for group, _ in BroadcastMismatch(E("b"), E("c")).fixes(s) for p in group]
    assert fixes == [("spec", "c", "b"), ("spec", "b", "c"), ("constraint", "b == c", None)]
    assert Inconclusive(E("a"), E("16")).fixes(s)  # a >= 16 or a < 16 settles it
    assert UnprovenEquation(((E("b"), E("c")),)).fixes(s)


def test_the_loop_dispatches_on_the_first_kind_that_offers_a_fix():
    s = Session(ConstraintSet.of([]))
    err = ValueError(REMAINDER)
    # an equation none of whose fixes exist (2 == 3) falls through to the message's own refusal
    att = Attempt(False, err, equations=((E("2"), E("3")),))
    assert _kinds(att.refusals) == ["UnprovenEquation", "Indivisible"]
    assert candidates(att, s) == Indivisible(E("3*b"), 2).fixes(s)
    assert refusal_key(att) == ("equation", "2 == 3")
    # an unreadable remainder is final: the broadcast after it offers no candidates, only its last resort
    att = Attempt(False, ValueError("The remainder mod(b, c) should be 0\n" + BROADCAST))
    assert candidates(att, s) == [] and refusal_key(att)[0] == "message"
    assert [p.text for group, _ in last_resort(att, s) for p in group] == \
        [p.text for group, _ in BroadcastMismatch(E("b"), E("c")).last_resort(s) for p in group]
    assert Attempt(True).refusals == ()

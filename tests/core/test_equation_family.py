"""The fixes of an equation a Dense built for one image size needs: the family of its one-variable parts
held at a size where it holds, and the size a person pins; both checked against brute force."""

from __future__ import annotations

import itertools

from smtdims.answers.equations import equation_family_fix, fixed_size_fix
from smtdims.lang.constraints import Constraint, ConstraintSet
from smtdims.lang.parser import parse_expr
from smtdims.reasoner import Session

SAME = "16*floordiv(floordiv(-h, 2), 2)*floordiv(floordiv(-w, 2), 2)"  # two stride-2 'same' convs, 16 channels
VALID = "(floordiv(h - 16, 16) + 1)*(floordiv(w - 16, 16) + 1) + 1"  # 16x16 patches and a class token


def _family(lhs: str, rhs: int) -> list[Constraint]:
    parts = equation_family_fix(Session(ConstraintSet.of([])), parse_expr(lhs), parse_expr(str(rhs)))
    assert all(kind == "constraint" for kind, *_ in parts)
    return [Constraint.parse(text) for _, text, _, _ in parts]


def test_the_family_of_two_strided_same_convs_is_every_size_whose_ceilings_give_7():
    family = _family(SAME, 784)
    eq = Constraint.parse(f"{SAME} == 784")
    for h, w in itertools.product(range(1, 61), repeat=2):
        env = {"h": h, "w": w}
        inside = all(c.holds(env) for c in family)
        assert inside == (25 <= h <= 28 and 25 <= w <= 28), env
        assert not inside or eq.holds(env)  # the family implies the equation


def test_the_family_implies_the_equation_of_patch_counts():
    family = _family(VALID, 197)
    eq = Constraint.parse(f"{VALID} == 197")
    for h, w in itertools.product(range(200, 260), repeat=2):
        env = {"h": h, "w": w}
        if all(c.holds(env) for c in family):
            assert eq.holds(env) and 224 <= h <= 239 and 224 <= w <= 239, env


def test_no_family_where_a_part_mixes_variables_or_every_part_is_a_variable():
    assert _family("max(h, w)*4", 64) == []
    assert _family("p*q", 64) == []


def test_the_pinned_size_is_where_every_division_is_exact():
    """28 for the 'same' convs (the size they were built for, not the run's first, 25); 224 for patches."""
    session = Session(ConstraintSet.of([]))
    same = fixed_size_fix(session, parse_expr(SAME), parse_expr("784"))
    assert {text for _, text, _, _ in same} == {"28"}
    valid = fixed_size_fix(session, parse_expr(VALID), parse_expr("197"))
    assert {text for _, text, _, _ in valid} == {"224"}

"""lattice_form against brute force: a rewrite it gives admits exactly the sizes the constraints do."""

from __future__ import annotations

import itertools

import pytest

from smtdims.answers.lattice import lattice_form
from smtdims.lang.constraints import Constraint, ConstraintSet

_FORMS = [
    "mod(h + {c}, {k}) == 0",
    "mod(floordiv(h + {c}, {k}) + {d}, {j}) == 0",
    "{k}*floordiv(h + {c}, {k}) == h + {c}",
    "floordiv(-h + {c}, {k}) == {j}*floordiv(floordiv(-h + {c}, {k}), {j})",
]


def _cases() -> list[list[str]]:
    one = [f.format(c=c, k=k, d=d, j=j) for f in _FORMS for c in (-2, 0, 1, 3) for k in (2, 3, 4)
           for d, j in ((-1, 2), (0, 2), (1, 3))]
    one = list(dict.fromkeys(one))
    pairs = [[a, b] for a, b in itertools.combinations(one[::7], 2)]
    return [[t] for t in one[::3]] + pairs[::5]


@pytest.mark.parametrize("texts", _cases(), ids=lambda t: " & ".join(t))
def test_a_rewrite_admits_exactly_the_sizes_the_constraints_admit(texts):
    got = lattice_form(texts, ConstraintSet.of([]))
    if got is None:
        return  # no class, or not proven: nothing claimed
    v, new = got
    cs = [Constraint.parse(t) for t in texts]
    admitted = {x for x in range(1, 400) if all(c.holds({v: x}) for c in cs)}
    rewritten = {new.evaluate({v: k}) for k in range(1, 400)}
    assert {x for x in rewritten if x < 400} == admitted, (texts, str(new))


@pytest.mark.parametrize(("texts", "want"), [
    (["mod(h, 8) == 0"], "8*h"),
    (["2*floordiv(-k_h, 2) == -k_h"], "2*k_h"),  # k_h even: 2*k_h in a spec reads 4*k_h
    (["mod(floordiv(h - 2, 2) - 1, 2) == 0", "mod(h, 2) == 0"], "4*h"),  # two levels of one U-Net side
    (["mod(h - 3, 4) == 0"], "4*h - 1"),
])
def test_one_residue_class_is_found(texts, want):
    got = lattice_form(texts, ConstraintSet.of([]))
    assert got is not None and str(got[1]) == want, got


@pytest.mark.parametrize("texts", [
    ["floordiv(-h, 2) == 2*floordiv(floordiv(-h, 2), 2)"],  # h in 3, 4, 7, 8, ...: two classes
    ["floordiv(h, 2) == 7"],  # 14 and 15: finite
    ["h >= 16"],  # no division: an interval, not a class
])
def test_no_rewrite_where_no_single_class_is_equivalent(texts):
    assert lattice_form(texts, ConstraintSet.of([])) is None


def test_the_other_constraints_on_the_variable_stay_outside_the_class():
    # a bound is the caller's to keep (k >= 4 after the rewrite), not folded into the class's start
    v, new = lattice_form(["mod(h, 4) == 0"], ConstraintSet.of(["h >= 16", "b >= 2"]))
    assert (v, str(new)) == ("h", "4*h")

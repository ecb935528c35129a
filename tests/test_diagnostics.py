"""check_constraints: minimal conflicting subsets, redundant constraints, fixed variables."""

from __future__ import annotations

import itertools
import json

import pytest

import smtdims
from smtdims.diagnostics import ConstraintReport, check_constraints
from smtdims.errors import PossibleDivisionByZeroError, UnsatisfiableConstraintsError

IMPLICIT = "(dimension variable)"


def _conflict(constraints) -> list[str]:
    with pytest.raises(UnsatisfiableConstraintsError) as info:
        check_constraints(constraints)
    return info.value.conflict


def _satisfiable(constraints) -> bool:
    try:
        check_constraints(constraints)
    except UnsatisfiableConstraintsError:
        return False
    return True


@pytest.mark.parametrize("constraints,expected", [
    (["c >= 5", "a >= 3", "d <= 7", "a <= 2"], {"a >= 3", "a <= 2"}),
    (["a >= b + 1", "e >= 2", "b >= a"], {"a >= b + 1", "b >= a"}),
    (["mod(a, 2) == 1", "b <= 4", "a == 4"], {"mod(a, 2) == 1", "a == 4"}),
    (["a >= 2*b", "b >= 2*c", "c >= a", "d >= 9"], {"a >= 2*b", "b >= 2*c", "c >= a"}),
])
def test_unsatisfiable_names_a_minimal_conflict_as_written(constraints, expected):
    conflict = _conflict(constraints)
    user = {t for t in conflict if not t.endswith(IMPLICIT)}
    assert user == expected
    # minimal: every proper subset of the user part is satisfiable
    for k in range(len(user)):
        for sub in itertools.combinations(sorted(user), k):
            assert _satisfiable(list(sub)), sub


def test_conflict_with_the_implicit_dimension_facts():
    conflict = _conflict(["a + b <= 1", "c >= 2"])
    assert conflict == ["a + b <= 1", "a >= 1 (dimension variable)", "b >= 1 (dimension variable)"]
    msg = str(UnsatisfiableConstraintsError(conflict))
    assert "a + b <= 1" in msg and "Remove or relax one of them" in msg


def test_redundant_constraints_can_all_be_removed_together():
    cons = ["a >= b", "b >= 16", "a >= 10", "a >= 16", "c == 4", "c <= 4", "b >= 16", "b >= 1", "a <= 1000"]
    r = check_constraints(cons)
    redundant = [x.text for x in r.redundant]
    assert redundant == ["a >= 10", "a >= 16", "c <= 4", "b >= 16", "b >= 1"]
    # exactly one of the duplicate 'b >= 16' is reported
    assert redundant.count("b >= 16") == 1
    kept = list(cons)
    for t in redundant:
        kept.remove(t)
    assert sorted(kept) == sorted(["a >= b", "b >= 16", "c == 4", "a <= 1000"])
    for t in redundant:  # the survivors imply every removed constraint
        lhs, op, rhs = smtdims.parse_constraint(t)
        assert smtdims.decide(lhs, op, rhs, constraints=kept).status == "true", t
    # and each implied_by subset alone implies it
    for x in r.redundant:
        user = [t for t in x.implied_by if not t.endswith(IMPLICIT)]
        lhs, op, rhs = smtdims.parse_constraint(x.text)
        assert smtdims.decide(lhs, op, rhs, constraints=user).status == "true", x
    assert next(x for x in r.redundant if x.text == "b >= 1").implied_by == ("b >= 1 (dimension variable)",)
    assert next(x for x in r.redundant if x.text == "a >= 10").implied_by == ("a >= b", "b >= 16")


def test_no_redundancy_and_no_fixed_variables_is_clean():
    r = check_constraints(["a >= b", "b >= 16"])
    assert r.clean and r.redundant == () and r.fixed == {}
    assert r.ranges == {"a": (16, float("inf")), "b": (16, float("inf"))}
    assert r.satisfiable and check_constraints(["a >= b", "b >= 16"]).example is not None
    assert smtdims.ConstraintSet.of(["a >= b", "b >= 16"]).holds(r.example)


@pytest.mark.parametrize("constraints,fixed", [
    (["c == 4", "a >= c"], {"c": 4}),
    (["a >= 3", "a <= 3", "b >= a"], {"a": 3}),
    (["a*b >= 4", "a <= 1"], {"a": 1}),
    (["a + b <= 2"], {"a": 1, "b": 1}),
])
def test_fixed_variables(constraints, fixed):
    r = check_constraints(constraints)
    assert r.fixed == fixed
    assert not r.clean
    for v, k in fixed.items():
        assert smtdims.bounds(v, constraints) == (k, k)


def test_possible_division_by_zero_in_a_constraint():
    with pytest.raises(PossibleDivisionByZeroError):
        check_constraints(["floordiv(a, b - 1) >= 1"])


def test_single_string_is_rejected():
    with pytest.raises(TypeError):
        check_constraints("a >= b")


def test_report_prints_and_serialises():
    r = check_constraints(["a >= b", "a >= b - 3", "c == 2"])
    assert isinstance(r, ConstraintReport)
    text = str(r)
    assert "redundant" in text and "a >= b - 3" in text and "c = 2" in text
    d = json.loads(json.dumps(r.to_dict()))
    assert d["redundant"] == [{"text": "a >= b - 3", "implied_by": ["a >= b"]}]
    assert d["fixed"] == {"c": 2} and d["ranges"]["a"] == [1, "inf"] and d["clean"] is False
    html = r._repr_html_()
    assert "a &gt;= b - 3" in html


def test_empty_set():
    r = check_constraints([])
    assert r.clean and r.ranges == {}


def test_jax_scope_is_accepted_and_texts_are_as_written():
    from jax import export

    scope = export.SymbolicScope(("a >= b", "b >= 16", "a >= 10"))
    r = check_constraints(scope)
    assert [x.text for x in r.redundant] == ["a >= 10"]
    bad = export.SymbolicScope(("a >= 3", "b >= 1", "a <= 2"))
    with pytest.raises(UnsatisfiableConstraintsError) as info:
        check_constraints(bad)
    assert set(info.value.conflict) == {"a >= 3", "a <= 2"}

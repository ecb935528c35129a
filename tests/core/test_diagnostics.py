"""check_constraints: minimal conflicting subsets, redundant constraints, fixed variables."""

from __future__ import annotations

import itertools
import json

import pytest

import smtdims
from smtdims.answers.diagnostics import ConstraintReport, check_constraints
from smtdims.errors import UnsatisfiableConstraintsError

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
    msg = str(UnsatisfiableConstraintsError.from_conflict(conflict))
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
    # one rule everywhere: the constraint holds where its divisor is nonzero, as in bounds
    # and decide; the report names the divisor (before: PossibleDivisionByZeroError)
    r = check_constraints(["floordiv(a, b - 1) >= 1"])
    assert r.satisfiable and r.self_guarded == ("b - 1",) and r.ranges["b"] == (2, float("inf"))


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


@pytest.mark.needs_jax
def test_jax_scope_is_accepted_and_texts_are_as_written():
    from jax import export

    scope = export.SymbolicScope(("a >= b", "b >= 16", "a >= 10"))
    r = check_constraints(scope)
    assert [x.text for x in r.redundant] == ["a >= 10"]
    bad = export.SymbolicScope(("a >= 3", "b >= 1", "a <= 2"))
    with pytest.raises(UnsatisfiableConstraintsError) as info:
        check_constraints(bad)
    assert set(info.value.conflict) == {"a >= 3", "a <= 2"}


# -- a constraint that keeps a divisor nonzero, in either order -----------------------------------------
@pytest.mark.parametrize("constraints", [
    ["floordiv(a, b - 2) >= 1", "b >= 3"],
    ["b >= 3", "floordiv(a, b - 2) >= 1"],
])
def test_a_divisor_guard_is_never_redundant_in_either_order(constraints):
    r = check_constraints(constraints)  # raised PossibleDivisionByZeroError in the first order
    assert r.satisfiable is True and r.redundant == ()
    assert r.ranges["b"] == (3, float("inf"))


def test_a_divisor_guard_among_redundant_constraints():
    # b >= 5 makes b >= 3 redundant (the guard stays, through b >= 5), and mod's divisor is b
    r = check_constraints(["mod(a, b - 2) == 1", "b >= 3", "b >= 5"])
    assert [x.text for x in r.redundant] == ["b >= 3"]
    r = check_constraints(["b >= 5", "mod(a, b - 2) == 1", "b >= 3"])
    assert [x.text for x in r.redundant] == ["b >= 3"]


def test_a_divisor_left_unguarded_by_the_others_is_named_in_every_order():
    for cons in (["floordiv(a, b - 1) >= 1", "a >= 2"], ["a >= 2", "floordiv(a, b - 1) >= 1"]):
        r = check_constraints(cons)
        assert r.self_guarded == ("b - 1",) and "b - 1" in str(r) and r.to_dict()["self_guarded"] == ["b - 1"]
    assert check_constraints(["floordiv(a, b - 1) >= 1", "b >= 2"]).self_guarded == ()


# -- scale: one incremental solver, points and propagation first ----------------------------------------
def test_chain_of_200_constraints_scales():
    """``x{i+1} >= x{i} + 1`` for 200 i: before, a session and a solver per constraint and one
    bounds question per variable (8.6-50 s); now the points refute every redundancy candidate and
    propagation gives every range, so almost no solver check runs."""
    import time

    cons = [f"x{i + 1} >= x{i} + 1" for i in range(200)]
    smtdims.reset_stats()
    t0 = time.monotonic()
    r = check_constraints(cons)
    elapsed = time.monotonic() - t0
    st = smtdims.stats()
    assert r.redundant == () and r.fixed == {} and r.reason == ""
    assert r.ranges["x0"] == (1, float("inf")) and r.ranges["x200"] == (201, float("inf"))
    assert st["solver_checks"] <= 10 and st["solvers_created"] <= 5, st
    assert elapsed < 20, elapsed  # generous: about 0.5 s here, loaded


_RANDOM_SETS = [
    ["a >= b", "b >= 3", "a >= 2", "a <= 40", "mod(a, 4) == 0"],
    ["max(a, b) <= c + 2", "c <= 9", "a >= 3", "a <= 11"],
    ["min(a, b) >= 4", "b <= 6", "a + b <= 12", "a >= 2"],
    ["a + b == 10", "a >= 3", "b >= 2", "a <= 8"],
    ["mod(a + b, 3) == 1", "a <= 5", "b <= 5", "a >= b"],
    ["floordiv(a, 2) >= b", "b >= 2", "a <= 17", "a >= 4"],
    ["a >= 2*b + 1", "b >= c", "c >= 2", "a <= 20", "a >= 5"],
    ["a == 2*c", "c <= 4", "b >= a", "b <= 8", "a >= 2"],
]


@pytest.mark.parametrize("constraints", _RANDOM_SETS)
def test_ranges_and_redundancy_agree_with_the_ladder(constraints):
    """Ranges against bounds() of each variable (the ladder); each redundant constraint is
    implied by the survivors and each kept one is not implied by the other survivors (decide)."""
    r = check_constraints(constraints)
    for v, rng in r.ranges.items():
        assert rng == tuple(smtdims.bounds(v, constraints)), v
    kept = list(constraints)
    for x in r.redundant:
        kept.remove(x.text)
    for t in constraints:
        lhs, op, rhs = smtdims.parse_constraint(t)
        status = smtdims.decide(lhs, op, rhs, constraints=[k for k in kept if k != t] if t in kept else kept).status
        assert (status == "true") == (t not in kept), t


def test_a_check_stopped_by_its_deadline_says_so_and_quotes_it():
    """At 200 variables / 500 constraints the whole check takes longer than 0.5 s: the report is
    sound but incomplete, says which limit stopped it, and quotes the per-call deadline."""
    import sys
    import time
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from benchmarks.corpus import scale_constraints

    _, cons, _ = scale_constraints(200, 500)
    t0 = time.monotonic()
    r = check_constraints(cons, deadline=0.5)
    assert time.monotonic() - t0 < 0.5 + 3  # within the deadline, generously
    assert r.reason == "deadline" and r.deadline == 0.5
    text = str(r)
    assert ("incomplete" if r.satisfiable else "satisfiability unknown") in text  # a slow machine may stop sooner
    assert "deadline (0.5 s" in text and "(10 s" not in text
    assert r.to_dict()["deterministic"] is False
    kept = [c for c in cons if c not in {x.text for x in r.redundant}]
    for x in r.redundant[:3]:  # what it did report is true
        lhs, op, rhs = smtdims.parse_constraint(x.text)
        assert smtdims.decide(lhs, op, rhs, constraints=kept).status == "true", x

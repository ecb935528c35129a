"""Public API contract: bounds, decide, their values and errors. At JAX's seam (install/uninstall,
answers inside JAX, stats): tests/jax/test_install.py."""

from __future__ import annotations

import math
import pickle

import pytest

import smtdims
from smtdims.errors import ParseError, PossibleDivisionByZeroError, UnsatisfiableConstraintsError

LOOSE = ("4*d == a - m", "m >= 0", "m <= 3")


def test_bounds_value_object():
    b = smtdims.bounds("2*batch + 1", constraints=("batch >= 128", "batch <= 1024"))
    lo, hi = b
    assert (lo, hi) == (257, 2049) and b == (257, 2049)
    assert b.lo_tight and b.hi_tight and b.tight
    assert 2 * b.lo_witness["batch"] + 1 == 257 and 2 * b.hi_witness["batch"] + 1 == 2049
    assert "tight" in b.describe() and "<table>" in b._repr_html_()
    assert b.to_dict()["hi"] == 2049
    assert pickle.loads(pickle.dumps(b)) == b
    with pytest.raises(AttributeError):
        b.lo = 3


def test_bounds_unbounded_is_tight_infinity():
    b = smtdims.bounds("free")
    assert b == (1, math.inf) and b.hi_tight and b.hi_witness is None
    assert b.to_dict()["hi"] == "inf"


@pytest.mark.parametrize(
    "expr,expected",
    [("a - 2*d", (3, math.inf)), ("a", (5, math.inf)), ("m", (1, 3)), ("mod(a, 4)", (1, 3))],
)
def test_jax_documented_looseness_is_gone(expr, expected):
    assert smtdims.symbolic_dim_bounds(expr, constraints=LOOSE) == expected


def test_max_min_identity_is_exact():
    assert smtdims.symbolic_dim_bounds("max(a, b) - a - max(b - a, 0)") == (0, 0)


def test_decide_statuses():
    assert smtdims.decide("b", ">=", "mod(b, 3)").status == "true"
    assert smtdims.decide("b", "<", "mod(b, 3)").status == "false"
    d = smtdims.decide("a + 1 >= b")
    assert d.status == "undetermined" and d.value is None
    wt, wf = d.witness_true, d.witness_false
    assert wt["a"] + 1 >= wt["b"] and not (wf["a"] + 1 >= wf["b"])
    assert smtdims.decide("a", ">=", 9, constraints=["a - b >= 8"]).value is True
    assert smtdims.decide("a", "!=", "a + 1").value is True
    with pytest.raises(TypeError, match="three-valued"):
        bool(d)


def test_decide_rejects_unknown_operator():
    with pytest.raises(ValueError, match="unknown comparison"):
        smtdims.decide("a", "=>", "b")


def test_python_semantics_of_negative_divisors():
    # Python: 7 // -2 == -4, 7 % -2 == -1; Z3's Euclidean div/mod would say -3 and 1.
    assert smtdims.symbolic_dim_bounds("floordiv(a, -2)", constraints=("a == 7",)) == (-4, -4)
    assert smtdims.symbolic_dim_bounds("mod(a, -2)", constraints=("a == 7",)) == (-1, -1)
    assert smtdims.symbolic_dim_bounds("mod(a, 0 - b)", constraints=("a == 7", "b == 2")) == (-1, -1)
    assert smtdims.symbolic_dim_bounds("floordiv(a, 0 - b)", constraints=("a == 7", "b == 2")) == (-4, -4)


def test_division_by_possibly_zero_divisor_is_an_error():
    with pytest.raises(PossibleDivisionByZeroError, match="'b - 2'"):
        smtdims.bounds("floordiv(a, b - 2)")
    assert smtdims.bounds("floordiv(a, b - 2)", constraints=("b >= 3",)).lo == 0


def test_unsatisfiable_constraints_name_the_conflict():
    with pytest.raises(UnsatisfiableConstraintsError) as info:
        smtdims.decide("a", ">=", 1, constraints=("a >= 10", "b >= 1", "a <= 5"))
    assert sorted(info.value.conflict) == ["a <= 5", "a >= 10"]


def test_parse_errors_point_at_the_input():
    with pytest.raises(ParseError) as info:
        smtdims.bounds("2*b + ")
    assert info.value.position == 6
    with pytest.raises(ParseError, match="integers"):
        smtdims.bounds("2.5*b")
    with pytest.raises(TypeError, match="sequence of strings"):
        smtdims.bounds("b", constraints="b >= 1")


def test_nonlinear_bounds_are_sound_and_tight_when_found():
    b = smtdims.bounds("a*b - a", constraints=("a <= 4", "b <= 3"))
    assert b == (0, 8) and b.tight
    assert smtdims.decide("a*a", ">=", "2*a - 1").status == "true"


def test_variables_first_met_in_later_queries_keep_their_lower_bound():
    # Regression: v >= 1 for a variable first encoded by bounds() never reached the shared
    # incremental solver, so a later decision saw c <= 0 and came back "unknown".
    from smtdims.lang.constraints import ConstraintSet
    from smtdims.reasoner import Session

    s = Session(ConstraintSet.of(["a <= 100"]))
    assert s.decide(smtdims.parse_expr("a"), ">=", smtdims.parse_expr("3")).status == "undetermined"
    assert s.bounds(smtdims.parse_expr("c + a")) == (2, math.inf)
    assert s.decide(smtdims.parse_expr("c"), ">=", smtdims.parse_expr("1")).status == "true"
    assert s.decide(smtdims.parse_expr("c"), ">=", smtdims.parse_expr("2")).status == "undetermined"


def test_decision_to_dict_is_plain_data():
    import json

    d = smtdims.decide("a + 1 >= b")
    assert json.loads(json.dumps(d.to_dict()))["status"] == "undetermined"


def test_unknown_operation_is_named():
    with pytest.raises(ParseError, match="unknown operation 'foo'"):
        smtdims.bounds("foo(a, 2)")


def test_queries_assert_only_the_axioms_they_need():
    # Regression: one nonlinear query's definitions (x == y*q + r) used to be asserted in
    # every later query, making linear ones nonlinear (a 240-query JAX test went 0.3 s -> 8 min).
    from smtdims.lang.constraints import ConstraintSet
    from smtdims.lang.expr import Op
    from smtdims.reasoner import Session

    p = smtdims.parse_expr
    history = Session(ConstraintSet.of(["a <= 50"]))
    fresh = Session(ConstraintSet.of(["a <= 50"]))
    for e in ("mod(a + 12, a + 4)", "floordiv(a*a, a + 1)", "mod(b, a)"):
        history.bounds(p(e))
    expected = (-5, 19)  # floor((a - 11) / 2), a in 1..50
    assert history.bounds(p("floordiv(-a + 11, -2)")) == fresh.bounds(p("floordiv(-a + 11, -2)")) == expected
    assert history.bounds(p("mod(a, a + 3)")) == fresh.bounds(p("mod(a, a + 3)"))
    shared = history.scope.solver._shared_atoms  # private: what the shared solver holds (z3side.py has no reader)
    assert not any(isinstance(x, Op) and not x.rhs.is_constant and x.op in ("mod", "floordiv") for x in shared)


# -- the limit quoted is the one in force for that call ----------------------------------------------------
_HARD = "a*a - 2*a*b + b*b >= 0"


def test_a_per_call_budget_is_quoted_not_the_default():
    d = smtdims.decide(_HARD, budget=50)
    assert d.status == "unknown" and d.reason == "budget" and d.budget == 50
    assert "rlimit 50 per check" in d.describe() and "5000000" not in d.describe()
    assert d.to_dict()["budget"] == 50 and d.to_dict()["deterministic"] is True


def test_a_per_call_budget_beats_the_installed_default_in_the_text():
    old = smtdims.options.current()
    smtdims.options.set_defaults(budget=20_000_000)
    try:
        d = smtdims.decide(_HARD, budget=50)
        assert "rlimit 50 per check" in d.describe() and "20000000" not in d.describe()
        assert "rlimit 50 per check" in str(d.explain())
    finally:
        smtdims.options.set_defaults(budget=old.budget)


_SLOW = ("a*a*b - c*c*d + 7*a*b*c", ("a*b*c <= 1000", "c*d >= 3*a"))


def test_a_per_call_deadline_is_quoted_and_named_as_the_deadline():
    b = smtdims.bounds(_SLOW[0], _SLOW[1], deadline=0.01)
    assert not b.tight and b.deterministic is False and b.reason == "deadline" and b.deadline == 0.01
    assert "deadline (0.01 s" in b.advice and "--deadline SECONDS" in b.advice and "run out of budget" not in b.advice
    d = b.to_dict()
    assert d["reason"] == "deadline" and d["deterministic"] is False
    dec = smtdims.decide(_SLOW[0], ">=", "0", _SLOW[1], deadline=0.01)
    if dec.status == "unknown":  # the deadline may also leave witnesses of both sides: undetermined
        assert dec.reason == "deadline" and "(0.01 s" in dec.describe() and "(10 s)" not in dec.describe()
        assert dec.to_dict()["deterministic"] is False


def test_a_bound_left_loose_by_the_budget_says_so():
    b = smtdims.bounds(_SLOW[0], _SLOW[1], budget=50)
    assert not b.tight and b.deterministic and b.reason == "incomplete" and b.budget == 50
    assert "rlimit 50 per check" in b.advice and "deadline" not in b.advice
    assert smtdims.bounds("2*b + 1").reason == "" and smtdims.bounds("2*b + 1").advice == ""


def test_a_constraint_set_copies_and_pickles_after_questions():
    """A set asked about holds derived facts (ranges, points: locks, read-only views); copies and
    pickles carry its constraints alone, equal and as usable as the original."""
    import copy

    from smtdims import ConstraintSet

    cs = ConstraintSet.of(("a >= b + 2", "a <= 10"))
    before = smtdims.bounds("a - b", cs)
    assert (before.lo, before.hi) == (2, 9)
    for twin in (pickle.loads(pickle.dumps(cs)), copy.deepcopy(cs), copy.copy(cs)):
        assert twin == cs and hash(twin) == hash(cs) and str(twin) == str(cs)
        assert (smtdims.bounds("a - b", twin).lo, smtdims.bounds("a - b", twin).hi) == (2, 9)

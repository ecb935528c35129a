"""Exactness on the Presburger fragment, against ISL as an independent exact oracle.

Linear expressions with floordiv/mod by constants and max/min, under linear
constraints, are decidable: smtdims' bounds must equal ISL's integer min/max (infinite
ends included), both ends marked tight, each finite end with a witness that attains it,
and every decision must be ISL's three-valued answer (never "unknown").

The ISL oracle is itself checked against brute force where the domain is a finite box
(every variable bounded), so that a bug in the oracle cannot hide one in smtdims.
"""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import HealthCheck, given, settings

from smtdims import options
from smtdims.errors import UnsatisfiableConstraintsError
from smtdims.lang.constraints import ConstraintSet
from smtdims.lang.parser import parse_expr
from smtdims.reasoner import Session
from tests import strategies as S
from tests.properties import oracle as O

SETTINGS = dict(
    deadline=None, derandomize=True, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
CHUNK = 25


def _exact_problems(case: S.Case) -> list[str]:
    out = O.run_smtdims(case, exact=True)
    return [f"{case.describe()}\n  {q}: {k}: {m}" for q, k, m in out.problems
            if k in O.UNSOUND_KINDS | O.CRASH_KINDS | O.INEXACT_KINDS]


@settings(max_examples=40, **SETTINGS)
@given(S.cases(S.GenConfig(linear=True)))
def test_presburger_bounds_and_decisions_equal_isl(case):
    bad = _exact_problems(case)
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("engine", ["isl-rung", "z3-only"])
@pytest.mark.parametrize("chunk", range(6))
def test_presburger_random_batch_equals_isl(chunk, engine):
    # with the ISL rung on, most bounds come from ISL itself: the same cases with the rung off
    # keep Z3's own exact path measured against the oracle
    bad = []
    with options.scoped(presburger=engine == "isl-rung"):
        for i in range(chunk * CHUNK, (chunk + 1) * CHUNK):
            # (large coefficients: test_soundness' "big" batch checks them against ISL too)
            case = S.random_case(random.Random(f"exact-{i}"), S.GenConfig(linear=True, big=0.0))
            bad += [f"[exact-{i}] {b}" for b in _exact_problems(case)]
    assert not bad, "\n".join(bad)


def _boxed(case: S.Case, size: int) -> S.Case:
    """The case with every variable also bounded by ``size``: the grid is then the whole domain."""
    box = tuple((S.var(v), "<=", S.const(size)) for v in case.all_vars())
    return S.Case(case.vars, case.expr, case.constraints + box, case.op, case.rhs)


@pytest.mark.parametrize("chunk", range(3))
def test_isl_oracle_agrees_with_brute_force_on_boxes(chunk):
    """On a bounded domain brute force is exact: ISL and smtdims must both match it."""
    bad = []
    for i in range(chunk * CHUNK, (chunk + 1) * CHUNK):
        raw = S.random_case(random.Random(f"box-{i}"), S.GenConfig(linear=True, big=0.0))
        case = _boxed(raw, S.grid_size(len(raw.all_vars())))
        grid = O.Grid.of(case)
        exact = O.isl_bounds(case)
        rng = grid.value_range()
        if rng is None or any(v is O.DIV0 for v in grid.values):
            assert exact is None or not grid.feasible, case.describe()
            continue
        if exact != rng:
            bad.append(f"[box-{i}] ISL {exact} vs brute force {rng}: {case.describe()}")
        truth = {(True, False): "true", (False, True): "false", (True, True): "undetermined"}[(
            any(O.relation(case.op, v, r) for v, r in zip(grid.values, grid.rhs_values)),
            any(not O.relation(case.op, v, r) for v, r in zip(grid.values, grid.rhs_values)))]
        if O.isl_decide(case) != truth:
            bad.append(f"[box-{i}] ISL says {O.isl_decide(case)}, brute force {truth}: {case.describe()}")
        b = Session(ConstraintSet.of(case.constraint_texts)).bounds(parse_expr(case.expr_text))
        if (b.lo, b.hi) != rng:
            bad.append(f"[box-{i}] smtdims {(b.lo, b.hi)} vs brute force {rng}: {case.describe()}")
    assert not bad, "\n".join(bad)


def test_isl_oracle_sees_through_empty_disjuncts():
    """Regression for the oracle: isl_set_max_val answers 0 on a set with an empty disjunct."""
    e = S.atom_poly(("min", S.add(S.scale(S.var("b"), 4), S.scale(S.var("d"), 68), S.const(11)),
                     S.scale(S.var("c"), -46)))
    case = S.Case(("b", "c", "d"), e)
    assert O.isl_bounds(case) == (-math.inf, -46)


# -- the documented examples: JAX's looseness is gone and ISL agrees ----------------------------------------
@pytest.mark.parametrize("expr,constraints,expected", [
    ("a - 2*d", ("4*d == a - m", "m >= 0", "m <= 3"), (3, math.inf)),
    ("a", ("4*d == a - m", "m >= 0", "m <= 3"), (5, math.inf)),
    ("max(a, b) - a - max(b - a, 0)", (), (0, 0)),
    ("mod(b, 3)", (), (0, 2)),
    ("b - mod(b, 3)", (), (0, math.inf)),
    ("2*batch + 1", ("batch >= 128", "batch <= 1024"), (257, 2049)),
    ("floordiv(a, -3) + mod(a, -3)", ("a <= 10",), (-6, -1)),
    ("min(a, 5) - max(b, 7)", ("a >= b",), (-math.inf, -2)),
    ("min(a, 5) - max(b, 7)", ("b >= a",), (-math.inf, -2)),
    ("min(a, 5) - max(b, 7)", ("b <= 9",), (-8, -2)),
])
def test_documented_examples_are_exact(expr, constraints, expected):
    b = Session(ConstraintSet.of(constraints)).bounds(parse_expr(expr))
    assert (b.lo, b.hi) == expected
    assert b.lo_tight and b.hi_tight
    names = sorted(parse_expr(expr).variables() | ConstraintSet.of(constraints).variables())
    for val, w in ((b.lo, b.lo_witness), (b.hi, b.hi_witness)):
        if not math.isinf(val):
            assert w is not None and ConstraintSet.of(constraints).holds({**{n: 1 for n in names}, **w})
            assert parse_expr(expr).evaluate({**{n: 1 for n in names}, **w}) == val


def test_unsatisfiable_presburger_constraints_agree_with_isl():
    case = S.Case(("a", "b"), S.var("a"), ((S.add(S.scale(S.var("a"), 2), S.scale(S.var("b"), -2)), "==", S.const(1)),))
    assert O.isl_bounds(case) is None  # 2a - 2b == 1 has no integer solution
    with pytest.raises(UnsatisfiableConstraintsError):
        Session(ConstraintSet.of(case.constraint_texts)).bounds(parse_expr("a"))


def test_the_search_starts_from_the_gates_point_where_no_guess_holds(monkeypatch):
    """Where none of the guesses holds, the search's first attained value is the satisfiability
    gate's point (already checked), not one more solver check with no facts of its own; every end is
    still exact (brute force over the finite box) with a witness that attains it."""
    from smtdims.scope import ConstraintScope

    factless = []
    check = ConstraintScope.check

    def spy(self, build, *exprs, ask):
        try:
            factless.append(build(None) == [])  # a check with facts reads the encoder
        except AttributeError:
            factless.append(False)
        return check(self, build, *exprs, ask=ask)

    monkeypatch.setattr(ConstraintScope, "check", spy)
    texts = ("mod(a, 7) == 3", "a >= 20", "a <= 60", "b >= a + 5", "b <= 70", "mod(b + a, 5) == 2", "c >= b - a")
    cs = ConstraintSet.of(texts)
    box = [{"a": a, "b": b, "c": c} for a in range(1, 61) for b in range(1, 71) for c in range(1, 72)]
    box = [p for p in box if cs.holds(p)]
    rng = random.Random(4421)
    with options.scoped(presburger=False):
        for _ in range(12):
            ka, kb, kc = (rng.randint(-3, 3) for _ in range(3))
            e = parse_expr(f"{ka}*a + {kb}*b + {kc}*c")
            s = Session(cs)
            b = s.bounds(e)
            assert not s.scope.points.base  # the case this tests: no guess holds, the gate's point did
            assert s.scope.first_point() is None and s.any_point() is not None
            values = [e.evaluate(p) for p in box]
            lo = min(values) if kc >= 0 else -math.inf  # c is unbounded above; a and b are not
            hi = max(values) if kc <= 0 else math.inf
            assert (b.lo, b.hi, b.lo_tight, b.hi_tight) == (lo, hi, True, True), str(e)
            for val, w in ((b.lo, b.lo_witness), (b.hi, b.hi_witness)):
                if not math.isinf(val):
                    assert cs.holds(w) and e.evaluate(w) == val
            assert factless and not any(factless[1:]), factless  # the gate's own check comes first
            factless.clear()

"""Scopes whose satisfiability the solver cannot decide claim no valuation.

A tight end, a witness and "undetermined" each claim that some valuation meets every constraint.
The ladder answers a question on its cone of influence (the constraints sharing its variables),
which is exact only when the whole scope is satisfiable. When the satisfiability gate's check says
unknown (``a^3 + b^3 == c^3`` has no solution in positive integers, and Z3 cannot prove it), the
bounds and true/false answers still hold (vacuously if no valuation exists), but a claim of a
valuation must rest on a whole valuation re-checked against every constraint.

The property test plants such a part (fresh variables, satisfiability known here) next to a random
case (``strategies.cases``) and re-checks every claim with exact Python arithmetic.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import smtdims
from smtdims.clocks import REASON_SATISFIABILITY
from smtdims.errors import PossibleDivisionByZeroError, UnsatisfiableConstraintsError
from smtdims.lang.constraints import ConstraintSet
from smtdims.lang.parser import parse_expr
from smtdims.reasoner import Session
from tests import strategies as S
from tests.properties import oracle as O

FERMAT = ["a*a*a + b*b*b == c*c*c", "x <= 5"]

SETTINGS = dict(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


# -- the report's case -------------------------------------------------------------------------------
def test_fermat_bounds_claim_no_valuation():
    b = smtdims.bounds("x", constraints=FERMAT)
    assert (b.lo, b.hi) == (1, 5)  # sound: vacuously, as no valuation meets the constraints
    assert not b.lo_tight and not b.hi_tight
    assert b.lo_witness is None and b.hi_witness is None
    assert b.reason.startswith(REASON_SATISFIABILITY)
    assert b.deterministic  # the budget, not a clock, left it unknown
    assert "whether any valuation meets all the constraints is unknown" in str(b.explain())


def test_fermat_constant_is_not_claimed_attained():
    b = smtdims.bounds("3", constraints=FERMAT)
    assert (b.lo, b.hi) == (3, 3) and not b.tight and b.lo_witness is None
    assert b.reason.startswith(REASON_SATISFIABILITY)
    assert smtdims.bounds("3", constraints=["x <= 5"]).tight


def test_fermat_decisions_claim_no_valuation():
    d = smtdims.decide("x", ">=", 3, constraints=FERMAT)
    assert d.status == "unknown"  # not "undetermined": its witnesses would meet only x <= 5
    assert d.witness_true is None and d.witness_false is None
    assert d.reason.startswith(REASON_SATISFIABILITY)
    assert "whether any valuation meets all the constraints is unknown" in d.describe()
    # true/false answers still hold (vacuously if no valuation exists), without witnesses
    assert smtdims.decide("x", ">=", 1, constraints=FERMAT).status == "true"
    f = smtdims.decide("x", ">=", 7, constraints=FERMAT)
    assert f.status == "false" and f.witness_false is None


def test_fermat_answers_are_stable():
    """The unknown gate is recorded per scope (deterministic): asked again, in another order, the same."""
    s = Session(ConstraintSet.of(FERMAT))
    x, c3 = parse_expr("x"), parse_expr("3")
    first = (s.bounds(x), s.decide(x, ">=", c3))
    s2 = Session(ConstraintSet.of(FERMAT))
    second = (s2.decide(x, ">=", c3), s2.bounds(x))
    assert first[0] == second[1] and first[0].tight == second[1].tight == False  # noqa: E712
    assert first[1] == second[0]


def test_satisfiable_scope_keeps_its_claims():
    b = smtdims.bounds("x", constraints=["x <= 5", "y*y == 4*z"])
    assert b.tight and b.lo_witness is not None and b.hi_witness is not None
    for w, end in ((b.lo_witness, 1), (b.hi_witness, 5)):
        assert w["x"] == end and w["y"] ** 2 == 4 * w["z"]
    d = smtdims.decide("x", ">=", 3, constraints=["x <= 5", "y*y == 4*z"])
    assert d.status == "undetermined"


def test_witness_proving_the_scope_is_kept():
    """A witness that, completed, meets every constraint proves satisfiability itself: kept."""
    # the rule every answer's witnesses go through, checked on witnesses no public call hands it
    def claimed(s: Session, *witnesses):
        return s.scope.gate.claimed(*witnesses)

    s = Session(ConstraintSet.of(FERMAT))
    s.ensure_satisfiable()
    assert not s.sat_proven
    ok, (w,) = claimed(s, {"x": 1, "a": 1, "b": 1, "c": 1})  # misses a^3 + b^3 == c^3
    assert not ok and w is None
    # 7^3 + 10^3 == 11^3 + 12; at a budget of 1 the gate's check says unknown (deterministic: not asked again)
    s2 = Session(ConstraintSet.of(["a*a*a + b*b*b == c*c*c + 12", "x <= 5"]), budget=1)
    s2.ensure_satisfiable()
    assert not s2.sat_proven and s2.scope.points.base == []  # no point known
    ok, (w, other) = claimed(s2, {"x": 2, "a": 7, "b": 10, "c": 11}, {"x": 5})
    assert ok and w == {"x": 2, "a": 7, "b": 10, "c": 11}
    assert other == {"x": 5, "a": 7, "b": 10, "c": 11}  # completed from the proving valuation


# -- property: every claim re-checked against every constraint -----------------------------------------
# A part on fresh variables whose satisfiability is known here, each hard for Z3 at a small budget.
HARD = [
    (["fa*fa*fa + fb*fb*fb == fc*fc*fc"], lambda e: e["fa"] ** 3 + e["fb"] ** 3 == e["fc"] ** 3, False),
    (["fa*fa == 2*fb*fb"], lambda e: e["fa"] ** 2 == 2 * e["fb"] ** 2, False),
    (["fa*fa*fa + fb*fb*fb == fc*fc*fc + 12"], lambda e: e["fa"] ** 3 + e["fb"] ** 3 == e["fc"] ** 3 + 12, True),
    (["fa*fb == 6"], lambda e: e["fa"] * e["fb"] == 6, True),
]
HARD_VARS = ("fa", "fb", "fc")
BUDGET = 20_000


def _meets_all(case: S.Case, hard, w) -> str | None:
    """Why ``w`` is not a whole valuation meeting every constraint, or None (exact arithmetic)."""
    texts, pred, _ = hard
    if not isinstance(w, dict):
        return f"{w!r} is not a valuation"
    hard_vars = {v for v in HARD_VARS if any(v in t for t in texts)}
    constrained = {v for l, _, r in case.constraints for v in S.variables(l) | S.variables(r)} | hard_vars
    if missing := constrained - w.keys():  # a variable of the question alone may be left out (any value)
        return f"{w} leaves out constrained variables {sorted(missing)}"
    env = {**dict.fromkeys(case.all_vars(), 1), **w}
    if not O.holds(case, env):
        return f"{w} violates {case.constraint_texts}"
    if not pred(env):
        return f"{w} violates {texts}"
    return None


def _value_is(case: S.Case, p: tuple, w: dict[str, int], want) -> bool:
    env = {**dict.fromkeys(case.all_vars(), 1), **w}
    try:
        v = O.evaluate(p, env)
    except ZeroDivisionError:
        return False
    return want(v) if callable(want) else v == want


def _claims_ok(case: S.Case, hard) -> list[str]:
    texts, _, satisfiable = hard
    cs = ConstraintSet.of(list(case.constraint_texts) + texts)
    e, r = parse_expr(case.expr_text), parse_expr(case.rhs_text)
    s = Session(cs, budget=BUDGET)
    bad: list[str] = []
    try:
        b = s.bounds(e)
    except UnsatisfiableConstraintsError:
        pass
    except PossibleDivisionByZeroError as err:
        if err.witness is not None and (why := _meets_all(case, hard, err.witness)):
            bad.append(f"zero divisor witness: {why}")
    else:
        for end, value, tight, w in (("lo", b.lo, b.lo_tight, b.lo_witness), ("hi", b.hi, b.hi_tight, b.hi_witness)):
            if not satisfiable and tight:
                bad.append(f"{end} = {value} claimed tight in a scope no valuation meets")
            if w is not None:
                if why := _meets_all(case, hard, w):
                    bad.append(f"{end} witness: {why}")
                elif not math.isinf(value) and not _value_is(case, case.expr, w, value):
                    bad.append(f"{end} witness {w} does not give {value}")
            elif tight and not math.isinf(value):
                bad.append(f"{end} = {value} claimed tight with no witness")
    try:
        d = s.decide(e, case.op, r)
    except (UnsatisfiableConstraintsError, PossibleDivisionByZeroError):
        return bad
    if not satisfiable and d.status == "undetermined":
        bad.append("undetermined in a scope no valuation meets")
    diff = S.add(case.expr, S.scale(case.rhs, -1))
    for name, w, want in (("witness_true", d.witness_true, True), ("witness_false", d.witness_false, False)):
        if w is None:
            if d.status == "undetermined":
                bad.append(f"undetermined without {name}")
            continue
        if why := _meets_all(case, hard, w):
            bad.append(f"{name}: {why}")
        elif not _value_is(case, diff, w, lambda v, want=want: O.relation(case.op, v, 0) == want):
            bad.append(f"{name} {w} does not give {want}")
    return bad


@settings(max_examples=60, **SETTINGS)
@given(S.cases(S.GenConfig(linear=None, max_depth=1, max_vars=3)), st.sampled_from(HARD))
def test_every_claim_meets_every_constraint(case, hard):
    bad = _claims_ok(case, hard)
    assert not bad, f"{case.describe()} + {hard[0]}:\n  " + "\n  ".join(bad)


@pytest.mark.parametrize("i", range(30))
def test_every_claim_meets_every_constraint_seeded(i):
    import random

    rng = random.Random(f"unproven-{i}")
    case = S.random_case(rng, S.GenConfig(linear=True, max_vars=3))
    hard = HARD[i % len(HARD)]
    bad = _claims_ok(case, hard)
    assert not bad, f"{case.describe()} + {hard[0]}:\n  " + "\n  ".join(bad)

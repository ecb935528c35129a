"""Rewrites that make solver questions cheaper must not change their meaning.

* ``Constraint.parts``: splitting ``max(x, y) <= z`` into ``x <= z and y <= z`` (and
  ``min(x, y) >= z`` likewise) is checked against the original constraint on brute-force
  grids of random constraints (every valuation where the original is defined).
* the fast linear solver: a check it cannot finish goes to the default solver.
* ``rays.Recession``: the LP over the constraints' recession cone proposes directions; a
  proposal is used only after ``rays.unbounded_below`` checked it exactly, and the case here
  is one where the fixed directions ``find_ray`` tries all fail.
"""

from __future__ import annotations

import itertools
import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from smtdims import ConstraintSet, bounds, clocks, options, parse_expr
from smtdims.clocks import REASON_DEADLINE
from smtdims.lang.constraints import MAX_PARTS, Constraint
from smtdims.rungs import rays
from tests import strategies as S

SETTINGS = dict(deadline=None, derandomize=True, database=None, max_examples=300,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _grid(names, size):
    for pt in itertools.product(range(1, size + 1), repeat=len(names)):
        yield dict(zip(names, pt))


@settings(**SETTINGS)
@given(S.cases(S.GenConfig(max_vars=3, max_constraints=3, planted=0.5)))
def test_parts_hold_exactly_where_the_constraint_holds(case: S.Case):
    for text in case.constraint_texts:
        c = Constraint.parse(text)
        parts = c.parts()
        assert 1 <= len(parts) <= MAX_PARTS
        names = sorted(c.diff.variables()) or ["a"]
        for env in _grid(names, S.grid_size(len(names))):
            try:
                want = c.holds(env)
            except ZeroDivisionError:
                continue  # a constraint holds only where its divisors are nonzero: the encoder adds that
            assert all(p.holds(env) for p in parts) == want, (text, env, [str(p.diff) for p in parts])


def test_parts_split_only_what_is_a_conjunction():
    def parts(text):
        return sorted(f"{p.diff} {p.kind} 0" for p in Constraint.parse(text).parts())

    assert parts("max(a, b) <= c + 4") == ["-a + c + 4 >= 0", "-b + c + 4 >= 0"]
    assert parts("min(x, max(y, z)) >= 30") == ["max(y, z) - 30 >= 0", "x - 30 >= 0"]
    assert parts("-3*min(a, b) <= 5") == ["3*a + 5 >= 0", "3*b + 5 >= 0"]
    # a disjunction (max on the large side), a product and an equality stay whole
    for text in ("max(a, b) >= c", "2*max(a, b)*c <= 7", "max(a, b) == c"):
        assert len(Constraint.parse(text).parts()) == 1, text
    # ten maxima would split into 2**10 parts: past the cap the inner ones stay whole
    many = Constraint.parse(" + ".join(f"max(a{i}, b{i})" for i in range(10)) + " <= z")
    assert 1 < len(many.parts()) <= MAX_PARTS
    env = {**{f"a{i}": i + 1 for i in range(10)}, **{f"b{i}": 10 - i for i in range(10)}}
    for z in (79, 80):  # the sum of the maxima is 80
        assert all(p.holds({**env, "z": z}) for p in many.parts()) == many.holds({**env, "z": z})


def test_split_constraints_tighten_the_interval_rung():
    # max(a, b) <= c + 4 bounds a and b once split: no solver is needed for a's upper end
    cs = ConstraintSet.of(["max(a, b) <= c + 4", "c <= 10"])
    b = bounds(parse_expr("a"), cs)
    assert (b.lo, b.hi) == (1, 14) and b.hi_tight
    assert b.hi_witness["a"] == 14


CHAIN = ["c >= b", "a >= c", "u <= 10", "u + a >= 3"]


def test_recession_cone_finds_the_ray_that_fixed_directions_miss():
    cs = ConstraintSet.of(CHAIN)
    f = parse_expr("a - 2*b")
    base = {"a": 3, "b": 1, "c": 2, "u": 5}
    assert cs.holds(base)
    # along every variable at once u grows past 10; along any single variable a - 2*b
    # either grows or a constraint breaks: find_ray's own directions fail
    assert not rays.find_ray(f, cs, [base], clock=clocks.clock())
    d = rays.Recession(cs, 100_000).direction(f, clocks.asking())
    assert d is not None and d["u"] == 0 and min(d.values()) >= 0
    assert rays.unbounded_below(f, cs, base, d, clock=clocks.clock())
    # a bounded end gets no direction: the LP is infeasible
    assert rays.Recession(cs, 100_000).direction(parse_expr("-u"), clocks.asking()) is None


def test_a_recession_check_the_deadline_interrupts_ends_without_a_direction(monkeypatch):
    """The watchdog's interrupt retires the shared context inside the check, which releases the LP
    (its solver is None after the check): the check's solver is popped all the same, and the
    question goes on without a direction (it raised AttributeError on CI: a 1,000-variable explain
    under load)."""
    import z3

    from smtdims.engines import checks, context, memory

    cs = ConstraintSet.of(CHAIN)
    cone = rays.Recession(cs, 100_000)
    real = checks.run_check

    def interrupted(solver, ctx, *args, **kwargs):
        memory.retire_shared(ctx)  # what run_check does when the watchdog interrupted the check
        return z3.unknown, REASON_DEADLINE

    before = context.shared_context()
    monkeypatch.setattr(checks, "run_check", interrupted)
    assert cone.direction(parse_expr("a - 2*b"), clocks.asking()) is None
    assert context.shared_context() is not before  # retired, and the LP built in it released with it
    monkeypatch.setattr(checks, "run_check", real)
    d = cone.direction(parse_expr("a - 2*b"), clocks.asking())  # rebuilt in the new shared context on the next use
    assert d is not None and d["u"] == 0


@settings(**SETTINGS)
@given(S.cases(S.GenConfig(max_vars=4, max_constraints=5, planted=0.7)), st.data())
def test_ray_check_following_only_moved_constraints_is_the_full_check(case: S.Case, data):
    # find_ray follows only the constraints that mention a moved variable, the others judged
    # at the base point (rays.failing_at): the same verdict as following every constraint
    cs = ConstraintSet.of(case.constraint_texts)
    e = parse_expr(case.expr_text)
    names = sorted(set(cs.variables()) | e.variables() | set(case.vars))
    for _ in range(4):
        p = {v: data.draw(st.integers(1, 6)) for v in names}
        d = {v: data.draw(st.sampled_from((0, 0, 1, 2, 6))) for v in names}
        full = rays.unbounded_below(e, cs, p, d, names, clock=clocks.clock())
        failing = rays.failing_at(cs, p)
        assert rays.unbounded_below(e, cs, p, d, names, failing=failing, clock=clocks.clock()) == full, (case.describe(), p, d)


def test_unbounded_end_through_the_api():
    b = bounds(parse_expr("a - 2*b"), CHAIN)
    assert b.lo == -math.inf and b.lo_tight
    assert b.hi == math.inf and b.hi_tight  # along a alone


def test_the_fast_linear_solver_hands_over_when_it_stalls():
    # Z3's older arithmetic solver (tried first on linear checks) ran this 2-variable check to
    # the deadline, ignoring rlimit; under its timeout the default solver answers exactly
    from smtdims.reasoner import Session

    with options.scoped(presburger=False, deadline=8):
        b = Session(ConstraintSet.of(["-2*a + 51*mod(-58*d, 6) >= 0"])).bounds(parse_expr("a"))
    assert (b.lo, b.hi) == (1, 102) and b.lo_tight and b.hi_tight and b.deterministic
    assert ConstraintSet.of(["-2*a + 51*mod(-58*d, 6) >= 0"]).holds(b.hi_witness)


def test_recession_cone_takes_huge_coefficients_and_deep_max():
    # coefficients past Python's 4,300-digit str limit, and a max nested 40 deep (whose slope
    # text would double per level), must not break the LP's script: such constraints are left out
    b = bounds(parse_expr("a - 2*b"), ["c >= b", "a >= c", "u <= 10", "2^20000*b - 2^20000*c <= 5"])
    assert b.lo == -math.inf and b.lo_tight
    deep = "b"
    for i in range(40):
        deep = f"max({deep}, b{i})"
    assert rays._slope(parse_expr(deep), {}) is None  # private: the LP's script leaves the deep constraint out
    b = bounds(parse_expr("a - 2*b"), ["c >= b", "a >= c", f"{deep} >= u", "u <= 10"])
    assert b.lo == -math.inf and b.lo_tight

"""Answers depend only on the question, its constraints, the budget and the options.

Earlier questions in the process, the models of earlier checks and the process's memory change no answer;
only a clock (the deadline) may, and an answer it shaped says so. Exports giving the same answer every
time: tests/jax/test_export_determinism.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

import smtdims
from smtdims import clocks, options
from smtdims.engines import presburger

L18 = "(min(-3*a, b - 2*c + a + 5) - max(-3*c - 2*b + 2, -2*b - c - 3*a - 1)) * (2*c + 1)"
C18 = ("mod(a + b, 7) == 3", "a >= 32")


def _fresh(code: str) -> dict:
    """Run ``code`` (which prints one JSON line) in a fresh interpreter."""
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_decision_does_not_depend_on_an_earlier_question():
    """18.3: "unknown" fresh, "undetermined" after ``2*b == 58``: models of earlier checks were kept as points."""
    ask = f"""
        import json, smtdims
        {{prior}}
        d = smtdims.decide({L18!r}, "<", "2", constraints={C18!r}, budget=300_000)
        print(json.dumps([d.status, d.reason]))
    """
    fresh = _fresh(ask.format(prior=""))
    warm = _fresh(ask.format(prior=f'smtdims.decide("2*b", "==", "58", constraints={C18!r}, budget=300_000)'))
    assert fresh == warm


def test_models_of_checks_are_not_kept_as_points():
    from smtdims.reasoner import REGISTRY

    s = REGISTRY.get(smtdims.ConstraintSet.of(C18))  # the session that public calls with C18 use
    before = s.scope.points.base
    smtdims.decide("2*b", "==", "58", constraints=C18)  # a solver check with a model
    smtdims.bounds("b - a", constraints=C18)
    assert s.scope.points.base == before


def test_nonlinear_bound_does_not_depend_on_an_earlier_question():
    """18.3: (249318, inf) fresh, (-inf, inf) after a prior question; hi_tight flipped with one unrelated
    z3.Context() alive (Z3's qfnia read the process's memory counter)."""
    ask = """
        import json, smtdims, z3
        {prior}
        b = smtdims.bounds("(5*a + 13) * (a + b - 5)^4", constraints=("13*a == 5*b + 20",), budget=300_000)
        print(json.dumps([str(b.lo), str(b.hi), b.lo_tight, b.hi_tight]))
    """
    fresh = _fresh(ask.format(prior=""))
    assert fresh == _fresh(ask.format(prior="keep = z3.Context()"))
    assert fresh == _fresh(ask.format(prior=(
        'smtdims.decide("a + b + 28", "<=", "39", constraints=("13*a == 5*b + 20",), budget=300_000)')))


C60 = (f"-a >= 2*a - {10**60 + 1}", "2*b + 2147483649*a >= -b + 12157665459056928800")
E60 = (f"b + 9007199254740991*a + 9223372036854775806 + floordiv(-{10**60 + 2}*a + {10**30 - 2}*b, "
       f"{10**18 - 2})")
LO60 = -333333333333333333999999996997600249753003000000000002666667000000000005333333999990779640029564804524


@pytest.mark.parametrize("isl", [False, True], ids=["z3", "isl-or-z3"])
def test_presburger_bound_with_huge_coefficients_is_exact(isl):
    """18.2: ISL's 1 s call limit dropped the answer and Z3's search stopped at 400 steps, not tight,
    marked deterministic. The search is now logarithmic in the range (galloping, bisection, optimiser)."""
    with options.scoped(presburger=isl):
        b = smtdims.bounds(E60, constraints=C60)
    assert (b.lo, b.hi, b.lo_tight, b.hi_tight) == (LO60, float("inf"), True, True)
    assert b.deterministic  # exact: the answer ISL, given all the time it wants, gives (checked by hand)


def test_late_isl_answer_leaves_an_exact_answer_or_a_clock_shaped_one(monkeypatch):
    """A late ISL answer is dropped: the ladder's answer must be the exact one, or marked not deterministic."""
    if not presburger.available():
        pytest.skip("islpy not installed")
    exprs = [f"3*a - b + {i}*c + floordiv(a + {i}, 3)" for i in range(6)]
    cons = ("a <= 9", "b <= a", "c <= 5 + b")
    with options.scoped(presburger=False):
        exact = [tuple(smtdims.bounds(e, constraints=cons)) for e in exprs]
    smtdims.reasoner.REGISTRY.clear()
    monkeypatch.setattr(presburger, "CALL_LIMIT", 1e-9)  # every ISL answer late
    for e, want in zip(exprs, exact, strict=True):
        b = smtdims.bounds(e, constraints=cons)
        assert tuple(b) == want or not b.deterministic, (e, b, want)


def _nonlinear_check_cost(junk_mb: int) -> tuple[str, int]:
    """One budget-limited nonlinear check (the fuzz's history query) with ``junk_mb`` MB of unrelated Z3
    terms alive: its status and the rlimit units it used."""
    import z3

    from smtdims.engines import checks

    junk = []
    for _ in range(junk_mb // 16):  # a context with terms: about 16 MB each
        ctx = z3.Context()
        xs = [z3.Int(f"x{i}", ctx) for i in range(2000)]
        junk.append((ctx, [x * y + 3 for x, y in zip(xs, xs[1:])]))
    ctx = z3.Context()
    a = z3.Int("a", ctx)
    e = -33 * a * z3.If(2 * a <= 2 * a * a - 4 * a - 2, 2 * a, 2 * a * a - 4 * a - 2) + 27 * a * a - 7 * a
    s = checks.make_solver(ctx, 30_000, nonlinear=True)
    s.add(a >= 1, a - 8 >= -4 * a * a, 3 * a + 7 >= -2 * a - 12, e > 226)
    r = s.check()
    st = s.statistics()
    used = next(st.get_key_value(k) for k in st.keys() if k == "rlimit count")
    del junk
    return str(r), used


def test_nonlinear_checks_do_not_read_the_process_memory():
    """Z3's default strategy for this check stops stages at memory caps on the process's whole Z3
    allocation: "unknown" after 30,057 units alone, "unsat" after 7,809 next to 80 MB of other contexts.
    The strategy smtdims uses must do the same work, unit for unit, whatever else the process holds."""
    assert _nonlinear_check_cost(0) == _nonlinear_check_cost(80) == _nonlinear_check_cost(160)


def test_a_decision_shaped_by_a_clock_is_not_deterministic():
    """A clock that shaped the path to a decision (the fast solver's timeout, ISL's call limit, checks
    not started while given-up ones run) makes it clock-shaped, whatever its final reason says (the
    reason alone was read: such decisions were reported deterministic)."""
    from smtdims import ConstraintSet
    from smtdims.lang.results import Decision
    from smtdims.reasoner import Session

    a = smtdims.parse_expr("a")
    with options.scoped(deadline=5), clocks.question():
        clocks.mark_clocked(clocks.CLOCK_FAST_SOLVER)
        # the session gives the answer the question's clock (the answer reads no question state)
        shaped = Session(ConstraintSet.of(["a <= 9"])).decide(a, ">=", smtdims.parse_expr("1"))
    assert shaped.status == "true" and not shaped.deterministic and "_clock" not in shaped.to_dict()
    assert Session(ConstraintSet.of(["a <= 9"])).decide(a, ">=", smtdims.parse_expr("1")).deterministic
    assert not Decision("a", ">=", "1", "unknown", reason="budget", _clock=clocks.CLOCK_FAST_SOLVER).deterministic
    assert Decision("a", ">=", "1", "unknown", reason="budget").deterministic


def test_facts_of_a_constraint_set_cut_by_the_deadline_are_not_kept():
    """``ConstraintSet.derived`` keeps a fact for every later question (and every fresh JAX scope
    with the same constraints); one computed after the question's deadline passed may be cut
    short, so it is given to that question only."""
    import time

    from smtdims import ConstraintSet

    cs = ConstraintSet.of(("a >= 3", "b <= 7"))
    made: list[int] = []

    def make(s: ConstraintSet, clock: clocks.Deadline) -> int:
        made.append(1)
        return len(made)

    with options.scoped(deadline=1e-9), clocks.question() as d:
        time.sleep(0.001)
        assert clocks.deadline_passed()
        assert cs.derived("probe", make, d) == 1
    assert cs.derived("probe", make, clocks.clock()) == 2  # computed again, now kept
    assert cs.derived("probe", make, clocks.clock()) == 2 and len(made) == 2

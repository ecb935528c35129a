"""Every public call returns within its deadline (+ slack) however large the input.

Before: the deadline was only watched inside Z3's check. ``bounds("(a - b)^300 + c",
deadline=2)`` took 3.8-13 s (ray search multiplying polynomials, 300 Z3 multiplications per
term), a 1,000-variable sum 2.4-14.5 s (12,000 point valuations), and a nonlinear check with
symbolic divisors ran 1-8 s past ``ctx.interrupt()``. The reproducers are here, with a property
test over random large inputs from ``tools/fuzz.py``'s ``large_case`` (powers up to 500,
1,000-variable sums, 500 constraints, nested and nonlinear divisions).

Timing bounds are generous (the machine is shared): a call may take its deadline plus ``SLACK``.
"""

from __future__ import annotations

import os
import random
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import smtdims
from tests.fuzz_tool import FUZZ

DEADLINE = 1.0
SLACK = 1.5  # the issue asks for deadline + 1 s; half a second more for a loaded machine

ALT_SUM = "".join((" - " if i % 2 else (" + " if i else "")) + f"x{i}" for i in range(1000))
NONLINEAR = ("mod(b, b + 2) == 2", "floordiv(3*b + a - 2, 2*c - 3) == 3*a - 2*c - 4")




def starvation() -> float:
    """How many runnable processes share each core now (1 on an idle or fully used machine, more when
    others run: CI's other jobs, the suite's own workers). The deadline is wall-clock, kept by a process
    that must be scheduled to keep it: past the cores, its overshoot grows with the queue
    (docs/guarantees.md, measured), which the guarantee allows and this test must not fail on."""
    try:
        return max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))
    except OSError:  # no load average here
        return 1.0


def timed(call, *args, **kw):
    t = time.monotonic()
    out = call(*args, **kw)
    took = time.monotonic() - t
    limit = DEADLINE + SLACK * starvation()
    assert took < limit, (f"{call.__name__}{str(args)[:200]}: {took:.2f} s under a {DEADLINE} s deadline "
                          f"(allowed {limit:.2f} s at a load of {starvation():.1f} per core)")
    return out


def assert_proven_unless_cut(b) -> None:
    """Both ends infinite, each proven so, unless the deadline cut the proof (a busy machine: the answer is
    then marked clock-shaped, ``deterministic`` False, and is still sound: infinite ends)."""
    assert (b.lo, b.hi) == (-float("inf"), float("inf"))
    if b.deterministic:
        assert (b.lo_tight, b.hi_tight) == (True, True), b


def test_power_300_within_deadline_and_upper_end_proven():
    b = timed(smtdims.bounds, "(a - b)^300 + c", deadline=DEADLINE)
    assert b.hi == float("inf") and b.hi_tight  # a ray along one variable: no solver
    assert b.lo <= 1  # attained at a = b, c = 1; the lower end may stay unproven (sound)


def test_power_400_exact_within_deadline():
    b = timed(smtdims.bounds, "(a + b)^400 - c*a", deadline=DEADLINE)
    assert_proven_unless_cut(b)
    d = timed(smtdims.decide, "(a + b)^400 - c*a", ">=", "0", deadline=DEADLINE)
    assert d.status in ("undetermined", "unknown")  # a = b = 1, c = 3 makes it negative


def test_high_degree_decision_within_deadline():
    # Z3 ran 14 s past its interrupt on this check: it is now given up past the deadline
    d = timed(smtdims.decide, "(-2*b + 3*c)^346 + c", ">=", "1", deadline=DEADLINE)
    assert d.status in ("true", "unknown")


@pytest.mark.parametrize("expr", ["(b + 2*a + 3)^134 + a*b*c", "(3*a + 3*b - c)^154 + c"])
def test_expanded_powers_within_deadline_in_every_call(expr):
    """About 9,000-12,000 terms: the interval sum, the rays' cost estimate, point evaluation and
    explain's conflict search (an encoding no watchdog reached: 3.4 s) each took seconds."""
    for call in (smtdims.bounds, smtdims.explain):
        timed(call, expr, *(("<=", "7") if call is smtdims.explain else ()), deadline=DEADLINE)


def test_interval_cut_by_the_deadline_is_not_kept():
    """A long sum's interval stops at the deadline with (-inf, inf): sound, and not cached, so a
    later question with time gets the real answer (every term is positive: the least value is at 1s)."""
    from smtdims.reasoner import REGISTRY

    e = "(a + b + c + 2)^15 + a*b*c"  # 817 terms: small enough to be cached
    cut = smtdims.bounds(e, deadline=1e-6)
    assert not cut.deterministic
    assert REGISTRY.get(smtdims.ConstraintSet.of(())).interval(smtdims.parse_expr(e)) == (5**15 + 1, float("inf"))
    full = smtdims.bounds(e)
    assert (full.lo, full.lo_tight, full.deterministic) == (5**15 + 1, True, True)


def test_thousand_variable_sum_within_deadline_and_proven():
    b = timed(smtdims.bounds, ALT_SUM, constraints=["x0 <= 5"], deadline=DEADLINE)
    assert_proven_unless_cut(b)


def test_thousand_variable_sum_with_y_lower_end_proven():
    """A linear question: its lower end is proven -inf by a ray (it was left unproven)."""
    b = timed(smtdims.bounds, ALT_SUM + " - 3*y", deadline=DEADLINE)
    assert b.lo == -float("inf") and b.lo_tight and b.deterministic


def test_thousand_variable_explain_within_deadline():
    timed(smtdims.explain, ALT_SUM, "<=", "7", constraints=["x0 <= 5"], deadline=DEADLINE)


def test_nonlinear_division_check_within_deadline():
    """Z3's default strategy ignored ctx.interrupt() here for 1-8 s; smtdims' nonlinear strategy
    (checks.nonlinear_tactic) proves the exact answer in milliseconds: every valuation has b = 2 and
    a >= 3 (a = 1 meets neither constraint), where floordiv(a - 3, a - 2) is 0."""
    for _ in range(2):  # were an answer deadline-shaped, it would not be cached: both calls do the work
        b = timed(smtdims.bounds, "floordiv(a - 3, a - 2)", constraints=NONLINEAR, deadline=DEADLINE)
        assert b.lo <= 0 <= b.hi  # sound: (a, b, c) = (4, 2, 3) meets the constraints, value 0
        assert smtdims.decide("b", "==", "2", constraints=NONLINEAR).status == "true"


def test_low_degree_nonlinear_check_that_ignores_the_interrupt_is_given_up():
    """Found by the fresh-vs-warm fuzz: degree 5, constant divisors, 34 s under a 10 s deadline
    (Z3 kept running inside the check after the watchdog's interrupt)."""
    e = ("-max(93*a*b - 2, 4*a*c + 2*a + 5)^2*min(-3*a*floordiv(b*c + 3*c, 3) - 7*a, "
         "a*floordiv(3*a^2 + 50*a, -1) + 6) - 4*a^2 - 75*c^2")
    d = timed(smtdims.decide, e, "!=", "388530", budget=500_000, deadline=DEADLINE)
    assert d.status in ("unknown", "undetermined", "true")  # never false: e != 388530 at a = b = c = 1


def test_five_hundred_constraints_within_deadline():
    cons = [f"v{i + 1} >= v{i} + {i % 3}" for i in range(500)]
    timed(smtdims.check_constraints, cons, deadline=DEADLINE)
    timed(smtdims.bounds, "v500 - 3*v7 + v250", constraints=cons, deadline=DEADLINE)


def test_expansion_past_the_limit_is_a_clear_parse_error():
    t = time.thread_time()  # CPU, not wall time: a loaded machine (the suite's other worker) is not the work
    with pytest.raises(smtdims.ParseError, match="expands to") as err:
        smtdims.parse_expr("(a + b + c)^500")  # 125,751 terms
    assert err.value.position == len("(a + b + c)")
    assert time.thread_time() - t < 1.0  # refused before the work (expanding it takes minutes)
    e = smtdims.parse_expr("(a + b + c)^150")  # 11,476 terms: under the limit
    assert len(e.terms) == 11476
    assert e.evaluate({"a": 1, "b": 2, "c": 3}) == 6**150


def test_expansion_matches_repeated_multiplication():
    e = smtdims.parse_expr("(2*a - b + 3)^7")
    r = smtdims.parse_expr("1")
    for _ in range(7):
        r = r * smtdims.parse_expr("2*a - b + 3")
    assert e == r and str(e) == str(r)


@pytest.mark.soak
@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(st.integers(0, 2**32), st.sampled_from(FUZZ.LARGE_KINDS))
def test_large_inputs_answer_within_deadline(seed, kind):
    """Random large inputs: every public call within the deadline + slack, and no wrong answer."""
    rng = random.Random(seed)
    case = FUZZ.large_case(rng, kind)
    e = smtdims.parse_expr(case["expr"])
    values = [e.evaluate(p) for p in FUZZ._points_of(case, rng)]
    with smtdims.options.scoped(deadline=DEADLINE):
        for name, ask in FUZZ.large_questions(case):
            before = smtdims.stats()
            t = time.monotonic()
            try:
                ans = ask()
            except (smtdims.PossibleDivisionByZeroError, smtdims.UnsatisfiableConstraintsError):
                ans = None
            took = time.monotonic() - t
            assert took < DEADLINE + SLACK, (f"{name} on {case['expr'][:80]} | {case['constraints'][:3]}: {took:.2f} s; "
                                             f"stats during the call: {_stats_delta(before, smtdims.stats())}")
            if name == "bounds" and ans is not None and values:
                assert ans.lo <= min(values) and max(values) <= ans.hi, (case, ans)


def _stats_delta(before: dict, after: dict) -> dict:
    """What a call changed in :func:`smtdims.stats` (a late call's message says where it went)."""
    out = {}
    for k, v in after.items():
        if isinstance(v, dict):
            d = {r: n - before[k].get(r, 0) for r, n in v.items() if n != before[k].get(r, 0)}
            if d:
                out[k] = d
        elif v != before.get(k):
            out[k] = v - before.get(k, 0)
    return out


def test_caches_do_not_keep_expanded_powers():
    """Memory: the large-input fuzz grew to 1.1 GB keeping every 10,000-term question in its
    scope's caches; past 2,000 terms a question is answered again rather than kept."""
    from smtdims.reasoner import REGISTRY

    big, small = "(a + b + c + 1)^30", "(a + b + 1)^3"  # 5,456 and 10 terms
    for e in (big, small):
        smtdims.bounds(e)
    s = REGISTRY.get(smtdims.ConstraintSet.of(()))  # the session of public calls without constraints
    kept = {str(k) for k in s.caches["bounds"]}
    assert str(smtdims.parse_expr(small)) in kept and str(smtdims.parse_expr(big)) not in kept
    assert smtdims.bounds(big).lo == 4**30  # answered again, the same


def test_parse_memos_hold_a_bounded_size():
    """The text-to-IR memos kept any result (functools.lru_cache, 8,192 entries): after 1,500 fresh-vs-warm
    fuzz questions 864,000 objects were alive, and each full garbage collection took 0.3-0.9 s inside
    whichever call triggered it (9 of 20,000 answers past deadline + 1 s). Now a memo keeps at most
    PARSE_CACHE_SIZE (Expr.size(): nested operands count) in all and no expression past CACHE_MAX_TERMS."""
    from smtdims.lang.constraints import CONSTRAINT_MEMO
    from smtdims.lang.memos import CACHE_MAX_TERMS, PARSE_CACHE_SIZE
    from smtdims.lang.parser import EXPR_MEMO

    big = "(a + b + c + 1)^30"  # 5,456 terms: parsed, answered, not kept
    assert smtdims.parse_expr(big) == smtdims.parse_expr(big) and len(smtdims.parse_expr(big).terms) > CACHE_MAX_TERMS
    assert all(v[0].size() <= CACHE_MAX_TERMS for v in EXPR_MEMO.entries())
    for i in range(40):  # 40 distinct expressions of size 863 (232 terms): more than the memo's total
        smtdims.parse_expr(f"(a + b + c)^20 + {i}*d")
        smtdims.Constraint.parse(f"(a + b + c)^20 >= {i}*d")
    for memo in (EXPR_MEMO, CONSTRAINT_MEMO):
        assert 0 < memo.held <= PARSE_CACHE_SIZE
        assert memo.held == sum(n for _, n in memo.entries())
    first = smtdims.parse_expr("(a + b + c)^20 + 0*d")  # evicted long ago: parsed again, equal
    assert first == smtdims.parse_expr("(a + b + c)^20 + 0*d")
    assert EXPR_MEMO.held >= PARSE_CACHE_SIZE - 2 * 863, "the memo keeps what fits, not less"


# -- checks Z3 does not stop at the interrupt, in the contexts of unsat cores and constraint diagnostics --
IGNORED = 6.0  # seconds a simulated check runs whatever the interrupt says


@pytest.fixture
def deaf_z3(monkeypatch):
    """Z3 workers whose every check first sleeps IGNORED seconds, deaf to the interrupt: a check Z3
    does not stop at ``ctx.interrupt()`` (measured: 9 s in explain's core check of a 9,181-term
    power). Yields the number of checks killed so far; the workers are stopped before and after."""
    from smtdims.engines import checks, counters

    checks.Z3_WORKERS.stop()
    monkeypatch.setenv("SMTDIMS_Z3_WORKER_STALL", str(IGNORED))
    yield counters.COUNTERS.abandoned_checks
    checks.Z3_WORKERS.stop()


def _nothing_runs() -> None:
    """No Z3 worker is left using the CPU (a killed one is gone; one that answered waits for input)."""
    from smtdims.engines import checks

    def cpu() -> float:
        return sum(w.cpu_seconds() for w in checks.Z3_WORKERS.workers())

    before = cpu()
    time.sleep(0.5)
    assert cpu() - before < 0.1


def test_explain_kills_an_unsat_core_check_past_the_deadline(deaf_z3):
    from smtdims.engines import counters

    t = time.monotonic()
    ex = smtdims.explain("a*b + c", ">=", "2", constraints=["c >= 1"], deadline=DEADLINE)
    assert time.monotonic() - t < DEADLINE + SLACK
    assert counters.COUNTERS.abandoned_checks > deaf_z3  # the core's check was asked (and its worker killed)
    _nothing_runs()
    assert ex.status == "true"  # the decision itself stands; its support is cut
    assert not ex.minimal and "c >= 1" in ex.support  # every constraint, said not to be minimal


def test_check_constraints_kills_a_nonlinear_check_past_the_deadline(deaf_z3):
    from smtdims.engines import counters

    t = time.monotonic()
    report = smtdims.check_constraints(["a*b >= c + 1", "floordiv(a*c, b + 1) <= 17", "c >= 2"],
                                       deadline=DEADLINE)
    assert time.monotonic() - t < DEADLINE + SLACK
    assert counters.COUNTERS.abandoned_checks > deaf_z3 and report.reason == "deadline"
    _nothing_runs()


def test_a_check_past_its_deadline_is_killed_and_nothing_of_it_is_kept(deaf_z3, monkeypatch):
    """A check Z3 does not stop (before: a thread nobody could stop, and past four of them no check
    started at all, "busy") now runs in a worker process killed KILL_GRACE seconds past the
    deadline: the answer is the sound one without it, clock-shaped, and nothing is left running."""
    from smtdims.engines import checks, counters

    q = ("a*a - 2*a*b + b*b", ">=", "0")  # (a - b)^2 >= 0: only the nonlinear solver proves it
    t = time.monotonic()
    d = smtdims.decide(*q, deadline=DEADLINE, budget=123_457)
    assert time.monotonic() - t < DEADLINE + SLACK
    assert (d.status, d.reason.split(":")[0], d.deterministic) == ("unknown", "deadline", False)
    assert counters.COUNTERS.abandoned_checks > deaf_z3
    _nothing_runs()
    b = smtdims.bounds("a*a - 2*a*b + b*b", deadline=DEADLINE, budget=123_457)
    assert not b.lo_tight and (b.reason, b.deterministic) == ("deadline", False)
    # a satisfiability gate not run must not pass as a deterministic answer in a scope that no
    # valuation satisfies (with time: UnsatisfiableConstraintsError)
    unsat = ["2*b == -4*a*b - 14*c"]
    vacuous = smtdims.decide("3*c", ">=", "c", constraints=unsat, deadline=DEADLINE, budget=123_457)
    assert not vacuous.deterministic
    # and a divisor gate not run is a refusal that says it may change (with time: exact bounds (0, 0))
    with pytest.raises(smtdims.PossibleDivisionByZeroError) as refused:
        smtdims.bounds("floordiv(a - 3, a - 2)", constraints=NONLINEAR, deadline=DEADLINE, budget=123_457)
    assert not refused.value.deterministic
    checks.Z3_WORKERS.stop()
    monkeypatch.delenv("SMTDIMS_Z3_WORKER_STALL")
    assert smtdims.bounds("floordiv(a - 3, a - 2)", constraints=NONLINEAR, deadline=DEADLINE,
                          budget=123_457) == (0, 0)
    with pytest.raises(smtdims.UnsatisfiableConstraintsError):
        smtdims.decide("3*c", ">=", "c", constraints=unsat, deadline=DEADLINE, budget=123_457)
    again = smtdims.decide(*q, deadline=DEADLINE, budget=123_457)
    assert (again.status, again.deterministic) == ("true", True)  # nothing of the cut answer was kept


@pytest.mark.parametrize("call", ["decide", "bounds", "explain"])
def test_high_degree_power_checks_leave_nothing_running(call):
    """Z3's nonlinear core never stopped on a monomial of 108 equal factors, interrupt or not: each
    given-up check of ``(-b + 1)^108 + a*b*c`` ran on for good (3 after three calls, 30 s later).
    Powers are now products of defined squares, and a check past its deadline is killed with its
    worker: once the call returns, no Z3 work of it uses the CPU."""
    args = ("(-b + 1)^108 + a*b*c",) if call == "bounds" else ("(-b + 1)^108 + a*b*c", ">=", "1")
    timed(getattr(smtdims, call), *args, deadline=DEADLINE)
    _nothing_runs()

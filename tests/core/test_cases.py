"""The ``cases`` rung (:mod:`smtdims.rungs.cases`): bounds of expressions of ``floordiv``/``mod`` by a
symbolic divisor, by cases on the quotient, against brute force and against Z3's search."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from smtdims import ConstraintSet, options, parse_expr
from smtdims.engines import presburger
from smtdims.reasoner import Session
from smtdims.rungs import cases

pytestmark = pytest.mark.skipif(not presburger.available(), reason="islpy is not installed (the rung needs ISL)")


def _linear(rng: random.Random, names: tuple[str, ...], big: int = 9) -> str:
    return " + ".join(f"{rng.randint(-3, 3)}*{v}" for v in names) + f" + {rng.randint(-big, big)}"


def _question(rng: random.Random, names: tuple[str, ...]) -> str:
    """``c1*mod(x, d) + c2*floordiv(x, d) + rest``, ``d`` of one sign for every valuation."""
    v = rng.choice(names)
    d = rng.choice([f"{v} + {rng.randint(0, 5)}", f"-{v} - {rng.randint(0, 5)}", f"{names[0]} + {names[1]} + 1",
                    f"2*{v} + {rng.randint(-1, 3)}"])
    x = _linear(rng, names, 20)
    terms = [f"{rng.choice([1, -1, 2, 3])}*mod({x}, {d})"]
    if rng.random() < 0.5:
        terms.append(f"{rng.choice([1, -2])}*floordiv({x}, {d})")
    if rng.random() < 0.5:
        terms.append(_linear(rng, names))
    return " + ".join(terms)


def _boxed_cases(n: int):
    rng = random.Random("quotient-cases")
    names = ("a", "b")
    for _ in range(n):
        cons = [f"a <= {rng.randint(2, 14)}", f"b <= {rng.randint(2, 14)}"]
        if rng.random() < 0.4:
            cons.append(f"{_linear(rng, names)} >= 0")
        yield _question(rng, names), cons


def _answer(text: str, cons: list[str]):
    return Session(ConstraintSet.of(cons)).bounds(parse_expr(text))


def test_boxed_quotient_cases_are_exact_against_brute_force():
    """In a box every end is attained: the rung's ends must be brute force's min and max, tight,
    with witnesses that meet the constraints and attain them; and no other rung may disagree."""
    answered = 0
    for text, cons in _boxed_cases(150):
        e, cs = parse_expr(text), ConstraintSet.of(cons)
        vals = [e.evaluate(env) for env in (dict(a=a, b=b) for a, b in itertools.product(range(1, 15), repeat=2))
                if cs.holds(env)]
        if not vals:
            continue
        try:
            got = _answer(text, cons)
        except ZeroDivisionError:
            continue
        assert (got.lo, got.hi) == (min(vals), max(vals)), (text, cons, got.answered_by)
        assert got.lo_tight and got.hi_tight
        for end, w in ((got.lo, got.lo_witness), (got.hi, got.hi_witness)):
            assert cs.holds(w) and e.evaluate(w) == end
        answered += got.answered_by == "cases"
    assert answered >= 40, f"the rung answered only {answered} questions"


def _open_cases(n: int):
    rng = random.Random("quotient-cases-open")
    for _ in range(n):
        k, m = rng.randint(-20, 20), rng.randint(0, 6)
        sign = rng.choice(["", "-"])
        inner = rng.choice([f"a + {k}", f"-a + {k}", f"2*a + {k}", f"3*a + {k}"])
        d = f"{sign}a {'-' if sign else '+'} {m}" if m else f"{sign}a"
        yield rng.choice([f"mod({inner}, {d})", f"floordiv({inner}, {d}) + mod({inner}, {d})",
                          f"3*mod({inner}, {d}) - a"]), rng.choice([[], ["a >= 3"], ["a <= 40"]])


@pytest.mark.parametrize("text, cons", list(_open_cases(40)))
def test_quotient_cases_agree_with_the_search_on_unbounded_scopes(text, cons, monkeypatch):
    """Where the scope is unbounded, the rung's answer against Z3's nonlinear search (the rung off):
    the same ends where both are tight, and every value at 200 sample points inside."""
    e, cs = parse_expr(text), ConstraintSet.of(cons)
    with_rung = _answer(text, cons)
    monkeypatch.setattr(cases, "quotient_cases", lambda *a: None)
    without = _answer(text, cons)
    if with_rung.lo_tight and without.lo_tight:
        assert with_rung.lo == without.lo
    if with_rung.hi_tight and without.hi_tight:
        assert with_rung.hi == without.hi
    for a in range(1, 201):
        env = {"a": a}
        if cs.holds(env):
            assert with_rung.lo <= e.evaluate(env) <= with_rung.hi, (text, env)
    for end, w, tight in ((with_rung.lo, with_rung.lo_witness, with_rung.lo_tight),
                          (with_rung.hi, with_rung.hi_witness, with_rung.hi_tight)):
        if tight and not math.isinf(end):
            assert cs.holds(w) and e.evaluate(w) == end


def test_the_rung_answers_the_tests_family_and_declines_what_it_cannot_split():
    """``mod(a + 13, a + 4)`` (quotient 1 or 2) is the rung's; a quotient with more values than
    ``MAX_QUOTIENTS`` (``mod(a + 100, -a - 4)``: 1 to 20), a divisor whose sign varies or an
    unbounded quotient (``mod(b, a)``) are left to the search, which answers them as before."""
    b = _answer("mod(a + 13, a + 4)", [])
    assert (b.lo, b.hi, b.answered_by) == (0, 9, "cases")
    assert _answer("mod(-a + 100, a + 4)", []).answered_by != "cases"
    varies = _answer("mod(b + 3, a - 5)", ["mod(a, 5) == 1", "b <= 4"])  # a - 5 in {-4, 1, 6, ...}
    assert varies.answered_by != "cases" and (varies.lo, varies.hi) == (-3, 7)
    got = _answer("mod(b, a)", ["a <= 5"])
    assert got.answered_by != "cases" and (got.lo, got.hi) == (0, 4)


def test_the_rung_is_off_with_the_presburger_option():
    with options.scoped(presburger=False):
        assert _answer("mod(a + 13, a + 4)", []).answered_by != "cases"


def test_the_cases_count_as_one_answer():
    """``stats()`` counts the question the rung answered, once, as ``cases``: the cases' own
    linear questions are the rung's work, not answers (``answers_by_rung`` adds up to questions)."""
    import smtdims

    smtdims.reset_stats()
    b = _answer("mod(a + 13, a + 4)", [])  # quotient 1 or 2: two cases, each an ISL question
    by = smtdims.stats()["answers_by_rung"]
    assert b.answered_by == "cases" and by["cases"] == 1
    assert sum(by.values()) == 1, by

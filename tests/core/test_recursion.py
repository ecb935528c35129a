"""Python's recursion limit is process-wide: smtdims raises it only for a question whose
expressions nest deeper than the stack in use leaves room for, and never for the shallow
expressions of real programs; every depth still gets its answer under Python's default limit."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import smtdims
from smtdims.lang.expr import MAX, Expr, Op, nesting
from smtdims.lang.parser import parse_expr

CHILD = textwrap.dedent("""
    import sys
    sys.setrecursionlimit(1000)  # Python's default: what users have
    import smtdims

    def mixed(depth):
        s = "a"
        for i in range(depth):
            s = ["max({}, b)", "floordiv({}, 3)", "mod({}, 5) + a", "min({}, 2*b + 1)"][i % 4].format(s)
        return s

    def under(frames, fn):  # the question asked from a stack already `frames` deep (JAX tracing)
        return fn() if frames == 0 else under(frames - 1, fn)

    for start in (400,):  # less room than a fresh stack: the stricter case for the per-level estimate
        for depth in (1, 10, 40, 80, 200):
            e = mixed(depth)
            b = under(start, lambda: smtdims.bounds(e, constraints=["a <= 50", "b <= 9"], deadline=30))
            assert b.lo <= b.hi, (depth, b)
            d = under(start, lambda: smtdims.decide(e, ">=", "0", constraints=["a <= 50"], deadline=30))
            assert d.status in ("true", "false", "undetermined", "unknown"), d
            assert sys.getrecursionlimit() == 1000, "restored after each question"
    print("OK")
""")


@pytest.mark.soak
def test_every_depth_answers_under_the_default_limit():
    res = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0 and res.stdout.strip() == "OK", res.stdout + res.stderr[-3000:]


def test_shallow_questions_leave_the_recursion_limit_alone(monkeypatch):
    calls = []
    real = sys.setrecursionlimit
    monkeypatch.setattr(sys, "setrecursionlimit", lambda n: (calls.append(n), real(n)))
    for text in ("floordiv(max(a, b), 2) + mod(a*b, 7)", "min(a, 16) - max(b, 2*a)", "a*b + 3"):
        smtdims.bounds(text, constraints=["a >= 2", "floordiv(b, 4) >= 1"])
        smtdims.decide(text, ">=", "1", constraints=["a >= 2"])
    assert calls == [], "a shallow question changed the process-wide recursion limit"
    before = sys.getrecursionlimit()
    deep = "a"
    for _ in range(300):
        deep = f"max({deep}, b)"
    smtdims.bounds(deep)
    assert len(calls) >= 2 and calls[-1] == before == sys.getrecursionlimit()  # raised, then restored


def test_nesting_is_counted_without_recursion():
    assert nesting(parse_expr("a + 2*b")) == 0
    assert nesting(parse_expr("floordiv(max(a, b), 2)")) == 2
    deep = Expr.var("a")
    for _ in range(5000):  # built bottom-up, as JAX builds them: no parser, no recursion
        deep = Expr.atom(Op(MAX, deep, Expr.var("b")))
    assert nesting(deep) == 5000 and nesting(deep, parse_expr("max(a, b)")) == 5000


def test_deep_expressions_hash_and_compare_on_every_python():
    """Python 3.12+ bounds recursion through C (tuple hashes and comparisons) by a fixed limit that
    sys.setrecursionlimit does not move: 300 nested max() raised RecursionError when hashed (a
    cache lookup) and when two equal copies were compared. Hashes are now computed as an Op is
    built, and equality falls back to an explicit stack."""
    def nested(sep: str) -> str:
        text = "a"
        for _ in range(300):
            text = f"max({text},{sep}b)"
        return text

    x, y = smtdims.parse_expr(nested(" ")), smtdims.parse_expr(nested(""))
    assert x is not y and x == y and hash(x) == hash(y) and not (x != y)
    assert smtdims.parse_expr(nested(" ") + " + 1") != x
    assert smtdims.decide(nested(" "), ">=", nested("")).status == "true"

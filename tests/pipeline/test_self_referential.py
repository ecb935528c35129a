"""Lengths that refer to themselves: an overlap-add, a pad to a multiple, compared with the input's length.

The equation JAX's broadcast asks has the input's variable on both sides (``n == 16*max(0, floordiv(n -
64, 16) + 1) + 48``). JAX takes an equality as a rewrite rule of its left term, so this one as a constraint
recursed without end inside JAX (a RecursionError, two wasted rounds, then ``n`` pinned at 64). Now: the
constraint goes to JAX with another of its terms on the left (the same solutions), and the fix is the
rewrite a person writes, ``16*k + 48`` (``k`` frames). Each model is checked against the native function
on every length 1..LIMIT: the fix admits exactly the lengths where the function runs on at least one
frame, and the examples of a ``dims="auto"`` export.
"""

from __future__ import annotations

import random

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export
from smtdims_jax.pipeline import export_and_verify
from smtdims_jax.pipeline.specs import jax_constraint, rule_form

from smtdims.lang.constraints import Constraint
from smtdims.lang.parser import parse_expr
from tests.fixtures_pipeline import loop_models as m

LIMIT = 160


def _runs(fn, n: int) -> bool:
    try:
        jax.eval_shape(fn, jax.ShapeDtypeStruct((2, n), jnp.float32))
        return True
    except Exception:  # noqa: BLE001 - any refusal: the function does not take this length
        return False


def _admitted(fix, n: int) -> bool:
    """Whether the fix's specification admits length ``n`` (its second dimension) with b = 2."""
    (text,) = fix.shapes
    dims = [parse_expr(d) for d in text.split(",")]
    cs = [Constraint.parse(c) for c in fix.constraints]
    (var,) = dims[1].variables() or {None}
    for k in range(1, LIMIT + 1):
        env = {v: 2 for v in dims[0].variables()} | ({var: k} if var else {})
        if dims[1].evaluate(env) == n and all(c.holds(env) for c in cs):
            return True
    return False


@pytest.mark.parametrize("win, hop, person", [(64, 16, "b, 16*k + 48"), (50, 20, "b, 20*k + 30"), (9, 4, "b, 4*k + 5")])
def test_an_overlap_add_gets_the_rewrite_a_person_writes(win, hop, person):
    fn = m.make_overlap_add(win, hop)
    report = export_and_verify(fn, "float32[b, n]", fix=True, samples=3)
    fix = report.fix
    assert fix is not None and fix.ok and fix.status == "fixed", "\n".join(fix.lines() if fix else report.lines())
    assert fix.shapes == (person,) and fix.constraints == (), fix.shapes
    assert "RecursionError" not in "\n".join(r.error for r in fix.rounds)
    # against the native function: exactly the lengths with at least one frame
    for n in range(1, LIMIT):
        assert _admitted(fix, n) == (_runs(fn, n) and n >= win), n


def test_a_pad_to_a_multiple_compared_with_the_input():
    report = export_and_verify(m.pad_to_blocks, "float32[b, n]", fix=True, samples=3)
    fix = report.fix
    assert fix is not None and fix.ok and fix.shapes == ("b, 16*k",), "\n".join(fix.lines() if fix else ())
    assert _runs(m.pad_to_blocks, 1)  # n = 1 broadcasts against the padded 16: no symbolic size does that
    for n in range(2, LIMIT):
        assert _admitted(fix, n) == _runs(m.pad_to_blocks, n), n


def test_auto_from_one_example_batch():
    fn = m.make_overlap_add(64, 16)
    got = export_and_verify(fn, np.zeros((2, 1024), np.float32), dims="auto")
    assert got.status == "fixed" and got.specs == ("float32[a, 16*k + 48]",) and got.constraints == (), got.table
    exp = got.report.exported
    x = np.random.default_rng(0).standard_normal((3, 64 + 16 * 5)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(exp.call(x)), np.asarray(jax.jit(fn)(x)), rtol=1e-5, atol=1e-5)


def test_a_users_self_referential_constraint_reaches_jax_in_its_rule_form():
    """As a user's constraint too: it exports (smtdims proves the broadcast) instead of recursing in JAX."""
    fn = m.make_overlap_add(64, 16)
    report = export_and_verify(fn, "float32[b, n]", constraints=("n == 16*max(0, floordiv(n - 64, 16) + 1) + 48",),
                               samples=3)
    assert report.ok, report.table()
    assert jax_constraint("n == 16*max(0, floordiv(n - 64, 16) + 1) + 48") == "16*max(0, floordiv(n - 64, 16) + 1) == n - 48"


def _equalities(rng: random.Random, count: int):
    atoms = ["a", "b", "n", "floordiv(n, 4)", "mod(a, 3)", "max(0, floordiv(n - 8, 2) + 1)", "a*b"]
    for _ in range(count):
        def side():
            return " + ".join(f"{rng.randint(1, 3)}*{rng.choice(atoms)}" for _ in range(rng.randint(1, 3))) + \
                f" + {rng.randint(-5, 5)}"
        yield f"{side()} == {side()}"


def test_rule_form_has_the_same_solutions_and_jax_takes_it():
    """Random equalities over atoms that repeat on both sides: where a rule form is written, JAX's parser
    takes it and it holds exactly where the equation does (brute force over a, b, n in 1..9)."""
    rng = random.Random(7)
    written = 0
    for text in _equalities(rng, 150):
        c = Constraint.parse(text)
        lhs, _, rhs = text.partition(" == ")
        try:
            form = rule_form(parse_expr(lhs), parse_expr(rhs))
        except Exception as err:  # noqa: BLE001 - report the equation
            raise AssertionError(text) from err
        if form is None or c.diff.as_constant() is not None:
            continue
        written += 1
        new = Constraint.parse(f"{form[0]} == {form[1]}")
        for a in range(1, 10):
            for b in range(1, 10, 2):
                for n in range(1, 20, 3):
                    env = {"a": a, "b": b, "n": n}
                    assert new.holds(env) == c.holds(env), (text, form, env)
        try:
            export.SymbolicScope((jax_constraint(text),))
        except ValueError as err:
            assert "Unsatisfiable" in str(err) or "multiple equality" in str(err), (text, err)
    assert written >= 50

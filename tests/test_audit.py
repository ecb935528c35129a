"""Audit mode: every decision recorded with who answered and where; doubtful ones flagged."""

from __future__ import annotations

import json
import os

import jax
import jax.numpy as jnp
import pytest
import smtdims_jax
from jax import export, lax
from smtdims_jax import adapter

import smtdims
from smtdims.audit import (
    INCONCLUSIVE,
    PROVABLY_EQUAL,
    REFUTED_STOCK,
    UNPROVEN_INEQUALITY,
    AuditReport,
    audit,
)
from smtdims.parser import parse_expr

HERE = os.path.basename(__file__)


def _export(f, shape):
    return export.export(jax.jit(f))(jax.ShapeDtypeStruct(shape, jnp.int32))


@pytest.fixture(autouse=True)
def _stock_afterwards():
    yield
    smtdims.uninstall()


def test_seed_row_13_exports_and_nothing_is_flagged(stock):
    b, = export.symbolic_shape("b")
    with audit() as report:
        assert smtdims.is_installed()
        exp = _export(lambda x: lax.slice_in_dim(x, 0, x.shape[0] % 3), (b,))
    assert not smtdims.is_installed()  # restored
    assert str(exp.out_avals[0].shape) == "(mod(b, 3),)"
    assert report.flagged == []
    by_q = {r.question: r for r in report.records}
    rec = by_q["'b' >= 'mod(b, 3)'"]
    assert rec.kind == "compare" and rec.answer == "True" and rec.answered_by == "smtdims solver"
    assert rec.location.split(":")[0].endswith(HERE)
    # '<' questions are computed by JAX as not(>=): the recorded answer is the final one
    assert by_q["'mod(b, 3)' < '0'"].answer == "False"
    assert by_q["bounds of mod(b, 3)"].answered_by == "stock JAX"  # linear: JAX's heuristic is trusted
    assert report.events >= len(report.records)


def test_inconclusive_comparison_is_flagged_with_a_verified_fix(stock):
    b, = export.symbolic_shape("b")
    with pytest.raises(Exception, match="inconclusive"), audit() as report:
        _export(lambda x: lax.slice_in_dim(x, 0, 16), (b,))
    [rec] = [r for r in report.flagged if r.flag == INCONCLUSIVE]
    assert rec.question == "'b' >= '16'"
    assert "add the constraint 'b >= 16'" in rec.detail
    assert rec.witness == {"b": 1}
    assert smtdims.decide("b", ">=", 16, constraints=["b >= 16"]).status == "true"


def test_unproven_inequality_shows_where_they_are_equal(stock):
    b, = export.symbolic_shape("b")

    def f(x):
        return x if x.shape[0] == 1 else x + 1  # the user's branch on ==

    with audit() as report:
        _export(f, (b,))
    [rec] = [r for r in report.flagged if r.flag == UNPROVEN_INEQUALITY]
    assert rec.question == "b == 1" and rec.answer == "False"
    assert rec.witness == {"b": 1}
    assert "equal at b = 1" in rec.detail
    assert rec.location.split(":")[0].endswith(HERE) and rec.location.endswith("in f")


def test_provably_equal_but_jax_said_false(stock):
    smtdims.install(equality=False)  # stock equality: syntactic
    a, = export.symbolic_shape("a")
    with audit() as report:
        assert ((a // 2) * 2 + a % 2 == a) is False
    assert smtdims.is_installed()  # an existing installation is left alone
    [rec] = report.flagged
    assert rec.flag == PROVABLY_EQUAL and rec.answered_by == "stock JAX"


def test_stock_answer_refuted_by_the_solver(stock):
    b, = export.symbolic_shape("b")
    e = ((b - 10) // 3) ** 2
    assert adapter.stock_bounds(e)[0] == 9  # stock JAX's unsound lower bound (0 at b = 10)

    def f(x):
        n = x.shape[0]
        return x if ((n - 10) // 3) ** 2 >= 9 else x + 1

    with pytest.raises(Exception, match="inconclusive"), audit() as report:
        _export(f, (b,))
    [rec] = [r for r in report.flagged if r.flag == REFUTED_STOCK]
    value = parse_expr("floordiv(b - 10, 3)^2 - 9").evaluate(rec.witness)
    assert value < 0  # stock claimed >= 0
    assert "would have given" in rec.detail


def test_synthetic_stock_events_correct_and_wrong(stock):
    b, = export.symbolic_shape("b", constraints=("b >= 4",))
    report = AuditReport()
    ok = dict(kind="bounds", question="bounds of b", expr=b, prec="best", answer=(4, float("inf")),
              answered_by="stock", stock=(4, float("inf")), scope=b.scope)
    wrong = dict(ok, question="bounds of b - 1", expr=b - 1, stock=(5, float("inf")), answer=(5, float("inf")))
    for _ in range(2):  # same question, same line: merged
        report.record(ok)
    report.record(wrong)
    report.close()
    recs = {r.question: r for r in report.records}
    assert recs["bounds of b"].flag is None and recs["bounds of b"].count == 2
    assert recs["bounds of b"].answered_by == "stock JAX"
    assert recs["bounds of b - 1"].flag == REFUTED_STOCK and recs["bounds of b - 1"].witness == {"b": 4}
    report.record(ok)  # closed: nothing more is recorded
    assert report.events == 3


def test_report_outputs(stock):
    b, = export.symbolic_shape("b")
    with audit() as report:
        _export(lambda x: x if x.shape[0] == 1 else x + 1, (b,))
    text = str(report)
    assert text.splitlines()[0].startswith(f"{report.events} decisions")
    assert "flag" in text.splitlines()[1] and UNPROVEN_INEQUALITY in text
    dicts = json.loads(report.to_json())
    assert dicts == report.to_dicts()
    assert {"kind", "question", "answer", "answered_by", "location", "flag", "witness", "count"} <= set(dicts[0])
    assert "<table>" in report._repr_html_() and "b == 1" in report._repr_html_()
    assert len(report) == len(dicts) and list(report) == report.records


def test_reading_the_report_inside_the_block(stock):
    b, = export.symbolic_shape("b")
    with audit() as report:
        _export(lambda x: x if x.shape[0] == 1 else x + 1, (b,))
        early = report.flagged  # analysis inside the block must not record its own questions or deadlock
        _export(lambda x: lax.slice_in_dim(x, 0, x.shape[0] % 3), (b,))
    assert [r.flag for r in early] == [UNPROVEN_INEQUALITY]
    assert len(report.records) > len(early) and [r.flag for r in report.flagged] == [UNPROVEN_INEQUALITY]


def test_listener_removed_and_budget_restored(stock):
    from smtdims.reasoner import CONFIG

    before = CONFIG.budget
    with audit(budget=12345) as report:
        assert report.record in adapter._LISTENERS
        assert CONFIG.budget == 12345
    assert report.record not in adapter._LISTENERS
    assert CONFIG.budget == before and not smtdims_jax.is_installed()

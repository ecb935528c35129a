"""Audit mode: every decision recorded with who answered and where; doubtful ones flagged;
questions JAX asks itself counted, not shown."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import pytest
import smtdims_jax
from jax import export, lax
from smtdims_jax import equality, listeners
from smtdims_jax.audit import (
    INCONCLUSIVE,
    JAX,
    PROVABLY_EQUAL,
    REFUTED_STOCK,
    UNPROVEN_INEQUALITY,
    USER,
    AuditReport,
    audit,
    cell_name,
    display_filename,
    user_location,
)
from smtdims_jax.jax_internals import stock_bounds

import smtdims
from smtdims.lang.parser import parse_expr
from tests.jax.colliding_key import CollidingKey

HERE = os.path.basename(__file__)


def _export(f, shape):
    return export.export(jax.jit(f))(jax.ShapeDtypeStruct(shape, jnp.int32))


@pytest.fixture(autouse=True)
def _stock_afterwards():
    yield
    smtdims.uninstall()


def test_seed_row_13_exports_and_nothing_is_flagged(stock):
    b, = export.symbolic_shape("b")
    with audit(show_internal=True) as report:
        assert smtdims.is_installed()
        exp = _export(lambda x: lax.slice_in_dim(x, 0, x.shape[0] % 3), (b,))
    assert not smtdims.is_installed()  # restored
    assert str(exp.out_avals[0].shape) == "(mod(b, 3),)"
    shown, everything = _views(report)
    assert [r for r in shown if r.flag] == []  # by default: nothing flagged (JAX's own == checks are not shown)
    by_q = {r.question: r for r in everything}
    rec = by_q["'b' >= 'mod(b, 3)'"]
    assert rec.kind == "compare" and rec.answer == "True"
    assert rec.answered_by in ("smtdims solver", "smtdims fast path")  # stock JAX cannot prove it
    assert rec.location.split(":")[0].endswith(HERE)
    assert rec.origin == JAX  # asked by lax.slice_in_dim, not by the lambda itself
    # '<' questions are computed by JAX as not(>=): the recorded answer is the final one
    assert by_q["'mod(b, 3)' < '0'"].answer == "False"
    assert by_q["bounds of mod(b, 3)"].answered_by in ("stock JAX", "smtdims fast path")
    assert report.events >= len(report.records)


def test_inconclusive_comparison_is_flagged_with_a_verified_fix(stock):
    b, = export.symbolic_shape("b")
    with pytest.raises(Exception, match="inconclusive"), audit() as report:
        _export(lambda x: lax.slice_in_dim(x, 0, 16), (b,))
    [rec] = [r for r in report.flagged if r.flag == INCONCLUSIVE]
    assert rec.origin == JAX  # asked inside lax.slice_in_dim, shown all the same: the export fails there
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
    assert rec.origin == USER


def test_provably_equal_but_jax_said_false(stock):
    smtdims.install(equality=False)  # stock equality: syntactic
    a, = export.symbolic_shape("a")
    with audit() as report:
        assert ((a // 2) * 2 + a % 2 == a) is False
    assert smtdims.is_installed()  # an existing installation is left alone
    [rec] = report.flagged
    assert rec.flag == PROVABLY_EQUAL and rec.answered_by == "stock JAX"


# Stock JAX's unsound answers: (spec, constraints, expression, stock's claimed lower bound,
# versions with that bug). JAX 0.12 fixed the even power (0 is now a candidate); its float
# division of large integers is unsound in every supported release.
_A = 2**55 + 1
STOCK_UNSOUND = [
    pytest.param("b", (), "floordiv(b - 10, 3)^2", 9, lambda n: ((n - 10) // 3) ** 2,
                 marks=pytest.mark.skipif(jax.__version_info__ >= (0, 12),
                                          reason="fixed in jax 0.12"), id="even-power"),
    pytest.param("b", (f"b >= {_A}",), "floordiv(b, 5)", _A // 5 + 1, lambda n: n // 5, id="float-division"),
]


@pytest.mark.parametrize("spec, constraints, text, claimed, fn", STOCK_UNSOUND)
def test_stock_answer_refuted_by_the_solver(stock, spec, constraints, text, claimed, fn):
    b, = export.symbolic_shape(spec, constraints=constraints)
    assert stock_bounds(fn(b))[0] == claimed  # stock JAX's unsound lower bound

    def f(x):
        return x if fn(x.shape[0]) >= claimed else x + 1

    with pytest.raises(Exception, match="inconclusive"), audit() as report:
        _export(f, (b,))
    [rec] = [r for r in report.flagged if r.flag == REFUTED_STOCK]
    value = parse_expr(f"{text} - {claimed}").evaluate(rec.witness)
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
    assert text.splitlines()[0].startswith(f"{report.events} decision")
    assert "flag" in text.splitlines()[1] and UNPROVEN_INEQUALITY in text
    dicts = json.loads(report.to_json())
    assert dicts == report.to_dicts()
    assert {"kind", "question", "answer", "answered_by", "location", "flag", "witness", "count", "origin"} <= set(dicts[0])
    page = report._repr_html_()
    assert "<table>" in page and "b == 1" in page
    # Jupyter right-aligns table cells: every cell says otherwise
    assert page.count("<td") == page.count('<td style="text-align: left') > 0
    assert page.count("<th") == page.count('<th style="text-align: left') > 0
    assert len(report) == len(dicts) and list(report) == report.records


def test_reading_the_report_inside_the_block(stock):
    b, = export.symbolic_shape("b")
    with audit() as report:
        _export(lambda x: x if x.shape[0] == 1 else x + 1, (b,))
        early = report.flagged  # analysis inside the block must not record its own questions or deadlock
        _export(lambda x: lax.slice_in_dim(x, 0, x.shape[0] % 3), (b,))
    assert [r.flag for r in early] == [UNPROVEN_INEQUALITY]
    assert len(report.all_records) > len(early) and [r.flag for r in report.flagged] == [UNPROVEN_INEQUALITY]


def test_listener_removed_and_budget_restored(stock):
    from smtdims.reasoner import CONFIG

    before = CONFIG.budget
    with audit(budget=12345) as report:
        assert report.record in listeners.listeners()
        assert CONFIG.budget == 12345
    assert report.record not in listeners.listeners()
    assert CONFIG.budget == before and not smtdims_jax.is_installed()


# -- who asked: user code or JAX itself -------------------------------------------------------------------
def _views(report: AuditReport) -> tuple[list, list]:
    """(records shown by default, records shown with show_internal=True) of one report."""
    assert report.show_internal
    everything = report.records
    report.show_internal = False
    try:
        return report.records, everything
    finally:
        report.show_internal = True


def test_mlp_internal_equality_checks_are_counted_not_flagged(stock):
    b, = export.symbolic_shape("b")
    w, bias = jnp.ones((4, 3)), jnp.ones((3,))

    def mlp(x):
        h = jnp.dot(x, w) + bias
        return jnp.mean(jax.nn.relu(h), axis=0)

    with audit(show_internal=True) as report:
        export.export(jax.jit(mlp))(jax.ShapeDtypeStruct((b, 4), jnp.float32))
    shown, everything = _views(report)
    jax_flags = [r for r in everything if r.flag == UNPROVEN_INEQUALITY]
    assert any(r.question == "b == 1" for r in jax_flags)  # broadcasting's own check
    assert all(r.origin == JAX for r in everything)  # the MLP compares no dimension itself
    assert shown == []
    report.show_internal = False
    assert report.flagged == [] and report.internal == len(everything)
    assert f"{report.internal} asked inside JAX, not shown" in report.summary()
    assert "asked by" not in str(report)


def test_concatenate_internal_checks_are_counted_not_flagged(stock):
    a, b = export.symbolic_shape("a, b")

    def f(x, y):
        return jnp.concatenate([x, y, x[:3]])

    with audit(show_internal=True) as report:
        export.export(jax.jit(f))(jax.ShapeDtypeStruct((a,), jnp.float32), jax.ShapeDtypeStruct((b,), jnp.float32))
    shown, everything = _views(report)
    questions = {r.question for r in everything}
    # the export's shape assertions look expressions up in a dict: a key comparison, not a decision
    assert "args[0].shape[0] == args[0].shape[0]" not in questions
    flagged = [r for r in everything if r.flag]
    assert flagged and {r.flag for r in flagged} == {UNPROVEN_INEQUALITY}
    assert all(" == " in r.question for r in flagged), flagged  # JAX's own == checks (== 0, == 1, ...)
    assert all(r.origin == JAX for r in everything) and shown == []
    assert "asked by" in str(report) and "JAX" in str(report)  # show_internal: a column says who asked


def test_user_comparisons_are_shown_and_flagged(stock):
    b, = export.symbolic_shape("b")

    def f(x):
        y = x if x.shape[0] == 1 else jnp.concatenate([x, x[:3]]).sum() + x  # the user's == (JAX's own in concatenate)
        big = jax.core.max_dim(x.shape[0], 4) >= 4  # a JAX dimension helper called from user code
        return y if big else y + 1

    with audit(show_internal=True) as report:
        _export(f, (b,))
    shown, everything = _views(report)
    [eq] = [r for r in shown if r.flag == UNPROVEN_INEQUALITY]
    assert eq.question == "b == 1" and eq.origin == USER and eq.location.endswith("in f")
    assert any(r.question == "'max(b, 4)' >= '4'" and r.answer == "True" for r in shown)
    assert all(r.origin == USER and r.location.endswith("in f") for r in shown)
    assert len(everything) > len(shown)  # JAX's own questions: hidden by default

    def g(x):
        return x if x.shape[0] >= 16 else x + 1

    with pytest.raises(Exception, match="inconclusive"), audit() as report:
        _export(g, (b,))
    [rec] = [r for r in report.records if r.flag == INCONCLUSIVE]
    assert rec.question == "'b' >= '16'" and rec.origin == USER and rec.location.endswith("in g")


def test_user_comparison_inside_a_function_jax_calls_back(stock):
    b, = export.symbolic_shape("b")

    def body(i, acc):  # called by lax.fori_loop: its own comparison is the user's
        return acc + 1 if acc.shape[0] == 1 else acc

    with audit() as report:
        _export(lambda x: lax.fori_loop(0, 3, body, x), (b,))
    [rec] = report.flagged
    assert rec.question == "b == 1" and rec.origin == USER and rec.location.endswith("in body")


def test_key_comparisons_of_lookups_are_not_decisions(stock):
    """A dict or cache lookup compares keys with ``==``; which lookups compare which keys
    depends on hash values (randomised per process), so recording them made the same audit
    differ between runs. The ``==`` that code writes is recorded, however it is reached."""
    b, = export.symbolic_shape("b")
    with audit(show_internal=True) as report:
        table = {CollidingKey((16,)): "sixteen"}
        assert table.get(CollidingKey((b,))) is None  # a lookup: not a decision
        assert table.setdefault(CollidingKey((b,)), "b") == "b"
        cached = functools.lru_cache(lambda k: k.shape)
        assert cached(CollidingKey((16,))) == (16,) and cached(CollidingKey((b,))) == (b,)
        assert cached.cache_info().currsize == 2  # the second call compared its key with the first
    assert report.events == 0 and report.all_records == []
    with audit(show_internal=True) as report:
        assert not (CollidingKey((b,)) == CollidingKey((16,)))  # written: through the key's __eq__
        assert b != 16
        assert 16 not in (b, 4) and 3 not in [b]
    asked: dict[str, int] = {}
    for r in report.all_records:
        asked[r.question] = asked.get(r.question, 0) + r.count
    assert asked == {"b == 16": 3, "b == 3": 1}


def test_the_rule_on_hand_made_frames(stock):
    """Frames compiled under JAX's file names: what counts is the chain between the innermost user
    frame and the decision."""
    b, = export.symbolic_shape("b")
    jax_dir = os.path.dirname(jax.__file__)
    report = AuditReport()

    def under(path: str, name: str, call: str):  # a function `name(fn)` whose frame lies in `path`
        ns: dict = {}
        exec(compile(f"def {name}(fn):\n    return {call}\n", os.path.join(jax_dir, *path.split("/")), "exec"), ns)
        return ns[name]

    library = under("_src/numpy/reductions.py", "mean", "fn()")  # jnp-like code
    operator = under("_src/export/shape_poly.py", "__eq__", "fn()")  # a _DimExpr operator
    max_dim = under("_src/core.py", "max_dim", "fn()")  # a dimension helper of jax.core
    other_core = under("_src/core.py", "bind", "fn()")
    ns: dict = {}  # the decision itself: a frame of the plugin (as equality.smt_eq is)
    exec(compile("def smt_eq(report, event):\n    return lambda: report.record(event)\n", equality.__file__, "exec"), ns)
    ask = lambda q: ns["smt_eq"](report, dict(  # noqa: E731
        kind="eq", question=q, lhs=b, rhs=1, answer=False, proven_equal=False, answered_by="smtdims"))
    ask("direct")()
    operator(ask("operator"))
    max_dim(lambda: operator(ask("max_dim")))
    library(functools.partial(operator, ask("library")))  # jnp code calling ==: partial adds no frame
    other_core(ask("bind"))
    library(lambda: [operator(ask("callback")) for _ in [0]])  # a user callback JAX calls: the user asks
    library(lambda: library(ask("nested")))
    report.close()
    origins = {r.question: r.origin for r in report.all_records}
    assert origins == {"direct": USER, "operator": USER, "max_dim": USER, "library": JAX, "bind": JAX,
                       "callback": USER, "nested": JAX}
    assert all(r.location.split(":")[0].endswith(HERE) for r in report.all_records)
    assert {r.question for r in report.records} == {"direct", "operator", "max_dim", "callback"}
    assert report.internal == 3


# -- notebook cells ------------------------------------------------------------------------------------------
class _FakeShell:
    def __init__(self, filename_map):
        from IPython.core.compilerop import CachingCompiler

        self.compile = CachingCompiler()
        self.compile._filename_map.update(filename_map)


def test_cell_names(monkeypatch):
    import IPython

    cell = "/tmp/ipykernel_4242/1473875025.py"
    monkeypatch.setattr(IPython, "get_ipython", lambda: None)  # no shell: the name still reads as a cell
    assert cell_name(cell) == "<cell>" and display_filename(cell) == "<cell>"
    assert cell_name("<ipython-input-5-0123abcd>") == "In [5]"  # the terminal's names carry the count
    assert cell_name(__file__) is None and display_filename(__file__) == __file__
    monkeypatch.setattr(IPython, "get_ipython", lambda: _FakeShell({cell: 7}))
    assert cell_name(cell) == "In [7]"
    assert cell_name("/tmp/ipykernel_4242/99.py") == "<cell>"  # a cell IPython does not know (yet)
    # a frame compiled under a cell's name is reported as that cell
    code = compile("def f():\n    return where()\n", cell, "exec")
    ns = {"where": user_location}
    exec(code, ns)
    assert ns["f"]() == "In [7]:2 in f"
    monkeypatch.setattr(IPython, "get_ipython", lambda: _FakeShell({cell: 8}))  # the cell run again
    assert ns["f"]() == "In [8]:2 in f"  # the memoised names are files', never cells'


def test_a_location_follows_the_working_directory(tmp_path, monkeypatch):
    """Locations are memoised per file and working directory: a script that changes directory
    reads paths relative to the new one, as before the memo."""
    src = tmp_path / "pkg" / "mod.py"
    src.parent.mkdir()
    ns = {"where": user_location}
    exec(compile("def f():\n    return where()\n", str(src), "exec"), ns)
    monkeypatch.chdir(tmp_path)
    assert ns["f"]() == os.path.join("pkg", "mod.py") + ":2 in f"
    monkeypatch.chdir(src.parent)
    assert ns["f"]() == "mod.py:2 in f"


def test_audit_lives_on_the_plugin_side():
    core_audit = os.path.join(os.path.dirname(smtdims.__file__), "audit.py")
    if os.path.exists(core_audit):  # at most a lazy re-export of smtdims_jax.audit
        text = open(core_audit).read()
        assert "def _analyse" not in text and "class AuditReport" not in text
    code = ("import sys, smtdims, smtdims.reasoner, smtdims.answers.explain, smtdims.lang.results, "
            "smtdims.show.html, smtdims.show.forms, smtdims.show.plot, smtdims.answers.diagnostics, smtdims.api\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('jax', 'jaxlib', 'smtdims_jax'))\n"
            "assert not bad, bad\n")
    subprocess.run([sys.executable, "-c", code], check=True)
    assert smtdims.audit is audit and smtdims.AuditReport is AuditReport  # lazy names of the package

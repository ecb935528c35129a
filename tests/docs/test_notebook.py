"""The constraint-debugging notebook: committed with its outputs, executed (a copy) end to end,
and what its cells show is checked here, not by assertions in the reader's cells; the
rendering helpers it uses are exact."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import random
import re
import shutil
import sys
from pathlib import Path

import nbformat
import pytest

from smtdims.lang.parser import parse_expr
from smtdims.show.forms import comparison_latex, latex, to_sympy
from smtdims.show.html import html_row, html_table, table_style
from smtdims.show.plot import classify_region, plot_region

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "constraint_debugging.ipynb"
KERNEL = "smtdims-test-python"


# -- what the cells show (checked on the committed outputs and on a fresh execution) ------------------------
def _cells(nb) -> dict[str, nbformat.NotebookNode]:
    return {c.id: c for c in nb.cells}


def _shown(cell, mime: str | None = None) -> str:
    """Everything a code cell shows: printed text and the rich outputs (of one MIME type, if given)."""
    parts: list[str] = []
    stream = False  # consecutive stream chunks are one text (the kernel may split one print)
    for o in cell.outputs:
        if o.output_type == "stream" and mime in (None, "text/plain"):
            if stream:
                parts[-1] += o.text
            else:
                parts.append(o.text)
            stream = True
            continue
        stream = False
        if o.output_type in ("display_data", "execute_result"):
            for k, v in o.data.items():
                if mime in (None, k) and not k.startswith("image/"):
                    parts.append(v if isinstance(v, str) else "".join(v))
    return "\n".join(parts)


def _check_outputs(nb) -> None:
    cells = _cells(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    for c in code:
        assert not any(o.output_type == "error" for o in c.outputs), c.id
        assert "ipykernel_" not in _shown(c), f"{c.id}: a cell's temporary file name shows instead of the cell"
    # sequential execution, every cell has run
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1))

    text = _shown(cells["undetermined-export"])
    assert "'a + 1' >= 'b' is inconclusive" in text and "b = " in text and "suggested fix" in text
    assert re.search(r"the comparison arose at In \[\d+\]:1 in <lambda>", text), text
    assert "\\geq" in _shown(cells["undetermined-decide"], "text/latex")
    decide = _shown(cells["undetermined-decide"], "text/html")
    assert "undetermined" in decide and "true at" in decide and "false at" in decide
    fixes = _shown(cells["undetermined-explain"], "text/html")
    assert "b &lt;= 2" in fixes and "a + 1 &gt;= b" in fixes and "verified fixes" in fixes

    plot = cells["undetermined-plot"]
    assert [o for o in plot.outputs if "image/png" in o.get("data", {})]
    before, first, after = _shown(plot).splitlines()[-3:]
    assert "'fails': 0" not in before and "'fails': 0" in first and "'fails': 0" in after
    assert "'infeasible': 0" in before and "'holds': 89" in before and "'holds': 89" in first
    assert "a + 1 >= b ->" in _shown(cells["undetermined-fixed"]) and "int32[]" in _shown(cells["undetermined-fixed"])

    row7 = _shown(cells["inconclusive-explain"], "text/html")
    for q in ("b &gt;= 2", "a &gt;= b", "a - b &gt;= 0"):
        assert f"<code>{q}</code> is <b" in row7 and "undetermined" in row7

    sl = _shown(cells["slice-error"])
    assert "'b' >= '16' is inconclusive" in sl and "b &gt;= 16" in sl and "b + 15" in sl
    assert "int32[16]" in _shown(cells["slice-fixed"]) and "native function: True" in _shown(cells["slice-fixed"])

    mod = _shown(cells["mod-audit"], "text/html")
    assert "int32[mod(b, 3)]" in _shown(cells["mod-audit"]) and "nothing flagged" in mod
    assert re.search(r"\d+ asked inside JAX, not shown", mod), mod
    everything = _shown(cells["mod-internal"], "text/html")
    assert "&#x27;b&#x27; &gt;= &#x27;mod(b, 3)&#x27;" in everything
    assert re.search(r"mod\(b, 3\)&#x27;</code></td><td[^>]*>True</td><td[^>]*>smtdims (solver|fast path)<", everything)
    assert "asked by" in everything and "JAX" in everything and "nothing flagged" in everything
    assert "b = 1..10: True" in _shown(cells["mod-run"]) and "is <b style='color:#1a7f37'>true" in _shown(cells["mod-run"])

    eq = _shown(cells["eq-audit"], "text/html")
    assert "1 unproven-inequality" in eq and "<code>b == 1</code>" in eq and "equal at b = 1" in eq
    assert re.search(r"In \[\d+\]:2 in &lt;lambda&gt;", eq), eq  # the cell, not /tmp/ipykernel_*/NNN.py
    assert eq.count("<td") == eq.count('<td style="text-align: left') > 0  # Jupyter would right-align

    assert "batch: (128, 1024)  free: (1, inf)" in _shown(cells["bounds-explain"])
    bounds = _shown(cells["bounds-explain"], "text/html")
    assert "257" in bounds and "2049" in bounds and "batch &gt;= 128" in bounds and "batch &lt;= 1024" in bounds
    assert "1024" in _shown(cells["bounds-check"], "text/html")
    assert [o for o in cells["plot-fixed"].outputs if "image/png" in o.get("data", {})]


_TOOL = ROOT / "tools" / "notebook_outputs.py"
_spec = importlib.util.spec_from_file_location("notebook_outputs", _TOOL)
notebook_outputs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(notebook_outputs)
visible_outputs, stale_outputs = notebook_outputs.visible_outputs, notebook_outputs.stale_outputs


def test_notebook_is_committed_with_its_outputs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    assert NOTEBOOK.stat().st_size < 1_000_000, "keep pictures small (modest dpi)"
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.execution_count is not None, f"{cell.id}: not executed; run bash scripts/notebook.sh"
            assert "execution" not in cell.metadata, "timing metadata: regenerate with scripts/notebook.sh"
    _check_outputs(nb)  # the committed outputs are current: regenerate with bash scripts/notebook.sh


def test_notebook_reads_as_a_tutorial():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not re.search(r"^\s*assert\b", cell.source, re.M), f"{cell.id}: checks belong in tests/docs/test_notebook.py"
            assert "raise AssertionError" not in cell.source, cell.id
    text = "\n".join(c.source for c in nb.cells)
    # every file it names is in the repository
    for name in re.findall(r"[\w./-]+\.(?:md|py|sh|ipynb|json|toml)\b", text):
        if "/" in name or name.isupper() or name.endswith((".md", ".sh", ".ipynb")):
            assert (ROOT / name).exists(), f"the notebook cites {name}, which the repository does not have"
    assert "SEED-EXAMPLES" not in text
    for api in ("explain(", "audit()", "audit(show_internal=True)", "plot_region(", "latex(", "check_constraints("):
        assert api in text


@pytest.fixture
def kernel_from_this_interpreter(tmp_path, monkeypatch) -> str:
    """A kernel spec that launches ipykernel with the running interpreter (no global install needed)."""
    import ipykernel  # noqa: F401  (the kernel runs `python -m ipykernel_launcher`)

    spec = tmp_path / "jupyter" / "kernels" / KERNEL
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "smtdims tests", "language": "python",
        "env": {"JAX_PLATFORMS": "cpu", "MPLBACKEND": "module://matplotlib_inline.backend_inline"},
    }))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))
    return KERNEL


def test_notebook_executes(kernel_from_this_interpreter, tmp_path):
    from nbclient import NotebookClient

    before = hashlib.sha256(NOTEBOOK.read_bytes()).hexdigest()
    copy = tmp_path / NOTEBOOK.name
    shutil.copy(NOTEBOOK, copy)  # executed and checked as a copy: the committed file is never written
    nb = nbformat.read(copy, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    client = NotebookClient(nb, timeout=240, kernel_name=kernel_from_this_interpreter, record_timing=False,
                            resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # raises CellExecutionError on the first failing cell
    _check_outputs(nb)
    assert hashlib.sha256(NOTEBOOK.read_bytes()).hexdigest() == before
    stale = stale_outputs(nbformat.read(NOTEBOOK, as_version=4), nb)
    assert not stale, f"the committed outputs are stale: regenerate with bash scripts/notebook.sh\n{stale[:6000]}"


def test_stale_outputs_are_detected():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    fresh = nbformat.read(NOTEBOOK, as_version=4)
    assert stale_outputs(nb, fresh) == ""
    cell = next(c for c in fresh.cells if c.id == "undetermined-decide")
    out = next(o for o in cell.outputs if o.output_type == "execute_result")
    out.data["text/plain"] = out.data["text/plain"].replace("answered_by='points'", "answered_by='presburger'")
    assert "answered_by='presburger'" in stale_outputs(nb, fresh)
    plain = nbformat.v4.new_output("stream", name="stdout", text="took 0.52 s, object at 0x7f00aa\n")
    other = nbformat.v4.new_output("stream", name="stdout", text="took 13 ms, object at 0x1234\n")
    cell.outputs.append(plain)
    nb_cell = next(c for c in nb.cells if c.id == "undetermined-decide")
    nb_cell.outputs.append(other)
    out.data["text/plain"] = out.data["text/plain"].replace("answered_by='presburger'", "answered_by='points'")
    assert stale_outputs(nb, fresh) == ""  # durations and addresses are masked


def test_the_introduction_counts_the_sections_and_uses_the_public_api():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    sections = [c for c in nb.cells if c.cell_type == "markdown" and c.source.startswith("## ")]
    words = {4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight"}
    assert f"takes {words[len(sections)]} of them" in nb.cells[0].source, len(sections)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert not re.search(r"from smtdims\.(diagnostics|explain) import", code)
    assert "from smtdims import check_constraints, explain" in code


def test_the_notebooks_claims():
    """What the notebook's text says about each example, checked through the API."""
    import smtdims
    from smtdims.answers.explain import explain

    d5 = smtdims.decide("a + 1", ">=", "b")
    assert d5.status == "undetermined"
    assert d5.witness_true["a"] + 1 >= d5.witness_true["b"] and d5.witness_false["a"] + 1 < d5.witness_false["b"]
    fixes = d5.explain().fixes
    assert {"b <= 2", "a + 1 >= b"} <= {f.text for f in fixes}
    for fix in fixes:  # "each one has been re-decided with the fix added"
        assert fix.verified
        if fix.kind == "constraint":
            assert smtdims.decide("a + 1", ">=", "b", constraints=[fix.text]).status == "true", fix
    assert fixes[0].text == "a + 1 >= b"  # "the comparison itself comes first"
    whole = classify_region("a + 1", ">=", "b", x="a", y="b", x_range=(1, 12), y_range=(1, 12))
    first = classify_region("a + 1", ">=", "b", [fixes[0].text], x="a", y="b", x_range=(1, 12), y_range=(1, 12))
    fixed = classify_region("a + 1", ">=", "b", ["b <= 2"], x="a", y="b", x_range=(1, 12), y_range=(1, 12))
    # "the first fix cuts away exactly the red points"; "b <= 2 cuts them away too, and many green ones"
    assert first.fails == () and len(first.holds) == len(whole.holds)
    assert fixed.fails == () and 0 < len(fixed.holds) < len(whole.holds) / 2
    for lhs, op, rhs in (("b", ">=", 2), ("a", ">=", "b"), ("a - b", ">=", 0)):
        ex = explain(lhs, op, rhs)
        assert ex.status == "undetermined" and ex.fixes and ex.witness_true and ex.witness_false
    ex9 = explain("b", ">=", 16)
    assert {f.kind: f.text for f in ex9.fixes} == {"constraint": "b >= 16", "spec": "b + 15"}
    assert smtdims.decide("b", ">=", "mod(b, 3)").status == "true"
    d13 = smtdims.decide("b", ">=", "mod(b, 3)").explain()
    assert d13.support == ("b >= 1 (dimension variable)",)
    b14 = smtdims.bounds("2*batch + 1", constraints=["batch >= 128", "batch <= 1024"])
    assert b14 == (257, 2049) and b14.tight


# -- rendering helpers ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("text", [
    "2*b + 1", "mod(b, 3) - floordiv(a - 7, 2)", "max(a, b) - min(a, 2)", "a^2*b - mod(a, -3)", "floordiv(a, b)",
    "floordiv(-a, 4) + mod(b - 9, 5)",
])
def test_sympy_form_agrees_with_exact_evaluation(text):
    e = parse_expr(text)
    s = to_sympy(e)
    symbols = {str(x): x for x in s.free_symbols}
    rng = random.Random(text)
    for _ in range(40):
        env = {v: rng.randint(1, 30) for v in e.variables()}
        assert s.subs({symbols[k]: v for k, v in env.items() if k in symbols}) == e.evaluate(env), env


def test_latex():
    assert latex("2*b + 1") == "2 b + 1"
    assert r"\bmod" in latex("mod(b, 3)") and r"\lfloor" in latex("floordiv(a, 2)")
    assert comparison_latex("a + 1", ">=", "b") == r"a + 1 \geq b"


def test_region_classification_is_exact():
    r = classify_region("a + 1", ">=", "b", ["a <= 5"], x="a", y="b", x_range=(1, 8), y_range=(1, 8))
    assert set(r.infeasible) == {(x, y) for x in range(6, 9) for y in range(1, 9)}
    assert set(r.holds) == {(x, y) for x in range(1, 6) for y in range(1, 9) if x + 1 >= y}
    assert set(r.fails) == {(x, y) for x in range(1, 6) for y in range(1, 9) if x + 1 < y}
    assert r.counts() == {"holds": len(r.holds), "fails": len(r.fails), "infeasible": 24}


def test_region_fixes_other_variables_and_zero_divisors():
    r = classify_region("floordiv(a, c - 2)", ">=", "b", x="a", y="b", x_range=(1, 3), y_range=(1, 3), fixed={"c": 2})
    assert r.holds == () and r.fails == () and len(r.infeasible) == 9  # divisor 0 everywhere


def test_plot_region_draws(monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    r = plot_region("a", ">=", "b", x="a", y="b", x_range=(1, 4), y_range=(1, 4), witnesses={"w": {"a": 1, "b": 2}})
    assert r.figure is not None and r.counts() == {"holds": 10, "fails": 6, "infeasible": 0}
    ax = r.figure.axes[0]
    assert ax.get_xlabel() == "a" and "a >= b" in ax.get_title() and "fixed" not in ax.get_title()


def test_plot_region_names_witnesses_off_the_grid():
    import matplotlib

    matplotlib.use("Agg")
    r = plot_region("a", ">=", "b", x="a", y="b", x_range=(1, 4), y_range=(1, 4),
                    witnesses={"in": {"a": 2, "b": 2}, "out": {"a": 1, "b": 64}})
    ax = r.figure.axes[0]
    assert ax.get_ylim()[1] < 10  # the grid is not stretched to b = 64
    assert [t.get_text() for t in ax.texts] == ["in", "out: a = 1, b = 64 (off the grid)"]


def test_plot_region_names_the_variables_it_fixes():
    import matplotlib

    matplotlib.use("Agg")
    r = plot_region("a + c", ">=", "b", x="a", y="b", x_range=(1, 3), y_range=(1, 3))
    assert r.fixed == {"c": 1} and "c = 1 fixed" in r.figure.axes[0].get_title()
    r = plot_region("a + c + d", ">=", "b", ["d <= 4"], x="a", y="b", x_range=(1, 3), y_range=(1, 3), fixed={"c": 5})
    title = r.figure.axes[0].get_title()
    assert r.fixed == {"c": 5, "d": 1} and "d <= 4; c = 5, d = 1 fixed" in title
    assert r.counts() == classify_region("a + 5 + 1", ">=", "b", x="a", y="b", x_range=(1, 3), y_range=(1, 3)).counts()


def test_html_tables_are_left_aligned():
    assert "text-align: left" in table_style()
    page = html_table([["1", "<code>a</code>"]], header=["x", "y"])
    assert page.count('<th style="text-align: left') == 2 and page.count('<td style="text-align: left') == 2
    assert html_row(["z"]) == f'<tr><td style="{table_style()}">z</td></tr>'


def test_render_imports_sympy_lazily():
    import subprocess

    code = "import sys, smtdims.show.forms; assert 'sympy' not in sys.modules; smtdims.show.forms.latex('a'); print('ok')"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "ok\n"


# -- the demo (examples/seed_demo.py) --------------------------------------------------------------------------
def test_demo_headings_name_what_they_show(capsys):
    import runpy

    import smtdims

    try:
        runpy.run_path(str(ROOT / "examples" / "seed_demo.py"), run_name="__main__")
    finally:
        smtdims.uninstall()
    out = capsys.readouterr().out
    headings = [line[3:] for line in out.splitlines() if line.startswith("## ")]
    assert len(headings) == 8, headings
    for h in headings:
        # a heading says what the example shows, not a number in a list the reader does not have
        assert not re.search(r"\b(row|issue|seed)\b", h, re.I), h
        assert ":" in h and len(h.split(":")[0]) > 8, h
    assert any(h.startswith("undetermined comparison") for h in headings)
    assert any(h.startswith("equal sizes spelled differently") for h in headings)


def test_regenerating_writes_only_when_what_the_cells_show_changed(tmp_path):
    """scripts/notebook.sh leaves the committed notebook untouched when a run differs only in a wall time
    (the whole fix's "2 round(s), 0.7s"), an address or a picture, so git status stays clean."""
    path = tmp_path / NOTEBOOK.name
    shutil.copy(NOTEBOOK, path)
    fresh = nbformat.read(path, as_version=4)
    cell = next(c for c in fresh.cells if c.cell_type == "code" and any(o.output_type == "stream" for o in c.outputs))
    out = next(o for o in cell.outputs if o.output_type == "stream")
    out.text = out.text + "whole fix: fixed, 2 round(s), 9.9s\n"
    committed = nbformat.read(path, as_version=4)
    next(o for o in next(c for c in committed.cells if c.id == cell.id).outputs
         if o.output_type == "stream").text += "whole fix: fixed, 2 round(s), 0.7s\n"
    nbformat.write(committed, path)
    written = path.read_bytes()
    assert not notebook_outputs.write_if_changed(path, fresh)  # only the duration differs
    assert path.read_bytes() == written
    out.text = out.text.replace("2 round(s)", "3 round(s)")
    assert notebook_outputs.write_if_changed(path, fresh)  # what it shows changed: written
    assert path.read_bytes() != written

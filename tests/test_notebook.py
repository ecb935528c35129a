"""The constraint-debugging notebook runs end to end (its cells assert what they show), is
committed without outputs, and the rendering helpers it uses are exact."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import nbformat
import pytest

from smtdims.parser import parse_expr
from smtdims.render import classify_region, comparison_latex, latex, plot_region, to_sympy

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "constraint_debugging.ipynb"
KERNEL = "smtdims-test-python"


def test_notebook_is_committed_without_outputs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code
    for cell in code:
        assert cell.outputs == [] and cell.execution_count is None, cell.source[:60]


def test_notebook_covers_the_seed_rows():
    text = NOTEBOOK.read_text()
    for row in ("Row 5", "Row 7", "Row 9", "Row 13", "Row 14"):
        assert f"## {row}" in text
    for api in ("explain(", "audit()", "plot_region(", "latex(", "check_constraints("):
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


def test_notebook_executes(kernel_from_this_interpreter):
    from nbclient import NotebookClient

    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(nb, timeout=240, kernel_name=kernel_from_this_interpreter,
                            resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    client.execute()  # raises CellExecutionError on the first failing cell (an assertion, say)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    html = [o for o in outputs if "text/html" in o.get("data", {})]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    latex_out = [o for o in outputs if "text/latex" in o.get("data", {})]
    assert len(html) >= 8, "Decision/Bounds/Explanation/audit displays"
    assert images, "the feasible-region picture"
    assert latex_out, "sympy/LaTeX renderings"
    assert not any(o.get("output_type") == "error" for o in outputs)
    # the file on disk is untouched (no outputs committed by running the test)
    assert all(c.outputs == [] for c in nbformat.read(NOTEBOOK, as_version=4).cells if c.cell_type == "code")


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
    assert ax.get_xlabel() == "a" and "a >= b" in ax.get_title()

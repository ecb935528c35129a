"""The fix's family as a picture (``FixResult.plot()``, ``_repr_html_``): the traced shapes in their four
classes, checked against the fix's own values, and the exact region of the fixed family."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from smtdims_jax.pipeline import export_and_verify  # noqa: E402
from smtdims_jax.pipeline.picture import (  # noqa: E402
    ADMITTED_FAILS,
    ADMITTED_RUNS,
    CLASSES,
    EXCLUDED_FAILS,
    EXCLUDED_RUNS,
    TracedShape,
    plot_fix,
    points_of,
    region_of,
)

from examples.fix_two import two  # noqa: E402
from tests.fixtures_pipeline.loop_models import vit_grid  # noqa: E402


def _fix_with_traced(fn: Any, spec: str) -> Any:
    """The whole fix of ``fn``, which keeps the traced shapes it decided on (``FixResult.traced``)."""
    fix = export_and_verify(fn, spec, fix=True, samples=3).fix
    assert fix is not None and fix.traced and all(isinstance(t, TracedShape) for t in fix.traced)
    return fix


@pytest.fixture(scope="module")
def two_fix() -> Iterator[Any]:
    yield _fix_with_traced(two, "float32[b]")


@pytest.fixture(scope="module")
def vit_fix() -> Iterator[Any]:
    yield _fix_with_traced(vit_grid, "float32[b, h, w, 3]")


def _legend(fig: Any) -> list[str]:
    return [t.get_text() for t in fig.axes[0].get_legend().get_texts()]


@pytest.mark.parametrize("which", ["two_fix", "vit_fix"])
def test_the_classes_add_up_to_the_fixs_own_count(which: str, request: pytest.FixtureRequest) -> None:
    fix = request.getfixturevalue(which)
    points, complete = points_of(fix)
    assert complete and points
    kinds = Counter(p.kind for p in points)
    box = fix.box
    assert len(points) == box.shapes
    assert kinds[ADMITTED_RUNS] == box.admitted_ok
    assert kinds[ADMITTED_FAILS] == box.admitted - box.admitted_ok
    assert kinds[EXCLUDED_RUNS] == box.native_ok - box.admitted_ok
    assert kinds[EXCLUDED_FAILS] == box.shapes - box.admitted - (box.native_ok - box.admitted_ok)
    by_env = {tuple(sorted(p.valuation.items())): p for p in points}
    for env in box.excluded_ok:
        assert by_env[tuple(sorted(env.items()))].kind == EXCLUDED_RUNS
    for env in box.admitted_failing:
        assert by_env[tuple(sorted(env.items()))].kind == ADMITTED_FAILS
    for env, runs, admits in fix.extremes:
        p = by_env[tuple(sorted(env.items()))]
        assert (p.runs, p.admitted) == (runs, admits)


def test_two_exact_points(two_fix: Any) -> None:
    """``two`` runs exactly for even b >= 16: the fix 2*k, k >= 8 admits exactly those."""
    for p in points_of(two_fix)[0]:
        b = p.valuation["b"]
        assert p.runs == (b >= 16 and b % 2 == 0) and p.admitted == p.runs, p


def test_a_strip_for_one_size(two_fix: Any) -> None:
    fig = two_fix.plot()
    from matplotlib.figure import Figure

    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "b" and "2*k" in ax.get_title(loc="left") and "k >= 8" in ax.get_title(loc="left")
    labels = _legend(fig)
    for _, label, _ in CLASSES:
        assert any(t.startswith(label) for t in labels), (label, labels)
    assert "admitted and runs natively (7)" in labels and "excluded and fails (8)" in labels
    assert "the fixed family (exact)" in labels


def test_two_sizes_of_a_vit(vit_fix: Any) -> None:
    fig = vit_fix.plot()
    ax = fig.axes[0]
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("h", "w")  # b varies as much, but the fix says nothing of it
    title = ax.get_title(loc="left")
    assert "k_h <= 16" in title and "h, w of b, h, w" in title and "b = 8" in title
    labels = _legend(fig)
    assert [t.split(" (")[0] for t in labels[:4]] == [label for _, label, _ in CLASSES]
    assert "the fixed family (exact)" in labels
    # the region: multiples of 8 up to 128 in h and w, exact, and it agrees with every traced shape
    names = list(vit_fix.box.variables)
    region = region_of(vit_fix, names, ("h", "w"), {"b": 8}, points_of(vit_fix)[0], [140, 140])
    assert region is not None
    assert region[(16, 24)] and region[(128, 128)] and region[(8, 8)]
    assert not region[(12, 16)] and not region[(136, 8)] and not region[(9, 8)]
    assert sum(region.values()) == 16 * 16
    x = plot_fix(vit_fix, x="w", y="b")
    assert (x.axes[0].get_xlabel(), x.axes[0].get_ylabel()) == ("w", "b")
    with pytest.raises(ValueError, match="not a variable"):
        plot_fix(vit_fix, x="k_h")


def test_repr_html_embeds_the_picture_above_the_text(two_fix: Any) -> None:
    page = two_fix._repr_html_()
    assert page.index("<img") < page.index("<pre>")
    assert "data:image/png;base64," in page
    assert "whole fix: fixed" in page and "k &gt;= 8" in page and "k >= 8" not in page.split("<pre>")[1]


def test_without_matplotlib_a_clear_error_and_the_text(two_fix: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(ImportError, match="pip install matplotlib"):
        two_fix.plot()
    page = two_fix._repr_html_()
    assert "pip install matplotlib" in page and "whole fix: fixed" in page and "<img" not in page


def test_a_result_that_keeps_no_traced_shapes_draws_what_it_names(two_fix: Any) -> None:
    """Without ``traced``, the points are the count's examples and the fix's edges, and the title says so."""
    from dataclasses import replace

    fix = replace(two_fix, extremes=(({"b": 16}, True, True), ({"b": 14}, True, False)), extremes_nonempty=(True, True),
                  traced=())
    points, complete = points_of(fix)
    assert not complete
    assert {p.valuation["b"]: p.kind for p in points} == {16: ADMITTED_RUNS, 14: EXCLUDED_RUNS}
    assert "not all it traced" in fix.plot().axes[0].get_title(loc="left")


def test_an_auto_report_draws_its_example() -> None:
    auto = export_and_verify(lambda x: x * 2, np.zeros((3, 5), np.float32), dims="auto", samples=2)
    assert auto.fix is None  # every size free, verified as given: nothing traced
    fig = auto.plot()
    ax = fig.axes[0]
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("a", "b") and "nothing traced" in ax.get_title(loc="left")
    assert "example" in _legend(fig)
    page = auto._repr_html_()
    assert "<img" in page and "auto export of" in page

"""A fix's family as a picture: the traced shapes on a grid, coloured by what they say.

A fix report is text, while the family it describes is a region of sizes: a ViT's fix
``float32[b, 8*k_h, 8*k_w, 3]`` with ``k_h <= 16, k_w <= 16`` is the multiples of 8 up to 128 in
``h`` and ``w``, and its verdict rests on where the shapes the fix traced fall against it. The
picture shows both, over two sizes of the specification as given (the variables the traced shapes
are valuations of):

- every traced shape, in one of four classes (:data:`CLASSES`): admitted and runs natively;
  excluded though it runs; admitted though it fails; excluded and fails. The second is what a user
  loses, the third what the verification must not have missed, so they get the loud colours;
- the exact region of the fixed family, at every integer point of the grid, decided as the fix
  decided each traced shape (:func:`.box.valuation_of`): drawn only where it agrees with the traced
  shapes' own admission, so the background never contradicts the points;
- the user's examples, ringed; the fix (its specification and constraints) in the title.

Nothing is traced here: the native verdicts are the fix's own (:class:`TracedShape`, read from the
:class:`~.result.FixResult`). matplotlib is imported on first use, so the reports stay cheap to
import, and a missing matplotlib is one clear error.
"""

from __future__ import annotations

import base64
import html
import io
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from smtdims.errors import SmtdimsError
from smtdims.lang.constraints import Constraint, ConstraintSet
from smtdims.lang.expr import Expr
from smtdims.lang.parser import parse_expr

from .box import valuation_of

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from .box import Dims, NativeBox

# the four classes, in legend order: (key, label, colour); green and grey agree with the function,
# orange (a user loses it) and red (the fix admits a failure) do not
ADMITTED_RUNS, EXCLUDED_RUNS, ADMITTED_FAILS, EXCLUDED_FAILS = (
    "admitted, runs", "excluded, runs", "admitted, fails", "excluded, fails")
CLASSES: tuple[tuple[str, str, str], ...] = (
    (ADMITTED_RUNS, "admitted and runs natively", "#1a7f37"),
    (EXCLUDED_RUNS, "excluded though it runs", "#d4a72c"),
    (ADMITTED_FAILS, "admitted though it fails", "#cf222e"),
    (EXCLUDED_FAILS, "excluded and fails", "#8c959f"),
)
REGION_COLOUR = "#9fd3ff"  # the fixed family, exact: a pale background under the points
# integer points of the exact region at most (each one exact check, ~10 us): 4096 on a strip, 256 x 256
REGION_CELLS = 1 << 16
REGION_SIDE = (4096, 256)  # the largest size drawn on an axis: one axis, two axes


@dataclass(frozen=True)
class TracedShape:
    """One shape the fix traced natively, as a valuation of the specification as given.

    ``runs``: the native function accepts it (``jax.make_jaxpr``); ``nonempty``: and no array of its
    program is empty (an excluded shape that runs on empty arrays only is nothing a user runs);
    ``admitted``: the fixed specification gives it (exact); ``example``: one of the user's examples.
    """

    valuation: dict[str, int]
    runs: bool
    nonempty: bool
    admitted: bool
    example: bool = False

    @property
    def kind(self) -> str:
        """Which of the four classes (:data:`CLASSES`) the shape is in."""
        if self.admitted:
            return ADMITTED_RUNS if self.runs else ADMITTED_FAILS
        return EXCLUDED_RUNS if self.runs else EXCLUDED_FAILS

    def to_dict(self) -> dict[str, Any]:
        return {"valuation": dict(self.valuation), "runs": self.runs, "nonempty": self.nonempty,
                "admitted": self.admitted, "example": self.example, "kind": self.kind}


def traced_shapes(box: NativeBox, dims: Dims, constraints: ConstraintSet) -> tuple[TracedShape, ...]:
    """The shapes ``box`` traced that the original specification admits, with the fixed specification's
    (``dims`` under ``constraints``) admission of each: the points :meth:`.box.NativeBox.count` counts,
    so the picture's classes add up to the report's numbers. For :func:`.verdict.conclude` to keep in
    the :class:`~.result.FixResult` (the box itself is not kept: it holds the function)."""
    examples = [dict(e) for e in box.examples]
    out = []
    for s, ok in box.ok.items():
        env = box.env[s]
        try:
            if not box.constraints.holds(env):
                continue
        except (ZeroDivisionError, KeyError):
            continue
        out.append(TracedShape(dict(env), ok, s in box.nonempty, box.admits(dims, constraints, s),
                               any(all(env.get(k) == v for k, v in e.items()) for e in examples)))
    return tuple(out)


# -- what a FixResult holds ----------------------------------------------------------------------------------
def points_of(fix: Any) -> tuple[tuple[TracedShape, ...], bool]:
    """The traced shapes a fix result holds, and whether they are all it traced.

    A result that keeps its traced shapes (``fix.traced``) gives them all; one that does not gives what its
    values name: the count's examples (shapes it excludes though they run, shapes it admits though they
    fail) and the fix's edges. Those are true points, only fewer: the title says so."""
    kept = getattr(fix, "traced", None)
    if kept:
        return tuple(kept), True
    pts: dict[tuple[tuple[str, int], ...], TracedShape] = {}
    nonempties = fix.extremes_nonempty or (True,) * len(fix.extremes)
    for (env, runs, admits), ne in zip(fix.extremes, nonempties, strict=True):
        pts[tuple(sorted(env.items()))] = TracedShape(dict(env), runs, ne and runs, admits)
    if fix.box is not None:
        for env in fix.box.excluded_ok:
            pts.setdefault(tuple(sorted(env.items())), TracedShape(dict(env), True, True, False))
        for env in fix.box.admitted_failing:
            pts.setdefault(tuple(sorted(env.items())), TracedShape(dict(env), False, False, True))
    return tuple(pts.values()), False


def substitution(fix: Any) -> dict[str, Expr]:
    """Each variable of the specification as given, as an expression in the fixed one's variables: the
    fix's spec rewrites composed in order (``h`` -> ``8*k_h``; a pinned size -> its number; a variable
    no rewrite names stays itself)."""
    m: dict[str, Expr] = {}
    for p in fix.parts:
        if p.kind != "spec" or not p.variable:
            continue
        new = parse_expr(p.text)
        m = {u: e.substitute({p.variable: new}) for u, e in m.items()}
        m.setdefault(p.variable, new)
    return m


def choose_axes(points: Sequence[TracedShape], names: Sequence[str], fix: Any,
                x: str | None, y: str | None) -> tuple[str, ...]:
    """One or two variables to draw: those named, else the ones the fix restricts, then those whose
    traced values vary most (a batch size traced at aligned sizes varies as much as a height, but the
    fix says nothing about it: the picture is of what the fix says)."""
    if x is not None:
        for v in (x, y):
            if v is not None and v not in names:
                raise ValueError(f"{v!r} is not a variable of the specification as given ({', '.join(names)})")
        return (x,) if y is None else (x, y)
    restricted: set[str] = set()
    if fix is not None:
        for p in fix.parts:
            restricted |= {p.variable} if p.kind == "spec" and p.variable else set()
            if p.kind != "spec":
                try:
                    restricted |= set(Constraint.parse(p.text).diff.variables())
                except SmtdimsError:
                    pass
    spread = {v: len({p.valuation[v] for p in points if v in p.valuation}) for v in names}
    ranked = sorted(names, key=lambda v: (v not in restricted, -spread[v], names.index(v)))
    return tuple(ranked[:2])


def base_of(points: Sequence[TracedShape], names: Sequence[str]) -> dict[str, int]:
    """The slice the region is drawn at: the first example's sizes, else each variable's most common
    traced value (the base point the traces were taken around)."""
    for p in points:
        if p.example:
            return {v: p.valuation[v] for v in names if v in p.valuation}
    base = {}
    for v in names:
        values = Counter(p.valuation[v] for p in points if v in p.valuation)
        base[v] = values.most_common(1)[0][0] if values else 1
    return base


def _axis_values(top: int, side: int) -> list[int]:
    return list(range(1, max(2, min(top, side)) + 1))


def region_of(fix: Any, names: Sequence[str], axes: Sequence[str], base: dict[str, int],
              points: Sequence[TracedShape], tops: Sequence[int]) -> dict[tuple[int, ...], bool] | None:
    """The fixed family at every integer point of the grid (the other variables at ``base``), exact: the
    fixed constraints with the specification as given written in the fixed variables
    (:func:`substitution`), decided by :func:`.box.valuation_of` as the fix decided each traced shape.
    None where it cannot be drawn: a part it cannot read, or a traced shape whose own admission it
    contradicts (then the background would lie; the points are still drawn)."""
    try:
        m = substitution(fix)
        cs = ConstraintSet.of(list(fix.constraints))
    except (SmtdimsError, ValueError):
        return None
    dims = (tuple(m.get(v, Expr.var(v)) for v in names),)

    def admits(env: dict[str, int]) -> bool:
        return valuation_of(dims, cs, (tuple(env[v] for v in names),)) is not None

    for p in points:  # the background must say what the fix said of each traced shape
        if all(v in p.valuation for v in names) and admits(p.valuation) != p.admitted:
            return None
    side = REGION_SIDE[len(axes) - 1]
    grids = [_axis_values(t, side) for t in tops]
    out: dict[tuple[int, ...], bool] = {}
    cells = math.prod(len(g) for g in grids)
    if cells > REGION_CELLS:
        return None
    if len(axes) == 1:
        for a in grids[0]:
            out[(a,)] = admits({**base, axes[0]: a})
    else:
        for a in grids[0]:
            for b in grids[1]:
                out[(a, b)] = admits({**base, axes[0]: a, axes[1]: b})
    return out


def _pyplot_free_figure(size: tuple[float, float]) -> Figure:
    """A Figure outside pyplot: returned to a notebook it shows once (pyplot's would show twice), and
    nothing accumulates in pyplot's list of open figures."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ImportError("the picture of a fix needs matplotlib: pip install matplotlib") from None
    return Figure(figsize=size, dpi=90)


# -- the picture ------------------------------------------------------------------------------------------
def plot_fix(fix: Any, *, x: str | None = None, y: str | None = None, title: str | None = None,
             examples: Sequence[dict[str, int]] = ()) -> Figure:
    """The fix's family over one or two sizes of the specification as given (``x``, ``y``: which; by default
    the ones the fix restricts, then those that vary most). See the module docstring."""
    points, complete = points_of(fix)
    if examples:  # an auto report knows its examples; a fix result that keeps them marks them itself
        marked = [TracedShape(p.valuation, p.runs, p.nonempty, p.admitted,
                              p.example or any(all(p.valuation.get(k) == v for k, v in e.items()) for e in examples))
                  for p in points]
        points = tuple(marked)
    names: list[str] = list(fix.box.variables) if fix.box is not None and fix.box.variables else sorted(
        {v for p in points for v in p.valuation} | {v for e in examples for v in e})
    if not names:
        raise ValueError("the specification has no symbolic size: there is no family to draw")
    axes = choose_axes(points, names, fix, x, y)
    points_base = [*points, *(TracedShape(dict(e), True, True, True, True) for e in examples
                               if not any(p.example for p in points))]
    base = base_of(points_base, names)
    others = [v for v in names if v not in axes]
    tops = [max([p.valuation.get(a, 1) for p in points_base] + [64]) for a in axes]
    region = region_of(fix, names, axes, base, points, [int(t * 1.25) + 1 for t in tops])
    fam = "; ".join(fix.in_avals) + (" with " + ", ".join(fix.constraints) if fix.constraints else "")
    head = title or f"{fix.function.split(':')[-1] or 'the function'}: {fix.status}: {fam}"
    return _draw(points, axes, names, others, base, region, head, complete, examples)


def plot_auto(report: Any, *, x: str | None = None, y: str | None = None) -> Figure:
    """An auto export's family: the fix's picture (:func:`plot_fix`) with the example marked; where no fix
    was needed (the all-variables specification verified as it was), the family is every size and
    nothing was traced: the example alone, on the whole region."""
    exs = _auto_examples(report)
    fam = "; ".join(report.specs) + (" with " + ", ".join(report.constraints) if report.constraints else "")
    head = f"auto export of {report.function.split(':')[-1]}: {report.status}: {fam}"
    if report.fix is not None:
        return plot_fix(report.fix, x=x, y=y, title=head, examples=exs)
    names = sorted({v for e in exs for v in e})
    if not names:
        raise ValueError("the family has no symbolic size: there is no family to draw")
    pts = tuple(TracedShape(e, True, True, True, True) for e in exs)
    axes = choose_axes(pts, names, None, x, y)
    base = base_of(pts, names)
    tops = [max(e.get(a, 1) for e in exs) * 2 + 1 for a in axes]
    side = REGION_SIDE[len(axes) - 1]
    cs = ConstraintSet.of(list(report.constraints))
    region: dict[tuple[int, ...], bool] = {}
    grids = [_axis_values(max(t, 16), side) for t in tops]
    for cell in (((a,) for a in grids[0]) if len(axes) == 1 else ((a, b) for a in grids[0] for b in grids[1])):
        try:
            region[cell] = cs.holds({**base, **dict(zip(axes, cell, strict=True))})
        except (ZeroDivisionError, KeyError):
            region[cell] = False
    return _draw((), axes, names, [v for v in names if v not in axes], base, region,
                 head + " (verified as given: nothing traced)", True, exs)


def _auto_examples(report: Any) -> list[dict[str, int]]:
    """The examples as valuations of the report's specification, read where a dimension is a bare variable
    (the all-variables specification, verified as it was). Where a fix ran, its traced shapes mark the
    examples themselves (the fix traced them first), so none are read here: a rewrite (``8*k`` for ``b``)
    renames what the example's sizes were sizes of."""
    from .specs import split_dims

    if report.fix is not None:
        return []
    dims = [d for s in report.specs for d in (split_dims(s.split("[", 1)[1].rstrip("]")) if "[" in s else [])]
    out = []
    for shapes in report.examples:
        flat = [n for s in shapes for n in s]
        out.append({d: n for d, n in zip(dims, flat, strict=False) if d.isidentifier()})
    return out


def _draw(points: Sequence[TracedShape], axes: Sequence[str], names: Sequence[str], others: Sequence[str],
          base: dict[str, int], region: dict[tuple[int, ...], bool] | None, head: str, complete: bool,
          examples: Sequence[dict[str, int]]) -> Figure:
    """The figure: the region as a pale background, the points by class (circles where the other sizes
    are at the drawn slice, diamonds elsewhere: projected), the examples ringed, a legend of the classes."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    strip = len(axes) == 1
    fig = _pyplot_free_figure((9.0, 2.4) if strip else (9.0, 5.6))
    ax = fig.add_subplot()
    colour = {k: c for k, _, c in CLASSES}

    def at(env: dict[str, int]) -> tuple[float, float]:
        return float(env[axes[0]]), (0.0 if strip else float(env[axes[1]]))

    if region:
        # one small square per admitted integer point (a fixed size on screen: a lattice such as the
        # multiples of 8 stays visible on log axes, and dense parts merge into an area)
        inside = [c for c, ok in region.items() if ok]
        if inside:
            ax.scatter([float(c[0]) for c in inside], [0.0 if strip else float(c[1]) for c in inside],
                       s=9 if not strip else 30, marker="s", color=REGION_COLOUR, lw=0, zorder=1, rasterized=True)
    counts = Counter(p.kind for p in points)
    empty_only = sum(1 for p in points if p.kind == EXCLUDED_RUNS and not p.nonempty)
    drawn = [p for p in points if all(a in p.valuation for a in axes)]
    for p in drawn:
        on_slice = all(p.valuation.get(v, base.get(v)) == base.get(v) for v in others)
        face = colour[p.kind] if (p.kind != EXCLUDED_RUNS or p.nonempty) else "none"
        ax.scatter(*at(p.valuation), s=46 if on_slice else 26, marker="o" if on_slice else "D",
                   facecolors=face, edgecolors=colour[p.kind], linewidths=1.4, zorder=3)
    rings = [e for e in examples if all(a in e for a in axes)] or [p.valuation for p in drawn if p.example]
    for e in rings:
        ax.scatter(*at(e), s=220, facecolors="none", edgecolors="black", linewidths=1.6, zorder=4)
        ax.annotate("example", at(e), textcoords="offset points", xytext=(8, 8), fontsize=8, zorder=5)
    ax.set_xscale("log", base=2)
    ax.set_xlabel(axes[0])
    if strip:
        ax.set_yticks([])
        ax.set_ylim(-1, 1)
    else:
        ax.set_yscale("log", base=2)
        ax.set_ylabel(axes[1])
    _limits(ax, [p.valuation for p in drawn] + list(rings), axes, region)
    labels = []
    for key, label, c in CLASSES:
        n = counts.get(key, 0)
        extra = f"; {empty_only} on empty arrays only, hollow" if key == EXCLUDED_RUNS and empty_only else ""
        labels.append(Line2D([], [], marker="o", ls="", color=c, markersize=7, label=f"{label} ({n}{extra})"))
    extras: list[Any] = []
    if region:
        extras.append(Patch(color=REGION_COLOUR, label="the fixed family (exact)"))
    if rings:
        extras.append(Line2D([], [], marker="o", ls="", markerfacecolor="none", markeredgecolor="black",
                             markersize=11, label="example"))
    ax.legend(handles=labels + extras, loc="center left", bbox_to_anchor=(1.02, 0.5), fontsize=8, frameon=False)
    sub = []
    if len(names) > 2 or (strip and len(names) > 1):
        sub.append(f"{', '.join(axes)} of {', '.join(names)} (the sizes the fix restricts, then those traced "
                   "at the most values)")
    if others:
        sub.append("region and circles at " + ", ".join(f"{v} = {base[v]}" for v in others)
                   + (f"; diamonds: other {', '.join(others)}" if any(
                       any(p.valuation.get(v) != base.get(v) for v in others) for p in drawn) else ""))
    if not complete:
        sub.append(f"{len(points)} traced shape(s) the result names (its examples and edges), not all it traced"
                   if points else "the result keeps none of the shapes it traced: the family alone")
    if region is None and points:
        sub.append("region not drawn: the fix's parts do not say it exactly")
    elif region:
        last = [max(c[i] for c in region) for i in range(len(axes))]
        beyond = [a for i, a in enumerate(axes) if any(p.valuation.get(a, 0) > last[i] for p in drawn)]
        if beyond:
            sub.append(f"family drawn exactly for {', '.join(beyond)} up to {max(last)}")
    ax.set_title(head + ("\n" + "\n".join(sub) if sub else ""), fontsize=9, loc="left")
    fig.tight_layout()
    return fig


def _one_colour() -> Any:
    from matplotlib.colors import ListedColormap

    return ListedColormap([REGION_COLOUR])


def _limits(ax: Any, envs: Sequence[dict[str, int]], axes: Sequence[str],
            region: dict[tuple[int, ...], bool] | None) -> None:
    """Axes from 1 to past the largest traced size (log scale: aligned sizes up to 1024 and the fix's
    edges both show)."""
    for i, a in enumerate(axes):
        top = max([e[a] for e in envs] + [16])
        if region:
            top = max(top, max((c[i] for c, inside in region.items() if inside), default=1))
        (ax.set_xlim if i == 0 else ax.set_ylim)(0.7, top * 1.5)


# -- in a notebook ----------------------------------------------------------------------------------------
def figure_html(fig: Figure) -> str:
    """``<img>`` of the figure as an inline PNG (a notebook shows it, and it survives being saved)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return f'<img alt="the family drawn over its sizes" src="data:image/png;base64,{data}"/>'


def report_html(text: str, draw: Any) -> str:
    """The picture (``draw()``'s figure) above the report's text, escaped. Where there is no picture (no
    matplotlib, no symbolic size) the text alone, with why: a notebook must still show the report."""
    try:
        pic = figure_html(draw())
    except ImportError as err:
        pic = f"<p><i>{html.escape(str(err))}</i></p>"
    except ValueError as err:
        pic = f"<p><i>no picture: {html.escape(str(err))}</i></p>"
    return f"<div>{pic}<pre>{html.escape(text)}</pre></div>"


__all__ = ["ADMITTED_FAILS", "ADMITTED_RUNS", "CLASSES", "EXCLUDED_FAILS", "EXCLUDED_RUNS", "TracedShape",
           "choose_axes", "figure_html", "plot_auto", "plot_fix", "points_of", "region_of", "report_html",
           "substitution", "traced_shapes"]

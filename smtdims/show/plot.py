"""Feasible-region pictures: the integer points of a two-variable grid, classified exactly.

The plot evaluates the comparison exactly (Python integers) on a grid of two variables, so it
shows the truth the solver reasons about, not an approximation of it. matplotlib is imported
only by :func:`plot_region`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..lang.constraints import ConstraintSet
from ..lang.expr import Expr
from ..lang.parser import parse_expr

_COMPARE = {
    ">=": lambda x: x >= 0, "<=": lambda x: x <= 0, ">": lambda x: x > 0,
    "<": lambda x: x < 0, "==": lambda x: x == 0, "!=": lambda x: x != 0,
}


@dataclass(frozen=True)
class Region:
    """Grid points of a two-variable picture, classified exactly."""

    x: str
    y: str
    holds: tuple[tuple[int, int], ...]
    fails: tuple[tuple[int, int], ...]
    infeasible: tuple[tuple[int, int], ...]
    figure: Any = None
    fixed: Mapping[str, int] = field(default_factory=dict)  # the values of the other variables

    def counts(self) -> dict[str, int]:
        return {"holds": len(self.holds), "fails": len(self.fails), "infeasible": len(self.infeasible)}


def classify_region(lhs: Expr | str, op: str, rhs: Expr | str, constraints: Sequence[str] | ConstraintSet = (), *,
                    x: str, y: str, x_range: tuple[int, int] = (1, 20), y_range: tuple[int, int] = (1, 20),
                    fixed: Mapping[str, int] | None = None) -> Region:
    """Classify each integer point of the grid: infeasible, comparison holds, or fails.

    Variables other than ``x`` and ``y`` take the values in ``fixed`` (default 1);
    ``Region.fixed`` says which values they took.
    """
    le = parse_expr(lhs) if isinstance(lhs, str) else lhs
    re_ = parse_expr(rhs) if isinstance(rhs, str) else rhs
    cs = ConstraintSet.of(constraints)
    diff = le - re_
    others = (diff.variables() | cs.variables()) - {x, y}
    base = {v: 1 for v in sorted(others)}
    base.update({v: k for v, k in (fixed or {}).items() if v not in (x, y)})
    test = _COMPARE[op]
    holds, fails, infeasible = [], [], []
    for xv in range(x_range[0], x_range[1] + 1):
        for yv in range(y_range[0], y_range[1] + 1):
            env = {**base, x: xv, y: yv}
            if not cs.holds(env):
                infeasible.append((xv, yv))
                continue
            try:
                ok = test(diff.evaluate(env))
            except ZeroDivisionError:
                infeasible.append((xv, yv))
                continue
            (holds if ok else fails).append((xv, yv))
    return Region(x, y, tuple(holds), tuple(fails), tuple(infeasible), fixed=dict(sorted(base.items())))


def plot_region(lhs: Expr | str, op: str, rhs: Expr | str, constraints: Sequence[str] | ConstraintSet = (), *,
                x: str, y: str, x_range: tuple[int, int] = (1, 20), y_range: tuple[int, int] = (1, 20),
                fixed: Mapping[str, int] | None = None, witnesses: Mapping[str, Mapping[str, int] | None] | None = None,
                ax: Any = None) -> Region:
    """Draw the feasible region of ``x``, ``y`` under the constraints, green where ``lhs op rhs``
    holds and red where it fails; ``witnesses`` (label -> valuation) are ringed, or named in a
    corner when they lie off the grid.

    Other variables take the values in ``fixed`` (default 1); the title names them.
    """
    import matplotlib.pyplot as plt

    region = classify_region(lhs, op, rhs, constraints, x=x, y=y, x_range=x_range, y_range=y_range, fixed=fixed)
    if ax is None:
        fig, ax = plt.subplots(figsize=(5, 5))
    else:
        fig = ax.figure
    for pts, color, label in ((region.infeasible, "#d0d7de", "infeasible"), (region.holds, "#1a7f37", "holds"),
                              (region.fails, "#cf222e", "fails")):
        if pts:
            xs, ys = zip(*pts, strict=True)
            ax.scatter(xs, ys, s=18, c=color, label=f"{label} ({len(pts)})")
    off_grid = []
    for label, w in (witnesses or {}).items():
        if w is None or x not in w or y not in w:
            continue
        if x_range[0] <= w[x] <= x_range[1] and y_range[0] <= w[y] <= y_range[1]:
            ax.scatter([w[x]], [w[y]], s=160, facecolors="none", edgecolors="black", linewidths=1.5)
            ax.annotate(label, (w[x], w[y]), textcoords="offset points", xytext=(6, 6))
        else:  # named, not drawn: the grid stays the grid
            off_grid.append(f"{label}: {x} = {w[x]}, {y} = {w[y]} (off the grid)")
    if off_grid:
        ax.text(0.02, 0.98, "\n".join(off_grid), transform=ax.transAxes, va="top", fontsize=8,
                bbox={"facecolor": "white", "edgecolor": "#d0d7de"})
    cons = ", ".join(c.text for c in ConstraintSet.of(constraints)) or "no constraints"
    if region.fixed:
        cons += "; " + ", ".join(f"{v} = {k}" for v, k in region.fixed.items()) + " fixed"
    ax.set_title(f"{lhs} {op} {rhs}  ({cons})", fontsize=10)
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=3, fontsize=8)  # off the points
    fig.tight_layout()
    return Region(region.x, region.y, region.holds, region.fails, region.infeasible, fig, region.fixed)


__all__ = ["Region", "classify_region", "plot_region"]

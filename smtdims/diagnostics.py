"""Constraint-set diagnostics: unsatisfiable subsets, redundant constraints, fixed variables.

A scope whose constraints contradict each other makes every question vacuous, and
JAX only says "Unsatisfiable constraint". :func:`check_constraints` names a
minimal conflicting subset as the user wrote it, lists constraints that the others
already imply (safe to drop, all together), and variables pinned to one value
(usually a sign that a constant belongs in the shape instead).
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

from . import host, options
from .constraints import ConstraintSet
from .errors import UnsatisfiableConstraintsError, format_valuation
from .explain import minimal_support
from .expr import Expr
from .heuristic import is_inf
from .reasoner import Session, _relation
from .render import left_align
from .results import TRUE, _fmt_bound, _json_bound, unknown_advice
from .smt import SAT, UNSAT


@dataclass(frozen=True)
class Redundant:
    """A constraint implied by ``implied_by`` (a minimal subset of the constraints kept)."""

    text: str
    implied_by: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.text}  (implied by: {'; '.join(self.implied_by) or 'nothing: it always holds'})"


@dataclass(frozen=True)
class ConstraintReport:
    """What :func:`check_constraints` found.

    ``satisfiable`` is True (``example`` meets every constraint) or None when the
    solver's budget ran out (unsatisfiable sets raise instead). ``redundant``: every
    listed constraint can be removed, all at once, without changing the set of
    valuations. ``fixed``: variables with a single possible value. ``ranges``: the
    exact range of each variable (sound, possibly loose, outside linear arithmetic).
    """

    constraints: tuple[str, ...]
    satisfiable: bool | None
    example: dict[str, int] | None
    redundant: tuple[Redundant, ...]
    fixed: dict[str, int]
    ranges: dict[str, tuple[int | float, int | float]]
    reason: str = ""

    @property
    def clean(self) -> bool:
        """Satisfiable, nothing redundant, no variable fixed."""
        return self.satisfiable is True and not self.redundant and not self.fixed

    def __str__(self) -> str:
        lines = [f"constraints: {', '.join(self.constraints) or 'none'}"]
        if self.satisfiable:
            lines.append(f"  satisfiable, e.g. {format_valuation(self.example)}")
        else:
            lines.append(f"  satisfiability unknown: {unknown_advice(self.reason)}")
        if self.redundant:
            lines.append("  redundant (can all be removed together):")
            lines += [f"    - {r}" for r in self.redundant]
        else:
            lines.append("  no redundant constraints")
        if self.fixed:
            lines.append("  fixed variables: " + ", ".join(f"{v} = {k}" for v, k in sorted(self.fixed.items())))
        if self.ranges:
            lines.append("  ranges: " + ", ".join(
                f"{v} in [{_fmt_bound(lo)}, {_fmt_bound(hi)}]" for v, (lo, hi) in sorted(self.ranges.items())))
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "constraints": list(self.constraints), "satisfiable": self.satisfiable, "example": self.example,
            "redundant": [{"text": r.text, "implied_by": list(r.implied_by)} for r in self.redundant],
            "fixed": dict(self.fixed),
            "ranges": {v: [_json_bound(lo), _json_bound(hi)] for v, (lo, hi) in self.ranges.items()},
            "reason": self.reason, "clean": self.clean,
        }

    def _repr_html_(self) -> str:
        esc = html.escape
        sat = ("satisfiable, e.g. " + esc(format_valuation(self.example))) if self.satisfiable else "unknown"
        red = "".join(f"<li><code>{esc(r.text)}</code> implied by {esc('; '.join(r.implied_by))}</li>"
                      for r in self.redundant) or "<li>none</li>"
        fixed = esc(", ".join(f"{v} = {k}" for v, k in sorted(self.fixed.items()))) or "none"
        rng = "".join(f"<tr><td>{esc(v)}</td><td>{esc(_fmt_bound(lo))}</td><td>{esc(_fmt_bound(hi))}</td></tr>"
                      for v, (lo, hi) in sorted(self.ranges.items()))
        return left_align(f"<div><b>constraints</b> <code>{esc(', '.join(self.constraints)) or 'none'}</code>: {sat}"
                f"<br><b>redundant</b><ul>{red}</ul><b>fixed</b>: {fixed}"
                f"<table><tr><th>variable</th><th>min</th><th>max</th></tr>{rng}</table></div>")


def _as_constraint_set(constraints: Any) -> ConstraintSet:
    if host.looks_like_jax(constraints):
        h = host.find(constraints)
        if h is not None and h.is_scope(constraints):
            return h.scope_constraints(constraints)
    return ConstraintSet.of(constraints)


def conflict(cs: ConstraintSet, budget: int) -> list[str] | None:
    """A minimal unsatisfiable subset (user texts plus implicit ``v >= 1`` facts), or None if none found."""
    session = Session(cs, budget)
    support, minimal = minimal_support(session, lambda enc: [], *(c.diff for c in cs))
    if not minimal:
        return None
    return list(support)


def check_constraints(constraints: Any, *, budget: int | None = None, deadline: float | None = None) -> ConstraintReport:
    """Diagnose a constraint set (strings, a ConstraintSet, or a ``jax.export.SymbolicScope``).

    Raises :class:`~smtdims.errors.UnsatisfiableConstraintsError` naming a minimal
    conflicting subset (texts as written) when no valuation satisfies them, and
    :class:`~smtdims.errors.PossibleDivisionByZeroError` for a divisor that can be 0.
    """
    with options.scoped(budget=budget, deadline=deadline), options.question():
        return _check_constraints(_as_constraint_set(constraints))


def _check_constraints(cs: ConstraintSet) -> ConstraintReport:
    budget = options.current().budget
    session = Session(cs, budget)
    session.check_divisors(*(c.diff for c in cs))
    linear = cs.is_linear()
    res = session.solver.check(lambda enc: [], linear=linear, model_vars=cs.variables())
    texts = tuple(c.text for c in cs)
    if res.status == UNSAT:
        core = conflict(cs, budget) or list(texts)
        raise UnsatisfiableConstraintsError(core)
    if res.status != SAT or not cs.holds(res.model or {}):
        return ConstraintReport(texts, None, None, (), {}, {}, reason=res.reason or "model failed re-evaluation")
    redundant = _redundant(cs, budget)
    ranges: dict[str, tuple[int | float, int | float]] = {}
    fixed: dict[str, int] = {}
    for v in sorted(cs.variables()):
        b = session.bounds(Expr.var(v))
        ranges[v] = (b.lo, b.hi)
        if b.lo == b.hi and not is_inf(b.lo):
            fixed[v] = int(b.lo)
    return ConstraintReport(texts, True, dict(res.model or {}), redundant, fixed, ranges)


def _redundant(cs: ConstraintSet, budget: int) -> tuple[Redundant, ...]:
    """Greedy: a constraint is redundant if the others not already dropped imply it.

    Checking against the survivors (not all others) keeps duplicates from both being
    dropped: the kept constraints imply every one reported, so all can go at once.
    Constraints are visited last to first, so of two duplicates the later is reported.
    """
    dropped: set[int] = set()
    found: dict[int, Redundant] = {}
    items = list(cs.constraints)
    for i in reversed(range(len(items))):  # last first: of two duplicates, the later one is reported
        c = items[i]
        rest = ConstraintSet(tuple(x for j, x in enumerate(items) if j != i and j not in dropped))
        op = ">=" if c.kind == ">=" else "=="
        s = Session(rest, budget)
        if s.decide(c.diff, op, Expr.const(0)).status != TRUE:
            continue
        dropped.add(i)
        neg = "<" if op == ">=" else "!="
        diff = c.diff

        def build(enc, diff=diff, neg=neg):
            return [_relation(neg, enc.expr(diff))]

        support, _ = minimal_support(s, build, diff)
        found[i] = Redundant(c.text, support)
    return tuple(found[i] for i in sorted(found))


__all__ = ["ConstraintReport", "Redundant", "check_constraints", "conflict"]

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

from .. import clocks, host, options
from ..clocks import REASON_DEADLINE
from ..engines.checks import SAT, UNSAT
from ..engines.implications import Implications
from ..errors import UnsatisfiableConstraintsError, format_valuation
from ..lang.constraints import ConstraintSet
from ..lang.expr import Expr, Var, symbolic_divisors
from ..lang.results import format_bound, json_bound, unknown_advice
from ..reasoner import Session, session_for
from ..rungs.interval_arith import INF, is_inf
from ..rungs.intervals import IntervalEvaluator
from ..show.html import left_align
from .explain import minimal_support


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
    solver's budget ran out (unsatisfiable sets raise instead). ``reason`` is empty, or says
    which limit stopped the work (then, when satisfiable, ``redundant`` may miss some and a
    range may be loose: each one listed is still sound). ``redundant``: every
    listed constraint can be removed, all at once, without changing the set of
    valuations. ``fixed``: variables with a single possible value. ``ranges``: the
    exact range of each variable (sound, possibly loose, outside linear arithmetic).
    ``clean`` (``"clean"`` in :meth:`to_dict` and ``check-constraints --json``): satisfiable,
    nothing redundant and no variable fixed, i.e. nothing to change.
    """

    constraints: tuple[str, ...]
    satisfiable: bool | None
    example: dict[str, int] | None
    redundant: tuple[Redundant, ...]
    fixed: dict[str, int]
    ranges: dict[str, tuple[int | float, int | float]]
    reason: str = ""
    budget: int | None = None  # the limits in force for the check (quoted when one stopped it)
    deadline: float | None = None
    # divisors that only the constraints dividing by them keep nonzero (docs/semantics.md): those
    # constraints exclude the valuations where the divisor is 0, as everywhere in smtdims, but JAX's
    # shape check evaluates them there (numpy: x // 0 == x % 0 == 0), so a guard says what is meant
    self_guarded: tuple[str, ...] = ()

    @property
    def clean(self) -> bool:
        """Satisfiable, nothing redundant, no variable fixed."""
        return self.satisfiable is True and not self.redundant and not self.fixed

    def __str__(self) -> str:
        lines = [f"constraints: {', '.join(self.constraints) or 'none'}"]
        if self.satisfiable:
            lines.append(f"  satisfiable, e.g. {format_valuation(self.example)}")
            if self.reason:
                lines.append("  incomplete (redundancy and ranges found so far; each one listed holds): "
                             + unknown_advice(self.reason, self.budget, self.deadline))
        else:
            lines.append(f"  satisfiability unknown: {unknown_advice(self.reason, self.budget, self.deadline)}")
        if self.redundant:
            lines.append("  redundant (can all be removed together):")
            lines += [f"    - {r}" for r in self.redundant]
        else:
            lines.append("  no redundant constraints")
        if self.fixed:
            lines.append("  fixed variables: " + ", ".join(f"{v} = {k}" for v, k in sorted(self.fixed.items())))
        if self.ranges:
            lines.append("  ranges: " + ", ".join(
                f"{v} in [{format_bound(lo)}, {format_bound(hi)}]" for v, (lo, hi) in sorted(self.ranges.items())))
        if self.self_guarded:
            lines.append("  divisors only their own constraints keep nonzero: " + ", ".join(self.self_guarded)
                         + " (those constraints exclude the valuations where it is 0; JAX's shape check evaluates "
                         "them there, with x // 0 and x % 0 as 0: a constraint such as 'b - 2 >= 1' says which you mean)")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "constraints": list(self.constraints), "satisfiable": self.satisfiable, "example": self.example,
            "redundant": [{"text": r.text, "implied_by": list(r.implied_by)} for r in self.redundant],
            "fixed": dict(self.fixed),
            "ranges": {v: [json_bound(lo), json_bound(hi)] for v, (lo, hi) in self.ranges.items()},
            "reason": self.reason, "deterministic": self.reason != REASON_DEADLINE, "budget": self.budget,
            "deadline": self.deadline, "clean": self.clean, "self_guarded": list(self.self_guarded),
        }

    def _repr_html_(self) -> str:
        esc = html.escape
        sat = ("satisfiable, e.g. " + esc(format_valuation(self.example))) if self.satisfiable else "unknown"
        red = "".join(f"<li><code>{esc(r.text)}</code> implied by {esc('; '.join(r.implied_by))}</li>"
                      for r in self.redundant) or "<li>none</li>"
        fixed = esc(", ".join(f"{v} = {k}" for v, k in sorted(self.fixed.items()))) or "none"
        rng = "".join(f"<tr><td>{esc(v)}</td><td>{esc(format_bound(lo))}</td><td>{esc(format_bound(hi))}</td></tr>"
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
    session = session_for(cs, budget)
    support, minimal = minimal_support(session, lambda enc: [], *(c.diff for c in cs))
    if not minimal:
        return None
    return list(support)


def check_constraints(constraints: Any, *, budget: int | None = None, deadline: float | None = None) -> ConstraintReport:
    """Diagnose a constraint set (strings, a ConstraintSet, or a ``jax.export.SymbolicScope``).

    Raises :class:`~smtdims.errors.UnsatisfiableConstraintsError` naming a minimal
    conflicting subset (texts as written) when no valuation satisfies them. A constraint holds
    only where its divisors are nonzero, as for ``bounds`` and ``decide`` (docs/semantics.md: one
    rule everywhere); a divisor that only the constraints dividing by it keep nonzero is listed in
    ``self_guarded`` (JAX's shape check evaluates those constraints where it is 0). A constraint
    that keeps another one's divisor nonzero is never reported redundant. ``budget``/``deadline``
    bound the whole check; when the deadline stops it, the report says so (``reason``) and what it
    lists still holds.
    """
    with options.scoped(budget=budget, deadline=deadline), clocks.question():
        return _check_constraints(_as_constraint_set(constraints))


def _check_constraints(cs: ConstraintSet) -> ConstraintReport:
    budget, deadline = clocks.limits_in_force()
    session = session_for(cs, budget)
    imp = session.implications() if cs.constraints else None
    res = session.model(lambda enc: [])  # a model is re-checked exactly against every constraint
    texts = tuple(c.text for c in cs)
    if res.status == UNSAT:
        core = conflict(cs, budget) or list(texts)
        raise UnsatisfiableConstraintsError.from_conflict(core)
    if res.status != SAT or res.model is None:
        return ConstraintReport(texts, None, None, (), {}, {}, reason=res.reason or "model failed re-evaluation",
                                budget=budget, deadline=deadline)
    self_guarded = _self_guarded_divisors(imp) if imp is not None else ()
    redundant, complete = _redundant(imp, [*session.known_points(), res.model or {}]) if imp else ((), True)
    ranges = _ranges(session, imp, res.model or {})
    fixed = {v: int(lo) for v, (lo, hi) in ranges.items() if lo == hi and not is_inf(lo)}
    return ConstraintReport(texts, True, dict(res.model or {}), redundant, fixed, ranges,
                            reason="" if complete and not clocks.deadline_passed() else REASON_DEADLINE,
                            budget=budget, deadline=deadline, self_guarded=self_guarded)


def _self_guarded_divisors(imp: Implications) -> tuple[str, ...]:
    """The divisors that the constraints not dividing by them allow to be 0 (or may: unknown).

    A constraint holds only where its divisors are nonzero, so ``floordiv(a, b - 1) >= 1``
    alone excludes ``b = 1``, here as in ``bounds`` and ``decide``; JAX's shape check evaluates
    it there (numpy's ``x // 0 == 0``), so the report names such divisors, whatever the order
    the constraints are listed in (one rule with ``bounds`` and ``decide``, which answer under
    such constraints rather than raise). A divisor the interval rules prove nonzero for every
    ``v >= 1`` costs no check.
    """
    found: list[str] = []
    divisors: dict[Expr, None] = {}
    for c in imp.items:
        divisors.update(dict.fromkeys(symbolic_divisors(c.diff)))
    for d in divisors:
        lo, hi = IntervalEvaluator({v: (1, INF) for v in d.variables()}).expr(d, clocks.clock())
        if lo > 0 or hi < 0:
            continue  # nonzero for every v >= 1
        if imp.may_be_zero(d):
            found.append(str(d))
    return tuple(found)


def _ranges(session: Session, imp: Implications | None,
            model: dict[str, int]) -> dict[str, tuple[int | float, int | float]]:
    """The exact range of each variable: propagation first, the ladder for what it leaves open.

    Interval propagation gives sound ends. One that a satisfying point attains, or that one
    check shows attainable (``v <= lo`` satisfiable with every constraint), is exact; an
    infinite upper end is proven by a ray of the variable's component
    (:func:`_unbounded_components`). Only the ends these leave open cost a bounds question.
    """
    cs = session.constraints
    propagated = session.var_ranges()
    points = [p for p in [*session.known_points(), model] if p and cs.holds(p)]
    unbounded = _unbounded_components(cs)
    out: dict[str, tuple[int | float, int | float]] = {}
    for v in sorted(cs.variables()):
        lo, hi = propagated.get(v, (1, INF))
        seen = [p[v] for p in points if v in p]
        if imp is None or is_inf(lo) or clocks.deadline_passed():
            new_lo: int | float | None = None
        else:
            new_lo = lo if lo in seen else imp.exact_end(v, int(lo), min(seen, default=hi), True)
        if new_lo is None or clocks.deadline_passed():
            new_hi: int | float | None = None
        elif is_inf(hi):
            new_hi = hi if v in unbounded else None
        else:
            new_hi = hi if hi in seen else imp.exact_end(v, int(hi), max(seen, default=new_lo), False)
        if new_lo is not None and new_hi is not None:
            out[v] = (new_lo, new_hi)
        elif clocks.deadline_passed():
            out[v] = (lo, hi)  # sound; maybe not exact (the report says the deadline passed)
        else:
            b = session.bounds(Expr.var(v))
            out[v] = (max(lo, b.lo), min(hi, b.hi))
    return out


def _linear_coefficients(e: Expr) -> dict[str, int] | None:
    """``e``'s variable coefficients when ``e`` is a sum of variables and a constant, else None."""
    out: dict[str, int] = {}
    for m, c in e.terms:
        if not m:
            continue
        if len(m) != 1 or m[0][1] != 1 or not isinstance(m[0][0], Var):
            return None
        out[m[0][0].name] = c
    return out


def _unbounded_components(cs: ConstraintSet) -> set[str]:
    """Variables proven unbounded above: those of a connected component whose all-ones direction is a ray.

    For a component K of plain linear constraints (no division, max, min or product), let
    ``d`` be 1 on K's variables and 0 elsewhere. If every constraint of K has ``L(d) >= 0``
    (``== 0`` for an equation), ``L`` its linear part, then from any satisfying valuation
    ``p`` (the set is satisfiable when this is asked), ``p + t*d`` satisfies every
    constraint for all ``t >= 0`` (``c(p + t*d) = c(p) + t*L(d)``; other components do not
    mention K's variables; ``v >= 1`` only grows): each variable of K is unbounded above.
    """
    parent: dict[str, str] = {v: v for v in cs.variables()}

    def root(v: str) -> str:
        while parent[v] != v:
            parent[v] = parent[parent[v]]
            v = parent[v]
        return v

    coeffs = []
    for c in cs.constraints:
        k = _linear_coefficients(c.diff)
        coeffs.append((c, k))
        names = sorted(c.diff.variables())
        for a in names[1:]:
            parent[root(a)] = root(names[0])
    ok: dict[str, bool] = {}
    for c, k in coeffs:
        if not k:
            if k is None:
                for v in c.diff.variables():
                    ok[root(v)] = False
            continue
        r = root(next(iter(k)))
        total = sum(k.values())
        ok[r] = ok.get(r, True) and (total >= 0 if c.kind == ">=" else total == 0)
    return {v for v in cs.variables() if ok.get(root(v), True)}


def _redundant(imp: Implications, points: list[dict[str, int]]) -> tuple[tuple[Redundant, ...], bool]:
    """Greedy: a constraint is redundant if the others not already dropped imply it.

    Checking against the survivors (not all others) keeps duplicates from both being
    dropped: the kept constraints imply every one reported, so all can go at once.
    Constraints are visited last to first, so of two duplicates the later is reported.
    Returns the redundant constraints and whether every constraint was examined (False
    when the deadline stopped the search: the list is then sound but maybe incomplete).
    """
    items = list(imp.items)
    imp.set_points(points)
    kept = list(range(len(items)))
    found: dict[int, Redundant] = {}
    for i in reversed(range(len(items))):  # last first: of two duplicates, the later one is reported
        if imp.stopped or clocks.deadline_passed():
            return tuple(found[k] for k in sorted(found)), False
        if imp.refuted_at_a_point(i, set(kept)):
            continue
        support = imp.implied(i, kept)
        if support is None or imp.guards_a_divisor(i, kept):
            continue
        kept.remove(i)
        found[i] = Redundant(items[i].text, support)
    return tuple(found[k] for k in sorted(found)), not imp.stopped


__all__ = ["ConstraintReport", "Redundant", "check_constraints", "conflict"]

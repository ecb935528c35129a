"""Why an answer is what it is: supporting constraints, witnesses, and verified fixes.

A proven answer is explained by a minimal subset of the constraints it rests on
(from Z3 unsat cores, then shrunk by deletion so the claim "minimal" holds). An
undetermined answer is explained by a witness valuation for each side and by
suggested fixes (:mod:`smtdims.answers.fixes`: each offered only after re-deciding
the question with the fix in place came out "true"). A bounds answer is explained
by the witness of each end and the constraints that bound it.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any

import z3

from .. import clocks, options
from ..engines.checks import UNSAT
from ..engines.encoding import Encoder
from ..errors import SmtdimsError, format_valuation
from ..lang import results as _results
from ..lang.constraints import Constraint, ConstraintSet
from ..lang.expr import Expr
from ..lang.results import FALSE, TRUE, UNDETERMINED, UNKNOWN, Bounds, Decision, format_bound, json_bound, unknown_advice
from ..reasoner import NEGATED, Session, session_for
from ..rungs.interval_arith import is_inf
from ..rungs.question import relation
from ..show.html import left_align
from .fixes import Fix, best_fixes


@dataclass(frozen=True)
class BoundEnd:
    """One end of a :class:`~smtdims.lang.results.Bounds`: value, witness, and what bounds it."""

    name: str  # "lo" | "hi"
    value: int | float
    tight: bool
    witness: dict[str, int] | None
    support: tuple[str, ...]
    minimal: bool

    def describe(self) -> str:
        if is_inf(self.value):
            state = "unbounded (proven)" if self.tight else "no finite bound found"
            return f"{self.name} = {format_bound(self.value)}: {state}"
        side = "below" if self.name == "lo" else "above"
        where = f"attained at {format_valuation(self.witness)}" if self.tight else "sound, maybe not tight"
        support = _support_text(self.support, self.minimal)
        return f"{self.name} = {format_bound(self.value)}, {where}; bounded {side} by: {support}"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "value": json_bound(self.value), "tight": self.tight, "witness": self.witness,
                "support": list(self.support), "minimal": self.minimal}


@dataclass(frozen=True)
class Explanation:
    """Why a :class:`Decision` or :class:`Bounds` came out as it did (immutable, printable).

    - proven ``true``/``false``: ``support`` is a minimal subset of the constraints the
      proof rests on (user texts; implicit facts as ``'b >= 1 (dimension variable)'``);
      ``minimal`` is False when the solver could not shrink it (then all are listed);
    - ``undetermined``: ``witness_true``/``witness_false`` and verified ``fixes``;
    - bounds (``kind == "bounds"``): ``ends``, one :class:`BoundEnd` per end.
    """

    kind: str  # "decision" | "bounds"
    question: str
    status: str
    constraints: tuple[str, ...] = ()
    support: tuple[str, ...] = ()
    minimal: bool = True
    witness_true: dict[str, int] | None = None
    witness_false: dict[str, int] | None = None
    fixes: tuple[Fix, ...] = ()
    ends: tuple[BoundEnd, ...] = ()
    answered_by: str = ""
    reason: str = ""
    budget: int | None = None  # the limits in force for the answer explained (quoted by the advice)
    deadline: float | None = None
    deterministic: bool = True

    def __str__(self) -> str:
        where = f" under {', '.join(self.constraints)}" if self.constraints else ""
        if self.kind == "bounds":
            span = ", ".join(format_bound(end.value) for end in self.ends)
            lines = [f"{self.question}{where}: [{span}] ({self.status})"]
            lines += [f"  {end.describe()}" for end in self.ends]
            if self.reason:
                lines.append(f"  an end is not proven tight: {unknown_advice(self.reason, self.budget, self.deadline)}")
            return "\n".join(lines)
        lines = [f"{self.question}{where}: {self.status}"]
        if self.status in (TRUE, FALSE):
            lines.append(f"  because: {_support_text(self.support, self.minimal)}")
        else:
            if self.status == UNKNOWN:
                lines.append(f"  the solver could not decide: {unknown_advice(self.reason, self.budget, self.deadline)}")
            if self.witness_true is not None:
                lines.append(f"  true  at {format_valuation(self.witness_true)}")
            if self.witness_false is not None:
                lines.append(f"  false at {format_valuation(self.witness_false)}")
            if self.fixes:
                lines.append("  suggested fixes (each checked by the solver: with it the answer is true):")
                lines += [f"    - {f}" for f in self.fixes]
            elif self.status == UNDETERMINED:
                lines.append("  no simple constraint or spec rewrite found that settles it")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind, "question": self.question, "status": self.status,
            "constraints": list(self.constraints), "support": list(self.support), "minimal": self.minimal,
            "witness_true": self.witness_true, "witness_false": self.witness_false,
            "fixes": [f.to_dict() for f in self.fixes], "ends": [e.to_dict() for e in self.ends],
            "answered_by": self.answered_by, "reason": self.reason, "deterministic": self.deterministic,
            "budget": self.budget, "deadline": self.deadline,
        }

    def _repr_html_(self) -> str:
        esc = html.escape
        color = {TRUE: "#1a7f37", FALSE: "#cf222e", UNDETERMINED: "#9a6700"}.get(self.status, "#57606a")
        cons = esc(", ".join(self.constraints)) or "none"
        if self.kind == "bounds":
            span = ", ".join(format_bound(end.value) for end in self.ends)
            head = (f"<div><code>{esc(self.question)}</code>: <b>[{esc(span)}]</b> ({esc(self.status)}) "
                    f"<small>(constraints: {cons})</small>")
        else:
            head = (f"<div><code>{esc(self.question)}</code> is <b style='color:{color}'>{esc(self.status)}</b> "
                    f"<small>(constraints: {cons})</small>")
        rows: list[str] = []
        if self.kind == "bounds":
            rows.append("<tr><th>end</th><th>value</th><th>witness</th><th>bounded by</th></tr>")
            for end in self.ends:
                w = esc(format_valuation(end.witness)) if end.witness else ("unbounded" if end.tight else "")
                rows.append(f"<tr><td>{end.name}</td><td>{esc(format_bound(end.value))}</td><td>{w}</td>"
                            f"<td>{_support_html(end.support, end.minimal)}</td></tr>")
        elif self.status in (TRUE, FALSE):
            rows.append(f"<tr><td>because</td><td>{_support_html(self.support, self.minimal)}</td></tr>")
        else:
            if self.status == UNKNOWN:
                rows.append(f"<tr><td>unknown</td><td>{esc(unknown_advice(self.reason, self.budget, self.deadline))}</td></tr>")
            for label, w in (("true at", self.witness_true), ("false at", self.witness_false)):
                if w is not None:
                    rows.append(f"<tr><td>{label}</td><td>{esc(format_valuation(w))}</td></tr>")
            if self.fixes:
                items = "".join(f"<li>{esc(str(f))}</li>" for f in self.fixes)
                rows.append(f"<tr><td>verified fixes</td><td><ul>{items}</ul></td></tr>")
        return left_align(head + "<table>" + "".join(rows) + "</table></div>")


def decision_dict(d: Decision) -> dict[str, Any]:
    """``Decision.to_dict()`` without touching the (unpicklable) solver session it carries."""
    out: dict[str, Any] = {f.name: getattr(d, f.name) for f in fields(d) if not f.name.startswith("_")}
    for k in ("witness_true", "witness_false"):
        out[k] = dict(out[k]) if out[k] is not None else None
    out["constraints"] = list(d.constraints)
    out["value"] = d.value
    return out


def _support_text(support: Sequence[str], minimal: bool) -> str:
    if not support:
        return "nothing (it holds for all integers)" if minimal else "(unknown)"
    return "; ".join(support) + ("" if minimal else " (all constraints: the solver could not minimise)")


def _support_html(support: Sequence[str], minimal: bool) -> str:
    return html.escape(_support_text(support, minimal))


# -- entry points -------------------------------------------------------------------------------------
def explain(lhs: Any, op: str | None = None, rhs: Any = None, constraints: Any = (), scope: Any = None, *,
            budget: int | None = None, deadline: float | None = None) -> Explanation:
    """Decide ``lhs op rhs`` (as :func:`smtdims.decide` does) and explain the answer, within one deadline."""
    from ..api import decide

    with options.scoped(budget=budget, deadline=deadline), clocks.question():
        return explain_decision(decide(lhs, op, rhs, constraints, scope))


def explain_decision(decision: Decision) -> Explanation:
    """The explanation of ``decision``; re-derived from its text if it carries no session."""
    with clocks.question():
        return _explain_decision(decision)


def _explain_decision(decision: Decision) -> Explanation:
    session, lhs, op, rhs = _decision_context(decision)
    d = decision if decision.asked is not None else session.decide(lhs, op, rhs)
    base = dict(kind="decision", question=d.question, status=d.status, constraints=d.constraints,
                answered_by=d.answered_by, reason=d.reason, budget=d.budget, deadline=d.deadline,
                deterministic=d.deterministic)
    diff = lhs - rhs
    if d.status in (TRUE, FALSE):
        # true: constraints AND not(rel) is unsat; false: constraints AND rel is unsat.
        rel_op = op if d.status == FALSE else NEGATED[op]
        support, minimal = minimal_support(session, lambda enc: [relation(rel_op, enc.expr(diff))], diff)
        return Explanation(**base, support=support, minimal=minimal)
    fixes = best_fixes(session, lhs, op, rhs, decision=d)
    return Explanation(**base, witness_true=d.witness_true, witness_false=d.witness_false, fixes=tuple(fixes))


def explain_bounds(bounds: Bounds) -> Explanation:
    """The witness of each end and a minimal set of constraints that proves it."""
    with clocks.question():
        return _explain_bounds(bounds)


def _explain_bounds(bounds: Bounds) -> Explanation:
    ctx = getattr(bounds, "_context", None)
    if ctx is not None:
        constraints, budget, e = ctx
        session = session_for(constraints, budget)
    else:
        from ..lang.parser import parse_expr

        session, e = session_for(ConstraintSet.of(bounds.constraints)), parse_expr(bounds.expr)
    ends = []
    for name, value, tight, witness in (("lo", bounds.lo, bounds.lo_tight, bounds.lo_witness),
                                        ("hi", bounds.hi, bounds.hi_tight, bounds.hi_witness)):
        if is_inf(value):
            ends.append(BoundEnd(name, value, tight, None, (), True))
            continue
        v = int(value)
        if name == "lo":
            build = lambda enc, v=v: [enc.expr(e) < enc.const(v)]  # noqa: E731
        else:
            build = lambda enc, v=v: [enc.expr(e) > enc.const(v)]  # noqa: E731
        support, minimal = minimal_support(session, build, e)
        ends.append(BoundEnd(name, value, tight, witness, support, minimal))
    status = "tight" if bounds.tight else "sound"
    return Explanation(
        kind="bounds", question=f"bounds of {bounds.expr}",
        status=status, constraints=bounds.constraints, ends=tuple(ends), answered_by=bounds.answered_by,
        reason=bounds.reason, budget=bounds.budget, deadline=bounds.deadline, deterministic=bounds.deterministic,
    )


def _decision_context(d: Decision) -> tuple[Session, Expr, str, Expr]:
    ctx = d.asked
    if ctx is not None:
        constraints, budget, lhs, op, rhs = ctx
        return session_for(constraints, budget), lhs, op, rhs
    from ..lang.parser import parse_expr

    try:
        return session_for(ConstraintSet.of(d.constraints)), parse_expr(d.lhs), d.op, parse_expr(d.rhs)
    except SmtdimsError as err:
        raise ValueError(
            f"this Decision of {d.question!r} carries no solver session (was it pickled or built by hand?) "
            f"and its text cannot be re-parsed ({err}); call smtdims.explain(lhs, op, rhs, constraints) instead"
        ) from None


# -- minimal supporting subsets -----------------------------------------------------------------------
Build = Callable[[Encoder], list[z3.BoolRef]]


def minimal_support(session: Session, build: Build, *exprs: Expr) -> tuple[tuple[str, ...], bool]:
    """A minimal subset of the constraints that, with ``v >= 1``, makes ``build`` unsatisfiable.

    Z3's minimised unsat core first; then each user constraint in it is dropped in
    turn and kept only if the rest no longer refutes ``build`` (so the subset is
    minimal over user constraints, not just "small"). ``(texts, minimal)``; when
    the solver cannot produce a core, every constraint is returned with False.
    """
    core = session.unsat_core(build, *exprs)  # in a context of its own: build's terms stay out of the session
    if core is None:
        names = sorted(session.constraints.variables().union(*(e.variables() for e in exprs)))
        return tuple(c.text for c in session.constraints) + tuple(f"{v} >= 1 (dimension variable)" for v in names), False
    by_text: dict[str, Constraint] = {}
    order: dict[str, int] = {}
    for i, c in enumerate(session.constraints):
        by_text.setdefault(c.text, c)
        order.setdefault(c.text, i)
    user = sorted({t for t in core if t in by_text}, key=order.__getitem__)  # as the user listed them
    implicit = sorted(t for t in core if t not in by_text)
    kept = list(user)
    for t in list(user):
        trial = [by_text[x] for x in kept if x != t]
        if refutes(ConstraintSet(tuple(trial)), build, session.budget, *exprs):
            kept.remove(t)
    if kept != user:
        # Dropping a user constraint can make an implicit v >= 1 fact necessary: ask again.
        fewer = session_for(ConstraintSet(tuple(by_text[t] for t in kept)), session.budget, trial=True)
        again = fewer.unsat_core(build, *exprs)
        if again is not None:
            implicit = sorted(t for t in again if t not in by_text)
        else:
            names = sorted(frozenset().union(*(e.variables() for e in exprs), *(by_text[t].diff.variables() for t in kept)))
            implicit = [f"{v} >= 1 (dimension variable)" for v in names]
    return tuple(kept) + tuple(implicit), True


def refutes(constraints: ConstraintSet, build: Build, budget: int, *exprs: Expr) -> bool:
    """Whether ``constraints`` (with ``v >= 1``) prove ``build`` (which encodes ``exprs``) unsatisfiable
    (unknown counts as no). A trial set: the registry keeps it apart from the sets people ask about."""
    return session_for(constraints, budget, trial=True).model(build, *exprs).status == UNSAT


_results.EXPLAINERS.update(decision=explain_decision, bounds=explain_bounds)

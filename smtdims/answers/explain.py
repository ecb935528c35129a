"""Why an answer is what it is: supporting constraints, witnesses, and verified fixes.

A proven answer is explained by a minimal subset of the constraints it rests on
(from Z3 unsat cores, then shrunk by deletion so the claim "minimal" holds). An
undetermined answer is explained by a witness valuation for each side and by
suggested fixes: constraints (in jax.export syntax, ready to paste into
``constraints=``) or shape-spec rewrites, each offered only after re-deciding the
question with the fix in place came out "true". A bounds answer is explained by
the witness of each end and the constraints that bound it.
"""

from __future__ import annotations

import html
import itertools
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import z3

from .. import options
from ..engines.checks import SAT, UNSAT
from ..engines.encoding import Encoder
from ..errors import SmtdimsError, UnsatisfiableConstraintsError, format_valuation
from ..lang import results as _results
from ..lang.constraints import Constraint, ConstraintSet
from ..lang.expr import FLOORDIV, MOD, Expr, Op, readable_int
from ..lang.render import left_align
from ..lang.results import FALSE, TRUE, UNDETERMINED, UNKNOWN, Bounds, Decision, _json_bound, format_bound, unknown_advice
from ..reasoner import NEGATED, REGISTRY, Session
from ..rungs.intervals import is_inf
from ..rungs.question import relation

CONSTRAINT, SPEC = "constraint", "spec"


# -- value objects ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Fix:
    """One suggested change that the solver has checked makes the question provably true.

    ``kind`` is ``"constraint"`` (``text`` is a jax.export constraint such as ``'b >= 16'``)
    or ``"spec"`` (``text`` is the dimension expression to write in the shape
    specification in place of ``variable``, e.g. ``'b + 15'`` for ``'b'``).
    """

    kind: str
    text: str
    variable: str | None = None
    note: str = ""
    verified: bool = True

    def __str__(self) -> str:
        if self.kind == SPEC:
            s = f"write '{self.text}' in the shape specification in place of '{self.variable}'"
        else:
            s = f"add the constraint '{self.text}'"
        return f"{s} ({self.note})" if self.note else s

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "text": self.text, "variable": self.variable, "note": self.note,
                "verified": self.verified}


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
        return {"name": self.name, "value": _json_bound(self.value), "tight": self.tight, "witness": self.witness,
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

    with options.scoped(budget=budget, deadline=deadline), options.question():
        return explain_decision(decide(lhs, op, rhs, constraints, scope))


def explain_decision(decision: Decision) -> Explanation:
    """The explanation of ``decision``; re-derived from its text if it carries no session."""
    with options.question():
        return _explain_decision(decision)


def _session_of(constraints: ConstraintSet, budget: int | None) -> Session:
    return REGISTRY.get(constraints, budget)


def _explain_decision(decision: Decision) -> Explanation:
    session, lhs, op, rhs = _decision_context(decision)
    d = decision if decision._context is not None else session.decide(lhs, op, rhs)
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
    with options.question():
        return _explain_bounds(bounds)


def _explain_bounds(bounds: Bounds) -> Explanation:
    ctx = getattr(bounds, "_context", None)
    if ctx is not None:
        constraints, budget, e = ctx
        session = _session_of(constraints, budget)
    else:
        from ..lang.parser import parse_expr

        session, e = REGISTRY.get(ConstraintSet.of(bounds.constraints)), parse_expr(bounds.expr)
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
    ctx = d._context
    if ctx is not None:
        constraints, budget, lhs, op, rhs = ctx
        return _session_of(constraints, budget), lhs, op, rhs
    from ..lang.parser import parse_expr

    try:
        return REGISTRY.get(ConstraintSet.of(d.constraints)), parse_expr(d.lhs), d.op, parse_expr(d.rhs)
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
        again = Session(ConstraintSet(tuple(by_text[t] for t in kept)), session.budget).unsat_core(build, *exprs)
        if again is not None:
            implicit = sorted(t for t in again if t not in by_text)
        else:
            names = sorted(frozenset().union(*(e.variables() for e in exprs), *(by_text[t].diff.variables() for t in kept)))
            implicit = [f"{v} >= 1 (dimension variable)" for v in names]
    return tuple(kept) + tuple(implicit), True


def refutes(constraints: ConstraintSet, build: Build, budget: int, *exprs: Expr) -> bool:
    """Whether ``constraints`` (with ``v >= 1``) prove ``build`` (which encodes ``exprs``) unsatisfiable
    (unknown counts as no). A session of its own: trial constraint sets stay out of the registry."""
    return Session(constraints, budget).model(build, *exprs).status == UNSAT


# -- suggested fixes ---------------------------------------------------------------------------------
def _negation_constraints(lhs: Expr, op: str, rhs: Expr) -> list[Constraint]:
    """``not (lhs op rhs)`` as a disjunction of jax-style constraints (one per branch)."""
    d = lhs - rhs
    neg = {
        ">=": [Constraint(-d - 1, ">=", "")], ">": [Constraint(-d, ">=", "")],
        "<=": [Constraint(d - 1, ">=", "")], "<": [Constraint(d, ">=", "")],
        "!=": [Constraint(d, "==", "")], "==": [Constraint(d - 1, ">=", ""), Constraint(-d - 1, ">=", "")],
    }[op]
    q = f"not ({lhs} {op} {rhs})"
    return [Constraint(c.diff, c.kind, q) for c in neg]


def comparison_as_constraint(lhs: Expr, op: str, rhs: Expr) -> str | None:
    """``lhs op rhs`` in jax.export constraint syntax (``>=``, ``<=``, ``==`` only); None for ``!=``."""
    if op in (">=", "<=", "=="):
        return f"{lhs} {op} {rhs}"
    if op == ">":
        return f"{lhs} >= {rhs + 1}"
    if op == "<":
        return f"{lhs} <= {rhs - 1}"
    return None


def proves_with(session: Session, lhs: Expr, op: str, rhs: Expr, extra: Sequence[Constraint] = (),
            replace: ConstraintSet | None = None) -> bool:
    """Re-decide ``lhs op rhs`` under the session's constraints plus ``extra`` (or ``replace``).

    True only when the new constraint set has a (re-checked) satisfying valuation and
    the question is proven under it: a fix that makes the constraints contradictory,
    or whose consistency the solver cannot establish, settles nothing.
    """
    base = replace if replace is not None else ConstraintSet(session.constraints.constraints + tuple(extra))
    s = Session(base, session.budget)  # private: trial constraint sets stay out of the shared registry
    try:
        if s.model(lambda enc: []).status != SAT:  # a model, re-checked exactly against every constraint
            return False
        return s.proves(lhs, op, rhs)
    except SmtdimsError:
        return False


_NONLINEAR_STEPS = 12  # solver checks per end when searching a nonlinear region (keeps errors fast)
_NONLINEAR_BUDGET = 500_000  # rlimit per such check; running out only makes a fix less weak, never wrong


def _var_range_where_false(session: Session, v: str, negs: list[Constraint]) -> tuple[float, float] | None:
    """Sound range of ``v`` over the valuations where the question fails; None if unknown.

    Linear: exact, from the optimiser. Nonlinear: a bounded search between the fast
    path's proven range and attained values, so that an error message never waits on
    dozens of solver calls; the range stays sound (it may be wider than the truth).
    """
    lo, hi = math.inf, -math.inf
    for neg in negs:
        if options.deadline_passed():  # one session per variable: a wide scope stops at the deadline
            return None
        cs = ConstraintSet(session.constraints.constraints + (neg,))
        try:
            if cs.is_linear():
                b = Session(cs, session.budget).bounds(Expr.var(v))
                r = (b.lo, b.hi)
            else:
                r = _bounded_range(Session(cs, min(session.budget, _NONLINEAR_BUDGET)), v)
        except UnsatisfiableConstraintsError:
            continue  # this branch of the negation is empty
        except SmtdimsError:
            return None
        if r is None:
            continue
        lo, hi = min(lo, r[0]), max(hi, r[1])
    return (lo, hi)


def _bounded_range(s: Session, v: str) -> tuple[float, float] | None:
    """Range of ``v`` under ``s``'s constraints with at most ``_NONLINEAR_STEPS`` checks per end.

    None when the region is empty; an end the search cannot pin down stays at the
    fast path's sound bound (possibly infinite).
    """
    x = Expr.var(v)
    with s.question(x):  # one question: its checks share the solver context the first one makes
        return _searched_range(s, v, x)


def _searched_range(s: Session, v: str, x: Expr) -> tuple[float, float] | None:
    start = s.model(lambda enc: [], x)  # s's constraints are nonlinear: not the shared linear solver
    if start.status == UNSAT:
        return None
    p_lo, p_hi = s.interval(x)
    if start.status != SAT or start.model is None:  # a model is re-checked exactly (else unknown)
        return (p_lo, p_hi)
    attained = start.model.get(v, 1)
    ends = []
    for upper in (False, True):
        proven, a, probes = (p_hi if upper else p_lo), attained, 0
        for _ in range(_NONLINEAR_STEPS):
            if proven == a:
                break
            if is_inf(proven):  # only an upper end can be infinite (variables are >= 1)
                if probes == 2:
                    break  # two probes, far apart, both attained: treat as unbounded (sound)
                m = a + 1 if probes == 0 else 4 * a + 64
                probes += 1
            else:
                m = (a + proven + 1) // 2 if upper else (a + proven) // 2
            build = (lambda enc, m=m: [enc.var(v) >= m]) if upper else (lambda enc, m=m: [enc.var(v) <= m])
            res = s.model(build, x)
            if res.status == UNSAT:
                proven = m - 1 if upper else m + 1
            elif res.status == SAT and res.model is not None:
                a = res.model.get(v, a)
            else:
                break
        ends.append(proven)
    return (ends[0], ends[1])


def suggest_fixes(session: Session, lhs: Expr, op: str, rhs: Expr, *, limit: int | None = None,
                  spec: bool = True, decision: Decision | None = None) -> list[Fix]:
    """Verified fixes for an undetermined ``lhs op rhs``, weakest simple ones first.

    Order: single-variable lower bounds ``v >= k`` (k one above the largest ``v`` at
    which the question fails, so the weakest such bound), single-variable upper
    bounds, the comparison itself as a constraint, then spec rewrites
    (``v -> v + (k-1)`` for a lower bound ``k``; ``v -> m*v`` for ``mod``/``floordiv``
    by ``m``). Every fix is offered only if re-deciding with it comes out "true".
    Proven answers get no fixes. ``limit`` stops early (the inconclusive-error
    message needs one); a few solver calls per variable otherwise.
    """
    d = decision if decision is not None else session.decide(lhs, op, rhs)
    if d.status not in (UNDETERMINED, UNKNOWN):
        return []
    out: list[Fix] = []
    seen: set[tuple[str, str]] = set()

    def offer(fix: Fix) -> bool:
        if (fix.kind, fix.text) not in seen:
            seen.add((fix.kind, fix.text))
            out.append(fix)
        return limit is not None and len(out) >= limit

    negs = _negation_constraints(lhs, op, rhs)
    names = sorted(lhs.variables() | rhs.variables())
    ranges = {v: _var_range_where_false(session, v, negs) for v in names}
    lower: list[tuple[str, int]] = []
    candidates: list[tuple[str, str, int]] = []
    for v in names:
        r = ranges[v]
        if r is not None and not is_inf(r[1]):
            candidates.append((v, ">=", int(r[1]) + 1))
    for v in names:
        r = ranges[v]
        if r is not None and not is_inf(r[0]) and r[0] - 1 >= 1:
            candidates.append((v, "<=", int(r[0]) - 1))
    for v, cop, k in candidates:
        # made, not parsed: Python's str() refuses a bound past 4,300 digits
        c = Constraint.make(Expr.var(v), cop, Expr.const(k), f"{v} {cop} {readable_int(k)}")
        if proves_with(session, lhs, op, rhs, [c]):
            if cop == ">=":
                lower.append((v, k))
            side = "smallest" if cop == ">=" else "largest"
            if offer(Fix(CONSTRAINT, c.text, v, f"the {side} bound on {v} that settles it")):
                return out
    text = comparison_as_constraint(lhs, op, rhs) if d.status == UNDETERMINED else None
    if text is not None and not options.deadline_passed():
        # built from the IR, not re-parsed from its text (a large expansion takes long to parse)
        rel = {">": (">=", rhs + 1), "<": ("<=", rhs - 1)}.get(op, (op, rhs))
        c = Constraint.make(lhs, rel[0], rel[1], text)
        if proves_with(session, lhs, op, rhs, [c]):
            if offer(Fix(CONSTRAINT, c.text, None, "the comparison itself")):
                return out
    if not spec:
        return out
    rewrites: list[tuple[str, Expr, str]] = [
        (v, Expr.var(v) + (k - 1), f"so that {v} >= {k} by construction") for v, k in lower if k >= 2
    ]
    for v, m in _divided_vars(lhs, rhs):
        rewrites.append((v, Expr.var(v) * m, f"so that {v} is a multiple of {m}"))
    for v, new, why in rewrites:
        if _spec_rewrite_proves(session, lhs, op, rhs, v, new):
            note = why
            if any(v in c.diff.variables() for c in session.constraints):
                note += f"; rewrite the constraints that mention {v} accordingly"
            if offer(Fix(SPEC, str(new), v, note)):
                return out
    return out


BOX_VALUATIONS = 400  # about this many valuations rank fixes: 1..64 for one variable, 1..20 for two, 1..7 for three


def _box_side(n_vars: int) -> int:
    return 1 if n_vars <= 0 else max(3, min(64, int(round(BOX_VALUATIONS ** (1.0 / n_vars)))))


def box_valuations(names: Sequence[str], side: int, most: int = 4 * BOX_VALUATIONS) -> list[dict[str, int]]:
    """Every valuation of ``names`` in ``1..side``, or ``most`` of them drawn with a fixed seed when
    there are more (``side ** len(names)`` grows past any budget with the variables). The same
    valuations on every call: a ranking must not depend on the run."""
    total = side ** len(names)
    if total <= most:
        return [dict(zip(names, values, strict=True)) for values in itertools.product(range(1, side + 1), repeat=len(names))]
    rng = random.Random(0)
    return [{v: rng.randint(1, side) for v in names} for _ in range(most)]


def fix_as_constraint(fix: Fix) -> Constraint:
    """The valuations a fix keeps, as one constraint: ``v -> v + k`` keeps ``v >= k + 1``; ``v -> m*v``
    keeps the multiples of ``m``; a constraint is itself."""
    if fix.kind != SPEC:
        return Constraint.parse(fix.text)
    new = Expr.lift(_parse(fix.text))
    k = (new - Expr.var(fix.variable)).as_constant()
    if k is not None:
        return Constraint.parse(f"{fix.variable} >= {k + 1}")
    return Constraint.make(Expr.var(fix.variable).mod(new.terms[0][1]), "==", Expr.const(0))


def _parse(text: str) -> Expr:
    from ..lang.parser import parse_expr

    return parse_expr(text)


def weakest_first(session: Session, fixes: Sequence[Fix], names: Sequence[str] = (), side: int | None = None) -> list[Fix]:
    """``fixes`` ordered by how many valuations of a small box (every variable in ``1..side``) the
    constraints keep with each in place, most first; ties keep their order.

    Why: every fix settles the question; the one that keeps the most valuations loses the least
    (``a + 1 >= b`` keeps what ``b <= 2`` throws away). The box is a measure, not a proof: the
    fixes were each verified before. One policy for ``explain``, the error message, the audit and
    ``smtdims run`` (the export pipeline measures native runs instead: :mod:`smtdims_jax.pipeline.box`).
    """
    if len(fixes) < 2:
        return list(fixes)
    def as_constraint(f: Fix) -> Constraint | None:
        try:
            return fix_as_constraint(f)
        except SmtdimsError:
            return None

    fixed = [as_constraint(f) for f in fixes]
    grid_names = sorted(set(names) | {v for c in fixed if c is not None for v in c.diff.variables()})
    # the user's constraints over these variables only: the others restrict every fix alike, and a
    # grid over hundreds of variables is 3^n points (it ran out of memory on 200)
    base = tuple(c for c in session.constraints.constraints if c.diff.variables() <= set(grid_names))
    grid = box_valuations(grid_names, side if side is not None else _box_side(len(grid_names)))

    def kept(c: Constraint | None) -> int:
        if c is None:
            return -1
        cs = ConstraintSet(base + (c,))
        count = 0
        for env in grid:
            try:
                count += cs.holds(env)
            except (ZeroDivisionError, KeyError):
                continue
        return count

    scored = [(-kept(c), i, f) for i, (c, f) in enumerate(zip(fixed, fixes, strict=True))]
    return [f for _, _, f in sorted(scored, key=lambda x: (x[0], x[1]))]


def best_fixes(session: Session, lhs: Expr, op: str, rhs: Expr, *, decision: Decision | None = None) -> list[Fix]:
    """Every verified fix of ``lhs op rhs``, weakest first (:func:`weakest_first`), a degenerate one
    after the others (:func:`nondegenerate_first`)."""
    fixes = suggest_fixes(session, lhs, op, rhs, decision=decision)
    ranked = weakest_first(session, fixes, sorted(lhs.variables() | rhs.variables()))
    return nondegenerate_first(session, ranked, lhs, rhs)


def nondegenerate_first(session: Session, fixes: Sequence[Fix], lhs: Expr, rhs: Expr) -> list[Fix]:
    """``fixes`` with the degenerate ones moved last (order kept otherwise), each noted with the quotient
    it empties.

    A fix is degenerate when it makes a ``floordiv`` of the question identically 0 that the constraints
    alone do not: ``h <= 7`` settles ``floordiv(h, 8)*floordiv(w, 8) <= 64`` by leaving no 8x8 patch
    at all. Such a quotient is a count (patches, blocks, windows), and a fix that empties it over the
    whole family it keeps answers the question by removing what the question was about; the box
    measure of :func:`weakest_first` cannot tell (``h <= 7`` keeps many small valuations). Still sound:
    a degenerate fix stays verified and listed, only ranked after the others; with no other fix it
    keeps its place. One zero check (the ladder, under the constraints with the fix) per fix and
    quotient, only where the question has a ``floordiv``.
    """
    diff = lhs - rhs
    quotients = sorted((a for a in diff.atoms() if isinstance(a, Op) and a.op == FLOORDIV), key=lambda a: a.sort_key())
    if len(fixes) < 2 or not quotients:
        return list(fixes)
    zero = Expr.const(0)
    live = [q for q in quotients if not _always_zero(session, Expr.atom(q), zero, None)]
    good: list[Fix] = []
    degenerate: list[Fix] = []
    for f in fixes:
        try:
            c = fix_as_constraint(f)
        except SmtdimsError:
            good.append(f)
            continue
        emptied = next((q for q in live if _always_zero(session, Expr.atom(q), zero, c)), None)
        if emptied is None:
            good.append(f)
        else:
            note = f"{f.note}; it leaves {emptied} == 0 everywhere" if f.note else f"it leaves {emptied} == 0 everywhere"
            degenerate.append(replace(f, note=note))
    return good + degenerate if good else list(fixes)


def _always_zero(session: Session, e: Expr, zero: Expr, extra: Constraint | None) -> bool:
    """Whether ``e == 0`` is proven under the session's constraints (plus ``extra``)."""
    if extra is None:
        try:
            return session.proves(e, "==", zero)
        except SmtdimsError:
            return False
    return proves_with(session, e, "==", zero, [extra])


def settling_fix(session: Session, lhs: Expr, rhs: Expr, *, decision: Decision | None = None) -> Fix | None:
    """The weakest verified fix that settles an inconclusive ``lhs >= rhs`` (JAX's question; ``<`` and
    ``>`` are asked as ``not >=``): the ``>=`` direction, or ``<`` where ``>=`` has none."""
    fixes = best_fixes(session, lhs, ">=", rhs, decision=decision) or best_fixes(session, lhs, "<", rhs)
    return fixes[0] if fixes else None


def _divided_vars(*exprs: Expr) -> list[tuple[str, int]]:
    """(variable, m) for each ``mod``/``floordiv`` by a constant m >= 2 whose dividend mentions the variable."""
    found: list[tuple[str, int]] = []
    for e in exprs:
        for a in sorted(e.atoms(), key=lambda a: a.sort_key()):
            if isinstance(a, Op) and a.op in (FLOORDIV, MOD):
                m = a.rhs.as_constant()
                if m is not None and m >= 2:
                    for v in sorted(a.lhs.variables()):
                        if (v, m) not in found:
                            found.append((v, m))
    return found


def _spec_rewrite_proves(session: Session, lhs: Expr, op: str, rhs: Expr, v: str, new: Expr) -> bool:
    """Whether writing ``new`` for ``v`` in the spec (constraints rewritten alike) proves the question."""
    env = {v: new}
    cs = ConstraintSet(tuple(
        Constraint(c.diff.substitute(env), c.kind, f"{c.text} [with {v} := {new}]") for c in session.constraints
    ))
    return proves_with(session, lhs.substitute(env), op, rhs.substitute(env), replace=cs)


_results.EXPLAINERS.update(decision=explain_decision, bounds=explain_bounds)

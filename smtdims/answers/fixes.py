"""Suggested fixes: what settles an undetermined question, each one re-decided, weakest first.

A fix is a constraint (in jax.export syntax, ready to paste into ``constraints=``) or a shape-spec
rewrite; it is offered only after re-deciding the question with it in place came out "true"
(:func:`proves_with`). Of several, the one that keeps the most valuations loses the least
(:func:`weakest_first`), and one that answers a question by emptying what it counts goes last
(:func:`nondegenerate_first`). One policy for ``explain``, the inconclusive error's message, the
audit and ``smtdims run``.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from .. import clocks
from ..engines.checks import SAT, UNSAT
from ..errors import SmtdimsError, UnsatisfiableConstraintsError
from ..lang.bigints import readable_int
from ..lang.constraints import Constraint, ConstraintSet
from ..lang.expr import FLOORDIV, MOD, Expr, Op
from ..lang.results import UNDETERMINED, UNKNOWN, Decision
from ..reasoner import Session, session_for
from ..rungs.interval_arith import is_inf

CONSTRAINT, SPEC = "constraint", "spec"


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


# -- what settles the question ---------------------------------------------------------------------
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
    if replace is not None:
        return _proven_under(session_for(replace, session.budget, trial=True), lhs, op, rhs)
    with session.assuming(*extra) as s:  # a trial set: the session's own answers never see ``extra``
        return _proven_under(s, lhs, op, rhs)


def _proven_under(s: Session, lhs: Expr, op: str, rhs: Expr) -> bool:
    """:func:`proves_with` in ``s``: a (re-checked) satisfying valuation, and ``lhs op rhs`` proven."""
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
        if clocks.deadline_passed():  # one session per variable: a wide scope stops at the deadline
            return None
        linear = session.constraints.is_linear() and neg.diff.is_linear()
        try:
            with session.assuming(neg, budget=None if linear else min(session.budget, _NONLINEAR_BUDGET)) as s:
                if linear:
                    b = s.bounds(Expr.var(v))
                    r = (b.lo, b.hi)
                else:
                    r = _bounded_range(s, v)
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
    if text is not None and not clocks.deadline_passed():
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
    for v, m in divided_vars(lhs, rhs):
        rewrites.append((v, Expr.var(v) * m, f"so that {v} is a multiple of {m}"))
    for v, new, why in rewrites:
        if spec_rewrite_proves(session, lhs, op, rhs, v, new):
            note = why
            if any(v in c.diff.variables() for c in session.constraints):
                note += f"; rewrite the constraints that mention {v} accordingly"
            if offer(Fix(SPEC, str(new), v, note)):
                return out
    return out


# -- which fix first --------------------------------------------------------------------------------
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


def divided_vars(*exprs: Expr) -> list[tuple[str, int]]:
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


def spec_rewrite_proves(session: Session, lhs: Expr, op: str, rhs: Expr, v: str, new: Expr) -> bool:
    """Whether writing ``new`` for ``v`` in the spec (constraints rewritten alike) proves the question."""
    env = {v: new}
    cs = ConstraintSet(tuple(
        Constraint(c.diff.substitute(env), c.kind, f"{c.text} [with {v} := {new}]") for c in session.constraints
    ))
    return proves_with(session, lhs.substitute(env), op, rhs.substitute(env), replace=cs)

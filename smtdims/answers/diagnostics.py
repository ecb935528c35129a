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

import z3

from .. import host, options
from ..engines.checks import SAT, UNSAT, KillableSolver, make_solver, minimise_by_deletion, run_check
from ..engines.counters import COUNTERS
from ..engines.encoding import Encoder, symbol
from ..errors import UnsatisfiableConstraintsError, format_valuation
from ..lang.constraints import ConstraintSet
from ..lang.expr import Expr, Var, symbolic_divisors
from ..lang.render import left_align
from ..lang.results import _json_bound, format_bound, unknown_advice
from ..options import REASON_DEADLINE
from ..reasoner import Session
from ..rungs.intervals import INF, IntervalEvaluator, is_inf
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
            "ranges": {v: [_json_bound(lo), _json_bound(hi)] for v, (lo, hi) in self.ranges.items()},
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
    session = Session(cs, budget)
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
    with options.scoped(budget=budget, deadline=deadline), options.question():
        return _check_constraints(_as_constraint_set(constraints))


def _check_constraints(cs: ConstraintSet) -> ConstraintReport:
    budget, deadline = options.limits_in_force()
    session = Session(cs, budget)
    imp = _Implications(cs, budget) if cs.constraints else None
    res = session.model(lambda enc: [])  # a model is re-checked exactly against every constraint
    texts = tuple(c.text for c in cs)
    if res.status == UNSAT:
        core = conflict(cs, budget) or list(texts)
        raise UnsatisfiableConstraintsError.from_conflict(core)
    if res.status != SAT or res.model is None:
        return ConstraintReport(texts, None, None, (), {}, {}, reason=res.reason or "model failed re-evaluation",
                                budget=budget, deadline=deadline)
    self_guarded = imp.self_guarded_divisors() if imp is not None else ()
    redundant, complete = _redundant(imp, [*session.known_points(), res.model or {}]) if imp else ((), True)
    ranges = _ranges(session, imp, res.model or {})
    fixed = {v: int(lo) for v, (lo, hi) in ranges.items() if lo == hi and not is_inf(lo)}
    return ConstraintReport(texts, True, dict(res.model or {}), redundant, fixed, ranges,
                            reason="" if complete and not options.deadline_passed() else REASON_DEADLINE,
                            budget=budget, deadline=deadline, self_guarded=self_guarded)


_WITNESS_POINTS = 4
_END_STEPS = 24  # checks per variable end before the ladder takes over


class _Assuming:
    """A solver whose ``check(*literals)`` skips z3.py's per-assumption ``cast``.

    The literals here are Boolean constants built in the solver's context, so the cast (in
    Python, per literal) only re-proves that; over hundreds of constraints it costs more than the
    checks themselves. Everything else is the solver's own (``run_check`` drives it).
    """

    def __init__(self, solver: z3.Solver):
        self.solver = solver

    def check(self, *literals: z3.BoolRef) -> z3.CheckSatResult:
        arr = (z3.Ast * len(literals))(*(b.as_ast() for b in literals))
        s = self.solver
        return z3.CheckSatResult(z3.Z3_solver_check_assumptions(s.ctx.ref(), s.solver, len(literals), arr))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.solver, name)


def _assuming(s: z3.Solver | KillableSolver) -> Any:
    return s if isinstance(s, KillableSolver) else _Assuming(s)


class _Solvers:
    """Z3's older arithmetic solver first (``arith.solver=2`` under a short timeout, as the
    ladder's linear rung does: 2.6x faster over 500 constraints here), the default solver where
    it says unknown. Either one's sat/unsat is the same fact, so the answer does not depend on
    which one finished (nor on the timeout): only the time does."""

    def __init__(self, ctx: z3.Context, build: Any, ask: options.Question):
        self.ctx, self.ask = ctx, ask
        self._build = build  # fast: bool -> a solver holding the formulas
        self._extra: list[z3.BoolRef] = []
        self.fast = build(True)
        self.default: z3.Solver | None = None
        self.last = self.fast

    def add(self, *formulas: z3.BoolRef) -> None:
        self._extra += formulas
        self.fast.add(*formulas)
        if self.default is not None:
            self.default.add(*formulas)

    def check(self, assumptions: list[z3.BoolRef]) -> tuple[object, str]:
        self.last = self.fast
        r, reason = run_check(_assuming(self.fast), self.ctx, assumptions, ask=self.ask)
        if r == z3.unknown and reason != REASON_DEADLINE:
            if self.default is None:
                self.default = self._build(False)
                self.default.add(*self._extra)
            self.last = self.default
            r, reason = run_check(_assuming(self.default), self.ctx, assumptions, ask=self.ask)
        return r, reason

    def model(self) -> z3.ModelRef:
        return self.last.model()

    def unsat_core(self) -> Any:
        return self.last.unsat_core()


class _Implications:
    """Which constraints the others imply: one incremental Z3 solver for the whole set.

    Each constraint ``c_i`` is asserted as ``on_i -> c_i`` and ``off_i -> not c_i``, and each
    implicit ``v >= 1`` as ``dim_v -> v >= 1``; a check switches constraints on and off with
    assumptions. The encoding of every constraint and division is built once (not a session and
    a solver per constraint). Sound: ``rest and not c_i`` unsatisfiable, with exactly the assumed facts, is the
    definition of "rest implies c_i"; unknown counts as "not implied".
    """

    def __init__(self, cs: ConstraintSet, budget: int):
        self.cs = cs
        self.ask = options.asking()  # made inside check_constraints' question: its clock and counts
        self.points: list[dict[str, int]] = []
        self.by_var: dict[str, list[int]] = {}
        for k, c in enumerate(cs.constraints):
            for v in c.diff.variables():
                self.by_var.setdefault(v, []).append(k)
        COUNTERS.bump("fresh_contexts")
        self.ctx = z3.Context()
        self.enc = Encoder(self.ctx)
        self.items = cs.constraints
        self.budget = budget
        self.terms: list[z3.BoolRef] = []
        self.axioms_by: list[list[z3.BoolRef]] = []  # the definitions of each constraint's divisions
        for c in self.items:
            (t,), atoms = self.enc.collect(lambda e, c=c: [e.constraint(c)])
            self.terms.append(t)
            self.axioms_by.append(self.enc.axioms_of(a for a in atoms if not isinstance(a, Var)))
        self.on = [z3.Bool(f"!c{i}", self.ctx) for i in range(len(self.terms))]
        self.off = [z3.Bool(f"!n{i}", self.ctx) for i in range(len(self.terms))]
        self.dims = {v: z3.Bool(symbol(v, "!v"), self.ctx) for v in sorted(cs.variables())}
        self.labels = {str(b): c.text for b, c in zip(self.on, self.items, strict=True)}
        self.labels.update({str(b): f"{v} >= 1 (dimension variable)" for v, b in self.dims.items()})
        self.nonlinear = not cs.is_linear()  # its checks run in a worker killed when late
        self.solver = self._solver(range(len(self.terms)))
        self.stopped = False  # the deadline passed: later questions are not asked
        self._zero: dict[Expr, z3.BoolRef] = {}

    def set_points(self, points: list[dict[str, int]]) -> None:
        """Satisfying valuations of the whole set (checked exactly here): where moving one variable
        breaks ``c_i`` and nothing else, ``c_i`` is not implied, and no solver is asked."""
        self.points = [dict(p) for p in points if p and self.cs.holds(p)][:_WITNESS_POINTS]

    def _solver(self, which: Any) -> _Solvers:
        """Solvers holding the switchable constraints ``which`` (their definitions) and their ``v >= 1`` facts."""
        which = list(which)
        return _Solvers(self.ctx, lambda fast: self._build(which, fast), self.ask)

    def _build(self, which: list[int], fast: bool) -> z3.Solver:
        s = make_solver(self.ctx, self.budget, fast=fast, killable=self.nonlinear)
        seen: set[int] = set()
        names: set[str] = set()
        for k in which:
            for ax in self.axioms_by[k]:
                if ax.get_id() not in seen:
                    seen.add(ax.get_id())
                    s.add(ax)
            s.add(z3.Implies(self.on[k], self.terms[k]), z3.Implies(self.off[k], z3.Not(self.terms[k])))
            names |= self.items[k].diff.variables()
        for v in sorted(names if len(names) < len(self.dims) else self.dims):
            s.add(z3.Implies(self.dims[v], self.enc.var(v) >= 1))
        return s

    def attains(self, v: str, value: int, lower: bool) -> bool | None:
        """Whether some valuation meets every constraint with ``v <= value`` (``lower``) / ``v >= value``.

        True: sat; False: unsat; None: unknown. With ``value`` a sound bound of ``v``, sat
        means the bound is attained (exact). No model is read (reading 200 values costs
        more than the check).
        """
        x = self.enc.var(v)
        lit = z3.Bool(symbol(v, f"!{'lo' if lower else 'hi'}{value}"), self.ctx)
        self.solver.add(z3.Implies(lit, x <= self.enc.const(value) if lower else x >= self.enc.const(value)))
        r, _ = self._check([*self.on, *self.dims.values(), lit])
        return True if r == z3.sat else False if r == z3.unsat else None

    def exact_end(self, v: str, proven: int, attained: int | float, lower: bool) -> int | None:
        """The exact lower (``lower``) or upper end of ``v`` from a sound bound ``proven`` and an
        attained value ``attained`` (or infinity): gallop inwards from ``proven``, then bisect.

        On ``f = sign*v``: ``Q(m)`` = "``f <= m`` is satisfiable", true exactly for ``m >= e``, the
        end. Invariant ``lo <= e <= hi``: ``Q(m)`` sat sets ``hi = m``, unsat ``lo = m + 1``. The
        first question is whether the proven bound is attained (the usual case). None when a
        check is unknown or :data:`_END_STEPS` checks do not close it (the ladder answers then).
        """
        sign = 1 if lower else -1
        lo, hi = proven * sign, (None if is_inf(attained) else int(attained) * sign)
        step = 1
        for _ in range(_END_STEPS):
            if hi is not None and lo >= hi:
                return hi * sign
            m = lo + step - 1 if hi is None else min(lo + step - 1, (lo + hi) // 2)
            got = self.attains(v, m * sign, lower)
            if got is None:
                return None
            if got:
                hi = m
            else:
                lo, step = m + 1, step * 2
        return hi * sign if hi is not None and lo >= hi else None

    def _check(self, assumptions: list[z3.BoolRef], solver: _Solvers | None = None) -> tuple[object, str]:
        COUNTERS.checked(self.ask)
        s = solver if solver is not None else self.solver
        return self._unless_stopped(lambda: s.check(assumptions))

    def _unless_stopped(self, check: Any) -> tuple[object, str]:
        """``check()``, unless the deadline stopped an earlier one: every later question of the set
        is then answered "unknown" without a check. (A nonlinear set's checks run in a worker killed
        when late: :class:`~smtdims.engines.smt.KillableSolver`.)"""
        if self.stopped:
            return z3.unknown, REASON_DEADLINE
        r, reason = check()
        if reason == REASON_DEADLINE:
            self.stopped = True
        return r, reason

    def refuted_at_a_point(self, i: int, kept: set[int]) -> bool:
        """A valuation meeting every kept constraint but ``i`` where ``i`` fails: ``i`` is not implied.

        Each candidate changes one variable ``v`` of constraint ``i`` at a satisfying point; the
        constraints that do not mention ``v`` still hold there, those that do are evaluated
        exactly: far cheaper per candidate than a solver check (most constraints of a real set are
        not redundant).
        """
        c = self.items[i]
        for p in self.points:
            for v in sorted(c.diff.variables()):
                x = p[v]
                for y in (x - 1, x + 1, 1, x // 2, 2 * x, x + 64, 64 * x, x + 2**40):
                    if y < 1 or y == x:
                        continue
                    q = {**p, v: y}
                    try:
                        if c.holds(q):
                            continue
                        if all(self.items[k].holds(q) for k in self.by_var[v] if k != i and k in kept):
                            return True
                    except ZeroDivisionError:
                        continue
        return False

    def implied(self, i: int, kept: list[int]) -> tuple[str, ...] | None:
        """A minimal support (texts) for "the constraints ``kept`` imply constraint ``i``", or None."""
        facts = [self.on[j] for j in kept if j != i] + list(self.dims.values())
        r, reason = self._check([*facts, self.off[i]])
        if r == z3.sat:
            return None
        if r == z3.unsat:
            core = {b.get_id() for b in self.solver.unsat_core()}
            rest = [b for b in facts if b.get_id() in core]
        elif reason == REASON_DEADLINE or not self._fresh_refutes(i, kept):
            return None
        else:  # proven by the fresh solver: minimise from every fact
            rest = list(facts)
        # deletion: a fact whose removal leaves "not c_i" satisfiable is needed; on a solver that
        # holds only the facts left (a core is a few constraints; the whole set is hundreds)
        index = {self.on[k].get_id(): k for k in kept}
        small = self._solver(sorted({i, *(index[b.get_id()] for b in rest if b.get_id() in index)}))
        needed = minimise_by_deletion(rest, lambda facts: self._check([*facts, self.off[i]], small), small.unsat_core)
        texts = [self.labels[str(b)] for b in needed]
        order = {c.text: k for k, c in reversed(list(enumerate(self.items)))}
        user = sorted({t for t in texts if t in order}, key=order.__getitem__)
        implicit = sorted(t for t in texts if t not in order)
        return tuple(user) + tuple(implicit)

    def _fresh_refutes(self, i: int, kept: list[int]) -> bool:
        """A non-incremental check for what the incremental solver left unknown (nonlinear sets):
        Z3 picks its nonlinear tactics only for a solver without assumptions."""
        if options.deadline_passed():
            self.stopped = True
            return False
        s = make_solver(self.ctx, self.budget, nonlinear=True, killable=True)
        s.add(*{ax.get_id(): ax for k in kept for ax in self.axioms_by[k]}.values(),
              *(self.terms[j] for j in kept if j != i), z3.Not(self.terms[i]),
              *(self.enc.var(v) >= 1 for v in self.dims))
        r, _ = self._check_with(s)
        return r == z3.unsat

    def _check_with(self, s: z3.Solver) -> tuple[object, str]:
        COUNTERS.checked(self.ask)
        return self._unless_stopped(lambda: run_check(s, self.ctx, ask=self.ask))

    def guards_a_divisor(self, i: int, kept: list[int]) -> bool:
        """Whether constraint ``i`` keeps a divisor of another kept constraint nonzero.

        Such a constraint is never reported redundant: the constraint dividing by
        ``d`` holds only where ``d != 0``, so it "implies" its own guard, but without the guard
        the set asks JAX to evaluate a division by 0 at some valuation. ``i`` guards ``d`` when
        the kept constraints that do not divide by ``d`` allow ``d == 0`` and adding ``i`` rules
        it out. Unknown counts as guarding (keeping a constraint is always safe).
        """
        own = set(symbolic_divisors(self.items[i].diff))
        for j in kept:
            if j == i:
                continue
            for d in symbolic_divisors(self.items[j].diff):
                if d in own:
                    continue
                zero = self._zero_literal(d)
                others = [self.on[k] for k in kept
                          if k != i and d not in set(symbolic_divisors(self.items[k].diff))]
                dims = list(self.dims.values())
                r, _ = self._check([*others, *dims, zero])
                if r == z3.unsat:
                    continue  # the others keep d nonzero on their own
                if r == z3.unknown:
                    return True
                r, _ = self._check([*others, self.on[i], *dims, zero])
                if r != z3.sat:
                    return True
        return False

    def self_guarded_divisors(self) -> tuple[str, ...]:
        """The divisors that the constraints not dividing by them allow to be 0 (or may: unknown).

        A constraint holds only where its divisors are nonzero, so ``floordiv(a, b - 1) >= 1``
        alone excludes ``b = 1``, here as in ``bounds`` and ``decide``; JAX's shape check evaluates
        it there (numpy's ``x // 0 == 0``), so the report names such divisors, whatever the order
        the constraints are listed in (one rule with ``bounds`` and ``decide``, which answer under
        such constraints rather than raise).
        """
        found: list[str] = []
        divisors: dict[Expr, None] = {}
        for c in self.items:
            divisors.update(dict.fromkeys(symbolic_divisors(c.diff)))
        for d in divisors:
            lo, hi = IntervalEvaluator({v: (1, INF) for v in d.variables()}).expr(d, options.clock())
            if lo > 0 or hi < 0:
                continue  # nonzero for every v >= 1
            others = [self.on[k] for k, c in enumerate(self.items) if d not in symbolic_divisors(c.diff)]
            r, _ = self._check([*others, *self.dims.values(), self._zero_literal(d)])
            if r != z3.unsat:
                found.append(str(d))
        return tuple(found)

    def _zero_literal(self, d: Expr) -> z3.BoolRef:
        b = self._zero.get(d)
        if b is None:
            b = z3.Bool(f"!z{len(self._zero)}", self.ctx)
            (t,), atoms = self.enc.collect(lambda e: [e.expr(d) == 0])
            self.solver.add(z3.Implies(b, t), *self.enc.axioms_of(a for a in atoms if not isinstance(a, Var)))
            self._zero[d] = b
        return b


def _ranges(session: Session, imp: _Implications | None,
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
        if imp is None or is_inf(lo) or options.deadline_passed():
            new_lo: int | float | None = None
        else:
            new_lo = lo if lo in seen else imp.exact_end(v, int(lo), min(seen, default=hi), True)
        if new_lo is None or options.deadline_passed():
            new_hi: int | float | None = None
        elif is_inf(hi):
            new_hi = hi if v in unbounded else None
        else:
            new_hi = hi if hi in seen else imp.exact_end(v, int(hi), max(seen, default=new_lo), False)
        if new_lo is not None and new_hi is not None:
            out[v] = (new_lo, new_hi)
        elif options.deadline_passed():
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


def _redundant(imp: _Implications, points: list[dict[str, int]]) -> tuple[tuple[Redundant, ...], bool]:
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
        if imp.stopped or options.deadline_passed():
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

"""Which constraints of a set the others imply: one incremental Z3 solver for the whole set.

What a constraint report needs (:func:`smtdims.answers.diagnostics.check_constraints`): for each
constraint, whether the others imply it and from which of them (a minimal support), whether it keeps
another one's divisor nonzero, and each variable's exact ends. Asking a session and a solver per
constraint would encode every constraint again for each; here each is encoded once, in a Z3 context
of its own, and the checks switch constraints on and off with assumptions. Made through
:meth:`smtdims.reasoner.Session.implications`, inside the caller's question, whose clock it is handed.
"""

from __future__ import annotations

import math
from typing import Any

import z3

from .. import clocks
from ..clocks import REASON_DEADLINE
from ..lang.constraints import ConstraintSet
from ..lang.expr import Expr, Var, symbolic_divisors
from .checks import KillableSolver, make_solver, minimise_by_deletion, run_check
from .counters import COUNTERS
from .encoding import Encoder, symbol

_WITNESS_POINTS = 4  # satisfying valuations tried before a solver is asked whether a constraint is implied
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
    ladder's linear rung does: faster on large linear sets), the default solver where it says
    unknown. Either one's sat/unsat is the same fact, so the answer does not depend on
    which one finished (nor on the timeout): only the time does."""

    def __init__(self, ctx: z3.Context, build: Any, ask: clocks.QuestionState):
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


class Implications:
    """Which constraints the others imply: one incremental Z3 solver for the whole set.

    Each constraint ``c_i`` is asserted as ``on_i -> c_i`` and ``off_i -> not c_i``, and each
    implicit ``v >= 1`` as ``dim_v -> v >= 1``; a check switches constraints on and off with
    assumptions. The encoding of every constraint and division is built once (not a session and
    a solver per constraint). Sound: ``rest and not c_i`` unsatisfiable, with exactly the assumed facts, is the
    definition of "rest implies c_i"; unknown counts as "not implied".
    """

    def __init__(self, cs: ConstraintSet, budget: int, ask: clocks.QuestionState):
        self.cs = cs
        self.ask = ask  # the caller's question: its clock and counts
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
        infinite = isinstance(attained, float) and math.isinf(attained)  # an int end may exceed float range
        lo, hi = proven * sign, (None if infinite else int(attained) * sign)
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
        when late: :class:`~smtdims.engines.checks.KillableSolver`.)"""
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
        if self.ask.deadline.expired:
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

    def may_be_zero(self, d: Expr) -> bool:
        """Whether the constraints that do not divide by ``d`` allow ``d == 0`` (or may: unknown)."""
        others = [self.on[k] for k, c in enumerate(self.items) if d not in symbolic_divisors(c.diff)]
        r, _ = self._check([*others, *self.dims.values(), self._zero_literal(d)])
        return r != z3.unsat

    def _zero_literal(self, d: Expr) -> z3.BoolRef:
        b = self._zero.get(d)
        if b is None:
            b = z3.Bool(f"!z{len(self._zero)}", self.ctx)
            (t,), atoms = self.enc.collect(lambda e: [e.expr(d) == 0])
            self.solver.add(z3.Implies(b, t), *self.enc.axioms_of(a for a in atoms if not isinstance(a, Var)))
            self._zero[d] = b
        return b

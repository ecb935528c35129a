"""The Z3 side of one constraint set (:class:`Z3Side`): every check, optimum and unsat core a
scope asks of Z3.

Two solvers answer checks:

- linear (Presburger) checks run on one incremental solver per constraint set in the process-wide
  shared context (push/pop). The procedure is complete there, so the sat/unsat status does not
  depend on earlier checks;
- nonlinear checks run in a context of their own, created for the question and dropped after it
  (:class:`Fresh`): Z3's nonlinear search depends on the terms and ids already in a context, so a
  shared context would make answers depend on the history of the process. Their strategy is
  :func:`smtdims.engines._z3_strategy.nonlinear_tactic`, not Z3's default, whose stages read the
  process's memory and the clock.

Every check carries the question's deadline: the watchdog interrupts it when the deadline passes
(see :mod:`smtdims.watchdog`).
"""

from __future__ import annotations

from collections.abc import Callable

import z3

from .. import clocks
from ..clocks import REASON_DEADLINE, REASON_INCOMPLETE, REASON_INTERRUPTED
from ..lang.constraints import ConstraintSet
from ..lang.expr import Atom, Expr, Var
from .checks import SAT, UNKNOWN, UNSAT, Z3_WORKERS, CheckResult, make_solver, minimise_by_deletion, run_check
from .context import Z3_LOCK, shared_context, z3_locked, z3_work
from .counters import COUNTERS
from .encoding import DeadlinePassed, Encoder, model_ints, symbol
from .memory import mark_trim_due, new_family, touch


class Fresh:
    """A context of its own for the nonlinear checks of one question (dropped with it)."""

    def __init__(self, constraints: ConstraintSet, ask: clocks.QuestionState):
        COUNTERS.bump("fresh_contexts")
        mark_trim_due()  # freed with its question: its pages too are worth giving back
        if ask.bounded:
            Z3_WORKERS.prestart()  # its checks go to a worker: the first one starts while this encodes
        with z3_work():
            self.ctx = z3.Context()
            self.enc = Encoder(self.ctx)
            self.terms, self.atoms = self.enc.collect(
                lambda e: [e.constraint(c) for c in constraints], sorted(constraints.variables()), watch=ask.deadline
            )


class Z3Side:
    """The Z3 side of one constraint set, created on first use; a scope holds one as ``scope.solver``
    (the door to a constraint set is :class:`smtdims.reasoner.Session`, never this).

    Linear checks share one incremental solver (push/pop) in the shared context, which
    holds the constraints and their definitions; each check adds its own inside push/pop;
    nonlinear ones run in the question's fresh context (:class:`Fresh`), one solver per
    check, asserting the constraints and the definitional axioms of the atoms the check
    mentions, no others. Thread-safe: work in the shared context holds ``Z3_LOCK``.
    """

    def __init__(self, constraints: ConstraintSet, budget: int, family: int | None = None):
        self.constraints = constraints
        self.budget = budget
        self.lock = Z3_LOCK
        self.family = new_family() if family is None else family  # released together (see touch)
        self._enc: Encoder | None = None
        self._solvers: dict[bool, z3.Solver] = {}  # the shared solvers: fast (older arithmetic) and default
        self._fast_timeouts = 0
        self._shared_atoms: set[Atom] = set()  # atoms whose axioms the shared solvers hold
        self.linear = constraints.is_linear()

    @property
    def started(self) -> bool:
        return self._enc is not None

    @z3_locked
    def _start(self, watch: clocks.Deadline | None = None) -> None:
        """The shared context's side of this constraint set (the constraints encoded once), built on first
        use and again after a retirement; ``watch``: the clock of the question that builds it."""
        if self._enc is not None and self._enc.ctx is not shared_context():  # retired: start over
            self._release()
        touch(self, self.family)
        if self._enc is None:
            enc = Encoder(shared_context())
            terms, atoms = enc.collect(
                lambda e: [e.constraint(c) for c in self.constraints], sorted(self.constraints.variables()), watch=watch
            )
            self._constraint_terms = terms
            self._constraint_atoms = atoms
            self._shared_atoms = set(atoms)
            self._enc = enc

    @property
    def _z3_ctx(self) -> z3.Context | None:
        return None if self._enc is None else self._enc.ctx

    @z3_locked
    def _release(self) -> None:
        """Drop the Z3 side (solvers, encoded terms); the next check rebuilds it, as after
        :func:`smtdims.engines.memory.retire_shared`. Only time is lost: the constraints and every
        check's formulas are encoded anew from the IR, and an answer never depends on a solver's
        history (push/pop leaves the constraints alone; Presburger answers are the same fresh and
        warm, see tools/fuzz.py --fresh-vs-warm)."""
        self._enc, self._solvers, self._shared_atoms = None, {}, set()
        self._constraint_terms, self._constraint_atoms = [], frozenset()

    def _encoder(self, watch: clocks.Deadline) -> Encoder:
        self._start(watch)
        assert self._enc is not None
        return self._enc

    def _shared_solver(self, fast: bool, watch: clocks.Deadline) -> z3.Solver:
        self._start(watch)
        s = self._solvers.get(fast)
        if s is None:
            assert self._enc is not None
            s = make_solver(self._enc.ctx, self.budget, fast=fast)
            s.add(*self._constraint_terms, *self._enc.axioms_of(self._constraint_atoms))
            self._solvers[fast] = s
        return s

    # -- the nonlinear context of the current question ------------------------------------------
    def fresh(self, ask: clocks.QuestionState) -> Fresh:
        """The fresh context of this constraint set for the question ``ask``.

        Inside an outer question (:func:`smtdims.clocks.outer_question`) one per Z3 side until the
        outermost one ends; outside, one per check.
        """
        q = ask
        if not q.starts:  # no outer question open
            return Fresh(self.constraints, ask)
        f = q.contexts.get(id(self))
        if f is None:
            f = Fresh(self.constraints, ask)
            q.contexts[id(self)] = f
            q.keep.append(self)  # ids stay unique while the question lives
        return f

    # -- checks ------------------------------------------------------------------------------------------
    def check(
        self,
        build: Callable[[Encoder], list[z3.BoolRef]],
        *,
        linear: bool,
        ask: clocks.QuestionState,
        want_model: bool = True,
        model_vars: frozenset[str] = frozenset(),
    ) -> CheckResult:
        """Satisfiability of the constraints AND the formulas ``build`` makes, for the question ``ask``
        (its deadline, its fresh contexts, its count of checks).

        Building the formulas watches the deadline too
        (:class:`~smtdims.engines.encoding.DeadlinePassed`): an input
        large enough to take seconds to encode is answered "unknown", reason deadline.
        """
        COUNTERS.checked(ask)
        try:
            return self._check(build, linear, want_model, model_vars, ask)
        except DeadlinePassed:
            COUNTERS.bump("deadline_hits")
            return CheckResult(UNKNOWN, reason=REASON_DEADLINE)

    def _check(self, build: Callable[[Encoder], list[z3.BoolRef]], linear: bool, want_model: bool,
               model_vars: frozenset[str], ask: clocks.QuestionState) -> CheckResult:
        if linear and self.linear:
            with Z3_LOCK:
                enc = self._encoder(ask.deadline)
                goals, atoms = enc.collect(build, sorted(model_vars), watch=ask.deadline)
                # the query's own definitions live inside push/pop: a scope that asked about
                # many divisions would otherwise slow every later check
                extra = [*enc.axioms_of(atoms - self._shared_atoms), *goals]
                # a scope where the fast solver timed out twice goes straight to the default one
                for fast in (True, False) if self._fast_timeouts < 2 else (False,):
                    s = self._shared_solver(fast, ask.deadline)
                    if self._enc is not enc:  # released in between (nothing here touches another holder)
                        return CheckResult(UNKNOWN, reason=REASON_INCOMPLETE)
                    s.push()
                    try:
                        s.add(*extra)
                        r, reason = run_check(s, enc.ctx, ask=ask)
                        if fast and r == z3.unknown and reason not in (REASON_DEADLINE, REASON_INTERRUPTED):
                            self._fast_timeouts += 1
                            continue  # past its timeout (or incomplete): the default solver decides
                        if r == z3.unknown and not fast and self._fast_timeouts:
                            # sat/unsat is the same fact from either solver; an unknown here is one
                            # the fast solver, given time, might have settled: clock-shaped
                            ask.deadline.mark(clocks.CLOCK_FAST_SOLVER)
                        return self._result(s, enc, want_model, model_vars, ask, r, reason)
                    finally:
                        s.pop()
        if ask.deadline.expired:
            COUNTERS.bump("deadline_hits")
            return CheckResult(UNKNOWN, reason=REASON_DEADLINE)
        f = self.fresh(ask)
        goals, atoms = f.enc.collect(build, sorted(model_vars), watch=ask.deadline)
        s = make_solver(f.ctx, self.budget, nonlinear=True, killable=True)
        s.add(*f.terms, *f.enc.axioms_of(f.atoms | atoms), *goals)
        return self._result(s, f.enc, want_model, model_vars, ask)

    def _result(self, s: z3.Solver | z3.Optimize, enc: Encoder, want_model: bool, model_vars: frozenset[str],
                ask: clocks.QuestionState, r: object = None, reason: str = "") -> CheckResult:
        if r is None:
            r, reason = run_check(s, enc.ctx, ask=ask)
        if r == z3.sat:
            model = None
            if want_model:
                m = s.model()
                names = set(model_vars) | set(self.constraints.variables())
                model = model_ints(m, enc.vars, sorted(names))
            return CheckResult(SAT, model=model)
        if r == z3.unsat:
            return CheckResult(UNSAT)
        COUNTERS.bump("solver_unknowns")
        return CheckResult(UNKNOWN, reason=reason or REASON_INCOMPLETE)

    def unsat_core(self, extra: Callable[[Encoder], list[z3.BoolRef]] | None = None, *,
                   ask: clocks.QuestionState) -> list[str] | None:
        """A small subset of user constraints (by text) that is unsatisfiable with ``extra``.

        Implicit ``v >= 1`` facts appear as ``'v >= 1 (dimension variable)'``. Returns None if
        satisfiable or unknown. Runs in a context of its own. Minimised by deletion, one
        deadline-bounded check per constraint of the core: Z3's own ``core.minimize`` runs
        inside ``unsat_core()``, where no watchdog reaches it (it runs on for seconds past the
        deadline on constraints with nested mods). When the deadline comes first, the core
        found so far is returned: a conflict still, perhaps not a minimal one; None when the
        deadline came before the first check ended (its checks run in a worker killed when late,
        :class:`~smtdims.engines.checks.KillableSolver`).
        """
        enc = Encoder(z3.Context())
        COUNTERS.bump("fresh_contexts")
        try:
            cons, c_atoms = enc.collect(lambda e: [e.constraint(c) for c in self.constraints],
                                        sorted(self.constraints.variables()), watch=ask.deadline)
            goals, atoms = enc.collect(extra or (lambda e: []), watch=ask.deadline)
        except DeadlinePassed:  # the question's deadline came while encoding: no core, in time
            COUNTERS.bump("deadline_hits")
            return None
        atoms = atoms | c_atoms
        s = make_solver(enc.ctx, self.budget, killable=True)
        labels: dict[str, str] = {}
        tracked: list[z3.BoolRef] = []

        def track(name: str, label: str, fact: z3.BoolRef) -> None:
            b = z3.Bool(name, enc.ctx)
            labels[name] = label
            tracked.append(b)
            s.add(z3.Implies(b, fact))

        for i, c in enumerate(self.constraints):
            track(f"!c{i}", c.text, cons[i])
        for a in sorted(atoms, key=lambda a: a.sort_key()):
            if isinstance(a, Var):
                track(symbol(a.name, "!v"), f"{a.name} >= 1 (dimension variable)", enc.vars[a.name] >= 1)
        s.add(*enc.axioms_of(a for a in atoms if not isinstance(a, Var)), *goals)

        def search() -> list[str] | None:
            COUNTERS.checked(ask)
            r, _ = run_check(s, enc.ctx, tracked, ask=ask)
            if r != z3.unsat:
                return None
            def check(facts: list[z3.BoolRef]) -> tuple[object, str]:
                COUNTERS.checked(ask)
                return run_check(s, enc.ctx, facts, ask=ask)

            needed = minimise_by_deletion(list(s.unsat_core()), check, s.unsat_core)
            return [labels[b.decl().name()] for b in needed]

        return search()

    def _optimizer(self, enc: Encoder, terms: list, goals: list[z3.BoolRef], atoms: set[Atom],
                   ask: clocks.QuestionState) -> z3.Optimize:
        COUNTERS.bump("solvers_created")
        COUNTERS.checked(ask)
        o = z3.Optimize(ctx=enc.ctx)
        o.set("rlimit", self.budget)
        o._smtdims_budget = self.budget  # type: ignore[attr-defined]  # tells Ctrl-C from the budget
        o.add(*terms, *enc.axioms_of(atoms), *goals)
        return o

    def optimize(
        self, e: Expr, model_vars: frozenset[str], senses: tuple[str, ...] = ("min", "max"), *,
        ask: clocks.QuestionState,
    ) -> dict[str, tuple[CheckResult, object]]:
        """Exact minimum and/or maximum of a linear ``e`` (Z3's optimiser; +-oo when unbounded).

        A new optimiser per sense (its search is not incremental) over the shared context's
        terms: the constraints are encoded once per scope, and a context is costly to build.
        """
        results: dict[str, tuple[CheckResult, object]] = {}
        with Z3_LOCK:
            try:
                enc = self._encoder(ask.deadline)
                (t,), atoms = enc.collect(lambda en: [en.expr(e)], sorted(model_vars), watch=ask.deadline)
            except DeadlinePassed:
                COUNTERS.bump("deadline_hits")
                return {sense: (CheckResult(UNKNOWN, reason=REASON_DEADLINE), None) for sense in senses}
            for sense in senses:
                o = self._optimizer(enc, self._constraint_terms, [], self._constraint_atoms | atoms, ask)
                h = o.minimize(t) if sense == "min" else o.maximize(t)
                r, reason = run_check(o, enc.ctx, ask=ask)
                if r == z3.sat:
                    value = h.lower() if sense == "min" else h.upper()
                    results[sense] = (self._result(o, enc, True, model_vars, ask, r), value)
                else:
                    if r == z3.unknown:
                        COUNTERS.bump("solver_unknowns")
                    results[sense] = (CheckResult(UNSAT if r == z3.unsat else UNKNOWN, reason=reason), None)
                if reason == REASON_DEADLINE:
                    break  # the shared context was retired: its terms are gone
        return results

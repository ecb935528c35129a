"""Z3 encoding of the IR, and a lazily-built, incremental solver session per constraint set.

Each operator is encoded in exactly one place (:meth:`Encoder._encode_op`).
``floordiv``/``mod`` follow Python: floor division, remainder with the divisor's
sign. Z3's own ``div``/``mod`` are Euclidean, which agrees with Python only for a
positive divisor, so negative constant divisors are rewritten and symbolic
divisors get fresh quotient/remainder variables with guarded axioms.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import z3

from .constraints import Constraint, ConstraintSet
from .expr import FLOORDIV, MAX, MIN, MOD, Atom, Expr, Op, Var

SAT, UNSAT, UNKNOWN = "sat", "unsat", "unknown"



@dataclass
class SolverCounters:
    """Process-wide counters reported by :func:`smtdims.stats`."""

    solvers_created: int = 0
    solver_checks: int = 0
    solver_unknowns: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def bump(self, name: str, by: int = 1) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + by)


COUNTERS = SolverCounters()


class Encoder:
    """Translates IR expressions to Z3 terms in one context; memoised per atom.

    Definitional axioms (``v >= 1``; quotient/remainder definitions for symbolic
    divisors) are kept per atom, so a query asserts only those of the atoms it
    mentions: one nonlinear query must not make every later query nonlinear.
    """

    def __init__(self, ctx: z3.Context):
        self.ctx = ctx
        self.vars: dict[str, z3.ArithRef] = {}
        self._atoms: dict[Atom, z3.ArithRef] = {}
        self._closure: dict[Atom, frozenset[Atom]] = {}  # the atom and every atom nested in it
        self._axioms: dict[Atom, list[z3.BoolRef]] = {}
        self._touched: set[Atom] | None = None
        self._fresh = 0

    def var(self, name: str) -> z3.ArithRef:
        v = self.vars.get(name)
        a = Var(name)
        if v is None:
            v = z3.Int(name, self.ctx)
            self.vars[name] = v
            self._atoms[a] = v
            self._closure[a] = frozenset((a,))
            self._axioms[a] = [v >= 1]
        if self._touched is not None:
            self._touched.add(a)
        return v

    def expr(self, e: Expr) -> z3.ArithRef:
        total: z3.ArithRef | None = None
        for m, c in e.terms:
            term: z3.ArithRef = z3.IntVal(c, self.ctx)
            for a, k in m:
                base = self.atom(a)
                for _ in range(k):
                    term = term * base
            total = term if total is None else total + term
        return total if total is not None else z3.IntVal(0, self.ctx)

    def atom(self, a: Atom) -> z3.ArithRef:
        if isinstance(a, Var):
            return self.var(a.name)
        t = self._atoms.get(a)
        if t is None:
            outer, self._touched = self._touched, set()
            try:
                t = self._encode_op(a)
                inner = self._touched
            finally:
                self._touched = outer
            self._atoms[a] = t
            self._closure[a] = frozenset(inner | {a})
        if self._touched is not None:
            self._touched |= self._closure[a]
        return t

    def _encode_op(self, a: Op) -> z3.ArithRef:
        x, y = self.expr(a.lhs), self.expr(a.rhs)
        if a.op == MAX:
            return z3.If(x >= y, x, y)
        if a.op == MIN:
            return z3.If(x <= y, x, y)
        assert a.op in (FLOORDIV, MOD), a.op
        d = a.rhs.as_constant()
        if d is not None and d > 0:
            return x / y if a.op == FLOORDIV else x % y  # Euclidean == floor for d > 0
        if d is not None and d < 0:
            # x // d == (-x) // (-d);  x % d == -((-x) % (-d))
            return (-x) / (-y) if a.op == FLOORDIV else -((-x) % (-y))
        # Symbolic divisor: x == y*q + r with Python's remainder sign, when y != 0.
        self._fresh += 1
        q = z3.Int(f"!q{self._fresh}", self.ctx)
        r = z3.Int(f"!r{self._fresh}", self.ctx)
        self._axioms[a] = [
            z3.Implies(
                y != 0,
                z3.And(
                    x == y * q + r,
                    z3.Implies(y > 0, z3.And(r >= 0, r < y)),
                    z3.Implies(y < 0, z3.And(r <= 0, r > y)),
                ),
            )
        ]
        return q if a.op == FLOORDIV else r

    def constraint(self, c: Constraint) -> z3.BoolRef:
        d = self.expr(c.diff)
        return d >= 0 if c.kind == ">=" else d == 0

    def collect(self, build: Callable[[Encoder], list[z3.BoolRef]], names: Iterable[str] = ()) -> tuple[list, set[Atom]]:
        """``build``'s formulas and every atom they (and the variables ``names``) mention."""
        outer, self._touched = self._touched, set()
        try:
            goals = build(self)
            for n in names:
                self.var(n)
            return goals, self._touched
        finally:
            self._touched = outer

    def axioms_of(self, atoms: Iterable[Atom]) -> list[z3.BoolRef]:
        return [ax for a in sorted(atoms, key=lambda a: a.sort_key()) for ax in self._axioms.get(a, ())]

    def all_axioms(self) -> list[z3.BoolRef]:
        """Every axiom encoded so far (for self-contained SMT-LIB scripts)."""
        return self.axioms_of(self._axioms)


# One Z3 context for the process: a context costs ~16 MiB and 10-25 ms to create, and a
# scope needs only a solver. Z3 contexts are not thread-safe, so all Z3 work holds Z3_LOCK.
Z3_LOCK = threading.RLock()
_CONTEXT: list[z3.Context] = []


def shared_context() -> z3.Context:
    with Z3_LOCK:
        if not _CONTEXT:
            _CONTEXT.append(z3.Context())
        return _CONTEXT[0]


def _locked(method: Callable) -> Callable:
    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        with Z3_LOCK:
            return method(*args, **kwargs)

    return wrapper


def make_solver(ctx: z3.Context, budget: int) -> z3.Solver:
    COUNTERS.bump("solvers_created")
    s = z3.Solver(ctx=ctx)
    s.set("rlimit", budget)
    s.set("random_seed", 0)
    return s


@dataclass
class CheckResult:
    status: str  # SAT | UNSAT | UNKNOWN
    model: dict[str, int] | None = None
    core: list[str] | None = None
    reason: str = ""


class SolverSession:
    """One Z3 context and incremental solver for one constraint set, created on first use.

    Linear (Presburger) queries run on the shared incremental solver with push/pop;
    nonlinear ones on a fresh solver so that their answers do not depend on the
    history of earlier queries (incremental nonlinear search is order-sensitive).
    Each query asserts the definitional axioms of the atoms it mentions, no others.
    Thread-safe: every method that touches Z3 holds the process-wide ``Z3_LOCK``.
    """

    def __init__(self, constraints: ConstraintSet, budget: int):
        self.constraints = constraints
        self.budget = budget
        self.lock = Z3_LOCK
        self._ctx: z3.Context | None = None
        self._enc: Encoder | None = None
        self._solver: z3.Solver | None = None
        self._shared_atoms: set[Atom] = set()  # atoms whose axioms the shared solver holds
        self.linear = constraints.is_linear()

    @property
    def started(self) -> bool:
        return self._ctx is not None

    @_locked
    def _start(self) -> None:
        if self._ctx is None:
            self._ctx = shared_context()
            enc = Encoder(self._ctx)
            terms, atoms = enc.collect(
                lambda e: [e.constraint(c) for c in self.constraints], sorted(self.constraints.variables())
            )
            self._constraint_terms = terms
            self._constraint_atoms = atoms
            self._enc = enc

    @property
    def encoder(self) -> Encoder:
        self._start()
        assert self._enc is not None
        return self._enc

    def _base(self, atoms: set[Atom]) -> list[z3.BoolRef]:
        """Constraints plus the axioms of their atoms and of ``atoms``: a query's whole background."""
        return [*self._constraint_terms, *self.encoder.axioms_of(self._constraint_atoms | atoms)]

    def _shared_solver(self) -> z3.Solver:
        self._start()
        if self._solver is None:
            assert self._ctx is not None
            self._solver = make_solver(self._ctx, self.budget)
            self._solver.add(*self._base(set()))
            self._shared_atoms = set(self._constraint_atoms)
        return self._solver

    @_locked
    def check(
        self,
        build: Callable[[Encoder], list[z3.BoolRef]],
        *,
        linear: bool,
        want_model: bool = True,
        model_vars: frozenset[str] = frozenset(),
    ) -> CheckResult:
        """Satisfiability of constraints AND the formulas ``build`` makes."""
        enc = self.encoder
        goals, atoms = enc.collect(build, sorted(model_vars))
        COUNTERS.bump("solver_checks")
        if linear and self.linear:
            s = self._shared_solver()
            new = atoms - self._shared_atoms
            if new:  # linear atoms' axioms are linear facts true everywhere: keep them
                s.add(*enc.axioms_of(new))
                self._shared_atoms |= new
            s.push()
            try:
                s.add(*goals)
                return self._result(s, want_model, model_vars)
            finally:
                s.pop()
        assert self._ctx is not None
        s = make_solver(self._ctx, self.budget)
        s.add(*self._base(atoms), *goals)
        return self._result(s, want_model, model_vars)

    def _result(
        self, s: z3.Solver | z3.Optimize, want_model: bool, model_vars: frozenset[str], r: object = None
    ) -> CheckResult:
        r = s.check() if r is None else r
        if r == z3.sat:
            model = None
            if want_model:
                m = s.model()
                names = set(model_vars) | set(self.constraints.variables())
                model = {
                    n: m.eval(self.encoder.vars[n], model_completion=True).as_long()
                    for n in sorted(names)
                    if n in self.encoder.vars
                }
            return CheckResult(SAT, model=model)
        if r == z3.unsat:
            return CheckResult(UNSAT)
        COUNTERS.bump("solver_unknowns")
        return CheckResult(UNKNOWN, reason=s.reason_unknown())

    @_locked
    def unsat_core(self, extra: Callable[[Encoder], list[z3.BoolRef]] | None = None) -> list[str] | None:
        """Minimal subset of user constraints (by text) that is unsatisfiable with ``extra``.

        Implicit ``v >= 1`` facts appear as ``'v >= 1 (dimension variable)'``.
        Returns None if satisfiable or unknown.
        """
        enc = self.encoder
        goals, atoms = enc.collect(extra or (lambda e: []))
        atoms = atoms | self._constraint_atoms
        assert self._ctx is not None
        s = make_solver(self._ctx, self.budget)
        s.set("core.minimize", True)
        COUNTERS.bump("solver_checks")
        labels: dict[str, str] = {}
        for i, c in enumerate(self.constraints):
            name = f"!c{i}"
            labels[name] = c.text
            s.assert_and_track(self._constraint_terms[i], z3.Bool(name, self._ctx))
        for a in sorted(atoms, key=lambda a: a.sort_key()):
            if isinstance(a, Var):
                name = f"!v:{a.name}"
                labels[name] = f"{a.name} >= 1 (dimension variable)"
                s.assert_and_track(enc.vars[a.name] >= 1, z3.Bool(name, self._ctx))
        s.add(*enc.axioms_of(a for a in atoms if not isinstance(a, Var)), *goals)
        if s.check() != z3.unsat:
            return None
        return [labels[str(b)] for b in s.unsat_core()]

    def _optimizer(self, goals: list[z3.BoolRef], atoms: set[Atom]) -> z3.Optimize:
        assert self._ctx is not None
        COUNTERS.bump("solvers_created")
        COUNTERS.bump("solver_checks")
        o = z3.Optimize(ctx=self._ctx)
        o.set("rlimit", self.budget)
        o.add(*self._base(atoms), *goals)
        return o

    @_locked
    def optimize(
        self, e: Expr, model_vars: frozenset[str], senses: tuple[str, ...] = ("min", "max")
    ) -> dict[str, tuple[CheckResult, object]]:
        """Exact minimum and/or maximum of a linear ``e`` (Z3's optimiser; +-oo when unbounded)."""
        (t,), atoms = self.encoder.collect(lambda enc: [enc.expr(e)], sorted(model_vars))
        results: dict[str, tuple[CheckResult, object]] = {}
        for sense in senses:
            o = self._optimizer([], atoms)
            h = o.minimize(t) if sense == "min" else o.maximize(t)
            r = o.check()
            if r == z3.sat:
                value = h.lower() if sense == "min" else h.upper()
                results[sense] = (self._result(o, True, model_vars, r), value)
            else:
                if r == z3.unknown:
                    COUNTERS.bump("solver_unknowns")
                results[sense] = (CheckResult(UNSAT if r == z3.unsat else UNKNOWN), None)
        return results

    @_locked
    def small_model(
        self, build: Callable[[Encoder], list[z3.BoolRef]], model_vars: frozenset[str]
    ) -> dict[str, int] | None:
        """A model of the constraints and ``build``'s goals with the smallest sum of the variables.

        Readable witnesses (``b = 1`` rather than ``b = 15``) for explanations; linear only.
        """
        enc = self.encoder
        names = sorted(set(model_vars) | set(self.constraints.variables()))
        goals, atoms = enc.collect(build, names)
        o = self._optimizer(goals, atoms)
        if names:
            o.minimize(z3.Sum([enc.vars[n] for n in names]))
        r = o.check()
        if r != z3.sat:
            return None
        return self._result(o, True, model_vars, r).model


def z3_int_or_inf(value: object) -> int | float:
    """Convert an optimiser objective value (an integer, or +-oo) to int / +-inf."""
    import math

    assert isinstance(value, z3.ArithRef)
    if z3.is_int_value(value):
        return value.as_long()
    text = value.sexpr()
    if "oo" in text:
        return -math.inf if "-" in text else math.inf
    # an epsilon-shifted value cannot arise for integer objectives
    raise ValueError(f"unexpected optimiser value {text}")

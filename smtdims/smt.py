"""The Z3 rungs: encoding of the IR, and the solver session of one constraint set.

Each operator is encoded in exactly one place (:meth:`Encoder._encode_op`).
``floordiv``/``mod`` follow Python: floor division, remainder with the divisor's
sign. Every division ``x / y`` gets ONE quotient/remainder pair ``(q, r)`` shared by
``floordiv(x, y)`` and ``mod(x, y)`` with ``x == y*q + r`` and the remainder's range
(so ``mod(a, b) == a - b*floordiv(a, b)`` is a one-step consequence). Z3's own
``div``/``mod`` are Euclidean and are not used.

Two solvers answer checks:

- linear (Presburger) checks run on one incremental solver per constraint set in the
  process-wide shared context (push/pop, ~0.2 ms a check). The procedure is complete
  there, so the sat/unsat status does not depend on earlier checks;
- nonlinear checks run in a context of their own, created for the question and
  dropped after it (:class:`Fresh`): Z3's nonlinear search depends on the terms and
  ids already in a context, so a shared context made answers depend on the history
  of the process. A fresh context costs about 2 ms. Their strategy is
  :func:`nonlinear_tactic`, not Z3's default, whose stages read the process's memory
  and the clock.

Every check carries the question's deadline: the watchdog interrupts it when the
deadline passes (see :mod:`smtdims.options`).
"""

from __future__ import annotations

import _signal
import contextvars
import functools
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TypeVar

import z3

from . import options
from .constraints import Constraint, ConstraintSet
from .expr import CACHE_MAX_TERMS, FLOORDIV, MAX, MIN, MOD, Atom, Expr, Op, Var, int_text, symbolic_divisors, text_int
from .options import REASON_BUDGET, REASON_BUSY, REASON_DEADLINE, REASON_INCOMPLETE, REASON_INTERRUPTED

SAT, UNSAT, UNKNOWN = "sat", "unsat", "unknown"
_T = TypeVar("_T")

_DIGITS = 10**4000  # Python refuses str()/int() of integers with more than 4,300 digits


def z3_int(value: int, ctx: z3.Context) -> z3.ArithRef:
    """An exact Z3 integer for any Python int (no 4,300-digit limit)."""
    if -_DIGITS < value < _DIGITS:
        return z3.IntVal(value, ctx)
    return z3.IntVal(int_text(value), ctx)


def model_int(value: z3.ArithRef) -> int:
    return text_int(value.as_string()) if z3.is_int_value(value) else int(str(value))


@dataclass
class SolverCounters:
    """Process-wide counters reported by :func:`smtdims.stats`."""

    solvers_created: int = 0
    solver_checks: int = 0
    solver_unknowns: int = 0
    fresh_contexts: int = 0
    deadline_hits: int = 0
    interrupts: int = 0  # checks cut by Ctrl-C
    abandoned_checks: int = 0  # nonlinear checks given up past the deadline (Z3 ignored the interrupt)
    skipped_checks: int = 0  # checks not started while MAX_ORPHANS given-up checks still ran
    _lock: threading.Lock = field(default_factory=lambda: options.fork_safe(threading.Lock()), repr=False)

    def bump(self, name: str, by: int = 1) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + by)
        if name == "solver_checks":
            _THREAD.checks = thread_checks() + by

    def reset(self) -> None:
        with self._lock:
            self.solvers_created = self.solver_checks = self.solver_unknowns = 0
            self.fresh_contexts = self.deadline_hits = self.interrupts = self.abandoned_checks = 0
            self.skipped_checks = 0


COUNTERS = SolverCounters()
_THREAD = threading.local()


def thread_checks() -> int:
    """Z3 checks this thread has run (never reset): a question that ran none is no solver answer."""
    return getattr(_THREAD, "checks", 0)


class DeadlinePassed(Exception):
    """The question's deadline passed while its formulas were being built (caught by the check)."""


# Whether this thread's encoding watches the deadline: only inside SolverSession.check and the
# other calls that catch DeadlinePassed (:func:`watching`); other users of the Encoder (CLI
# scripts) never see it.
_ENCODING = threading.local()
_SHARED_POWER = 8  # powers from this exponent up are products of defined squares (smaller ones: spelt out)


@contextmanager
def watching() -> Iterator[None]:
    """Encoding inside the block raises :class:`DeadlinePassed` once the question's deadline has passed."""
    outer = getattr(_ENCODING, "watch", False)
    _ENCODING.watch = True
    try:
        yield
    finally:
        _ENCODING.watch = outer


@dataclass(frozen=True, slots=True)
class _Square:
    """The key of ``atom^exp`` (``exp`` a power of two) among an :class:`Encoder`'s atoms: a variable
    with the definition ``atom^exp == atom^(exp/2) * atom^(exp/2)`` as its axiom, asserted by the
    checks that mention it, like a division's."""

    atom: Atom
    exp: int

    def sort_key(self) -> tuple:
        return (2, self.atom.sort_key(), self.exp)


class Encoder:
    """Translates IR expressions to Z3 terms in one context; memoised per atom.

    Definitional axioms (``v >= 1``; the quotient/remainder definition of each
    division) are kept per atom, so a check asserts only those of the atoms it
    mentions: one nonlinear question must not make every later one nonlinear.
    """

    def __init__(self, ctx: z3.Context):
        self.ctx = ctx
        self.vars: dict[str, z3.ArithRef] = {}
        self._atoms: dict[Atom, z3.ArithRef] = {}
        self._closure: dict[Atom, frozenset[Atom]] = {}  # the atom and every atom nested in it
        self._axioms: dict[Atom, list[z3.BoolRef]] = {}
        self._divisions: dict[tuple[Expr, Expr], tuple[z3.ArithRef, z3.ArithRef, list[z3.BoolRef]]] = {}
        self._exprs: dict[Expr, tuple[z3.ArithRef, frozenset[Atom]]] = {}  # whole expressions, memoised
        self._powers: dict[tuple[Atom, int], z3.ArithRef] = {}  # a^k for k >= _SHARED_POWER
        self._squares = 0  # squares defined so far (their names)
        self._touched: set[Atom] | None = None

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

    def const(self, value: int) -> z3.ArithRef:
        return z3_int(value, self.ctx)

    def expr(self, e: Expr) -> z3.ArithRef:
        hit = self._exprs.get(e)
        if hit is not None:
            if self._touched is not None:
                self._touched |= hit[1]
            return hit[0]
        outer, self._touched = self._touched, set()
        try:
            t = self._expr(e)
            atoms = frozenset(self._touched)
        finally:
            self._touched = outer
        if self._touched is not None:
            self._touched |= atoms
        if len(self._exprs) < 50_000 and len(e.terms) <= CACHE_MAX_TERMS:  # bounded as the session caches are
            self._exprs[e] = (t, atoms)
        return t

    def _expr(self, e: Expr) -> z3.ArithRef:
        # one n-ary product per term and one sum (Z3 flattens nested ones to the same terms):
        # a^300 as 300 binary products cost 11 s in the Python API for (a - b)^300
        terms: list[z3.ArithRef] = []
        for i, (m, c) in enumerate(e.terms):
            if not i & 31 and getattr(_ENCODING, "watch", False) and options.deadline_passed():
                raise DeadlinePassed  # an encoding as large as the input must not outlive the question
            factors = [] if c == 1 and m else [self.const(c)]
            for a, k in m:
                if k < _SHARED_POWER:
                    factors.extend([self.atom(a)] * k)
                else:
                    factors.append(self._power(a, k))
            terms.append(factors[0] if len(factors) == 1 else self._nary(z3.Z3_mk_mul, factors))
        if not terms:
            return self.const(0)
        return terms[0] if len(terms) == 1 else self._nary(z3.Z3_mk_add, terms)

    def _power(self, a: Atom, k: int) -> z3.ArithRef:
        """``a^k`` as the product of the squares ``a^(2^i)`` of ``k``'s binary digits, each square a
        variable of its own defined by ``s_2e == s_e * s_e`` (:class:`_Square`); shared by every
        monomial that has it.

        Why not one product of ``k`` copies of ``a``: Z3's nonlinear core (nla's Grobner pass) never
        stopped on such a monomial, interrupt or not (``(-b + 1)^108 + a*b*c``: given-up checks ran on
        for good, and past four of them no check could start). The solver now sees monomials of at most
        ``log2(k) + 1`` factors and degree-2 definitions. The formula is equivalent: each square is
        defined as the product of the one below, so ``a^k`` keeps its value in every model.
        ``(b + 2*a + 3)^134`` has 9,181 terms: the powers are shared, not spelt out per term
        (847,000 Z3 arguments, 3 s, before sharing; 27,000 after).
        """
        t = self._powers.get((a, k))
        if t is None:
            factors = [self.atom(a)] if k & 1 else []
            e = 2
            while e <= k:
                sq = self._square(a, e)
                if k & e:
                    factors.append(sq)
                e <<= 1
            t = self._powers[(a, k)] = factors[0] if len(factors) == 1 else self._nary(z3.Z3_mk_mul, factors)
        elif self._touched is not None:
            self._square(a, 1 << (k.bit_length() - 1))  # mentioned again: the chain's definitions are this formula's too
        return t

    def _square(self, a: Atom, e: int) -> z3.ArithRef:
        """``a^e`` (``e`` a power of two >= 2) as a variable defined by its square root's square."""
        key = _Square(a, e)
        t = self._atoms.get(key)  # type: ignore[call-overload]
        if t is None:
            root = self.atom(a) if e == 2 else self._square(a, e // 2)
            self._squares += 1
            t = z3.Int(f"!s{self._squares}", self.ctx)
            self._atoms[key] = t  # type: ignore[index]
            # s >= 0 is implied (a square); stated, it is one linear fact the core need not derive
            self._axioms[key] = [t == root * root, t >= 0]  # type: ignore[index]
        elif e > 2:
            self._square(a, e // 2)  # touch the chain below
        else:
            self.atom(a)
        if self._touched is not None:
            self._touched.add(key)  # type: ignore[arg-type]
        return t

    def _nary(self, mk: Callable, args: list[z3.ArithRef]) -> z3.ArithRef:
        """One n-ary Z3 term of integer ``args`` (z3.Product/Sum re-check every argument's sort: 1 s for a^300)."""
        arr = (z3.Ast * len(args))(*(x.as_ast() for x in args))
        return z3.ArithRef(mk(self.ctx.ref(), len(args), arr), self.ctx)

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
        q, r, axioms = self._division(a.lhs, a.rhs, x, y)
        self._axioms[a] = axioms
        return q if a.op == FLOORDIV else r

    def _division(self, lhs: Expr, rhs: Expr, x: z3.ArithRef, y: z3.ArithRef):
        """The one quotient/remainder pair of ``lhs / rhs`` (Python's floor semantics).

        ``x == y*q + r`` with ``0 <= r < y`` for ``y > 0`` and ``y < r <= 0`` for ``y < 0``
        defines q = x // y and r = x % y uniquely; for y == 0 nothing is asserted (the
        ladder's divisor gate keeps such valuations out of every answer).
        """
        key = (lhs, rhs)
        hit = self._divisions.get(key)
        if hit is not None:
            return hit
        n = len(self._divisions) + 1
        q = z3.Int(f"!q{n}", self.ctx)
        r = z3.Int(f"!r{n}", self.ctx)
        d = rhs.as_constant()
        if d is not None and d > 0:
            axioms = [x == y * q + r, r >= 0, r <= self.const(d - 1)]
        elif d is not None and d < 0:
            axioms = [x == y * q + r, r <= 0, r >= self.const(d + 1)]
        else:
            axioms = [z3.Implies(y != 0, z3.And(
                x == y * q + r,
                z3.Implies(y > 0, z3.And(r >= 0, r < y)),
                z3.Implies(y < 0, z3.And(r <= 0, r > y)),
            ))]
        hit = (q, r, axioms)
        self._divisions[key] = hit
        return hit

    def constraint(self, c: Constraint) -> z3.BoolRef:
        """``c`` where it is defined: a constraint holds only at valuations where its divisors are nonzero."""
        if c.kind == ">=":
            # split into linear parts where that is exact: no If case split for the solver
            parts = [self.expr(p.diff) >= 0 for p in c.parts()]
            rel = parts[0] if len(parts) == 1 else z3.And(*parts)
        else:
            rel = self.expr(c.diff) == 0
        nonzero = [self.expr(div) != 0 for div in symbolic_divisors(c.diff)]
        return z3.And(rel, *nonzero) if nonzero else rel

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
        out: list[z3.BoolRef] = []
        seen: set[int] = set()
        for a in sorted(atoms, key=lambda a: a.sort_key()):
            for ax in self._axioms.get(a, ()):
                if ax.get_id() not in seen:  # floordiv and mod of one division share axioms
                    seen.add(ax.get_id())
                    out.append(ax)
        return out

    def all_axioms(self) -> list[z3.BoolRef]:
        """Every axiom encoded so far (for self-contained SMT-LIB scripts)."""
        return self.axioms_of(self._axioms)

    def axiom_labels(self) -> dict[int, str]:
        """What each axiom encoded so far defines, by Z3 id (the comments of SMT-LIB scripts)."""
        labels: dict[int, str] = {}
        for key, axioms in self._axioms.items():
            if isinstance(key, Var):
                label = f"{key.name} >= 1 (dimension variable)"
            elif isinstance(key, _Square):
                label = f"definition of {key.atom}^{key.exp} as a variable (a square of the power below)"
            else:
                label = "definition of a floordiv/mod by a symbolic divisor (Python semantics)"
            for ax in axioms:
                labels.setdefault(ax.get_id(), label)
        return labels


# One shared Z3 context for the linear solvers of every scope: a context costs memory and
# milliseconds, and a scope needs only a solver. Z3 contexts are not thread-safe, so all
# work in it holds Z3_LOCK.
Z3_LOCK = options.fork_safe(threading.RLock())
_CONTEXT: list[z3.Context] = []


def _after_fork_in_child() -> None:
    """A forked child gets a shared context of its own on first use: a thread of the parent may have
    been inside a check in the old one (a solver pushed, never popped), and sessions rebuild their
    solvers in a new context by themselves (see :func:`retire_shared`). Given-up checks of the
    parent do not run in the child: they no longer count against ``MAX_ORPHANS``."""
    _CONTEXT.clear()
    _ORPHANS.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def is_shared_context(ctx: z3.Context) -> bool:
    """Whether ``ctx`` is the process's shared context (without creating one)."""
    return bool(_CONTEXT) and ctx is _CONTEXT[0]


def shared_context() -> z3.Context:
    with Z3_LOCK:
        if not _CONTEXT:
            with z3_work():
                _CONTEXT.append(z3.Context())
        return _CONTEXT[0]


def retire_shared(ctx: z3.Context) -> None:
    """Replace the shared context after the watchdog interrupted a check in it.

    Z3's interrupt can outlive the check it was meant for (in some code paths the next
    check on the context comes back "canceled"), so an interrupted shared context is not
    used again: every session rebuilds its solver in the new one on its next check.
    """
    with Z3_LOCK:
        if _CONTEXT and _CONTEXT[0] is ctx:
            _CONTEXT[0] = z3.Context()


def _locked(method: Callable) -> Callable:
    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        with Z3_LOCK:
            return method(*args, **kwargs)

    return wrapper


# Linear checks first try Z3's older arithmetic solver (arith.solver=2): at scale it is 10-50x
# faster on satisfiable checks over hundreds of difference and divisibility constraints (200
# variables / 500 constraints: 588 ms -> 11 ms for one check). It does not always honour rlimit
# (a 2-variable check with a mod ran to the 10 s deadline), so it runs under a short timeout and
# the default solver takes over on anything but sat/unsat. Either one's sat/unsat is the same
# fact, so the answer does not depend on which one finished; Z3's own timeout, unlike an
# interrupt, is withdrawn when the check ends.
FAST_TIMEOUT_MS = 100


def make_solver(ctx: z3.Context, budget: int, *, fast: bool = False, nonlinear: bool = False) -> z3.Solver:
    """A solver with the budget and a fixed seed; ``fast``: the older arithmetic solver, time-limited;
    ``nonlinear``: for one check without assumptions of a nonlinear formula (:func:`nonlinear_tactic`)."""
    COUNTERS.bump("solvers_created")
    if nonlinear:
        with z3_work():
            s = nonlinear_tactic(ctx).solver()
    else:
        s = z3.Solver(ctx=ctx)
    s.set("rlimit", budget)
    s.set("random_seed", 0)
    if fast:
        s.set("arith.solver", 2)
        s.set("timeout", FAST_TIMEOUT_MS)
    return s


def nonlinear_tactic(ctx: z3.Context) -> z3.Tactic:
    """Z3's QF_NIA preamble and its SMT core: the strategy of every non-incremental nonlinear check.

    Why not ``z3.Solver()``: on a nonlinear formula its first check runs Z3's ``qfnia`` tactic,
    whose stages stop at memory caps (20 MB for ``cofactor-term-ite``, 100 MB for bit-blasting)
    compared with the whole process's Z3 allocation counter, and two of whose stages stop after
    2 s and 3 s of wall clock. The same check then got another answer in a process holding more
    Z3 memory (every live context adds about 16 MB): 70 of 3,500 fuzz answers differed between a
    fresh and a warmed-up process (issue 18.3). This strategy has neither: every step is bounded
    by the check's rlimit alone, so its answer is a function of the formula and the budget.

    It is qfnia's preamble (simplify, propagate-values, ctx-simplify, elim-uncnstr: rewrites that
    preserve satisfiability, with model converters for the models) without the memory-capped
    ``cofactor-term-ite``, the 0-1 ``lia2card`` and ``solve-eqs`` (with it, the reshape check of
    ``tests/test_determinism.py`` ran out of budget), then the sum-of-monomials simplification and the
    SMT core (``smt``) that qfnia runs in its later stages; ``qfnra-nlsat`` only where the SMT core
    gives up as incomplete. The bit-blasting stage is left out: without its memory cap it spent the
    whole rlimit blasting 64-bit products, and with a step cap instead it lost 13 answers of 204.
    Measured on the fuzz's nonlinear questions (``tools/fuzz.py``'s generator, seeds 0 and 1: 496
    answers at the default budget and a tenth of it, in process): 28 answers more precise than with
    ``z3.Solver()`` (a decision, or a tight end), 5 less precise, in 139 s against 193 s; the same rlimit
    count, unit for unit, with 80 MB of unrelated Z3 terms alive (``tests/test_determinism.py``).
    """
    cached = getattr(ctx, "_smtdims_nia", None)
    if cached is not None:
        return cached

    def tac(name: str, **params: object) -> z3.Tactic:
        t = z3.Tactic(name, ctx)
        return z3.With(t, **params) if params else t

    preamble = z3.Then(
        tac("simplify"), tac("propagate-values"),
        tac("ctx-simplify", max_depth=30, max_steps=5_000_000),
        tac("simplify", pull_cheap_ite=True, local_ctx=True, local_ctx_limit=10_000_000),
        tac("elim-uncnstr"),
    )
    smt_core = z3.Then(tac("simplify", som=True), tac("smt"))
    nlsat = z3.Then(tac("simplify", som=True), tac("qfnra-nlsat"), tac("fail-if-undecided"))
    t = z3.Then(preamble, z3.OrElse(smt_core, nlsat))
    ctx._smtdims_nia = t  # type: ignore[attr-defined]  # one per context: the context's checks share it
    return t


@dataclass
class CheckResult:
    status: str  # SAT | UNSAT | UNKNOWN
    model: dict[str, int] | None = None
    core: list[str] | None = None
    reason: str = ""


def unknown_reason(z3_reason: str, interrupted: bool) -> str:
    """Why a check came back unknown, in the user's terms (budget, deadline, incompleteness)."""
    if interrupted:
        return REASON_DEADLINE
    # Z3 reports an exhausted rlimit as "max. resource limit exceeded", and as "canceled"
    # inside nonlinear tactics: without our interrupt, a cancellation is the budget's.
    if "resource" in z3_reason or "rlimit" in z3_reason or "cancel" in z3_reason:
        return REASON_BUDGET
    return REASON_INCOMPLETE


# -- Ctrl-C ------------------------------------------------------------------------------------------
# Z3 handles SIGINT itself while a check runs (its handler replaces Python's for the check and
# cancels every check that enabled it; Python's handler never runs), so by itself a Ctrl-C
# only turns the check into "unknown". Measured (z3 4.x/5.4): a Solver then says "interrupted
# from keyboard" (the cancel's origin, not the tactic's text), an Optimize says "canceled" as
# it does for an exhausted rlimit, but with an rlimit count below the budget. So:
# - Z3's handler is enabled only in the main thread (where Python acts on SIGINT) and only
#   when SIGINT is not ignored: a check in another thread must not swallow the main thread's
#   Ctrl-C, and an ignored SIGINT must not cut a check;
# - a check cut by SIGINT ends its question (``Deadline.fire``; the answer is clock-shaped,
#   never cached) and the signal is delivered again with ``signal.raise_signal`` once Z3 has put
#   Python's handler back: whatever handler is installed decides (KeyboardInterrupt by default;
#   asyncio's cancels its task; SIG_DFL ends the process).
_SIGINT = int(signal.SIGINT)
_MAIN = threading.main_thread()
_KEYBOARD = "interrupted from keyboard"


def _ctrl_c_wanted() -> bool:
    return threading.get_ident() == _MAIN.ident and _signal.getsignal(_SIGINT) != signal.SIG_IGN


def _arm_ctrl_c(s: z3.Solver | z3.Optimize) -> None:
    """Z3's SIGINT handling on ``s`` as :func:`_ctrl_c_wanted` says (set only when it changes: ~40 us)."""
    want = _ctrl_c_wanted()
    if getattr(s, "_smtdims_ctrl_c", True) is not want:
        s.set("ctrl_c", want)
        s._smtdims_ctrl_c = want  # type: ignore[union-attr]


def _cut_by_sigint(s: z3.Solver | z3.Optimize, z3_reason: str) -> bool:
    """Whether an unknown check (not interrupted by the watchdog) was cancelled by Ctrl-C."""
    if not getattr(s, "_smtdims_ctrl_c", True):
        return False
    if z3_reason == _KEYBOARD:
        return True
    if isinstance(s, z3.Optimize) and "cancel" in z3_reason:
        budget = getattr(s, "_smtdims_budget", None)
        if budget is None:
            return False
        st = s.statistics()
        used = next((st.get_key_value(k) for k in st.keys() if k == "rlimit count"), budget)
        return used < budget  # an exhausted rlimit reads exactly the budget
    return False


# -- fork gate -----------------------------------------------------------------------------------------
# A fork while another thread is inside a Z3 check can copy a mutex Z3 holds inside (measured: 1-2
# of 20 children hung in Z3_solver_check_assumptions although every Python lock was reset). So a
# fork waits, up to FORK_WAIT seconds, until no check is running, and no check starts until it is
# done. Checks are short (the budget, the deadline); past FORK_WAIT the fork goes ahead anyway.
FORK_WAIT = 2.0
_GATE = threading.Condition(threading.Lock())
_GATE_STATE = {"running": 0, "forking": False}


def _gate_enter() -> None:
    with _GATE:
        while _GATE_STATE["forking"]:
            _GATE.wait()
        _GATE_STATE["running"] += 1


def _gate_leave() -> None:
    with _GATE:
        _GATE_STATE["running"] -= 1
        if not _GATE_STATE["running"]:
            _GATE.notify_all()


@contextmanager
def z3_work() -> Iterator[None]:
    """Z3 work outside a check (a new context, the encoding of its constraints, a strategy) under the
    fork gate too: a fork in the middle of such calls copied a mutex Z3 held (1 child of 20 hung in
    ``Z3_mk_context_rc`` with another thread building a fresh context)."""
    _gate_enter()
    try:
        yield
    finally:
        _gate_leave()


def _before_fork() -> None:
    with _GATE:
        _GATE_STATE["forking"] = True
        _GATE.wait_for(lambda: not _GATE_STATE["running"], timeout=FORK_WAIT)


def _after_fork_in_parent() -> None:
    with _GATE:
        _GATE_STATE["forking"] = False
        _GATE.notify_all()


def _after_fork_gate_in_child() -> None:
    global _GATE
    _GATE = threading.Condition(threading.Lock())
    _GATE_STATE.update(running=0, forking=False)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                        after_in_child=_after_fork_gate_in_child)


def run_check(s: z3.Solver | z3.Optimize, ctx: z3.Context, assumptions: list | None = None) -> tuple[object, str]:
    """``s.check(*assumptions)`` under the question's deadline: ``(z3 result, unknown reason or "")``.

    A check cut by Ctrl-C re-delivers SIGINT to Python (see above): by default that raises
    KeyboardInterrupt here; under a handler that does not raise, the question ends as
    "unknown" with reason ``interrupted``, clock-shaped.
    """
    d = options.active_deadline()
    if d is not None and d.expired:
        COUNTERS.bump("deadline_hits")
        return z3.unknown, REASON_DEADLINE
    _arm_ctrl_c(s)
    token = options.WATCHDOG.arm(ctx, d.end) if d is not None else None
    _gate_enter()
    try:
        r = s.check(*(assumptions or ()))
    finally:
        _gate_leave()
        interrupted = options.WATCHDOG.disarm(token) if token is not None else False
        if interrupted:
            retire_shared(ctx)
    if interrupted and r != z3.unknown:
        # the deadline fired between the check's end and disarm: the context's cancel flag is
        # set and evaluating the model raises ("canceled"; seen in a fork stress run). The
        # question is over anyway: the check counts as cut by the deadline.
        r = z3.unknown
    if r == z3.unknown:
        z3_reason = s.reason_unknown()
        if not interrupted and _cut_by_sigint(s, z3_reason):
            COUNTERS.bump("interrupts")
            if d is not None:
                d.fire(options.CLOCK_INTERRUPTED)
            signal.raise_signal(_SIGINT)  # Python's handler runs now (KeyboardInterrupt by default)
            return r, REASON_INTERRUPTED
        reason = unknown_reason(z3_reason, interrupted)
        if reason == REASON_DEADLINE:
            COUNTERS.bump("deadline_hits")
            if d is not None:
                d.fire(options.CLOCK_DEADLINE)
        return r, reason
    return r, ""


class Fresh:
    """A context of its own for the nonlinear checks of one question (dropped with it)."""

    def __init__(self, constraints: ConstraintSet):
        COUNTERS.bump("fresh_contexts")
        with z3_work():
            self.ctx = z3.Context()
            self.enc = Encoder(self.ctx)
            self.terms, self.atoms = self.enc.collect(
                lambda e: [e.constraint(c) for c in constraints], sorted(constraints.variables())
            )


_QUESTION = threading.local()

# Checks in a context of their own under a deadline (nonlinear checks, unsat cores) run in a thread
# that the question can give up (give_up_at_deadline): Z3 may not stop them at the interrupt
# ((-2*b + 3*c)^346 + c >= 1 ran 14 s past a 1 s deadline). Ctrl-C while the caller waits interrupts
# the check and raises in the caller. Checks in the shared context stay in the caller's thread.
ABANDON_GRACE = 0.25  # seconds past the deadline before a check is given up (Z3 usually stops in ms)
MAX_ORPHANS = 4  # given-up checks still running: past this, no check in a context of its own starts
_ORPHANS: set[threading.Thread] = set()


def given_up_checks() -> frozenset[threading.Thread]:
    """The threads of given-up checks still running (at most ``MAX_ORPHANS``)."""
    return frozenset(_ORPHANS)


def minimise_by_deletion(rest: list[z3.BoolRef], check: Callable[[list[z3.BoolRef]], tuple[object, str]],
                         core: Callable[[], Iterable[z3.BoolRef]]) -> list[z3.BoolRef]:
    """A minimal unsatisfiable subset of the assumptions ``rest`` (an unsat core), by deletion.

    A fact whose removal leaves the rest satisfiable is needed (and stays needed in every smaller
    unsatisfiable subset); a removal that stays unsat shrinks the rest to ``core()``, the new core.
    ``check(facts)`` is one deadline-bounded check under those assumptions; when the deadline stops
    it, what is left is kept: still unsatisfiable, perhaps not minimal.
    """
    needed: list[z3.BoolRef] = []
    while rest:
        b = rest.pop()
        r, reason = check(needed + rest)
        if r == z3.unsat:
            kept = {x.get_id() for x in core()}
            rest = [x for x in rest if x.get_id() in kept]
        elif reason == REASON_DEADLINE:
            needed += [b, *rest]
            break
        else:
            needed.append(b)
    return needed


class GivenUp(Exception):
    """The question stopped waiting for Z3 work (:func:`give_up_at_deadline`); ``reason``: deadline / interrupted."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _dec_ref_from_any_thread(ctx: z3.Context) -> bool:
    """Let ``ctx``'s objects be released from any thread (Z3 queues the release for the thread that
    next calls into the context); False where this Z3 cannot (a single-threaded build).

    Needed once work in ``ctx`` runs in another thread: Python releases a Z3 object (``__del__``,
    ``Z3_dec_ref``) in whichever thread drops its last reference, and a given-up check still runs
    when the caller drops the formulas it built. Without the queue, that release races with the
    check's own reference counting on the same terms.
    """
    if getattr(ctx, "_smtdims_any_thread", False):
        return True
    try:
        z3.Z3_enable_concurrent_dec_ref(ctx.ref())
    except (z3.Z3Exception, AttributeError):  # AttributeError: a z3-solver without the call
        return False
    ctx._smtdims_any_thread = True  # type: ignore[attr-defined]
    return True


def give_up_at_deadline(ctx: z3.Context, work: Callable[[], _T]) -> _T:
    """``work()`` (Z3 calls in ``ctx`` only) in a thread that the question gives up ``ABANDON_GRACE``
    seconds past its deadline, when Z3 ignores the watchdog's interrupt; :class:`GivenUp` then.

    Measured: ``Z3_solver_check_assumptions`` went on 14 s past ``ctx.interrupt()`` at degree 346,
    0.9-8 s with a symbolic divisor, 24 s on a degree-5 product, and 9 s in ``explain``'s unsat-core
    check of a 9,181-term power. No syntactic test tells which checks Z3 stops at the interrupt, so
    every check in a context of its own under a deadline runs this way (a thread costs about 0.1 ms
    against a check's milliseconds). The caller must never touch ``ctx`` again after :class:`GivenUp`: the
    thread keeps the context's objects alive and stops when Z3 next looks at its interrupt flag, so
    nothing of the context is used by two threads at once. Z3 calls release the GIL, so the caller
    waits without being blocked. What ``work()`` returns is what it returns in the caller's thread (the
    same calls); only a given-up answer is new, and it is clock-shaped. Ctrl-C while the caller waits
    (main thread): a handler of ours notes it and interrupts the work (Z3 takes no SIGINT in another
    thread), then Python's own handler runs, as after a check Z3 cut in the caller's thread
    (:func:`run_check`): KeyboardInterrupt by default; a handler that does not raise gives
    ``GivenUp("interrupted")``. Without a deadline, or where Z3 cannot release objects from any thread,
    ``work()`` runs in the caller's thread. With ``MAX_ORPHANS`` given-up threads still running it does
    not run at all: ``GivenUp("busy")``, an answer shaped by the process's state (clock-shaped).
    """
    d = options.active_deadline()
    if d is None or not _dec_ref_from_any_thread(ctx):
        return work()
    if len(_ORPHANS) >= MAX_ORPHANS:
        # Z3 ignores the interrupt of the given-up checks still running (measured: nla's Grobner basis
        # enumerating the factorisations of a 108-factor monomial, for good): a check started in the
        # caller's thread could hang it the same way (it did, in the large fuzz). None is started.
        COUNTERS.bump("skipped_checks")
        options.mark_clocked(options.CLOCK_BUSY)
        raise GivenUp(REASON_BUSY)
    box: list = []
    run = contextvars.copy_context().run  # the question's deadline and options, in the thread

    def body() -> None:
        try:
            box.append(run(work))
        except BaseException as err:  # noqa: BLE001 - handed to the caller
            box.append(err)
        finally:
            _ORPHANS.discard(t)

    t = threading.Thread(target=body, name="smtdims-check", daemon=True)
    hit: list[int] = []
    prev = _signal.getsignal(_SIGINT) if _ctrl_c_wanted() else None
    if prev is not None:
        signal.signal(_SIGINT, lambda *_: (hit.append(1), ctx.interrupt()))
    _ORPHANS.add(t)
    try:
        t.start()
        end = time.monotonic() + max(0.0, d.remaining()) + ABANDON_GRACE
        while t.is_alive() and not hit and time.monotonic() < end:
            t.join(min(0.05, max(0.0, end - time.monotonic())))
    except BaseException:
        ctx.interrupt()  # stop the work, and never use its context again
        raise
    finally:
        if prev is not None:
            signal.signal(_SIGINT, prev)
    if hit:
        COUNTERS.bump("interrupts")
        d.fire(options.CLOCK_INTERRUPTED)
        signal.raise_signal(_SIGINT)  # Python's handler runs now (KeyboardInterrupt by default)
        raise GivenUp(REASON_INTERRUPTED)
    if t.is_alive():
        COUNTERS.bump("abandoned_checks")
        d.fire(options.CLOCK_DEADLINE)
        ctx.interrupt()
        _yield_cpu(t)
        raise GivenUp(REASON_DEADLINE)
    res = box[0]
    if isinstance(res, BaseException):
        raise res
    return res


ORPHAN_NICE = 19  # the niceness of a given-up check: it runs on CPU time nobody else wants


def _yield_cpu(t: threading.Thread) -> None:
    """Lower a given-up check's thread to the lowest priority (Linux; elsewhere nothing).

    A given-up check is work nobody waits for, but until Z3 notices the interrupt it took a
    core from the questions that followed: in the large fuzz (2 cores, deadline 1 s) an
    ``explain`` that takes 1.3 s alone took 3.3 s behind such checks. On Linux a
    thread's niceness is its own (``setpriority`` with the thread's id), and raising it needs
    no privilege; other systems would read the id as a process's, so they are left alone.
    The thread was alive a moment ago: its id cannot have been reused by then (ids cycle
    through ``pid_max``).
    """
    tid = t.native_id
    if not sys.platform.startswith("linux") or tid is None:
        return
    try:
        os.setpriority(os.PRIO_PROCESS, tid, ORPHAN_NICE)
    except OSError:  # the thread ended meanwhile (its id is gone), or a sandbox forbids it
        pass


def _forget_fresh(session: SolverSession) -> None:
    """Drop the question's fresh context of ``session``: a later check of the question makes its own."""
    contexts = getattr(_QUESTION, "contexts", None)
    if contexts is not None:
        contexts.pop(id(session), None)


@contextmanager
def question() -> Iterator[None]:
    """Checks inside the block share one fresh context per constraint set; all are dropped
    when the outermost block ends, so the next question starts from nothing."""
    q = _QUESTION
    depth = getattr(q, "depth", 0)
    if depth == 0:
        q.contexts, q.keep = {}, []
    q.depth = depth + 1
    try:
        yield
    finally:
        q.depth = depth
        if depth == 0:
            q.contexts, q.keep = {}, []


class SolverSession:
    """The Z3 side of one constraint set, created on first use.

    Linear checks share one incremental solver (push/pop) in the shared context, which
    holds the constraints and their definitions; each check adds its own inside push/pop;
    nonlinear ones run in the question's fresh context (:class:`Fresh`), one solver per
    check, asserting the constraints and the definitional axioms of the atoms the check
    mentions, no others. Thread-safe: work in the shared context holds ``Z3_LOCK``.
    """

    def __init__(self, constraints: ConstraintSet, budget: int):
        self.constraints = constraints
        self.budget = budget
        self.lock = Z3_LOCK
        self._enc: Encoder | None = None
        self._solvers: dict[bool, z3.Solver] = {}  # the shared solvers: fast (older arithmetic) and default
        self._fast_timeouts = 0
        self._shared_atoms: set[Atom] = set()  # atoms whose axioms the shared solvers hold
        self.linear = constraints.is_linear()

    @property
    def started(self) -> bool:
        return self._enc is not None

    @_locked
    def _start(self) -> None:
        if self._enc is not None and self._enc.ctx is not shared_context():  # retired: start over
            self._enc, self._solvers, self._shared_atoms = None, {}, set()
        if self._enc is None:
            enc = Encoder(shared_context())
            terms, atoms = enc.collect(
                lambda e: [e.constraint(c) for c in self.constraints], sorted(self.constraints.variables())
            )
            self._constraint_terms = terms
            self._constraint_atoms = atoms
            self._shared_atoms = set(atoms)
            self._enc = enc

    @property
    def encoder(self) -> Encoder:
        self._start()
        assert self._enc is not None
        return self._enc

    def _shared_solver(self, fast: bool = False) -> z3.Solver:
        self._start()
        s = self._solvers.get(fast)
        if s is None:
            assert self._enc is not None
            s = make_solver(self._enc.ctx, self.budget, fast=fast)
            s.add(*self._constraint_terms, *self._enc.axioms_of(self._constraint_atoms))
            self._solvers[fast] = s
        return s

    # -- the nonlinear context of the current question ------------------------------------------
    def fresh(self) -> Fresh:
        """The fresh context of this constraint set for the question being answered.

        Inside :func:`question` one per session for the whole question; outside, one per check.
        """
        q = _QUESTION
        if not getattr(q, "depth", 0):
            return Fresh(self.constraints)
        f = q.contexts.get(id(self))
        if f is None:
            f = Fresh(self.constraints)
            q.contexts[id(self)] = f
            q.keep.append(self)  # ids stay unique while the question lives
        return f

    # -- checks ------------------------------------------------------------------------------------------
    def check(
        self,
        build: Callable[[Encoder], list[z3.BoolRef]],
        *,
        linear: bool,
        want_model: bool = True,
        model_vars: frozenset[str] = frozenset(),
    ) -> CheckResult:
        """Satisfiability of the constraints AND the formulas ``build`` makes.

        Building the formulas watches the deadline too (:class:`DeadlinePassed`): an input
        large enough to take seconds to encode is answered "unknown", reason deadline.
        """
        COUNTERS.bump("solver_checks")
        try:
            with watching():
                return self._check(build, linear, want_model, model_vars)
        except DeadlinePassed:
            COUNTERS.bump("deadline_hits")
            return CheckResult(UNKNOWN, reason=REASON_DEADLINE)

    def _check(self, build: Callable[[Encoder], list[z3.BoolRef]], linear: bool, want_model: bool,
               model_vars: frozenset[str]) -> CheckResult:
        if linear and self.linear:
            with Z3_LOCK:
                enc = self.encoder
                goals, atoms = enc.collect(build, sorted(model_vars))
                # the query's own definitions live inside push/pop: a scope that asked about
                # many divisions would otherwise slow every later check (measured: 2 ms -> 1 s)
                extra = [*enc.axioms_of(atoms - self._shared_atoms), *goals]
                # a scope where the fast solver timed out twice goes straight to the default one
                for fast in (True, False) if self._fast_timeouts < 2 else (False,):
                    s = self._shared_solver(fast)
                    s.push()
                    try:
                        s.add(*extra)
                        r, reason = run_check(s, enc.ctx)
                        if fast and r == z3.unknown and reason not in (REASON_DEADLINE, REASON_INTERRUPTED):
                            self._fast_timeouts += 1
                            continue  # past its timeout (or incomplete): the default solver decides
                        if r == z3.unknown and not fast and self._fast_timeouts:
                            # sat/unsat is the same fact from either solver; an unknown here is one
                            # the fast solver, given time, might have settled: clock-shaped
                            options.mark_clocked(options.CLOCK_FAST_SOLVER)
                        return self._result(s, enc, want_model, model_vars, r, reason)
                    finally:
                        s.pop()
        if options.deadline_passed():
            COUNTERS.bump("deadline_hits")
            return CheckResult(UNKNOWN, reason=REASON_DEADLINE)
        f = self.fresh()
        goals, atoms = f.enc.collect(build, sorted(model_vars))
        s = make_solver(f.ctx, self.budget, nonlinear=True)
        s.add(*f.terms, *f.enc.axioms_of(f.atoms | atoms), *goals)
        return self._abandonable(s, f, want_model, model_vars)

    def _abandonable(self, s: z3.Solver, f: Fresh, want_model: bool,
                     model_vars: frozenset[str]) -> CheckResult:
        """The check in a thread the question gives up shortly after its deadline (:func:`give_up_at_deadline`)."""
        try:
            return give_up_at_deadline(f.ctx, lambda: self._result(s, f.enc, want_model, model_vars))
        except GivenUp as stop:
            _forget_fresh(self)  # the thread may still be inside the context: never touch it again
            return CheckResult(UNKNOWN, reason=stop.reason)
        except BaseException:
            _forget_fresh(self)  # Ctrl-C while waiting: the same
            raise

    def _result(self, s: z3.Solver | z3.Optimize, enc: Encoder, want_model: bool, model_vars: frozenset[str],
                r: object = None, reason: str = "") -> CheckResult:
        if r is None:
            r, reason = run_check(s, enc.ctx)
        if r == z3.sat:
            model = None
            if want_model:
                m = s.model()
                names = set(model_vars) | set(self.constraints.variables())
                model = {
                    n: model_int(m.eval(enc.vars[n], model_completion=True))
                    for n in sorted(names)
                    if n in enc.vars
                }
            return CheckResult(SAT, model=model)
        if r == z3.unsat:
            return CheckResult(UNSAT)
        COUNTERS.bump("solver_unknowns")
        return CheckResult(UNKNOWN, reason=reason or REASON_INCOMPLETE)

    def unsat_core(self, extra: Callable[[Encoder], list[z3.BoolRef]] | None = None) -> list[str] | None:
        """A small subset of user constraints (by text) that is unsatisfiable with ``extra``.

        Implicit ``v >= 1`` facts appear as ``'v >= 1 (dimension variable)'``. Returns None if
        satisfiable or unknown. Runs in a context of its own. Minimised by deletion, one
        deadline-bounded check per constraint of the core: Z3's own ``core.minimize`` runs
        inside ``unsat_core()``, where no watchdog reaches it (it took 3.4 s past a 1 s
        deadline on 11 constraints with nested mods). When the deadline comes first, the core
        found so far is returned: a conflict still, perhaps not a minimal one; None when Z3 did
        not stop at the deadline (:func:`give_up_at_deadline`).
        """
        enc = Encoder(z3.Context())
        COUNTERS.bump("fresh_contexts")
        try:
            with watching():
                cons, c_atoms = enc.collect(lambda e: [e.constraint(c) for c in self.constraints],
                                            sorted(self.constraints.variables()))
                goals, atoms = enc.collect(extra or (lambda e: []))
        except DeadlinePassed:  # the question's deadline came while encoding: no core, in time
            COUNTERS.bump("deadline_hits")
            return None
        atoms = atoms | c_atoms
        s = make_solver(enc.ctx, self.budget)
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
                track(f"!v:{a.name}", f"{a.name} >= 1 (dimension variable)", enc.vars[a.name] >= 1)
        s.add(*enc.axioms_of(a for a in atoms if not isinstance(a, Var)), *goals)

        def search() -> list[str] | None:
            COUNTERS.bump("solver_checks")
            r, _ = run_check(s, enc.ctx, tracked)
            if r != z3.unsat:
                return None
            def check(facts: list[z3.BoolRef]) -> tuple[object, str]:
                COUNTERS.bump("solver_checks")
                return run_check(s, enc.ctx, facts)

            needed = minimise_by_deletion(list(s.unsat_core()), check, s.unsat_core)
            return [labels[str(b)] for b in needed]

        try:  # Z3 may go on past the interrupt (9 s in explain of a 9,181-term power): given up then
            return give_up_at_deadline(enc.ctx, search)
        except GivenUp:
            return None  # no conflict found in time

    def _optimizer(self, enc: Encoder, terms: list, goals: list[z3.BoolRef], atoms: set[Atom]) -> z3.Optimize:
        COUNTERS.bump("solvers_created")
        COUNTERS.bump("solver_checks")
        o = z3.Optimize(ctx=enc.ctx)
        o.set("rlimit", self.budget)
        o._smtdims_budget = self.budget  # type: ignore[attr-defined]  # tells Ctrl-C from the budget
        o.add(*terms, *enc.axioms_of(atoms), *goals)
        return o

    def optimize(
        self, e: Expr, model_vars: frozenset[str], senses: tuple[str, ...] = ("min", "max")
    ) -> dict[str, tuple[CheckResult, object]]:
        """Exact minimum and/or maximum of a linear ``e`` (Z3's optimiser; +-oo when unbounded).

        A new optimiser per sense (its search is not incremental) over the shared context's
        terms: the constraints are encoded once per scope, and a context costs about 5 ms.
        """
        results: dict[str, tuple[CheckResult, object]] = {}
        with Z3_LOCK:
            enc = self.encoder
            try:
                with watching():
                    (t,), atoms = enc.collect(lambda en: [en.expr(e)], sorted(model_vars))
            except DeadlinePassed:
                COUNTERS.bump("deadline_hits")
                return {sense: (CheckResult(UNKNOWN, reason=REASON_DEADLINE), None) for sense in senses}
            for sense in senses:
                o = self._optimizer(enc, self._constraint_terms, [], self._constraint_atoms | atoms)
                h = o.minimize(t) if sense == "min" else o.maximize(t)
                r, reason = run_check(o, enc.ctx)
                if r == z3.sat:
                    value = h.lower() if sense == "min" else h.upper()
                    results[sense] = (self._result(o, enc, True, model_vars, r), value)
                else:
                    if r == z3.unknown:
                        COUNTERS.bump("solver_unknowns")
                    results[sense] = (CheckResult(UNSAT if r == z3.unsat else UNKNOWN, reason=reason), None)
                if reason == REASON_DEADLINE:
                    break  # the shared context was retired: its terms are gone
        return results


def z3_int_or_inf(value: object) -> int | float:
    """Convert an optimiser objective value (an integer, or +-oo) to int / +-inf."""
    import math

    assert isinstance(value, z3.ArithRef)
    if z3.is_int_value(value):
        return model_int(value)
    text = value.sexpr()
    if "oo" in text:
        return -math.inf if "-" in text else math.inf
    # an epsilon-shifted value cannot arise for integer objectives
    raise ValueError(f"unexpected optimiser value {text}")

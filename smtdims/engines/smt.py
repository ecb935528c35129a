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
import ctypes
import functools
import itertools
import math
import os
import signal
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

import z3

from .. import options
from ..lang.constraints import Constraint, ConstraintSet
from ..lang.expr import CACHE_MAX_TERMS, FLOORDIV, MAX, MIN, MOD, Atom, Expr, Op, Var, int_text, symbolic_divisors, text_int
from ..options import REASON_BUDGET, REASON_DEADLINE, REASON_INCOMPLETE, REASON_INTERRUPTED
from . import _z3_strategy as _strategy
from . import workers

SAT, UNSAT, UNKNOWN = "sat", "unsat", "unknown"
_T = TypeVar("_T")

_DIGITS = 10**4000  # Python refuses str()/int() of integers with more than 4,300 digits


def symbol(name: str, kind: str = "dim") -> str:
    """The Z3 name of the dimension variable ``name``: ``kind:name`` (``dim`` for its integer, ``d`` for
    the recession LP's real, ``!v`` for the literal of its ``>= 1`` fact...). The one place where a
    user's name becomes a solver's name; models are read back through the terms, never by name.
    (``--smtlib`` scripts name the ``>= 1`` facts ``|v:name|`` and the constraints ``|c<i>|``: a
    variable's name must be neither, or Z3 takes the label for the variable.)

    Why not ``name`` itself: Z3 writes a name into SMT-LIB text as it is (``Z3_benchmark_to_smtlib_string``
    and ``sexpr`` check only its characters), and the text's reader (the Z3 worker, ``--smtlib``
    scripts) takes ``true``, ``and``, ``let``, ``_``, ``div``, ``abs``, ``pi``... as the language's own
    words: ``true*true >= 2`` was parsed as something else and the worker's answers were wrong or
    errors. ``:`` is not a simple-symbol character, so ``kind:name`` is always written quoted
    (``|dim:true|``), and no SMT-LIB reserved word, Z3 function or keyword contains it (keywords start
    with ``:``; a quoted symbol is never a keyword). Injective (``kind`` holds no ``:``): the characters
    a quoted symbol cannot hold (``|``, ``\\``, and the non-printable ones) and ``~``, the escape,
    are written ``~hex;``. The parser's names (letters, digits, ``_``, combining marks) pass as they are.
    """
    if name.isprintable() and "|" not in name and "\\" not in name and "~" not in name:
        return f"{kind}:{name}"
    return kind + ":" + "".join(ch if ch.isprintable() and ch not in "|\\~" else f"~{ord(ch):x};" for ch in name)


def z3_int(value: int, ctx: z3.Context) -> z3.ArithRef:
    """An exact Z3 integer for any Python int (no 4,300-digit limit)."""
    if -_DIGITS < value < _DIGITS:
        return z3.IntVal(value, ctx)
    return z3.IntVal(int_text(value), ctx)


def model_int(value: z3.ArithRef | int) -> int:
    if isinstance(value, int):  # a worker's model (_RemoteModel)
        return value
    return text_int(value.as_string()) if z3.is_int_value(value) else int(str(value))


def model_numerals(m: z3.ModelRef, terms: Iterable[z3.ExprRef]) -> list[str | None]:
    """The exact text (``'5'``, ``'-3/4'``) of each term's value in ``m`` (model completion);
    None where the value is not a numeral.

    Why not ``m.eval``: at 200 variables z3py's wrappers (``eval``, ``is_int_value``, ``sort``,
    ``numerator_as_long``: about 20 us a constant) cost 4 ms a model, 30-40% of a bounds query at
    benchmark 5's size; the same C calls made directly take 0.9 ms. Z3 keeps the result of
    ``Z3_model_eval`` alive until the next result is made, and its text is read at once.
    """
    C = z3.z3core
    c, mr = m.ctx.ref(), m.model
    r = (C.Ast * 1)()
    out: list[str | None] = []
    for t in terms:
        if not C.Z3_model_eval(c, mr, t.as_ast(), True, r):
            raise z3.Z3Exception(f"failed to evaluate {t} in the model")
        try:
            out.append(C.Z3_get_numeral_string(c, r[0]))
        except z3.Z3Exception:  # not a numeral (Z3 reports it; asking first cost a call per constant)
            out.append(None)
    return out


def model_ints(m: z3.ModelRef | _RemoteModel, consts: dict[str, z3.ArithRef], names: Iterable[str]) -> dict[str, int]:
    """``{n: model_int(m.eval(consts[n], model_completion=True))}`` for the ``names`` in ``consts``,
    through :func:`model_numerals`."""
    names = [n for n in names if n in consts]
    if not isinstance(m, z3.ModelRef):
        return {n: model_int(m.eval(consts[n], model_completion=True)) for n in names}
    texts = model_numerals(m, (consts[n] for n in names))
    return {n: text_int(t) if t is not None and "/" not in t else model_int(m.eval(consts[n], model_completion=True))
            for n, t in zip(names, texts, strict=True)}


# The one lock of every counter :func:`smtdims.stats` reports: these solver counters and the rungs'
# answer counts (``smtdims.scope.STATS``). ``+=`` alone loses counts between threads; the counters are
# one resource (one report), so one lock, held for a single addition.
COUNTS_LOCK = options.fork_safe(threading.Lock())


@dataclass
class SolverCounters:
    """Process-wide counters reported by :func:`smtdims.stats`."""

    solvers_created: int = 0
    solver_checks: int = 0
    solver_unknowns: int = 0
    fresh_contexts: int = 0
    deadline_hits: int = 0
    interrupts: int = 0  # checks cut by Ctrl-C
    abandoned_checks: int = 0  # checks whose Z3 worker was killed past the deadline (Z3 ignored the interrupt)
    workers_down: int = 0  # checks answered "unknown" (deadline) because no Z3 worker could start just then
    heap_trims: int = 0  # freed memory given back to the system after Z3 sides were released

    def bump(self, name: str, by: int = 1) -> None:
        with COUNTS_LOCK:
            setattr(self, name, getattr(self, name) + by)

    def checked(self, ask: options.Question) -> None:
        """One more Z3 check, in the process's counters and in the question's own (``ask.checks``:
        whether a rung's answer came from Z3, :meth:`smtdims.scope._Stats.answered`)."""
        self.bump("solver_checks")
        ask.checks += 1

    def reset(self) -> None:
        with COUNTS_LOCK:
            self.solvers_created = self.solver_checks = self.solver_unknowns = 0
            self.fresh_contexts = self.deadline_hits = self.interrupts = self.abandoned_checks = 0
            self.workers_down = self.heap_trims = 0


COUNTERS = SolverCounters()


class DeadlinePassed(Exception):
    """The question's deadline passed while its formulas were being built (caught by the check)."""


_SHARED_POWER = 8  # powers from this exponent up are products of defined squares (smaller ones: spelt out)


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
        self._watch: options.Deadline | None = None  # the clock of the collect running (see collect)

    def var(self, name: str) -> z3.ArithRef:
        v = self.vars.get(name)
        a = Var(name)
        if v is None:
            v = z3.Int(symbol(name), self.ctx)
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
            if not i & 31 and self._watch is not None and self._watch.expired:
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

    def collect(self, build: Callable[[Encoder], list[z3.BoolRef]], names: Iterable[str] = (), *,
                watch: options.Deadline | None = None) -> tuple[list, set[Atom]]:
        """``build``'s formulas and every atom they (and the variables ``names``) mention.

        ``watch``: the question's clock; building raises :class:`DeadlinePassed` once it has passed
        (the engine's calls catch it: an input as large as the question must not outlive it). Other
        users of the Encoder (CLI scripts) give none and never see it. An encoder is used by one
        thread at a time (the shared one under ``Z3_LOCK``, a fresh one by its question's)."""
        outer, self._touched = self._touched, set()
        outer_watch, self._watch = self._watch, watch if watch is not None else self._watch
        try:
            goals = build(self)
            for n in names:
                self.var(n)
            return goals, self._touched
        finally:
            self._touched, self._watch = outer, outer_watch

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
    solvers in a new context by themselves (see :func:`retire_shared`). (The parent's Z3 workers
    are forgotten by :mod:`smtdims.engines.workers`' own hook.)"""
    _CONTEXT.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def is_shared_context(ctx: z3.Context) -> bool:
    """Whether ``ctx`` is the process's shared context (without creating one)."""
    return bool(_CONTEXT) and ctx is _CONTEXT[0]


def _new_shared_context() -> z3.Context:
    """A context for the shared linear solvers. Its terms are built and checked under Z3_LOCK, but
    Python releases a term (``Z3_dec_ref``) in whichever thread drops its last reference, outside
    the lock (a check's formulas, when the function that built them returns): racing another
    thread's calls into the context, that crashed a process (SIGSEGV in ``Z3_mk_ge``, SIGABRT in
    ``Z3_solver_assert``, in tests/test_fork.py's busy threads). With concurrent dec-ref, Z3 queues
    such releases for the thread that next enters the context."""
    with z3_work():
        ctx = z3.Context()
        try:
            z3.Z3_enable_concurrent_dec_ref(ctx.ref())
        except (z3.Z3Exception, AttributeError):  # a z3-solver without the call (single-threaded build)
            pass
    return ctx


def shared_context() -> z3.Context:
    with Z3_LOCK:
        if not _CONTEXT:
            _CONTEXT.append(_new_shared_context())
        return _CONTEXT[0]


def retire_shared(ctx: z3.Context) -> None:
    """Replace the shared context after the watchdog interrupted a check in it.

    Z3's interrupt can outlive the check it was meant for (in some code paths the next
    check on the context comes back "canceled"), so an interrupted shared context is not
    used again: every session rebuilds its solver in the new one on its next check.
    """
    with Z3_LOCK:
        if _CONTEXT and _CONTEXT[0] is ctx:
            _CONTEXT[0] = _new_shared_context()
            # now, not at their next check: a session that is not asked again would keep the old
            # context alive with every term in it (9 contexts, 220 MB, after 300 large questions)
            for members in list(_LIVE.values()):
                for holder in list(members):
                    if holder._z3_ctx is ctx:
                        holder._release()
            _trim_state["due"] = True


def _locked(method: Callable) -> Callable:
    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        with Z3_LOCK:
            return method(*args, **kwargs)

    return wrapper


FAST_TIMEOUT_MS = _strategy.FAST_TIMEOUT_MS


def make_solver(ctx: z3.Context, budget: int, *, fast: bool = False, nonlinear: bool = False,
                killable: bool = False) -> z3.Solver | KillableSolver:
    """A solver with the budget and a fixed seed (:func:`smtdims.engines._z3_strategy.solver`); ``killable``:
    its checks under a deadline run in a worker process killed when late (:class:`KillableSolver`)."""
    COUNTERS.bump("solvers_created")
    if killable:
        return KillableSolver(ctx, budget, fast=fast, nonlinear=nonlinear)
    with z3_work():
        return _strategy.solver(ctx, budget, fast=fast, nonlinear=nonlinear)


def nonlinear_tactic(ctx: z3.Context) -> z3.Tactic:
    """Z3's QF_NIA preamble and its SMT core (:func:`smtdims.engines._z3_strategy.nonlinear_tactic`)."""
    with z3_work():
        return _strategy.nonlinear_tactic(ctx)


# Checks that Z3 may not stop at its interrupt run in worker processes killed when late.
Z3_WORKERS = workers.Pool("_z3_worker.py", 4, spin=0.0)  # 4: questions from several threads at once
KILL_GRACE = 0.25  # seconds past the deadline before a worker still checking is killed (Z3 usually stops in ms)
WORKER_START_LIMIT = 10.0  # seconds for a worker to start (import z3) before it is given up in this process
DEADLINE_IN_WORKER = "smtdims: deadline"  # reason_unknown of a check the deadline stopped in the worker
_SOLVER_KEYS = itertools.count(1)


class _RemoteModel:
    """The integer constants of a worker's model; like ``z3.ModelRef.eval(const, model_completion=True)``
    (a constant the model leaves free is 0, Z3's completion for integers)."""

    def __init__(self, values: dict[str, str]):
        self.values = values

    def eval(self, t: z3.ExprRef, model_completion: bool = False) -> int:
        return text_int(self.values.get(t.decl().name(), "0"))


class KillableSolver:
    """A solver whose checks under a deadline run in a Z3 worker process killed when late.

    Why: Z3 may go on long past ``ctx.interrupt()`` (14 s at degree 346, 24 s on a degree-5
    product, for good on a 108-factor monomial; no syntactic test tells which checks it stops),
    and a thread cannot be killed. The formulas are built here, in the caller's context, and sent
    as SMT-LIB text (declarations and assertions added since the worker last saw this solver); the
    worker checks them with the same strategy and parameters (:mod:`smtdims.engines._z3_strategy`) and a
    timer that interrupts at the deadline; ``KILL_GRACE`` seconds past it the worker is killed and
    the check is "unknown", reason deadline. Nothing runs on after a late answer. Without a
    deadline, or where no worker can start (not POSIX), the check runs here, as before.

    The answer is a function of the formulas and the budget, as in process: the worker keeps one
    context per caller context (a question's :class:`Fresh` context), so a check sees the terms of
    its own question only; the rlimit count of a check may differ by a few units from the same
    check in the caller's context (term ids), never with the process's history.
    """

    def __init__(self, ctx: z3.Context, budget: int, *, fast: bool, nonlinear: bool):
        self.ctx = ctx
        self.budget, self.fast, self.nonlinear = budget, fast, nonlinear
        self._local: z3.Solver | None = None  # built only for a check here (the strategy costs ~9 ms a context)
        self._settings: list[tuple[tuple, dict]] = []
        self._added: list[z3.BoolRef] = []
        self._local_n = 0  # how many of them the local solver holds
        self._key = next(_SOLVER_KEYS)
        self._held: tuple[workers.Worker, int, int, frozenset[str]] | None = None  # worker, generation, sent, declared
        self._last: dict | None = None  # the worker's answer to the last check; None: the local solver's
        self._assumptions: list[z3.BoolRef] = []

    def add(self, *formulas: z3.BoolRef) -> None:
        self._added += formulas  # the local solver gets them only if it checks (about 60 us each)

    @property
    def local(self) -> z3.Solver:
        """The same solver in the caller's context, for checks without a deadline or worker."""
        if self._local is None:
            with z3_work():
                self._local = _strategy.solver(self.ctx, self.budget, fast=self.fast, nonlinear=self.nonlinear)
            for args, kwargs in self._settings:
                self._local.set(*args, **kwargs)
        return self._local

    def set(self, *args: object, **kwargs: object) -> None:
        self._settings.append((args, kwargs))
        if self._local is not None:
            self._local.set(*args, **kwargs)

    def check(self, *assumptions: z3.BoolRef, deadline: options.Deadline | None = None) -> z3.CheckSatResult:
        """Z3's ``check``; under a ``deadline`` (:func:`run_check` gives the question's) in a worker."""
        self._assumptions = list(assumptions)
        d = deadline
        if d is not None:
            answer = self._remote(d, assumptions)
            if answer is not None:
                self._last = answer
                return {"sat": z3.sat, "unsat": z3.unsat}.get(answer["r"], z3.unknown)
        self._last = None
        if self._local_n < len(self._added):
            self.local.add(*self._added[self._local_n:])
            self._local_n = len(self._added)
        return self.local.check(*assumptions)

    def _remote(self, d: options.Deadline, assumptions: tuple[z3.BoolRef, ...]) -> dict | None:
        """The worker's answer; None where no worker can start (the check then runs here)."""
        late = {"r": "unknown", "reason": DEADLINE_IN_WORKER}
        with Z3_WORKERS.worker(max(0.0, d.remaining())) as w:
            if w is None:
                return late  # every worker busy with other questions until the deadline
            if w.broken:
                return None  # no worker process can run here (not POSIX): the check runs in process
            if w.down:
                # its start failed moments ago (a loaded machine): no answer until it is tried again.
                # Not in process: there Z3 may run on past the deadline's interrupt (once in CI: an hour past a 1 s deadline)
                COUNTERS.bump("workers_down")
                return late
            for _ in range(2):  # once more, from the start, if the worker does not hold this solver
                held = self._held
                fresh = held is None or held[0] is not w or held[1] != w.generation
                sent, declared = (0, frozenset()) if fresh else (held[2], held[3])
                text, declared = _smt2(self.ctx, self._added[sent:], declared)
                request = {"ctx": _context_key(self.ctx), "key": self._key, "reset": fresh, "smt2": text, "budget": self.budget,
                           "fast": self.fast, "nonlinear": self.nonlinear,
                           "until": d.end if d.end < math.inf else None,
                           "assume": [b.decl().name() for b in assumptions]}
                try:
                    with _ctrl_c_ends_the_wait():
                        answer, generation = w.call(request, max(0.0, d.remaining()) + KILL_GRACE,
                                                    min(WORKER_START_LIMIT, max(0.0, d.remaining()) + KILL_GRACE),
                                                    WORKER_START_LIMIT)
                except _CtrlC:
                    # the worker was killed; as after a check Z3 cut in process, run_check delivers
                    # SIGINT again, to Python's own handler (KeyboardInterrupt by default)
                    self._held = None
                    return {"r": "unknown", "reason": _KEYBOARD}
                if answer is None:
                    self._held = None
                    COUNTERS.bump("workers_down" if w.down else "abandoned_checks")
                    return late
                if answer.get("missing"):
                    self._held = None
                    continue
                self._held = (w, generation, len(self._added), declared)
                if answer.get("deadline"):
                    answer["reason"] = DEADLINE_IN_WORKER
                return answer
        return late

    def model(self) -> z3.ModelRef | _RemoteModel:
        if self._last is None:
            return self.local.model()
        return _RemoteModel(self._last.get("model", {}))

    def unsat_core(self) -> list[z3.BoolRef]:
        if self._last is None:
            return list(self.local.unsat_core())
        names = set(self._last.get("core", ()))
        return [b for b in self._assumptions if b.decl().name() in names]

    def reason_unknown(self) -> str:
        return self.local.reason_unknown() if self._last is None else self._last.get("reason", "")


class _CtrlC(BaseException):
    """SIGINT arrived while the main thread waited for a worker (:func:`_ctrl_c_ends_the_wait`)."""


def _raise_ctrl_c(signum: int, frame: object) -> None:
    raise _CtrlC


@contextmanager
def _ctrl_c_ends_the_wait() -> Iterator[None]:
    """While the main thread waits for a Z3 worker, Ctrl-C ends the wait (:class:`_CtrlC`), as Z3's
    own handler ends a check in process; the caller then delivers SIGINT again to the handler in
    place before (one that does not raise still ends the question, as "interrupted")."""
    if not _ctrl_c_wanted():
        yield
        return
    prev = _signal.getsignal(_SIGINT)
    signal.signal(_SIGINT, _raise_ctrl_c)
    try:
        yield
    finally:
        signal.signal(_SIGINT, prev)


def _context_key(ctx: z3.Context) -> int:
    """A number naming ``ctx`` for the workers (unique in the process, unlike ``id``)."""
    key = getattr(ctx, "_smtdims_key", None)
    if key is None:
        key = ctx._smtdims_key = next(_SOLVER_KEYS)  # type: ignore[attr-defined]
    return key


_DECLARE = "(declare-fun "


def _smt2(ctx: z3.Context, formulas: list[z3.BoolRef], declared: frozenset[str]) -> tuple[str, frozenset[str]]:
    """SMT-LIB text of ``formulas`` without the declarations the worker already holds, and the
    declared names after it (the worker's parser refuses a declaration it has seen)."""
    if not formulas:
        return "", declared
    # Z3's benchmark printer: one C call (26 us here, against 700 us for a scratch solver's sexpr)
    arr = (z3.Ast * len(formulas))(*(f.as_ast() for f in formulas))
    text = z3.Z3_benchmark_to_smtlib_string(ctx.ref(), "", "", "unknown", "", len(formulas), arr,
                                            z3.BoolVal(True, ctx).as_ast())
    lines, names = [], set(declared)
    for line in text.splitlines(keepends=True):
        if line.startswith(("(check-sat", "(set-info")):
            continue
        if line.startswith(_DECLARE):
            name = _declared_name(line)
            if name in names:
                continue
            names.add(name)
        lines.append(line)
    return "".join(lines), frozenset(names)


def _declared_name(line: str) -> str:
    rest = line[len(_DECLARE):]
    if rest.startswith("|"):
        return rest[: rest.index("|", 1) + 1]
    return rest.split(" ", 1)[0]


@dataclass
class CheckResult:
    status: str  # SAT | UNSAT | UNKNOWN
    model: dict[str, int] | None = None
    core: list[str] | None = None
    reason: str = ""


def unknown_reason(z3_reason: str, interrupted: bool) -> str:
    """Why a check came back unknown, in the user's terms (budget, deadline, incompleteness)."""
    if interrupted or z3_reason == DEADLINE_IN_WORKER:
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


def run_check(s: z3.Solver | z3.Optimize, ctx: z3.Context, assumptions: list | None = None, *,
              ask: options.Question) -> tuple[object, str]:
    """``s.check(*assumptions)`` under the question's deadline (``ask``'s; none where it is not
    ``bounded``): ``(z3 result, unknown reason or "")``.

    A check cut by Ctrl-C re-delivers SIGINT to Python (see above): by default that raises
    KeyboardInterrupt here; under a handler that does not raise, the question ends as
    "unknown" with reason ``interrupted``, clock-shaped.
    """
    d = ask.deadline if ask.bounded else None
    if d is not None and d.expired:
        COUNTERS.bump("deadline_hits")
        return z3.unknown, REASON_DEADLINE
    _arm_ctrl_c(s)
    token = options.WATCHDOG.arm(ctx, d.end) if d is not None else None
    _gate_enter()
    try:
        r = s.check(*(assumptions or ()), deadline=d) if isinstance(s, KillableSolver) else s.check(*(assumptions or ()))
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

    def __init__(self, constraints: ConstraintSet, ask: options.Question):
        COUNTERS.bump("fresh_contexts")
        _trim_state["due"] = True  # freed with its question: its pages too are worth giving back
        if ask.bounded:
            Z3_WORKERS.prestart()  # its checks go to a worker: the first one starts while this encodes
        with z3_work():
            self.ctx = z3.Context()
            self.enc = Encoder(self.ctx)
            self.terms, self.atoms = self.enc.collect(
                lambda e: [e.constraint(c) for c in constraints], sorted(constraints.variables()), watch=ask.deadline
            )


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


# Objects whose Z3 side is built in the shared context (a session's solvers and terms, a recession
# cone's LP), by family (a scope's session with its focus sessions and cones), least recently used
# family first (under Z3_LOCK). Past the limit the oldest family's Z3 sides are released
# (``_release()``; each is rebuilt on its next use): a solver holding a scope's constraints costs
# 0.1-4 MB of Z3 memory, and sessions live as long as their scope (JAX) or the registry's capacity
# (public calls), so without this bound memory grew with the number of scopes asked about, not with
# the number in use (issue 28: 530 MB after 20,000 questions). By family, not by object: one question
# on a large scope touches many focus sessions, and releasing them one by one rebuilt 500-constraint
# solvers within a question (benchmark 5: 38 -> 94 ms).
LIVE_Z3_FAMILIES = 16
_LIVE: OrderedDict[int, weakref.WeakSet] = OrderedDict()
_FAMILY_KEYS = itertools.count(1)


def new_family() -> int:
    return next(_FAMILY_KEYS)


# Giving released Z3 memory back to the system. Z3 allocates with malloc; after a family or a retired
# context is released, glibc keeps the freed pages in its heaps (fragmented by what is still live),
# and RSS stayed 20-40 MB above what was in use after many large scopes (issue 28). ``malloc_trim``
# returns them. It costs 1-4 ms on a heap of 100-200 MB, so it runs at the end of a public question
# (never inside one: benchmark 5's latency), only after a release or a question's fresh context (freed
# with the question), at most once per TRIM_EVERY seconds (math.inf: never).
TRIM_EVERY = 1.0
_trim_state = {"due": False, "last": -math.inf}


def _find_malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None (musl, macOS, Windows: nothing to do there)."""
    try:
        fn = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError, TypeError):  # TypeError: Windows has no CDLL(None)
        return None
    fn.argtypes, fn.restype = [ctypes.c_size_t], ctypes.c_int
    return fn


_MALLOC_TRIM = _find_malloc_trim()


def _trim_after_question() -> None:
    """At the end of an outermost question: return freed heap pages if a release made them free."""
    if not _trim_state["due"] or _MALLOC_TRIM is None:
        return
    now = time.monotonic()
    if now - _trim_state["last"] < TRIM_EVERY:
        return
    _trim_state["due"], _trim_state["last"] = False, now
    COUNTERS.bump("heap_trims")
    _MALLOC_TRIM(0)


options.AFTER_QUESTION.append(_trim_after_question)


def touch(holder: object, family: int) -> None:
    """``holder`` (with ``_release()`` and a ``_z3_ctx``) has just used its Z3 side: its family is the
    most recent."""
    with Z3_LOCK:
        members = _LIVE.pop(family, None)
        if members is None:
            members = weakref.WeakSet()
        members.add(holder)
        _LIVE[family] = members
        if len(_LIVE) > LIVE_Z3_FAMILIES:
            for key in [k for k, m in _LIVE.items() if not m]:  # families whose objects are all gone
                del _LIVE[key]
        while len(_LIVE) > LIVE_Z3_FAMILIES:
            for other in list(_LIVE.popitem(last=False)[1]):
                other._release()
            _trim_state["due"] = True


class SolverSession:
    """The Z3 side of one constraint set, created on first use.

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

    @_locked
    def _start(self, watch: options.Deadline | None = None) -> None:
        """The shared context's side of this session (the constraints encoded once), built on first
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

    @_locked
    def _release(self) -> None:
        """Drop the Z3 side (solvers, encoded terms); the next check rebuilds it, as after
        :func:`retire_shared`. Only time is lost: the constraints and every check's formulas are
        encoded anew from the IR, and an answer never depended on a solver's history (push/pop
        leaves the constraints alone; Presburger answers are the same fresh and warm, see
        tools/fuzz.py --fresh-vs-warm)."""
        self._enc, self._solvers, self._shared_atoms = None, {}, set()
        self._constraint_terms, self._constraint_atoms = [], frozenset()

    def _encoder(self, watch: options.Deadline) -> Encoder:
        self._start(watch)
        assert self._enc is not None
        return self._enc

    def _shared_solver(self, fast: bool, watch: options.Deadline) -> z3.Solver:
        self._start(watch)
        s = self._solvers.get(fast)
        if s is None:
            assert self._enc is not None
            s = make_solver(self._enc.ctx, self.budget, fast=fast)
            s.add(*self._constraint_terms, *self._enc.axioms_of(self._constraint_atoms))
            self._solvers[fast] = s
        return s

    # -- the nonlinear context of the current question ------------------------------------------
    def fresh(self, ask: options.Question) -> Fresh:
        """The fresh context of this constraint set for the question ``ask``.

        Inside a session question (:func:`smtdims.options.session_question`) one per session until the
        outermost one ends; outside, one per check.
        """
        q = ask
        if not q.starts:  # no session question open
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
        ask: options.Question,
        want_model: bool = True,
        model_vars: frozenset[str] = frozenset(),
    ) -> CheckResult:
        """Satisfiability of the constraints AND the formulas ``build`` makes, for the question ``ask``
        (its deadline, its fresh contexts, its count of checks).

        Building the formulas watches the deadline too (:class:`DeadlinePassed`): an input
        large enough to take seconds to encode is answered "unknown", reason deadline.
        """
        COUNTERS.checked(ask)
        try:
            return self._check(build, linear, want_model, model_vars, ask)
        except DeadlinePassed:
            COUNTERS.bump("deadline_hits")
            return CheckResult(UNKNOWN, reason=REASON_DEADLINE)

    def _check(self, build: Callable[[Encoder], list[z3.BoolRef]], linear: bool, want_model: bool,
               model_vars: frozenset[str], ask: options.Question) -> CheckResult:
        if linear and self.linear:
            with Z3_LOCK:
                enc = self._encoder(ask.deadline)
                goals, atoms = enc.collect(build, sorted(model_vars), watch=ask.deadline)
                # the query's own definitions live inside push/pop: a scope that asked about
                # many divisions would otherwise slow every later check (measured: 2 ms -> 1 s)
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
                            ask.deadline.mark(options.CLOCK_FAST_SOLVER)
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
                ask: options.Question, r: object = None, reason: str = "") -> CheckResult:
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
                   ask: options.Question) -> list[str] | None:
        """A small subset of user constraints (by text) that is unsatisfiable with ``extra``.

        Implicit ``v >= 1`` facts appear as ``'v >= 1 (dimension variable)'``. Returns None if
        satisfiable or unknown. Runs in a context of its own. Minimised by deletion, one
        deadline-bounded check per constraint of the core: Z3's own ``core.minimize`` runs
        inside ``unsat_core()``, where no watchdog reaches it (it took 3.4 s past a 1 s
        deadline on 11 constraints with nested mods). When the deadline comes first, the core
        found so far is returned: a conflict still, perhaps not a minimal one; None when the
        deadline came before the first check ended (its checks run in a worker killed when late,
        :class:`KillableSolver`).
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
                   ask: options.Question) -> z3.Optimize:
        COUNTERS.bump("solvers_created")
        COUNTERS.checked(ask)
        o = z3.Optimize(ctx=enc.ctx)
        o.set("rlimit", self.budget)
        o._smtdims_budget = self.budget  # type: ignore[attr-defined]  # tells Ctrl-C from the budget
        o.add(*terms, *enc.axioms_of(atoms), *goals)
        return o

    def optimize(
        self, e: Expr, model_vars: frozenset[str], senses: tuple[str, ...] = ("min", "max"), *,
        ask: options.Question,
    ) -> dict[str, tuple[CheckResult, object]]:
        """Exact minimum and/or maximum of a linear ``e`` (Z3's optimiser; +-oo when unbounded).

        A new optimiser per sense (its search is not incremental) over the shared context's
        terms: the constraints are encoded once per scope, and a context costs about 5 ms.
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

"""The gates of a scope and the claims its answers make about valuations.

Before any rung answers, a question passes two gates: the constraints have a valuation (else every
answer would be vacuous, and an export of an impossible specification would succeed) and no symbolic
divisor may be 0. A witness, a tight end and "undetermined" each claim that some valuation exists:
:meth:`Gate.claimed` keeps a claim only where the gate proved the scope satisfiable or the witness,
completed, meets every constraint (exact arithmetic). Readable witnesses (``b = 1``, not
``b = 9216``) are made here too, each candidate re-checked exactly.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable

import z3

from . import clocks
from .engines import presburger
from .engines.checks import SAT, UNSAT
from .engines.encoding import Encoder
from .errors import PossibleDivisionByZeroError, UnsatisfiableConstraintsError
from .ladder import WalkedScope
from .lang.expr import Expr, symbolic_divisors
from .rungs.interval_arith import is_inf
from .rungs.points import shrink
from .rungs.presburger import READABLE_VALUE

SMALL_WITNESS_MAX_VARS = 32  # beyond this, an undetermined answer's witnesses are left as found
_WITNESS_CHECKS = 12  # Z3 checks at most, per end, looking for a bound's smallest witness


class Gate:
    """The satisfiability gate of one scope (a focus: its parent's), the divisor gate, and the claims
    about valuations that the scope's answers make."""

    def __init__(self, scope: WalkedScope, *, checked: bool):
        self.scope = weakref.proxy(scope)  # the scope owns its gate: no reference cycle (freed at once)
        self.checked = checked  # a focus is a component of a satisfiable set: its gate is its parent's
        # Whether the gate proved that some valuation meets every constraint (a known point, a model,
        # ISL's point). Unproven (the gate's check said unknown), the bounds and true/false answers
        # still hold (vacuously if none does), but no valuation is claimed (:meth:`claimed`).
        self.proven_here = False
        self.reason = ""  # why the gate's check said unknown (clocks.REASON_*)
        self.model: dict[str, int] | None = None  # the valuation that passed it, where not a known point

    @property
    def proven(self) -> bool:
        """Whether some valuation is known to meet every constraint of the scope (a focus: its parent's)."""
        parent = self.scope.parent
        return parent.gate.proven if parent is not None else self.proven_here

    def ensure(self, *, make_points: bool = True) -> None:
        """Raise :class:`UnsatisfiableConstraintsError` naming a minimal conflict, once per scope.

        A known satisfying point settles it without a solver. Without ``make_points`` (people's
        bounds, which ISL answers without the known points): where they are not made yet, the first
        known point (:meth:`ConstraintScope.first_point`: the ranges and the guesses up to the first
        that holds), else ISL's point of the constraints (their set, built once, serves the bounds
        too), settles it before the points are made (all of them: about a fifth of a fresh scope's
        first exact bounds).
        """
        if self.checked:
            return
        s = self.scope
        guessed = False  # the guesses were checked (none holds): the points would hold none either
        if s.constraints.constraints and not make_points and not s.points_made():
            first = s.first_point()
            if first is not None:
                self.model, self.checked, self.proven_here = dict(first), True, True
                return
            guessed = True
            isl = s.isl_engine(Expr.const(0), clocks.clock())
            got = isl.point(clock=clocks.clock()) if isl is not None else None
            if got is not None and got[0] is not None:  # re-checked exactly (else: ISL's conflict, Z3)
                self.model, self.checked, self.proven_here = got[0], True, True
                return
        if not s.constraints.constraints or (not guessed and s.points.satisfiable()):
            self.checked = self.proven_here = True
            return
        isl = s.isl_engine(Expr.const(0), clocks.clock())
        got = isl.conflict(clock=clocks.clock()) if isl is not None else None
        if got is not None:
            point, core = got
            if core is not None:
                raise UnsatisfiableConstraintsError.from_conflict(core)
            self.model, self.checked, self.proven_here = point, True, True
            return
        res = s.check(lambda enc: [], ask=clocks.asking())
        if res.status == UNSAT:
            core = (None if s.internal else s.solver.unsat_core(ask=clocks.asking())) or [c.text for c in s.constraints]
            raise UnsatisfiableConstraintsError.from_conflict(core)
        if res.status == SAT:
            self.model, self.proven_here = res.model, True  # check() re-checked the model exactly
        else:
            # Unknown: the answers stay sound (vacuously if no valuation exists), but none may claim a
            # valuation it has not checked against every constraint (claimed)
            self.reason = res.reason or clocks.REASON_INCOMPLETE
        if res.status != "unknown" or clocks.clocked() is None:  # unknown at the budget: deterministic,
            self.checked = True  # do not ask on every question (a clock's unknown: ask again)

    def zero_divisor(self, *exprs: Expr) -> tuple[str, dict[str, int] | None] | None:
        """A symbolic divisor of ``exprs`` that may be 0 (with a valuation where it is), or None."""
        s = self.scope
        for e in exprs:
            for d in symbolic_divisors(e):
                lo, hi = s.interval(d)
                if lo > 0 or hi < 0:
                    continue
                for value, env in s.points.values(d, clocks.clock()):
                    if value == 0:
                        return str(d), self.complete(env)
                res = s.check(lambda enc, d=d: [enc.expr(d) == 0], d, ask=clocks.asking())
                if res.status == SAT:
                    return str(d), self.complete(res.model)
                if res.status != UNSAT:
                    return str(d), None
        return None

    def check_divisors(self, *exprs: Expr) -> None:
        """A symbolic divisor that can be 0 is an error, as in JAX."""
        z = self.zero_divisor(*exprs)
        if z is not None:
            raise PossibleDivisionByZeroError.from_divisor(*z, clocks.clocked())

    # -- claims -------------------------------------------------------------------------------------------
    def claimed(self, *witnesses: dict[str, int] | None) -> tuple[bool, list[dict[str, int] | None]]:
        """``(proven, completed)``: whether the scope is known satisfiable, and ``witnesses`` (from this
        scope or a focus) completed to whole valuations, each kept only where it meets every constraint.

        Why: a witness, a tight end and "undetermined" claim that some valuation exists. A focus answers
        for the whole scope only when the whole is satisfiable (:meth:`ConstraintScope.focus`); where
        the gate could not prove it, a claim stands only on a witness that, completed, meets every
        constraint: that valuation proves the scope satisfiable, and then completes the answer's other
        witnesses.
        """
        if self.proven:
            return True, [self.complete(w) for w in witnesses]
        done = [self.complete(w) for w in witnesses]
        base = next((w for w in done if w is not None), None)
        if base is None:
            return False, done
        return True, [d if d is not None or w is None else self.complete(w, base) for w, d in zip(witnesses, done, strict=True)]

    def complete(self, env: dict[str, int] | None, base: dict[str, int] | None = None) -> dict[str, int] | None:
        """A witness from a focus (cone of influence) extended to every constrained variable.

        The focus's variables are unconstrained by the other constraints, so any satisfying
        point of the whole set (``base``, else a known one) supplies the rest. Where the gate did
        not prove the set satisfiable, the focus's witness may meet only its part of the
        constraints: it is returned only if the whole valuation meets every constraint (exact
        arithmetic), else None.
        """
        if env is None:
            return None
        s = self.scope
        if not all(v in env for v in s.constraints.variables()):
            env = {**(base or s.any_point() or {}), **env}
        elif self.proven:
            return env
        return env if self.proven or self._meets_all(env) else None

    def _meets_all(self, env: dict[str, int]) -> bool:
        """Whether ``env`` values every constrained variable and meets every constraint (exactly)."""
        cs = self.scope.constraints
        try:
            return all(v in env for v in cs.variables()) and cs.holds(env)
        except (KeyError, ZeroDivisionError):
            return False

    def unproven_reason(self) -> str:
        return f"{clocks.REASON_SATISFIABILITY}: {self.reason or clocks.REASON_INCOMPLETE}"

    def readable(self, env: dict[str, int], ok: Callable[[dict[str, int]], bool]) -> dict[str, int]:
        """A smaller witness (``b = 3`` rather than ``b = 64``), re-checked exactly; small scopes only.

        :func:`points.shrink` costs a few exact evaluations of the constraints per variable:
        beyond a few dozen variables that is more than the question itself, and any model is
        as valid a witness.
        """
        cs = self.scope.constraints
        if len(cs.variables()) > SMALL_WITNESS_MAX_VARS:
            return env
        return shrink(env, ok, cs, clocks.clock())


def wants_small(value: int | float, tight: bool, env: dict[str, int] | None) -> bool:
    """Whether an end's witness is one :func:`small_witness` makes smaller: a tight finite end's, in a
    small scope."""
    return env is not None and tight and not is_inf(value) and len(env) <= SMALL_WITNESS_MAX_VARS


def small_witness(scope: WalkedScope, e: Expr, value: int | float, tight: bool, env: dict[str, int] | None,
                  eng: presburger.Engine | None) -> dict[str, int] | None:
    """A witness of a tight end that a reader checks at a glance: ``b = 1, batch = 3``, not
    ``batch = 9216``; ``a = b = 1`` for ``max(a, b) - min(a, b) = 0``, not ``a = b = 1024``.

    Once the end is known (never while it is searched: this changes no bound), first exact
    evaluations only: every variable 1, every variable moved down together, then
    :func:`points.shrink`; then, while a value is still above ``READABLE_VALUE``, the least sum of
    the variables over the valuations that meet the constraints and attain the end, by galloping
    up from "every variable 1" and bisecting (at most ``_WITNESS_CHECKS`` Z3 checks, under the
    question's budget and deadline). Every candidate is re-checked exactly (constraints hold, ``e``
    equals the end); a check that fails or says unknown keeps the witness found so far. Small
    scopes only (``SMALL_WITNESS_MAX_VARS``), as for decisions.
    """
    if not wants_small(value, tight, env):
        return env
    assert env is not None
    cs = scope.constraints

    def attains(w: dict[str, int]) -> bool:
        try:
            return e.evaluate(w) == value
        except ZeroDivisionError:
            return False

    def valid(w: dict[str, int]) -> bool:
        try:
            return cs.holds(w) and attains(w)
        except ZeroDivisionError:
            return False

    eng = eng if isinstance(value, int) else None
    given = eng.given_least(e, value) if eng is not None else None
    if given is not None and all(env.get(v) == x for v, x in given.items()):
        # The cone of influence's part is ISL's least-sum point for this end: no valuation of
        # those variables with a smaller sum attains it, so every step below (all ones, moving
        # down, shrinking one variable) can only fail on them; the other variables (no
        # constraint links them to these) may still shrink.
        if len(given) < len(env):
            return shrink(env, attains, cs, clocks.clock(), keep=frozenset(given))
        return env
    names = sorted(env)
    ones = dict.fromkeys(names, 1)
    if valid(ones):
        return ones
    down = min(env.values(), default=1) - 1  # every variable moved down together: a - b, max(a, b) - min(a, b)
    if down > 0 and valid(shifted := {v: x - down for v, x in env.items()}):
        env = shifted
    env = shrink(env, attains, cs, clocks.clock())
    if max(env.values(), default=1) <= READABLE_VALUE or clocks.deadline_passed():
        return env
    # ISL finds the least sum in one call where it takes the question (the focus's engine: the
    # one that answered the bounds, holding the least-sum witnesses it gave with them); Z3
    # searches for it otherwise. The focus's point covers the cone of influence; the other
    # variables keep their values here (no constraint links them), and the whole is re-checked.
    least = eng.least_witness(e, value, clock=clocks.clock()) if eng is not None else None
    if least is not None and least.keys() <= env.keys():
        cand = {**env, **least}
        if valid(cand):
            return cand if sum(cand.values()) < sum(env.values()) else env
    # sum <= lo is refuted: only all-ones has sum len(names); no valuation goes below the variables' ranges
    floor = sum(max(1, int(low)) if not is_inf(low) else 1 for low in (scope.interval(Expr.var(v))[0] for v in names))
    lo, best, step = max(len(names), floor - 1), sum(env.values()), 1
    for _ in range(_WITNESS_CHECKS):
        if lo + 1 >= best or clocks.deadline_passed():
            break
        m = lo + max(1, min(step, (best - lo) // 2))

        def build(enc: Encoder, m: int = m) -> list[z3.BoolRef]:
            xs = [enc.var(v) for v in names]
            return [enc.expr(e) == enc.const(value), sum(xs[1:], xs[0]) <= enc.const(m)]

        res = scope.check(build, e, ask=clocks.asking())
        if res.status == UNSAT:
            lo, step = m, step * 2
        elif res.status == SAT and res.model is not None and all(v in res.model for v in names):
            cand = {v: res.model[v] for v in names}
            if not valid(cand):
                break  # never trust a model exact arithmetic refutes
            env, best = cand, sum(cand.values())
        else:
            break
    return env

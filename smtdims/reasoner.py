"""The facade: sound fast path first, Z3 for the rest; caches, budgets and counters.

A :class:`Session` holds everything known about one constraint set: heuristic
variable ranges, per-expression caches and a :class:`~smtdims.smt.SolverSession`
whose Z3 context is only created when a query needs it.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import z3

from .constraints import ConstraintSet
from .errors import PossibleDivisionByZeroError, UnsatisfiableConstraintsError
from .expr import FLOORDIV, MOD, Expr, Op, deep_recursion
from .heuristic import INF, Interval, IntervalEvaluator, propagate_var_ranges
from .results import FALSE, TRUE, UNDETERMINED, UNKNOWN, Bounds, Decision
from .smt import COUNTERS, SAT, UNSAT, CheckResult, Encoder, SolverSession, z3_int_or_inf

DEFAULT_BUDGET = 5_000_000  # Z3 rlimit per check: deterministic, roughly 0.5-1 s of work
_SEARCH_STEPS = 40  # binary-search steps per end of a nonlinear bound
_SEARCH_STEPS_LINEAR = 400  # incremental checks are cheap; enough for 128-bit-wide ranges
_UNBOUNDED_PROBES = 6  # probes towards an end with no proven bound before calling it "not found"

# What a caller needs from bounds, weakest first (mirrors JAX's BoundsPrecision).
NEED_SIGN_LEQ = "geq0_or_leq0"  # enough once lo >= 0 or hi <= 0 (max/min)
NEED_SIGN_LT = "geq0_or_lt0"  # enough once lo >= 0 or hi < 0 (comparisons)
NEED_BEST = "best"

COMPARISON_OPS = (">=", "<=", ">", "<", "==", "!=")


def sufficient(need: str, lo: float, hi: float) -> bool:
    if need == NEED_SIGN_LEQ:
        return lo >= 0 or hi <= 0
    if need == NEED_SIGN_LT:
        return lo >= 0 or hi < 0
    return lo == hi


@dataclass
class _Config:
    budget: int = DEFAULT_BUDGET


CONFIG = _Config()


class _Stats:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        self.fast_path_answers = 0
        self.solver_answers = 0
        self.cache_hits = 0
        self.stock_answers = 0

    def bump(self, name: str) -> None:
        with self.lock:
            setattr(self, name, getattr(self, name) + 1)


STATS = _Stats()


def stats() -> dict[str, int]:
    """Counters since start (or :func:`reset_stats`): who answered, how often Z3 ran."""
    return {
        "fast_path_answers": STATS.fast_path_answers,
        "stock_answers": STATS.stock_answers,
        "solver_answers": STATS.solver_answers,
        "solver_checks": COUNTERS.solver_checks,
        "solver_unknowns": COUNTERS.solver_unknowns,
        "solvers_created": COUNTERS.solvers_created,
        "cache_hits": STATS.cache_hits,
    }


def reset_stats() -> None:
    STATS.reset()
    with COUNTERS._lock:
        COUNTERS.solvers_created = COUNTERS.solver_checks = COUNTERS.solver_unknowns = 0


def _symbolic_divisors(e: Expr) -> list[Expr]:
    return [a.rhs for a in e.atoms() if isinstance(a, Op) and a.op in (FLOORDIV, MOD) and not a.rhs.is_constant]


def _relation(op: str, d: z3.ArithRef) -> z3.BoolRef:
    """``lhs op rhs`` as a relation on ``d = lhs - rhs``."""
    return {">=": d >= 0, "<=": d <= 0, ">": d > 0, "<": d < 0, "==": d == 0, "!=": d != 0}[op]


def _interval_decides(op: str, lo: float, hi: float) -> str | None:
    if op == ">=":
        return TRUE if lo >= 0 else FALSE if hi < 0 else None
    if op == ">":
        return TRUE if lo > 0 else FALSE if hi <= 0 else None
    if op == "<=":
        return TRUE if hi <= 0 else FALSE if lo > 0 else None
    if op == "<":
        return TRUE if hi < 0 else FALSE if lo >= 0 else None
    if op == "==":
        return TRUE if lo == hi == 0 else FALSE if (lo > 0 or hi < 0) else None
    if op == "!=":
        return FALSE if lo == hi == 0 else TRUE if (lo > 0 or hi < 0) else None
    raise ValueError(f"unknown comparison {op!r}; use one of {', '.join(COMPARISON_OPS)}")


class Session:
    """All reasoning about one constraint set. Thread-safe: public methods take ``lock``."""

    def __init__(self, constraints: ConstraintSet, budget: int | None = None):
        self.constraints = constraints
        self.budget = budget if budget is not None else CONFIG.budget
        self.solver = SolverSession(constraints, self.budget)
        self.lock = self.solver.lock
        self._evaluator: IntervalEvaluator | None = None
        self._infeasible_hint = False
        self._satisfiable_checked = False
        self._sign_cache: dict[tuple[Expr, str], Interval] = {}
        self._bounds_cache: dict[Expr, Bounds] = {}
        self._decision_cache: dict[tuple[Expr, str, Expr], Decision] = {}
        self._proof_cache: dict[tuple[Expr, str, Expr], bool] = {}
        self._sample_points: list[dict[str, int]] | None = None
        self.last_witnesses: dict[Expr, tuple[dict[str, int] | None, dict[str, int] | None, str]] = {}

    # -- fast path -----------------------------------------------------------------
    @property
    def evaluator(self) -> IntervalEvaluator:
        if self._evaluator is None:
            ranges, infeasible = propagate_var_ranges(self.constraints)
            self._infeasible_hint = infeasible
            self._evaluator = IntervalEvaluator(ranges)
        return self._evaluator

    def interval(self, e: Expr) -> Interval:
        """Sound (possibly loose) bounds of ``e``; no solver."""
        return self.evaluator.expr(e)

    # -- solver helpers ------------------------------------------------------------------
    def _linear(self, *exprs: Expr) -> bool:
        return self.solver.linear and all(e.is_linear() for e in exprs)

    def _valid_model(self, model: dict[str, int] | None) -> bool:
        """Witnesses are re-checked with exact Python arithmetic: an encoding bug cannot pass."""
        return model is not None and self.constraints.holds(model)

    def _check(self, build: Callable[[Encoder], list[z3.BoolRef]], *exprs: Expr) -> CheckResult:
        res = self.solver.check(
            build, linear=self._linear(*exprs), model_vars=frozenset().union(*(e.variables() for e in exprs))
        )
        if res.status == SAT and not self._valid_model(res.model):
            return CheckResult("unknown", reason="solver model failed exact re-evaluation")
        return res

    def _small_witness(self, build: Callable[[Encoder], list[z3.BoolRef]], e: Expr) -> dict[str, int] | None:
        """The witness with the smallest variables (linear only), re-checked like any model."""
        if not self._linear(e):
            return None
        model = self.solver.small_model(build, e.variables())
        return model if self._valid_model(model) else None

    def ensure_satisfiable(self) -> None:
        """Raise :class:`UnsatisfiableConstraintsError` naming a minimal conflict, once per session."""
        if self._satisfiable_checked:
            return
        if not self.constraints.constraints:
            self._satisfiable_checked = True
            return
        res = self._check(lambda enc: [])
        if res.status == UNSAT:
            core = self.solver.unsat_core() or [c.text for c in self.constraints]
            raise UnsatisfiableConstraintsError(core)
        self._satisfiable_checked = True
        if res.status == SAT and res.model is not None:
            self._remember_point(res.model)

    def check_divisors(self, *exprs: Expr) -> None:
        """A symbolic divisor that can be 0 is an error, as in JAX."""
        for e in exprs:
            for d in _symbolic_divisors(e):
                lo, hi = self.interval(d)
                if lo > 0 or hi < 0:
                    continue
                res = self._check(lambda enc, d=d: [enc.expr(d) == 0], d)
                if res.status == SAT:
                    raise PossibleDivisionByZeroError(str(d), res.model)
                if res.status != UNSAT:
                    raise PossibleDivisionByZeroError(str(d), None)

    def _remember_point(self, model: dict[str, int]) -> None:
        if self._sample_points is None:
            self._sample_points = []
        if model not in self._sample_points and len(self._sample_points) < 8:
            self._sample_points.append(dict(model))

    # -- decisions -------------------------------------------------------------------------
    def decide(self, lhs: Expr, op: str, rhs: Expr) -> Decision:
        if op not in COMPARISON_OPS:
            raise ValueError(f"unknown comparison {op!r}; use one of {', '.join(COMPARISON_OPS)}")
        key = (lhs, op, rhs)
        with self.lock, deep_recursion():
            hit = self._decision_cache.get(key)
            if hit is not None:
                STATS.bump("cache_hits")
                return hit
            d = self._decide(lhs, op, rhs)
            self._decision_cache[key] = d
            return d

    def _decision(self, lhs: Expr, op: str, rhs: Expr, status: str, by: str, **kw) -> Decision:
        return Decision(
            str(lhs), op, str(rhs), status,
            constraints=tuple(c.text for c in self.constraints), answered_by=by,
            _context=(self, lhs, op, rhs), **kw,
        )

    def _decide(self, lhs: Expr, op: str, rhs: Expr) -> Decision:
        self.check_divisors(lhs, rhs)
        diff = lhs - rhs
        lo, hi = self.interval(diff)
        fast = _interval_decides(op, lo, hi)
        if fast is not None and not self._infeasible_hint and not self.constraints.constraints:
            STATS.bump("fast_path_answers")
            return self._decision(lhs, op, rhs, fast, "fast path")
        self.ensure_satisfiable()
        if fast is not None:
            STATS.bump("fast_path_answers")
            return self._decision(lhs, op, rhs, fast, "fast path")
        STATS.bump("solver_answers")
        holds = self._check(lambda enc: [_relation(op, enc.expr(diff))], diff)
        fails = self._check(lambda enc: [z3.Not(_relation(op, enc.expr(diff)))], diff)
        if fails.status == UNSAT and holds.status != UNSAT:
            return self._decision(lhs, op, rhs, TRUE, "solver", witness_true=holds.model)
        if holds.status == UNSAT and fails.status != UNSAT:
            return self._decision(lhs, op, rhs, FALSE, "solver", witness_false=fails.model)
        if holds.status == SAT and fails.status == SAT:
            w_true = self._small_witness(lambda enc: [_relation(op, enc.expr(diff))], diff) or holds.model
            w_false = self._small_witness(lambda enc: [z3.Not(_relation(op, enc.expr(diff)))], diff) or fails.model
            return self._decision(lhs, op, rhs, UNDETERMINED, "solver", witness_true=w_true, witness_false=w_false)
        reason = holds.reason or fails.reason or "solver budget exhausted"
        return self._decision(
            lhs, op, rhs, UNKNOWN, "solver", reason=reason,
            witness_true=holds.model, witness_false=fails.model,
        )

    def proves(self, lhs: Expr, op: str, rhs: Expr) -> bool:
        """Whether ``lhs op rhs`` is proven for every valuation: one solver check, no witnesses.

        The cheap form of :meth:`decide` for hot paths that only act on a proof (JAX's ``==``).
        """
        key = (lhs, op, rhs)
        with self.lock, deep_recursion():
            hit = self._proof_cache.get(key)
            if hit is not None:
                STATS.bump("cache_hits")
                return hit
            self.check_divisors(lhs, rhs)
            diff = lhs - rhs
            lo, hi = self.interval(diff)
            fast = _interval_decides(op, lo, hi)
            if fast is not None:
                STATS.bump("fast_path_answers")
                proven = fast == TRUE
            else:
                self.ensure_satisfiable()
                STATS.bump("solver_answers")
                fails = self._check(lambda enc: [z3.Not(_relation(op, enc.expr(diff)))], diff)
                proven = fails.status == UNSAT
            self._proof_cache[key] = proven
            return proven

    # -- bounds for JAX-style callers ------------------------------------------------------
    def sign_bounds(self, e: Expr, need: str) -> Interval:
        """Sound bounds of ``e`` precise enough for ``need`` when provable.

        The solver is only asked the one or two sign questions ``need`` requires.
        """
        lo, hi = self.interval(e)
        if sufficient(need, lo, hi) and not self._infeasible_hint:
            STATS.bump("fast_path_answers")
            return (lo, hi)
        key = (e, need)
        with self.lock, deep_recursion():
            hit = self._sign_cache.get(key)
            if hit is not None:
                STATS.bump("cache_hits")
                return hit
            if need == NEED_BEST:
                b = self.bounds(e)
                result: Interval = (b.lo, b.hi)
            else:
                result = self._sign_bounds(e, need, lo, hi)
            self._sign_cache[key] = result
            return result

    def _sign_bounds(self, e: Expr, need: str, lo: float, hi: float) -> Interval:
        self.check_divisors(e)
        self.ensure_satisfiable()
        STATS.bump("solver_answers")
        below = self._check(lambda enc: [enc.expr(e) < 0], e)
        if below.status == UNSAT:
            return (max(lo, 0), hi)
        strict = need == NEED_SIGN_LT
        above = self._check(lambda enc: [enc.expr(e) >= 0 if strict else enc.expr(e) > 0], e)
        if above.status == UNSAT:
            return (lo, min(hi, -1 if strict else 0))
        self.last_witnesses[e] = (above.model, below.model, above.reason or below.reason)
        return (lo, hi)

    # -- exact bounds ---------------------------------------------------------------------------
    def bounds(self, e: Expr) -> Bounds:
        with self.lock, deep_recursion():
            hit = self._bounds_cache.get(e)
            if hit is not None:
                STATS.bump("cache_hits")
                return hit
            b = self._bounds(e)
            self._bounds_cache[e] = b
            return b

    def _mk_bounds(self, e: Expr, lo, hi, by: str, **kw) -> Bounds:
        return Bounds(
            lo, hi, expr=str(e), constraints=tuple(c.text for c in self.constraints), answered_by=by,
            context=(self, e), **kw,
        )

    def _bounds(self, e: Expr) -> Bounds:
        self.check_divisors(e)
        self.ensure_satisfiable()
        c = e.as_constant()
        if c is not None:
            STATS.bump("fast_path_answers")
            w = self._any_point(e)
            return self._mk_bounds(e, c, c, "fast path", lo_tight=True, hi_tight=True, lo_witness=w, hi_witness=w)
        STATS.bump("solver_answers")
        if self._linear(e):
            b = self._optimize_bounds(e)
            if b is not None:
                return b
        return self._search_bounds(e)

    def _any_point(self, e: Expr) -> dict[str, int] | None:
        res = self._check(lambda enc: [], e)
        return res.model if res.status == SAT else None

    def _optimize_bounds(self, e: Expr) -> Bounds | None:
        """Exact ends of a linear ``e``.

        An end the fast path already bounds is settled by one incremental check (is it
        attained?); only the other ends go to Z3's optimiser, which is far costlier on
        large constraint sets and the only way to prove an end infinite.
        """
        ends: dict[str, tuple] = {}
        for sense, end in (("min", self.interval(e)[0]), ("max", self.interval(e)[1])):
            if math.isinf(end):
                continue
            res = self._check(lambda enc, end=end: [enc.expr(e) == end], e)
            if res.status == SAT and res.model is not None and e.evaluate(res.model) == end:
                ends[sense] = (end, True, res.model)
        todo = tuple(x for x in ("min", "max") if x not in ends)
        if todo:
            for sense, (res, value) in self.solver.optimize(e, e.variables(), todo).items():
                if res.status != SAT:
                    return None
                val = z3_int_or_inf(value)
                if math.isinf(val):
                    ends[sense] = (val, True, None)
                elif not self._valid_model(res.model) or e.evaluate(res.model) != val:  # type: ignore[arg-type]
                    return None  # never trust an optimum we cannot re-evaluate exactly
                else:
                    ends[sense] = (val, True, res.model)
        (lo, lt, lw), (hi, ht, hw) = ends["min"], ends["max"]
        return self._mk_bounds(e, lo, hi, "solver", lo_tight=lt, hi_tight=ht, lo_witness=lw, hi_witness=hw)

    def _search_bounds(self, e: Expr) -> Bounds:
        """Binary search between a proven bound and an attained value, one end at a time."""
        lo0, hi0 = self.interval(e)
        start = self._check(lambda enc: [], e)
        if start.status != SAT or start.model is None:
            return self._mk_bounds(e, lo0, hi0, "fast path")
        v0 = e.evaluate(start.model)
        lo, lo_tight, lo_w = self._search_end(e, lo0, v0, start.model, lower=True)
        hi, hi_tight, hi_w = self._search_end(e, hi0, v0, start.model, lower=False)
        return self._mk_bounds(e, lo, hi, "solver", lo_tight=lo_tight, hi_tight=hi_tight, lo_witness=lo_w, hi_witness=hi_w)

    def _search_end(self, e: Expr, proven, attained: int, witness: dict[str, int], *, lower: bool):
        """Tighten one end: a proven bound ``p`` and an attained value ``a`` close in on each other.

        Without a proven bound the search only probes a few times, ever further out: Z3
        cannot prove a nonlinear expression unbounded, so more probes would only cost time.
        """
        sign = 1 if lower else -1  # search the lower end of sign*e
        p = proven * sign if not math.isinf(proven) else -INF
        a = attained * sign
        w = witness
        gap, probes = max(1, abs(a)), 0
        steps = _SEARCH_STEPS_LINEAR if self._linear(e) else _SEARCH_STEPS
        for _ in range(steps):
            if p == a:
                break
            if math.isinf(p):
                if probes == _UNBOUNDED_PROBES:
                    break
                probes += 1
                m = a - gap
                gap *= 1 << 16  # far out fast: a finite end may lie many orders of magnitude away
            else:
                m = p + (a - p + 1) // 2
            res = self._check(lambda enc, m=m: [sign * enc.expr(e) < m], e)
            if res.status == UNSAT:
                p = m
            elif res.status == SAT and res.model is not None:
                a, w = sign * e.evaluate(res.model), res.model
            else:
                break
        if p == a:
            return a * sign, True, w
        return (p * sign if not math.isinf(p) else (-INF if lower else INF)), False, None

    # -- sample points for cheap refutation ------------------------------------------------------
    def sample_points(self) -> list[dict[str, int]]:
        """A few valuations satisfying the constraints (for cheap disproofs), at most one solver call."""
        with self.lock:
            if self._sample_points is None:
                self._sample_points = []
                for guess in self._guesses():
                    if self.constraints.holds(guess):
                        self._remember_point(guess)
                if not self._sample_points and self.constraints.constraints:
                    try:
                        self.ensure_satisfiable()
                    except UnsatisfiableConstraintsError:
                        pass
            return list(self._sample_points)


    def _guesses(self) -> list[dict[str, int]]:
        """Candidate points from the fast path's variable ranges: low ends, and a spread above them."""
        ranges = self.evaluator.var_ranges
        names = sorted(self.constraints.variables())
        low = {n: int(ranges.get(n, (1, INF))[0]) for n in names}
        up, down = {}, {}  # distinct values, in both orders (a >= b admits only one of them)
        for i, n in enumerate(names):
            lo, hi = ranges.get(n, (1, INF))
            up[n] = int(min(lo + 6 + 4 * i, hi))
            down[n] = int(min(lo + 6 + 4 * (len(names) - 1 - i), hi))
        return [{n: 1 for n in names}, low, up, down]


class SessionRegistry:
    """Sessions keyed by constraint set and budget; bounded so memory cannot grow without limit."""

    def __init__(self, capacity: int = 256):
        self.capacity = capacity
        self._lock = threading.Lock()
        self._sessions: OrderedDict[tuple[ConstraintSet, int], Session] = OrderedDict()

    def get(self, constraints: ConstraintSet, budget: int | None = None) -> Session:
        budget = budget if budget is not None else CONFIG.budget
        key = (constraints, budget)
        with self._lock:
            s = self._sessions.get(key)
            if s is None:
                s = Session(constraints, budget)
                self._sessions[key] = s
                if len(self._sessions) > self.capacity:
                    self._sessions.popitem(last=False)
            else:
                self._sessions.move_to_end(key)
            return s

    def clear(self) -> None:
        with self._lock:
            self._sessions.clear()


REGISTRY = SessionRegistry()

"""The ``presburger`` rung: exact bounds of small Presburger questions by ISL (islpy), if installed.

On the Presburger fragment (linear; ``floordiv``/``mod`` by nonzero constants; ``max``/``min``)
ISL computes the exact minimum and maximum of an expression over the integer points of the
constraints with exact arithmetic, in a fraction of a millisecond where Z3 needs a few checks.
It is an optional accelerator (``pip install smtdims[isl]``): without islpy, or when a question
is not eligible, the ladder goes on to Z3 exactly as before.

What is trusted, and what is checked:

- Each finite end comes with a witness, ISL's sample point of ``{constraints, e == end}``,
  re-checked with exact Python arithmetic (constraints hold, ``e`` evaluates to the end). A
  witness that fails declines the whole answer.
- The ends must agree with what the ladder already knows: the proven interval contains them and
  no known satisfying point lies outside them. Disagreement declines the answer (and is counted:
  ``stats()["presburger_declined"]``).
- That no valuation lies beyond an end is ISL's claim, as "unsat" is Z3's: two independent exact
  engines, each cross-checked against brute force and against each other by the test suite and
  ``tools/fuzz.py``. ``smtdims.set_defaults(presburger=False)`` turns the rung off.

Bounded time: ISL cannot be interrupted from another thread while it holds the interpreter, so
the rung only takes small questions (at most ``MAX_VARS`` variables, ``MAX_PARTS`` constraint
parts and ``MAX_CASES`` ``max``/``min`` atoms: their case splits are what grows exponentially)
and runs under ISL's deterministic operation quota; past the quota ISL stops and the question
goes to Z3 under the deadline.
"""

from __future__ import annotations

import math
import threading
from typing import Any

from .constraints import ConstraintSet
from .expr import FLOORDIV, MAX, MIN, MOD, Expr, Op, Var

MAX_VARS = 12
MAX_PARTS = 40
MAX_CASES = 6
MAX_DEPTH = 8  # nested floordiv/mod: each level is an existential variable for ISL
MAX_DIGITS = 1000  # constants are passed as decimal text (Python refuses str() past 4300 digits)
_DIGITS_LIMIT = 10**MAX_DIGITS
OPERATIONS = 2_000_000  # ISL's quota per question (isl_ctx_set_max_operations)

_LOCK = threading.Lock()  # ISL contexts are not thread-safe
_STATE: dict[str, Any] = {}


def _isl() -> Any | None:
    """islpy and this module's ISL context, or None when islpy is not installed."""
    if "isl" not in _STATE:
        try:
            import islpy
        except ImportError:
            _STATE["isl"] = None
        else:
            ctx = islpy.Context()
            ctx.set_max_operations(OPERATIONS)
            _STATE["isl"] = (islpy, ctx)
    return _STATE["isl"]


def available() -> bool:
    return _isl() is not None


def _cases(e: Expr, seen: set[Op]) -> int:
    n = 0
    for m, _ in e.terms:
        for a, _ in m:
            if isinstance(a, Op) and a not in seen:
                seen.add(a)
                n += (a.op in (MAX, MIN)) + _cases(a.lhs, seen) + _cases(a.rhs, seen)
    return n


def _small(e: Expr, depth: int = 0) -> bool:
    """Shallow enough, and every constant short enough, for ISL's text syntax (stops at the limit)."""
    if depth > MAX_DEPTH:
        return False
    for m, c in e.terms:
        if abs(c) >= _DIGITS_LIMIT:
            return False
        for a, _ in m:
            if isinstance(a, Op) and not (_small(a.lhs, depth + 1) and _small(a.rhs, depth + 1)):
                return False
    return True


class Engine:
    """ISL's view of one constraint set: the integer set of the constraints, built once per variable list."""

    def __init__(self, constraints: ConstraintSet):
        self.constraints = constraints
        self.parts = constraints.parts()
        self._domains: dict[tuple[str, ...], Any] = {}
        seen: set[Op] = set()
        self._constraint_cases = sum(_cases(p.diff, seen) for p in self.parts)
        self._small_parts = all(_small(p.diff) for p in self.parts)
        self.declined = 0

    def eligible(self, e: Expr) -> bool:
        if not e.is_linear() or len(self.parts) > MAX_PARTS or not self._small_parts:
            return False
        if len(self.constraints.variables() | e.variables()) > MAX_VARS or not _small(e):
            return False
        return self._constraint_cases + _cases(e, set()) <= MAX_CASES

    def bounds(self, e: Expr, known: dict[int, dict[str, int]] | None = None
               ) -> tuple[int | float, int | float, dict[str, int] | None, dict[str, int] | None] | None:
        """``(lo, hi, lo_witness, hi_witness)``, exact; None when ISL could not answer (quota, error).

        ``known`` maps values of ``e`` to satisfying valuations already at hand: an end that one
        of them attains needs no sample point from ISL.
        """
        known = known or {}
        got = _isl()
        if got is None or not self.eligible(e):
            return None
        isl, ctx = got
        names = tuple(sorted(self.constraints.variables() | e.variables()))
        with _LOCK:
            ctx.reset_operations()
            try:
                dom, alias, tup = self._domain(isl, ctx, names)
                f = isl.PwAff.read_from_str(ctx, "{ [" + tup + "] -> [" + _text(e, alias) + "] }")
                graph = isl.Map.from_pw_aff(f).intersect_domain(dom)
                values = graph.range()
                obj = isl.Aff.var_on_domain(isl.LocalSpace.from_space(values.get_space()), isl.dim_type.set, 0)
                los: list[int | float] = []
                his: list[int | float] = []
                # per basic set, skipping empty ones: isl_set_max_val has answered 0 for a set with an
                # empty disjunct ({ [i] : i mod 46 = 0 and i <= -46; [i] : false }, islpy 2026.2)
                for bs in values.coalesce().get_basic_sets():
                    if bs.is_empty():
                        continue
                    one = isl.Set.from_basic_set(bs)
                    los.append(_value(one.min_val(obj)))
                    his.append(_value(one.max_val(obj)))
                if not los or any(v is None for v in (*los, *his)):
                    return None
                lo, hi = min(los), max(his)
                w_lo = None if _infinite(lo) else known.get(int(lo)) or _sample(isl, ctx, graph, int(lo), names)
                w_hi = None if _infinite(hi) else known.get(int(hi)) or _sample(isl, ctx, graph, int(hi), names)
            except isl.Error:  # the operation quota, or anything ISL refuses
                return None
        for end, w in ((lo, w_lo), (hi, w_hi)):
            if _infinite(end):
                continue
            if w is None or not self.constraints.holds(w) or e.evaluate(w) != end:
                return None  # never trust an end without a witness that re-evaluates exactly
        return lo, hi, w_lo, w_hi


    def satisfiable(self, e: Expr, rel: str) -> bool | None:
        """Whether some valuation meets the constraints and ``e rel 0`` (``rel`` in ``<``, ``>``, ``>=``).

        None when ISL could not answer. "No" is ISL's proof (as "unsat" is Z3's); "yes" only
        ever costs precision if wrong, never soundness: the ladder then proves nothing.
        """
        got = _isl()
        if got is None or not self.eligible(e):
            return None
        isl, _ctx = got
        try:
            with _LOCK:
                _ctx.reset_operations()
                dom, alias, tup = self._domain(isl, _ctx, tuple(sorted(self.constraints.variables() | e.variables())))
                cond = isl.Set.read_from_str(_ctx, "{ [" + tup + "] : " + _text(e, alias) + f" {rel} 0 }}")
                return not dom.intersect(cond).is_empty()
        except isl.Error:
            return None

    def _domain(self, isl: Any, ctx: Any, names: tuple[str, ...]) -> tuple[Any, dict[str, str], str]:
        alias = {n: f"v{i}" for i, n in enumerate(names)}  # ISL-safe names for any user name
        tup = ", ".join(alias[n] for n in names)
        dom = self._domains.get(names)
        if dom is None:
            conds = [f"{alias[n]} >= 1" for n in names]
            conds += [f"{_text(p.diff, alias)} {'>=' if p.kind == '>=' else '='} 0" for p in self.parts]
            dom = isl.Set.read_from_str(ctx, "{ [" + tup + "] : " + " and ".join(conds) + " }")
            self._domains[names] = dom
        return dom, alias, tup


def _sample(isl: Any, ctx: Any, graph: Any, value: int, names: tuple[str, ...]) -> dict[str, int] | None:
    at = isl.Set.read_from_str(ctx, "{ [x] : x = " + str(value) + " }")
    pt = graph.intersect_range(at).domain().sample_point()
    if pt.is_void():
        return None
    return {n: int(str(pt.get_coordinate_val(isl.dim_type.set, i))) for i, n in enumerate(names)}


def _infinite(x: int | float) -> bool:
    return isinstance(x, float)  # ends are ints or +-inf; math.isinf(int) overflows past 1e308


def _value(v: Any) -> int | float | None:
    if v.is_nan():
        return None
    if v.is_infty():
        return math.inf
    if v.is_neginfty():
        return -math.inf
    return int(str(v))


def _text(e: Expr, alias: dict[str, str]) -> str:
    """ISL syntax for a linear ``e`` (every coefficient an integer literal, atoms parenthesised)."""
    parts = []
    for m, c in e.terms:
        if not m:
            parts.append(f"({c})")
            continue
        ((a, k),) = m
        assert k == 1, "not linear"
        parts.append(f"{c}*{_atom(a, alias)}")
    return "(" + (" + ".join(parts) if parts else "0") + ")"


def _atom(a: Var | Op, alias: dict[str, str]) -> str:
    if isinstance(a, Var):
        return alias[a.name]
    x = _text(a.lhs, alias)
    if a.op in (MAX, MIN):
        return f"{a.op}({x}, {_text(a.rhs, alias)})"
    d = a.rhs.as_constant()
    assert d, "a symbolic or zero divisor is not Presburger"
    # Python's floor division: x // d == floor(x / d) == floor(-x / -d); ISL's floor is exact
    if a.op == FLOORDIV:
        return f"floor({x}/{d})" if d > 0 else f"floor((-{x})/{-d})"
    assert a.op == MOD
    # ISL's "mod" by a positive constant is Python's %; x % d == -((-x) % -d) for d < 0.
    # (Each argument is written once: x - d*floor(x/d) would double the text per nesting level.)
    return f"({x} mod {d})" if d > 0 else f"(-((-{x}) mod {-d}))"

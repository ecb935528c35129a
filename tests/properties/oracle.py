"""Oracles that judge smtdims from the outside.

* Brute force (:class:`Grid`): every valuation of the case's variables in ``1..G``
  (G from ``strategies.grid_size``), kept when the constraints hold (a zero divisor in
  a constraint drops the point). A bound is refuted by a kept point outside it, "true"
  by a kept point where the comparison is false, and so on. Witnesses are re-checked
  exactly at any size.
* ISL (:func:`isl_bounds`, :func:`isl_decide`): exact on the Presburger fragment (linear,
  floordiv/mod by constants, max/min), by an independent route: ``isl_pw_aff``
  arithmetic, whose floor/max/min are piecewise, and ISL's integer min/max.
* JAX (:func:`jax_answers`): the answers JAX itself gets from ``_bounds_decision`` and
  symbolic comparisons for a case (with or without smtdims installed). The JAX-private
  imports stay inside that function.

The ``check_*`` functions return a list of problems (empty: consistent). Each problem is
``(kind, message)``; ``UNSOUND_KINDS`` are the ones that break smtdims' guarantee.
"""

from __future__ import annotations

import itertools
import math
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

from tests import strategies as S
from tests.strategies import Case

UNSOUND_KINDS = frozenset({
    "unsound-bound", "unsound-decision", "bad-witness", "wrong-unsat", "wrong-div0", "missed-div0",
    "jax-unsound-bound", "jax-unsound-compare", "jax-unsound-construction", "jax-wrong-unsat",
})
INEXACT_KINDS = frozenset({"inexact-bound", "inexact-decision", "not-tight", "unknown-presburger"})
CRASH_KINDS = frozenset({"crash", "jax-crash"})
# A query that ran past its deadline (plus a second of slack for the interrupt to land).
TIME_KINDS = frozenset({"past-deadline"})
DEADLINE_SLACK = 1.0

DIV0 = object()  # marks a value whose evaluation divided by zero

_OPS_PY = {
    ">=": lambda x, y: x >= y, "<=": lambda x, y: x <= y, ">": lambda x, y: x > y,
    "<": lambda x, y: x < y, "==": lambda x, y: x == y, "!=": lambda x, y: x != y,
}


def _floordiv(x: int, y: int) -> int:
    return x // y


def _mod(x: int, y: int) -> int:
    return x % y


_ENV = {"_floordiv": _floordiv, "_mod": _mod, "_max": max, "_min": min}


def compile_poly(p: tuple, names: tuple[str, ...]):
    """``f(*values)`` evaluating ``p`` exactly (ZeroDivisionError on a zero divisor)."""
    args = ", ".join(_py_name(n) for n in names)
    src = f"lambda {args}: {_py_names(S.render_python(p), names)}"
    return eval(src, dict(_ENV))  # noqa: S307 - source built from our own AST


def _py_name(n: str) -> str:
    return f"v_{n}"


def _py_names(src: str, names: tuple[str, ...]) -> str:
    # variable names may be Python keywords or shadow builtins: rename them all
    import re

    return re.sub(r"\b[A-Za-z_][A-Za-z0-9_]*\b", lambda m: _py_name(m.group(0)) if m.group(0) in names else m.group(0), src)


def evaluate(p: tuple, env: dict[str, int]) -> int:
    return S.evaluate(p, env)


def evaluate_normal(p: tuple, env: dict[str, int]) -> int:
    """``p``'s value as JAX's normal form has it: a ``mod`` by the constant 1 or -1 is 0 and a
    ``floordiv`` by it is the (negated) dividend, exact divisions (``_DimExpr._divmod``), so a term
    with such a ``mod`` vanishes whatever divides by zero in it (smtdims' normal form does the same).
    ZeroDivisionError where a division that remains divides by zero."""
    total = 0
    for c, m in p:
        if any(not isinstance(a, str) and a[0] == "mod" and S.as_constant(a[2]) in (1, -1) for a, _ in m):
            continue
        prod = c
        for a, k in m:
            if isinstance(a, str):
                v = env[a]
            elif a[0] == "floordiv" and S.as_constant(a[2]) in (1, -1):
                v = evaluate_normal(a[1], env) * S.as_constant(a[2])
            else:
                v = S._apply(a[0], evaluate_normal(a[1], env), evaluate_normal(a[2], env))
            prod *= v**k
        total += prod
    return total


def holds(case: Case, env: dict[str, int]) -> bool:
    """Constraints hold at ``env`` (all case variables present and >= 1); zero divisors fail."""
    try:
        if any(env[v] < 1 for v in case.all_vars()):
            return False
        return all(_OPS_PY[op](evaluate(l, env), evaluate(r, env)) for l, op, r in case.constraints)
    except (ZeroDivisionError, KeyError):
        return False


@dataclass
class Grid:
    """The kept valuations of a case, with the values of its expression and right-hand side."""

    case: Case
    names: tuple[str, ...]
    points: list[tuple[int, ...]] = field(default_factory=list)  # constraints hold
    values: list[Any] = field(default_factory=list)  # expr value or DIV0
    rhs_values: list[Any] = field(default_factory=list)
    size: int = 0

    @staticmethod
    def of(case: Case, size: int | None = None) -> Grid:
        names = case.all_vars()
        G = size or S.grid_size(len(names))
        cons = [(compile_poly(l, names), op, compile_poly(r, names)) for l, op, r in case.constraints]
        fe, fr = compile_poly(case.expr, names), compile_poly(case.rhs, names)
        g = Grid(case, names)
        for pt in itertools.product(range(1, G + 1), repeat=len(names)):
            g.size += 1
            try:
                if not all(_OPS_PY[op](l(*pt), r(*pt)) for l, op, r in cons):
                    continue
            except ZeroDivisionError:
                continue
            g.points.append(pt)
            g.values.append(_safe(fe, pt))
            g.rhs_values.append(_safe(fr, pt))
        return g

    def env(self, pt: tuple[int, ...]) -> dict[str, int]:
        return dict(zip(self.names, pt))

    @property
    def feasible(self) -> bool:
        return bool(self.points)

    def value_range(self) -> tuple[int, int] | None:
        vs = [v for v in self.values if v is not DIV0]
        return (min(vs), max(vs)) if vs else None

    def div0_point(self, which: str = "both") -> dict[str, int] | None:
        for pt, v, r in zip(self.points, self.values, self.rhs_values):
            if (which in ("expr", "both") and v is DIV0) or (which in ("rhs", "both") and r is DIV0):
                return self.env(pt)
        return None


def _safe(f, pt):
    try:
        return f(*pt)
    except ZeroDivisionError:
        return DIV0


def _fmt(v: Any) -> str:
    return "inf" if v == math.inf else "-inf" if v == -math.inf else str(v)


# -- brute-force checks ------------------------------------------------------------------------
def check_witness(case: Case, p: tuple, w: Any, expect: Any, what: str) -> list[tuple[str, str]]:
    """``w`` satisfies the constraints and ``p(w)`` satisfies ``expect`` (a value or a predicate)."""
    if not isinstance(w, dict):
        return [("bad-witness", f"{what}: witness {w!r} is not a valuation")]
    env = dict(w)
    missing = [v for v in case.all_vars() if v not in env]
    if missing:
        # variables the answer does not depend on may be left out: any value >= 1 will do
        env.update({v: 1 for v in missing})
    if any(not isinstance(v, int) or isinstance(v, bool) for v in env.values()):
        return [("bad-witness", f"{what}: witness {w!r} has non-integer values")]
    if not holds(case, env):
        return [("bad-witness", f"{what}: witness {w} violates the constraints (or a variable < 1)")]
    try:
        val = evaluate(p, env)
    except ZeroDivisionError:
        # A divisor that the normal form cancels (floordiv(d, c - b) * mod(x, -1) is 0 there, in
        # JAX's as in smtdims'): the witness is judged by the normal form's value; where a
        # left-out variable sits in a divisor that remains, distinct values for the left-out ones.
        try:
            val = evaluate_normal(p, env)
        except ZeroDivisionError:
            env.update({v: 2 + i for i, v in enumerate(missing)})
            try:
                if not missing or not holds(case, env):
                    raise ZeroDivisionError
                val = evaluate(p, env)
            except ZeroDivisionError:
                return [("bad-witness", f"{what}: witness {w} divides by zero")]
    ok = expect(val) if callable(expect) else val == expect
    if not ok:
        return [("bad-witness", f"{what}: witness {w} gives {val}")]
    return []


def check_bounds(case: Case, grid: Grid, b: Any) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    lo, hi = b
    for v in (lo, hi):
        if not (isinstance(v, int) and not isinstance(v, bool)) and v not in (math.inf, -math.inf):
            out.append(("crash", f"bound {v!r} is neither an int nor +-inf"))
            return out
    if (b.lo, b.hi) != (lo, hi):
        out.append(("crash", "Bounds fields disagree with the tuple"))
    for pt, v in zip(grid.points, grid.values):
        if v is DIV0:
            continue
        if v < lo or v > hi:
            out.append(("unsound-bound", f"bounds [{_fmt(lo)}, {_fmt(hi)}] exclude {v} at {grid.env(pt)}"))
            break
    for end, val, tight, w in (("lo", lo, b.lo_tight, b.lo_witness), ("hi", hi, b.hi_tight, b.hi_witness)):
        if tight and not math.isinf(val):
            out += check_witness(case, case.expr, w, val, f"{end} = {val} claimed tight")
        elif w is not None and not math.isinf(val):
            out += check_witness(case, case.expr, w, val, f"{end} = {val} witness")
    return out


def relation(op: str, x: int, y: int) -> bool:
    return _OPS_PY[op](x, y)


def check_decision(case: Case, grid: Grid, d: Any) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    q = f"{case.expr_text} {case.op} {case.rhs_text}"
    if d.status not in ("true", "false", "undetermined", "unknown"):
        return [("crash", f"status {d.status!r}")]
    expected_value = {"true": True, "false": False}.get(d.status)
    if d.value is not expected_value:
        out.append(("crash", f"value {d.value!r} does not match status {d.status!r}"))
    if d.status in ("true", "false"):
        want = d.status == "true"
        for pt, v, r in zip(grid.points, grid.values, grid.rhs_values):
            if v is DIV0 or r is DIV0:
                continue
            if relation(case.op, v, r) != want:
                out.append(("unsound-decision", f"{q} answered {d.status}, but at {grid.env(pt)}: {v} vs {r}"))
                break
    diff = S.add(case.expr, S.scale(case.rhs, -1))
    if d.status == "undetermined":
        out += check_witness(case, diff, d.witness_true, lambda v: relation(case.op, v, 0), "witness_true")
        out += check_witness(case, diff, d.witness_false, lambda v: not relation(case.op, v, 0), "witness_false")
    return out


def normalized_div0(text: str, grid: Grid) -> dict[str, int] | None:
    """A kept grid point where smtdims' own normal form of ``text`` divides by zero.

    Used only to classify: an expression whose zero divisor cancels out in normal form
    (``floordiv(a, b - 1) - floordiv(a, b - 1)``) is not required to raise.
    """
    from smtdims import parse_expr

    e = parse_expr(text)
    for pt in grid.points:
        try:
            e.evaluate(grid.env(pt))
        except ZeroDivisionError:
            return grid.env(pt)
        except KeyError:
            return None
    return None


def check_exception(case: Case, grid: Grid, exc: BaseException, parts: tuple[tuple, ...]) -> list[tuple[str, str]]:
    """Is raising ``exc`` for a query over ``parts`` (polys) justified?"""
    from smtdims.errors import PossibleDivisionByZeroError, UnsatisfiableConstraintsError

    if isinstance(exc, UnsatisfiableConstraintsError):
        if grid.feasible:
            return [("wrong-unsat", f"UnsatisfiableConstraintsError, but {grid.env(grid.points[0])} meets the constraints")]
        return []
    if isinstance(exc, PossibleDivisionByZeroError):
        w = exc.witness
        if w is not None:
            env = {**{v: 1 for v in case.all_vars()}, **w}
            if not holds(case, env):
                return [("wrong-div0", f"division-by-zero witness {w} violates the constraints")]
            for p in parts:
                try:
                    evaluate(p, env)
                except ZeroDivisionError:
                    return []
            return [("wrong-div0", f"no divisor is 0 at the division-by-zero witness {w}")]
        for pt, v, r in zip(grid.points, grid.values, grid.rhs_values):
            if v is DIV0 or (len(parts) > 1 and r is DIV0):
                return []
        return [("div0-unverified", "PossibleDivisionByZeroError without a witness, and none in the grid")]
    return [("crash", f"{type(exc).__name__}: {exc}")]


def check_no_div0(case: Case, grid: Grid, texts: tuple[str, ...]) -> list[tuple[str, str]]:
    for t in texts:
        w = normalized_div0(t, grid)
        if w is not None:
            return [("missed-div0", f"answered although a divisor of {t!r} is 0 at {w}")]
    return []


# -- ISL: exact on the Presburger fragment ----------------------------------------------------------
class _Isl:
    def __init__(self, names: tuple[str, ...]):
        import islpy as isl

        self.isl = isl
        space = isl.Space.set_alloc(isl.DEFAULT_CONTEXT, 0, len(names))
        for i, n in enumerate(names):
            space = space.set_dim_name(isl.dim_type.set, i, n)
        self.universe = isl.Set.universe(space)
        ls = isl.LocalSpace.from_space(space)
        self.vars = {n: isl.PwAff.var_on_domain(ls, isl.dim_type.set, i) for i, n in enumerate(names)}

    def val(self, n: int):
        return self.isl.Val(str(n))

    def const(self, n: int):
        return self.isl.PwAff.val_on_domain(self.universe, self.val(n))

    def poly(self, p: tuple):
        total = self.const(0)
        for c, m in p:
            if not m:
                total = total.add(self.const(c))
                continue
            if len(m) != 1 or m[0][1] != 1:
                raise ValueError("not in the Presburger fragment")
            total = total.add(self.atom(m[0][0]).scale_val(self.val(c)))
        return total

    def atom(self, a: Any):
        if isinstance(a, str):
            return self.vars[a]
        op, x, y = a
        px = self.poly(x)
        if op in ("max", "min"):
            py = self.poly(y)
            return px.max(py) if op == "max" else px.min(py)
        d = S.as_constant(y)
        if not d:
            raise ValueError("symbolic or zero divisor: not in the Presburger fragment")
        # floor(x / d) == floor((-x) / (-d)): divide by |d|, ISL's floor is exact
        q = (px if d > 0 else px.neg()).scale_down_val(self.val(abs(d))).floor()
        return q if op == "floordiv" else px.sub(q.scale_val(self.val(d)))

    def domain(self, case: Case):
        dom = self.universe
        one = self.const(1)
        for v in self.vars.values():
            dom = dom.intersect(v.ge_set(one))
        for l, op, r in case.constraints:
            pl, pr = self.poly(l), self.poly(r)
            dom = dom.intersect(pl.ge_set(pr) if op == ">=" else pl.le_set(pr) if op == "<=" else pl.eq_set(pr))
        return dom

    @staticmethod
    def to_py(v) -> int | float | None:
        if v.is_nan():
            return None
        if v.is_infty():
            return math.inf
        if v.is_neginfty():
            return -math.inf
        return int(str(v))


def isl_bounds(case: Case, p: tuple | None = None) -> tuple[int | float, int | float] | None:
    """Exact (min, max) of ``p`` (default: the case's expression); None if the constraints are unsatisfiable."""
    I = _Isl(case.all_vars())
    dom = I.domain(case)
    if dom.is_empty():
        return None
    e = I.poly(case.expr if p is None else p)
    # The values taken, as a 1-d set; optimise the identity over it. (pw_aff min_val refuses
    # pieces whose affine expression became rational after ISL used an equality.)
    values = I.isl.Map.from_pw_aff(e).intersect_domain(dom).range()
    obj = I.isl.Aff.var_on_domain(I.isl.LocalSpace.from_space(values.get_space()), I.isl.dim_type.set, 0)
    # Per basic set, skipping empty ones: isl_set_max_val answers 0 on a set with an empty
    # disjunct such as { [i] : i mod 46 = 0 and i <= -46; [i] : false } (seen with islpy 2026.2).
    los, his = [], []
    for bs in values.coalesce().get_basic_sets():
        if bs.is_empty():
            continue
        one = I.isl.Set.from_basic_set(bs)
        los.append(I.to_py(one.min_val(obj)))
        his.append(I.to_py(one.max_val(obj)))
    assert los and None not in los and None not in his, (case.describe(), values)
    return min(los), max(his)


def isl_decide(case: Case) -> str | None:
    """Exact status of ``expr op rhs`` over all valuations; None if the constraints are unsatisfiable."""
    I = _Isl(case.all_vars())
    dom = I.domain(case)
    if dom.is_empty():
        return None
    e, r = I.poly(case.expr), I.poly(case.rhs)
    rel = {
        ">=": e.ge_set, "<=": e.le_set, ">": e.gt_set, "<": e.lt_set, "==": e.eq_set, "!=": e.ne_set,
    }[case.op](r)
    some_true = not dom.intersect(rel).is_empty()
    some_false = not dom.subtract(rel).is_empty()
    return "undetermined" if some_true and some_false else "true" if some_true else "false"


def check_exact_bounds(case: Case, b: Any) -> list[tuple[str, str]]:
    exact = isl_bounds(case)
    if exact is None:
        return [("wrong-unsat", "ISL says the constraints are unsatisfiable, smtdims answered")]
    out = []
    if (b.lo, b.hi) != exact:
        kind = "unsound-bound" if (b.lo > exact[0] or b.hi < exact[1]) else "inexact-bound"
        out.append((kind, f"bounds [{_fmt(b.lo)}, {_fmt(b.hi)}], ISL: [{_fmt(exact[0])}, {_fmt(exact[1])}]"))
    elif not (b.lo_tight and b.hi_tight):
        out.append(("not-tight", f"bounds [{_fmt(b.lo)}, {_fmt(b.hi)}] are exact but not marked tight"))
    return out


def check_exact_decision(case: Case, d: Any) -> list[tuple[str, str]]:
    exact = isl_decide(case)
    if exact is None:
        return [("wrong-unsat", "ISL says the constraints are unsatisfiable, smtdims answered")]
    if d.status == exact:
        return []
    if d.status == "unknown":
        return [("unknown-presburger", f"'unknown' on a Presburger question; ISL: {exact}")]
    if d.status in ("true", "false"):
        return [("unsound-decision", f"{d.status}, ISL: {exact}")]
    return [("inexact-decision", f"{d.status}, ISL: {exact}")]


# -- running smtdims on a case ---------------------------------------------------------------------------
@dataclass
class Outcome:
    queries: int = 0
    problems: list[tuple[str, str, str]] = field(default_factory=list)  # (query, kind, message)
    exact_checked: int = 0
    exact_ok: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)  # query -> its wall time

    def timed(self, query: str, started: float) -> None:
        self.seconds[query] = time.monotonic() - started

    def check_deadline(self) -> None:
        """Every query must answer within the deadline in force (the backstop that stops Z3)."""
        from smtdims import options

        limit = options.current().deadline + DEADLINE_SLACK
        for q, dt in self.seconds.items():
            if dt > limit:
                self.add(q, [("past-deadline", f"{dt:.1f} s, deadline {options.current().deadline:g} s")])

    def add(self, query: str, problems: list[tuple[str, str]]) -> None:
        self.problems += [(query, k, m) for k, m in problems]

    def count(self, key: str) -> None:
        self.statuses[key] = self.statuses.get(key, 0) + 1

    @property
    def unsound(self) -> list[tuple[str, str, str]]:
        return [p for p in self.problems if p[1] in UNSOUND_KINDS | CRASH_KINDS]


def run_smtdims(case: Case, grid: Grid | None = None, *, budget: int | None = None,
                exact: bool = True, jax: bool = False) -> Outcome:
    """Ask smtdims ``bounds`` and ``decide`` for the case (in a fresh session) and judge the answers."""
    from smtdims.errors import PossibleDivisionByZeroError, UnsatisfiableConstraintsError
    from smtdims.lang.constraints import ConstraintSet
    from smtdims.lang.parser import parse_expr
    from smtdims.reasoner import Session

    grid = grid or Grid.of(case)
    out = Outcome()
    if budget is None:
        from smtdims import DEFAULT_BUDGET

        budget = DEFAULT_BUDGET  # explicit: install(budget=...) changes the process-wide default
    presburger = exact and case.presburger
    try:
        cs = ConstraintSet.of(case.constraint_texts)
        e, r = parse_expr(case.expr_text), parse_expr(case.rhs_text)
    except Exception as err:  # our texts are well-formed: any error here is a bug
        out.add("parse", [("crash", f"{type(err).__name__}: {err}")])
        return out
    session = Session(cs, budget=budget)

    out.queries += 1
    started = time.monotonic()
    try:
        b = session.bounds(e)
    except (UnsatisfiableConstraintsError, PossibleDivisionByZeroError) as err:
        out.count(type(err).__name__)
        out.add("bounds", check_exception(case, grid, err, (case.expr,)))
        if presburger and isinstance(err, UnsatisfiableConstraintsError):
            out.exact_checked += 1
            out.exact_ok += isl_bounds(case) is None
            if isl_bounds(case) is not None:
                out.add("bounds", [("wrong-unsat", "ISL finds the constraints satisfiable")])
    except Exception as err:
        out.add("bounds", [("crash", f"{type(err).__name__}: {err}")])
    else:
        out.timed("bounds", started)
        out.count("bounds-tight" if b.lo_tight and b.hi_tight else "bounds-loose")
        out.add("bounds", check_bounds(case, grid, b) + check_no_div0(case, grid, (case.expr_text,)))
        if presburger:
            probs = check_exact_bounds(case, b)
            out.exact_checked += 1
            out.exact_ok += not probs
            out.add("bounds", probs)

    out.queries += 1
    started = time.monotonic()
    try:
        d = session.decide(e, case.op, r)
    except (UnsatisfiableConstraintsError, PossibleDivisionByZeroError) as err:
        out.count(type(err).__name__)
        out.add("decide", check_exception(case, grid, err, (case.expr, case.rhs)))
    except Exception as err:
        out.add("decide", [("crash", f"{type(err).__name__}: {err}")])
    else:
        out.timed("decide", started)
        out.count(f"decide-{d.status}")
        out.add("decide", check_decision(case, grid, d) + check_no_div0(case, grid, (case.expr_text, case.rhs_text)))
        if presburger:
            probs = check_exact_decision(case, d)
            out.exact_checked += 1
            out.exact_ok += not probs
            out.add("decide", probs)

    if jax:
        ja = jax_answers(case)
        out.queries += ja.queries
        out.add("jax", check_jax(case, grid, ja))
        out.seconds.update({f"jax {q}": dt for q, dt in ja.seconds.items()})
    out.check_deadline()
    return out


# -- JAX: the answers jax.export gets -----------------------------------------------------------------------
@dataclass
class JaxAnswers:
    """What JAX computed for a case; ``error`` set when JAX refused the case itself."""

    error: str | None = None
    stock_error: str | None = None  # the same case under stock JAX, when ``error`` is a crash
    warnings: list[str] = field(default_factory=list)
    stock: Any = None  # stock JAX's answers to the same case, when some answer here is an error
    expr: Any = None
    rhs: Any = None
    bounds: dict[str, Any] = field(default_factory=dict)  # precision name -> (lo, hi) or exception
    compares: dict[str, Any] = field(default_factory=dict)  # op -> bool or exception
    max_min: dict[str, Any] = field(default_factory=dict)  # "max"/"min" -> expression or exception
    queries: int = 0
    seconds: dict[str, float] = field(default_factory=dict)  # question -> its wall time


def jax_eval(e: Any, env: dict[str, int]) -> int:
    """Exact value of a JAX dimension (``_DimExpr`` or int), by our own walk of its structure."""
    if not hasattr(e, "_sorted_terms"):
        return int(e)
    total = 0
    for term, coeff in e._sorted_terms:
        prod = coeff
        for f, k in term._factors:
            if f.var is not None:
                v = env[f.var]
            else:
                x, y = (jax_eval(o, env) for o in f.operands)
                v = S._apply(f.operation, x, y)
            prod *= v**k
        total += prod
    return total


def jax_answers(case: Case, *, with_max_min: bool = True) -> JaxAnswers:
    """Build the case in a fresh ``SymbolicScope`` and collect JAX's answers (whatever is installed)."""
    from jax import export
    from jax._src import core  # JAX-private: tests only
    from jax._src.export import shape_poly as sp  # JAX-private: tests only

    ans = JaxAnswers()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _jax_answers(case, ans, with_max_min, export, core, sp)
    ans.warnings = [_clip(str(w.message)) for w in caught]
    if ans.error is not None and ans.error.startswith("CRASH"):
        ans.stock_error = _under_stock(lambda: _build_error(case, export, core))
    elif _non_refusals(ans) and _installed():
        # is it smtdims' doing? ask stock JAX the same questions
        ans.stock = _under_stock(lambda: jax_answers(case, with_max_min=with_max_min))
    return ans


def _clip(text: str, head: int = 160, tail: int = 240) -> str:
    return text if len(text) <= head + tail else f"{text[:head]} ... {text[-tail:]}"


def _installed() -> bool:
    try:
        import smtdims_jax
    except ImportError:  # pragma: no cover
        return False
    return smtdims_jax.is_installed()


def _non_refusals(ans: JaxAnswers) -> list[str]:
    out = []
    for group in (ans.bounds, ans.compares, ans.max_min):
        for k, v in group.items():
            if isinstance(v, BaseException) and not _is_refusal(v):
                out.append(k)
    return out


def _build_error(case: Case, export, core) -> str | None:
    ans = JaxAnswers()
    _jax_answers(case, ans, False, export, core, None, build_only=True)
    return ans.error


def _under_stock(fn):
    """Run ``fn`` with smtdims uninstalled, restoring the installation afterwards."""
    try:
        import smtdims_jax
    except ImportError:  # pragma: no cover
        return fn()
    with smtdims_jax.stock_jax():
        return fn()


def _jax_answers(case: Case, ans: JaxAnswers, with_max_min: bool, export, core, sp, build_only: bool = False) -> None:
    try:
        scope = export.SymbolicScope(case.constraint_texts)
        (ans.expr,) = export.symbolic_shape(case.expr_text, scope=scope)
        (ans.rhs,) = export.symbolic_shape(case.rhs_text, scope=scope)
    except (ValueError, OverflowError, core.InconclusiveDimensionOperation) as err:
        ans.error = f"{type(err).__name__}: {str(err)[:200]}"
        return
    except Exception as err:
        ans.error = f"CRASH {type(err).__name__}: {str(err)[:200]}"
        return
    if build_only:
        return
    e, r = ans.expr, ans.rhs
    if isinstance(e, sp._DimExpr):
        for prec in sp.BoundsPrecision:
            ans.queries += 1
            t = time.monotonic()
            try:
                ans.bounds[prec.name] = sp._bounds_decision(e, prec)
            except Exception as err:
                ans.bounds[prec.name] = err
            ans.seconds[f"bounds {prec.name}"] = time.monotonic() - t
    for op in (">=", ">", "<=", "<"):
        ans.queries += 1
        t = time.monotonic()
        try:
            ans.compares[op] = bool(_OPS_PY[op](e, r))
        except Exception as err:
            ans.compares[op] = err
        ans.seconds[f"compare {op}"] = time.monotonic() - t
    if with_max_min:
        for name, fn in (("max", core.max_dim), ("min", core.min_dim)):
            ans.queries += 1
            t = time.monotonic()
            try:
                ans.max_min[name] = fn(e, r)
            except Exception as err:
                ans.max_min[name] = err
            ans.seconds[name] = time.monotonic() - t


def _is_refusal(err: BaseException) -> bool:
    """Errors by which JAX declines to answer (never a wrong answer in itself)."""
    from jax._src import core

    if isinstance(err, core.InconclusiveDimensionOperation):
        return True
    # JAX's own constraint processing rejects unsatisfiable constraints (checked against the grid)
    return _is_unsat_error(err)


def _is_unsat_error(err: BaseException) -> bool:
    from smtdims.errors import UnsatisfiableConstraintsError

    return isinstance(err, UnsatisfiableConstraintsError) or (
        isinstance(err, ValueError) and "nsatisfiable constraint" in str(err))


def _crash_kind(ja: JaxAnswers, group: str, key: str, err: BaseException, grid: Grid, prefix: str) -> tuple[str, str]:
    if _is_unsat_error(err):
        if grid.feasible:
            return (f"{prefix}-wrong-unsat", f"{key}: {err}, but {grid.env(grid.points[0])} meets the constraints")
        return ("", "")
    if ja.stock is not None:
        same = getattr(ja.stock, group, {}).get(key)
        if isinstance(same, BaseException) and type(same) is type(err):
            return ("stock-crash", f"{key} (stock JAX fails the same way): {type(err).__name__}: {err}")
    return (f"{prefix}-crash", f"{key}: {type(err).__name__}: {err}")


def check_jax(case: Case, grid: Grid, ja: JaxAnswers, *, unsound_prefix: str = "jax") -> list[tuple[str, str]]:
    """Soundness of every answer in ``ja`` on the grid. Values at points with a zero divisor are skipped."""
    out: list[tuple[str, str]] = []
    if ja.error is not None:
        if ja.error.startswith("CRASH"):
            if ja.stock_error is not None and ja.stock_error.split(":")[0] == ja.error.split(":")[0]:
                out.append(("stock-crash", f"building the case (stock JAX fails the same way): {ja.error}"))
            else:
                out.append((f"{unsound_prefix}-crash", f"building the case: {ja.error}"))
        return out
    for w in ja.warnings:
        if "smtdims" in w:
            out.append((f"{unsound_prefix}-warning", w))
    # the expressions JAX built must mean what the text says, at every kept point
    for name, je, vals in (("expr", ja.expr, grid.values), ("rhs", ja.rhs, grid.rhs_values)):
        for pt, v in zip(grid.points, vals):
            if v is DIV0:
                continue
            try:
                jv = jax_eval(je, grid.env(pt))
            except ZeroDivisionError:
                continue
            if jv != v:
                out.append((f"{unsound_prefix}-unsound-construction",
                            f"JAX built {name} = {je} which is {jv} at {grid.env(pt)}, the text gives {v}"))
                break
    for prec, res in ja.bounds.items():
        if isinstance(res, BaseException):
            if not isinstance(res, _inconclusive()):
                out.append(_crash_kind(ja, "bounds", prec, res, grid, unsound_prefix))
            continue
        lo, hi = res
        for pt, v in zip(grid.points, grid.values):
            if v is not DIV0 and not (lo <= v <= hi):
                out.append((f"{unsound_prefix}-unsound-bound",
                            f"_bounds_decision({prec}) = ({_fmt(lo)}, {_fmt(hi)}) excludes {v} at {grid.env(pt)}"))
                break
    for op, res in ja.compares.items():
        if isinstance(res, BaseException):
            if not isinstance(res, _inconclusive()):
                out.append(_crash_kind(ja, "compares", op, res, grid, unsound_prefix))
            continue
        for pt, v, r in zip(grid.points, grid.values, grid.rhs_values):
            if v is DIV0 or r is DIV0:
                continue
            if _OPS_PY[op](v, r) != res:
                out.append((f"{unsound_prefix}-unsound-compare",
                            f"{case.expr_text} {op} {case.rhs_text} answered {res}, false at {grid.env(pt)}: {v} vs {r}"))
                break
    for name, res in ja.max_min.items():
        if isinstance(res, BaseException):
            if not isinstance(res, _inconclusive()):
                out.append(_crash_kind(ja, "max_min", name, res, grid, unsound_prefix))
            continue
        fn = max if name == "max" else min
        for pt, v, r in zip(grid.points, grid.values, grid.rhs_values):
            if v is DIV0 or r is DIV0:
                continue
            try:
                jv = jax_eval(res, grid.env(pt))
            except ZeroDivisionError:
                continue
            if jv != fn(v, r):
                out.append((f"{unsound_prefix}-unsound-construction",
                            f"{name}_dim gave {res} = {jv} at {grid.env(pt)}, the truth is {fn(v, r)}"))
                break
    return [p for p in out if p[0]]


def _inconclusive():
    from jax._src import core

    return core.InconclusiveDimensionOperation

"""Query corpora for the benchmarks, generated deterministically (seeded), plus an islpy oracle.

* :func:`stock_decided_corpus`: comparisons / ``max`` / ``min`` drawn from the shape
  arithmetic real models do (conv and pool output sizes, SAME padding, reshapes,
  slicing, floordiv/mod by constants, constrained scopes) that stock JAX decides.
* :func:`hard_corpus`: Presburger comparisons stock JAX cannot settle and bounds it
  answers loosely, with the exact answer from islpy as ground truth.
* :func:`presburger_bound_queries`: (expression, constraints) strings for smtdims vs islpy.
* :func:`scale_scope`: a satisfiable scope with n variables and m constraints.

Expressions are built while stock JAX is installed, so construction never runs smtdims.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from ._common import mode

# -- JAX helpers -----------------------------------------------------------------------------------


def jax_bits():
    from jax import export
    from jax._src import core
    from jax._src.export import shape_poly as sp

    return export, core, sp


@dataclass
class Query:
    kind: str  # "ge" | "max" | "min" | "eq" | "bounds"
    lhs: Any
    rhs: Any
    scope_id: int
    text: str
    truth: str | None = None  # hard corpus: "true" | "false" | "undetermined" | "exact"
    exact: tuple | None = None  # exact (lo, hi) of lhs - rhs (or of lhs for "bounds")
    stock: tuple | None = None  # stock's (lo, hi) at the precision the query needs


@dataclass
class Corpus:
    scopes: list[Any]
    queries: list[Query]
    info: dict[str, Any] = field(default_factory=dict)

    def by_kind(self) -> dict[str, list[Query]]:
        out: dict[str, list[Query]] = {}
        for q in self.queries:
            out.setdefault(q.kind, []).append(q)
        return out


def run_query(q: Query, sp: Any, core: Any) -> Any:
    """The operation JAX itself performs for this kind of query."""
    if q.kind == "ge":
        return q.lhs >= q.rhs
    if q.kind == "max":
        return core.max_dim(q.lhs, q.rhs)
    if q.kind == "min":
        return core.min_dim(q.lhs, q.rhs)
    if q.kind == "eq":
        return q.lhs == q.rhs
    if q.kind == "bounds":
        return sp._bounds_decision(q.lhs, sp.BoundsPrecision.BEST)
    raise ValueError(q.kind)


# -- corpus 1: stock-decided ------------------------------------------------------------------------
# (shape spec, constraints): image, sequence and seed-tutorial scopes.
STOCK_SCOPES: list[tuple[str, tuple[str, ...]]] = [
    ("b, h, w, c", ()),
    ("b, h, w, c", ("h >= 16", "w >= 16", "h <= 2048")),
    ("b, s, d", ()),
    ("b, s, d", ("s >= 8", "s <= 4096", "d >= 64", "b <= 1024")),
    ("a, b", ("a >= b", "b >= 16")),
    ("batch, free", ("batch >= 128", "batch <= 1024")),
    ("b, t", ("t >= 2*b", "b >= 1")),
]


def _derived(dims: list[Any], core: Any, rng: random.Random) -> list[tuple[str, Any, Any]]:
    """(description, expression, source dimension) for shape arithmetic over ``dims``."""
    out: list[tuple[str, Any, Any]] = []
    for x in dims:
        out.append(("dim", x, x))
        for k in (1, 2, 3, 5, 7):
            for s in (1, 2, 4):
                out.append((f"valid_conv k{k} s{s}", (x - k) // s + 1, x))
                same = (x + s - 1) // s
                out.append((f"same_conv s{s}", same, x))
                pad = core.max_dim((same - 1) * s + k - x, 0)
                out.append((f"same_pad k{k} s{s}", pad, x))
                out.append((f"same_pad_lo k{k} s{s}", pad // 2, x))
        for p in (2, 3, 4):
            out.append((f"pool{p}", (x - p) // p + 1, x))
            out.append((f"floordiv{p}", x // p, x))
            out.append((f"mod{p}", x % p, x))
            out.append((f"ceil_div{p}", -((-x) // p), x))
            out.append((f"pad_to{p}", x + (-x) % p, x))
        for start in (1, 2, 4):
            out.append((f"slice_from{start}", x - start, x))
            out.append((f"strided_slice{start + 1}", (x - 1) // (start + 1) + 1, x))
            out.append((f"padded{start}", x + 2 * start, x))
        out.append(("half_window", x // 2 + 1, x))
        out.append(("double", 2 * x, x))
    for i, x in enumerate(dims):
        for y in dims[i + 1:]:
            out.append(("reshape_flatten", x * y, x))
            out.append(("concat", x + y, x))
            out.append(("reshape_split", (x * y) // 2, x))
    rng.shuffle(out)
    return out


def _stock_decides(q: Query, sp: Any) -> tuple | None:
    """Stock's (lo, hi) when it settles the query at the precision JAX asks for, else None."""
    prec = sp.BoundsPrecision.FOR_GEQ0_OR_LT0 if q.kind == "ge" else sp.BoundsPrecision.FOR_GEQ0_OR_LEQ0
    try:
        lo, hi = sp._bounds_decision(q.lhs - q.rhs, prec)
    except Exception:
        return None
    return (lo, hi) if prec._bounds_are_sufficient(lo, hi) else None


def stock_decided_corpus(n_queries: int = 3000, seed: int = 0, n_eq: int = 0) -> Corpus:
    """``n_queries`` ge/max/min queries stock JAX decides; plus ``n_eq`` ``==`` of distinct dims."""
    export, core, sp = jax_bits()
    rng = random.Random(seed)
    scopes, cands, eqs = [], [], []
    with mode("stock"):
        for sid, (spec, constraints) in enumerate(STOCK_SCOPES):
            dims = list(export.symbolic_shape(spec, constraints=constraints))
            scope = dims[0].scope
            scopes.append(scope)
            derived = _derived(dims, core, rng)
            consts = (0, 1, 2, 3, 8, 16, 64)
            for desc, e, src in derived:
                if core.is_constant_dim(e):
                    continue
                partners: list[tuple[str, Any]] = [(str(c), c) for c in rng.sample(consts, 3)]
                partners.append((str(src), src))
                partners += [(f"{d2}", e2) for d2, e2, _ in rng.sample(derived, 3)]
                for _pdesc, p in partners:
                    kind = rng.choice(("ge", "ge", "max", "min"))
                    q = Query(kind, e, p, sid, f"[{desc}] {kind}({e}, {p})")
                    cands.append(q)
                    if len(eqs) < 8 * n_eq and not core.is_constant_dim(p) and str(p) != str(e):
                        eqs.append(Query("eq", e, p, sid, f"{e} == {p}"))
        decided = []
        seen = set()
        rng.shuffle(cands)
        for q in cands:
            if len(decided) >= n_queries:
                break
            key = (q.scope_id, q.kind, str(q.lhs), str(q.rhs))
            if key in seen:
                continue
            seen.add(key)
            st = _stock_decides(q, sp)
            if st is not None:
                q.stock = st
                decided.append(q)
    for s in scopes:  # the filtering warmed stock's caches: start cold
        s._bounds_cache.clear()
        s._decision_initial_state = None
    queries = decided
    queries.sort(key=lambda q: q.scope_id)  # real traces ask many questions of one scope in a row
    eq_queries = rng.sample(eqs, min(n_eq, len(eqs))) if n_eq else []
    eq_queries.sort(key=lambda q: q.scope_id)
    kinds: dict[str, int] = {}
    for q in queries + eq_queries:
        kinds[q.kind] = kinds.get(q.kind, 0) + 1
    return Corpus(scopes, queries + eq_queries, {"candidates": len(seen), "stock_decided": len(decided),
                                                 "kinds": kinds, "scopes": len(scopes)})


# -- islpy oracle ----------------------------------------------------------------------------------
class NotPresburger(ValueError):
    pass


def isl_text(e: Any) -> str:
    """ISL syntax for a smtdims IR expression in the Presburger fragment."""
    from smtdims.lang.expr import FLOORDIV, MAX, MOD, Op, Var

    parts = []
    for m, c in e.terms:
        if not m:
            parts.append(f"{c}")
            continue
        if len(m) != 1 or m[0][1] != 1:
            raise NotPresburger(str(e))
        a = m[0][0]
        if isinstance(a, Var):
            body = a.name
        else:
            assert isinstance(a, Op)
            x = isl_text(a.lhs)
            if a.op in (FLOORDIV, MOD):
                d = a.rhs.as_constant()
                if d is None or d == 0:
                    raise NotPresburger(str(e))
                if a.op == FLOORDIV:
                    body = f"floor(({x})/{d})" if d > 0 else f"floor((-1*({x}))/{-d})"
                else:
                    body = f"(({x}) mod {d})" if d > 0 else f"-1*((-1*({x})) mod {-d})"
            else:
                y = isl_text(a.rhs)
                body = f"{'max' if a.op == MAX else 'min'}({x}, {y})"
        parts.append(f"{c}*({body})")
    return " + ".join(parts) if parts else "0"


def _isl_graph(expr: Any, constraints: Any) -> tuple[Any, list[str]]:
    """islpy's set of ``[variables..., y_]`` with the constraints and ``y_ = expr``, and the names."""
    import islpy as isl

    names = sorted(expr.variables() | constraints.variables())
    conds = [f"{n} >= 1" for n in names]
    for c in constraints:
        conds.append(f"{isl_text(c.diff)} {'>=' if c.kind == '>=' else '='} 0")
    conds.append(f"y_ = {isl_text(expr)}")
    return isl.Set("{ [" + ", ".join([*names, "y_"]) + "] : " + " and ".join(conds) + " }"), names


def isl_bounds(expr: Any, constraints: Any) -> tuple:
    """Exact (lo, hi) of a Presburger IR expression under a smtdims ConstraintSet, by islpy."""
    import islpy as isl

    full, names = _isl_graph(expr, constraints)
    s = full.project_out(isl.dim_type.set, 0, len(names))
    return _val(s.dim_min_val(0)), _val(s.dim_max_val(0))


def isl_bounds_with_witnesses(expr: Any, constraints: Any) -> tuple:
    """:func:`isl_bounds` and, for each finite end, a valuation attaining it (ISL's sample point):
    the same work as smtdims' answer, which carries a witness of each tight end."""
    import islpy as isl

    full, names = _isl_graph(expr, constraints)
    values = full.project_out(isl.dim_type.set, 0, len(names))
    ends = _val(values.dim_min_val(0)), _val(values.dim_max_val(0))
    witnesses = []
    for end in ends:
        if isinstance(end, int):
            pt = full.fix_val(isl.dim_type.set, len(names), isl.Val(str(end))).sample_point()
            witnesses.append({n: int(pt.get_coordinate_val(isl.dim_type.set, i).to_python())
                              for i, n in enumerate(names)})
        else:
            witnesses.append(None)
    return ends, witnesses


def _val(v: Any) -> float | int:
    if v.is_infty():
        return float("inf")
    if v.is_neginfty():
        return float("-inf")
    if v.is_nan():
        return float("nan")
    return int(v.to_python())


# -- corpus 2: stock-inconclusive or loose ------------------------------------------------------------
HARD_SCOPES: list[tuple[str, tuple[str, ...]]] = [
    ("a, b, c", ()),
    ("a, b, c", ("a >= b", "b >= c")),
    ("a, b, c", ("a - b >= 8", "c <= 64")),
    ("a, b, c", ("a + b <= 100", "c >= 2*a")),
    ("a, b, c", ("a >= 16", "b >= 8", "mod(c, 4) == 0")),
]


def _lin(rng: random.Random, names: list[str], allow_neg: bool = False) -> str:
    k = rng.randint(1, 2)
    terms = []
    for n in rng.sample(names, k):
        coef = rng.choice((1, 1, 2, 3)) * (rng.choice((1, -1)) if allow_neg else 1)
        terms.append(f"{coef}*{n}" if coef != 1 else n)
    off = rng.randint(0, 5)
    return " + ".join(terms) + (f" + {off}" if off else "")


def _hard_pair(rng: random.Random, names: list[str]) -> tuple[str, str]:
    """(lhs, rhs) of a comparison built around floordiv/mod/max/min identities."""
    x, y = _lin(rng, names), _lin(rng, names)
    k, k2 = rng.randint(2, 9), rng.randint(2, 5)
    t = rng.randrange(14)
    pairs = [
        (x, f"mod({x}, {k})"),  # true: x >= 0
        (f"{k}*floordiv({x}, {k}) + mod({x}, {k})", x),  # true (equality)
        (x, f"{k}*floordiv({x}, {k})"),  # true
        (f"max({x}, {y})", f"floordiv({x} + {y}, 2)"),  # true
        (f"floordiv({x} + {y}, 2)", f"min({x}, {y})"),  # true
        (f"{k}*floordiv({x} + {k - 1}, {k})", x),  # true (ceil)
        (f"mod({x}, {k}) + mod({y}, {k})", f"mod({x} + {y}, {k})"),  # true
        (f"floordiv(floordiv({x}, {k}), {k2})", f"floordiv({x}, {k * k2})"),  # true (equality)
        (f"mod({x}, {k})", f"{k}"),  # false
        (f"floordiv({x}, {k})", f"{x} + 1"),  # false
        (f"min({x}, {y}) + max({x}, {y})", f"{x} + {y}"),  # true (equality)
        (x, y),  # usually undetermined
        (f"floordiv({x}, {k})", f"floordiv({y}, {k})"),  # depends on the scope
        (f"mod({x}, {k})", f"mod({y}, {k2})"),  # usually undetermined
    ]
    return pairs[t]


def _hard_bound_expr(rng: random.Random, names: list[str]) -> str:
    x, y = _lin(rng, names), _lin(rng, names)
    k = rng.randint(2, 9)
    return rng.choice([
        f"mod({x}, {k}) + floordiv({x}, {k})",
        f"{x} - {k}*floordiv({x}, {k})",
        f"max({x}, {y}) - min({x}, {y})",
        f"min({x}, {y}) - floordiv({x}, {k})",
        f"mod({x}, {k}) - mod({y}, {k})",
        f"floordiv({x} + {y}, {k}) - floordiv({x}, {k})",
    ])


def hard_corpus(n_queries: int = 300, seed: int = 1, loose_share: float = 0.25) -> Corpus:
    """Comparisons stock JAX cannot settle, and BEST-bounds queries it answers loosely.

    Each query carries islpy's exact answer: ``truth`` is true/false/undetermined for a
    comparison and "exact" for a bounds query (``exact`` holds the tight bounds).
    """
    from smtdims_jax.conversion import scope_constraints, to_ir

    export, core, sp = jax_bits()
    rng = random.Random(seed)
    scopes, scope_names = [], []
    with mode("stock"):
        for spec, constraints in HARD_SCOPES:
            dims = list(export.symbolic_shape(spec, constraints=constraints))
            scopes.append(dims[0].scope)
            scope_names.append([str(d) for d in dims])
        want_loose = int(n_queries * loose_share)
        want_cmp = n_queries - want_loose
        cmps: list[Query] = []
        loose: list[Query] = []
        seen: set = set()
        tries = 0
        while (len(cmps) < want_cmp or len(loose) < want_loose) and tries < 60 * n_queries:
            tries += 1
            sid = rng.randrange(len(scopes))
            scope, names = scopes[sid], scope_names[sid]
            cset = scope_constraints(scope)
            try:
                if len(cmps) < want_cmp and (len(loose) >= want_loose or rng.random() < 0.75):
                    ls, rs = _hard_pair(rng, names)
                    if (sid, ls, rs) in seen:
                        continue
                    seen.add((sid, ls, rs))
                    lhs, rhs = export.symbolic_shape(f"{ls}, {rs}", scope=scope)
                    diff = lhs - rhs
                    if core.is_constant_dim(diff):
                        continue
                    lo, hi = sp._bounds_decision(diff, sp.BoundsPrecision.FOR_GEQ0_OR_LT0)
                    if lo >= 0 or hi < 0:
                        continue  # stock decides it
                    ex = isl_bounds(to_ir(diff), cset)
                    truth = "true" if ex[0] >= 0 else "false" if ex[1] < 0 else "undetermined"
                    # keep a majority of determinate ones: that is where smtdims must answer
                    if truth == "undetermined" and rng.random() < 0.6:
                        continue
                    cmps.append(Query("ge", lhs, rhs, sid, f"{lhs} >= {rhs}", truth, ex, (lo, hi)))
                elif len(loose) < want_loose:
                    es = _hard_bound_expr(rng, names)
                    if (sid, es) in seen:
                        continue
                    seen.add((sid, es))
                    (e,) = export.symbolic_shape(es, scope=scope)
                    if core.is_constant_dim(e):
                        continue
                    st = sp._bounds_decision(e, sp.BoundsPrecision.BEST)
                    ex = isl_bounds(to_ir(e), cset)
                    if tuple(st) == tuple(ex):
                        continue  # stock is already tight
                    loose.append(Query("bounds", e, 0, sid, f"bounds({e})", "exact", ex, tuple(st)))
            except NotPresburger:
                continue
            except Exception:  # an expression JAX rejects (e.g. while normalising): skip it
                continue
    for s in scopes:
        s._bounds_cache.clear()
        s._decision_initial_state = None
    queries = cmps + loose
    queries.sort(key=lambda q: q.scope_id)
    truths: dict[str, int] = {}
    for q in queries:
        truths[q.truth or "?"] = truths.get(q.truth or "?", 0) + 1
    return Corpus(scopes, queries, {"tries": tries, "truths": truths, "scopes": len(scopes)})


# -- benchmark 4: Presburger bound queries as strings ---------------------------------------------------
ORACLE_CONSTRAINTS: list[tuple[str, ...]] = [
    (),
    ("a >= b", "b >= 16"),
    ("a - b >= 8", "c <= 64"),
    ("a + b <= 100", "c >= 2*a"),
    ("a >= 16", "b >= 8", "mod(c, 4) == 0"),
    ("a <= 1024", "b <= 512", "c <= 256", "a >= b + c"),
]


def presburger_bound_queries(n: int = 200, seed: int = 2) -> list[tuple[str, tuple[str, ...]]]:
    """(expression, constraints) strings in the Presburger fragment, over a, b, c."""
    rng = random.Random(seed)
    names = ["a", "b", "c"]
    out = []
    for _ in range(n):
        cons = rng.choice(ORACLE_CONSTRAINTS)
        t = rng.random()
        if t < 0.2:
            e = _lin(rng, names, allow_neg=True)
        elif t < 0.6:
            e = _hard_bound_expr(rng, names)
        else:
            ls, rs = _hard_pair(rng, names)
            e = f"{ls} - ({rs})"
        out.append((e, cons))
    return out


# -- benchmark 5: scale ---------------------------------------------------------------------------------
def scale_constraints(n_vars: int, n_cons: int, seed: int = 3, with_sums: bool = False
                      ) -> tuple[list[str], list[str], dict[str, int]]:
    """Variable names, constraints and a valuation satisfying all of them.

    Kinds, in turn: chains (``v3 >= v7 + 2``), divisibility (``mod(v5, 4) == 0``), max/min
    (``max(v1, v2) <= v9 + 4``, ``min(v4, v8) >= 30``), upper bounds, and with ``with_sums``
    three-variable sums (``v1 + 2*v2 - v3 <= 700``: general integer programming, much harder).
    The constraints are drawn to hold at a fixed random valuation, so every scope is satisfiable.
    """
    rng = random.Random(seed * 1_000_003 + n_vars * 1009 + n_cons)
    names = [f"v{i}" for i in range(n_vars)]
    val = {n: rng.randint(1, 400) * 4 for n in names}  # multiples of 4: divisibility constraints hold
    cons: list[str] = []
    seen: set[str] = set()
    divisible: set[str] = set()

    def add(c: str) -> None:
        if c not in seen:
            seen.add(c)
            cons.append(c)

    # a chain through the variables sorted by value
    order = sorted(names, key=lambda n: val[n], reverse=True)
    kinds = ["chain", "div", "max", "min", "upper"] + (["sum"] if with_sums else [])
    i = 0
    while len(cons) < n_cons:
        i += 1
        kind = kinds[i % len(kinds)]
        if kind == "chain":
            j = rng.randrange(len(order) - 1)
            x, y = order[j], order[j + 1]
            gap = min(val[x] - val[y], rng.randint(0, 3))
            add(f"{x} >= {y} + {gap}" if gap else f"{x} >= {y}")
        elif kind == "div":
            cand = [n for n in names if n not in divisible]
            if not cand:
                continue
            x = rng.choice(cand)
            divisible.add(x)
            add(f"mod({x}, {rng.choice((2, 4))}) == 0")
        elif kind == "max":
            x, y, z = rng.sample(names, 3) if n_vars >= 3 else (names * 3)[:3]
            slack = max(val[x], val[y]) - val[z]
            add(f"max({x}, {y}) <= {z} + {max(slack, 0) + rng.randint(0, 8)}")
        elif kind == "min":
            x, y = rng.sample(names, 2)
            add(f"min({x}, {y}) >= {min(val[x], val[y]) - rng.randint(0, 8)}")
        elif kind == "sum":
            x, y, z = rng.sample(names, 3) if n_vars >= 3 else (names * 3)[:3]
            rhs = val[x] + 2 * val[y] - val[z]
            add(f"{x} + 2*{y} - {z} <= {rhs + rng.randint(0, 20)}")
        else:
            x = rng.choice(names)
            add(f"{x} <= {val[x] + rng.randint(0, 100)}")
    return names, cons[:n_cons], val

"""Benchmark 5: scale. Scopes with 10/50/200 variables and 20/100/500 constraints.

Constraints mix chains (``v3 >= v7 + 2``), divisibility (``mod(v5, 4) == 0``), max/min
(``max(v1, v2) <= v9 + 4``, ``min(v4, v8) >= 30``), sums and upper bounds, drawn to hold at
a fixed random valuation (so every scope is satisfiable). Per size:

* JAX scope creation (``symbolic_shape(..., constraints=...)``), stock and with smtdims;
* smtdims setup: the first solver-backed query in a fresh scope (IR translation, Z3
  context, constraints asserted, satisfiability);
* after setup: exact ``smtdims.bounds`` of fresh expressions (target <= 50 ms at 200 vars /
  500 constraints, the largest of the queries' medians over three runs, each in a fresh set and
  session; the largest single time beside it), a comparison through JAX's seam, and stock
  JAX's BEST bounds of the same expressions for reference;
* solver unknowns: target 0 (no query exceeds the configured budget);
* ``check_constraints`` (redundant constraints, fixed variables, exact ranges) on the same
  sets and on a chain of 200 constraints ``x{i+1} >= x{i} + 1``, beside one ``bounds`` query
  on the same set (target: the chain in <= 2 s; it took 8.6-37 s before it used one incremental
  solver, point moves and propagation).

Run: ``python benchmarks/bench_scale.py [--quick]``
"""

from __future__ import annotations

import signal
import sys
import threading
from contextlib import contextmanager
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import (  # noqa: E402
    cli,
    forget_scope,
    median,
    mode,
    no_gc,
    now,
    stats_delta,
    stats_snapshot,
    table,
    target,
    targets_table,
)
from benchmarks.corpus import jax_bits, scale_constraints  # noqa: E402

SMTDIMS_REPS = 3  # runs of smtdims' queries per size (see _one_size)
JAX_QUERIES = 3  # JAX's elimination can be exponential in the constraint count: sample it
JAX_LIMIT_S = 5.0


class _TimeUp(Exception):
    pass


@contextmanager
def time_limit(seconds: float):
    """Interrupt pure-Python work after ``seconds`` (main thread, SIGALRM); no-op where unavailable."""
    if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(signum, frame):
        raise _TimeUp()

    old = signal.signal(signal.SIGALRM, _raise)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


FULL_SIZES = [(n, m) for n in (10, 50, 200) for m in (20, 100, 500)]
QUICK_SIZES = [(10, 20), (50, 100)]


def _exprs(names: list[str], k: int) -> list[str]:
    import random

    rng = random.Random(len(names) * 7 + k)
    out = []
    for i in range(k):
        a, b, c, d, e = (rng.choice(names) for _ in range(5))
        out.append([
            f"{a} + {b}",
            f"{a} + {b} + {c} - 2*{d}",
            f"max({a}, {b}) - floordiv({c}, 3)",
            f"mod({a} + {b}, 7) + {e}",
            f"min({a}, {c}) - {d} + {i}",
        ][i % 5])
    return out


def _timed(fn, limit_s: float) -> tuple[float, object]:
    """(milliseconds, result); result is "timeout" past ``limit_s`` or the exception's name."""
    t0 = now()
    try:
        with time_limit(limit_s):
            res = fn()
    except _TimeUp:
        res = "timeout"
    except Exception as err:
        res = f"error: {type(err).__name__}"
    return (now() - t0) / 1e6, res


def _clear_registry() -> None:
    from smtdims import reasoner

    reg = getattr(reasoner, "REGISTRY", None)
    if reg is not None:
        reg.clear()


def _one_size(n: int, m: int, n_queries: int) -> dict:
    import smtdims
    from smtdims import ConstraintSet, decide, parse_expr

    export, core, sp = jax_bits()
    names, cons, val = scale_constraints(n, m)
    exprs_txt = _exprs(names, n_queries + 1)
    out: dict = {"vars": n, "constraints": m}

    # (a) smtdims on its own: the constraint set, then exact bounds of fresh expressions. Each query's
    # time is its median over SMTDIMS_REPS runs, each in a fresh set and session (the setup paid again by
    # the first query; the others new to the session): one run's single timings put the VM's pauses
    # (and a busy machine's) in the max.
    smtdims.reset_stats()
    before = stats_snapshot()
    first_rep: dict = {}
    runs: list[tuple[float, list[float], list[float], int]] = []
    for rep in range(SMTDIMS_REPS):
        _clear_registry()
        with no_gc():
            t0 = now()
            cset = ConstraintSet.of(cons)
            exprs = [parse_expr(t) for t in exprs_txt]
            parse_ms = (now() - t0) / 1e6
            setup_ms, _ = _timed(lambda e=exprs[0], cs=cset: smtdims.bounds(e, cs), 60)
            times, cmp_times, tight = [], [], 0
            for e in exprs[1:]:
                ms, b = _timed(lambda e=e, cs=cset: smtdims.bounds(e, cs), 60)
                times.append(ms)
                tight += bool(getattr(b, "lo_tight", False) and getattr(b, "hi_tight", False))
            for e in exprs[1:]:
                c = e.evaluate(val)
                ms, _ = _timed(lambda e=e, c=c, cs=cset: decide(e, ">=", c, cs), 60)  # true at val: never proven
                cmp_times.append(ms)
        if rep == 0:
            out["parse_ms"] = parse_ms  # the parse memo answers the later runs
            first_rep = stats_delta(before, stats_snapshot())
        runs.append((setup_ms, times, cmp_times, tight))
    delta = stats_delta(before, stats_snapshot())
    _clear_registry()
    times = [median([r[1][i] for r in runs]) for i in range(len(exprs_txt) - 1)]
    cmp_times = [median([r[2][i] for r in runs]) for i in range(len(exprs_txt) - 1)]
    out["setup_first_query_ms"] = median([r[0] for r in runs])
    out.update(bounds_median_ms=median(times), bounds_max_ms=max(times), tight=f"{min(r[3] for r in runs)}/{len(times)}",
               bounds_max_single_ms=max(max(r[1]) for r in runs), decide_median_ms=median(cmp_times),
               decide_max_ms=max(cmp_times), unknowns=delta.get("solver_unknowns", 0),
               solvers_created=first_rep.get("solvers_created", 0), solver_checks=first_rep.get("solver_checks", 0))

    # (b) through JAX: creating the scope parses max/min constraints with dimension comparisons,
    # which run JAX's elimination procedure (stock's, or smtdims' trusted-stock-first path)
    spec = ", ".join(names)
    scopes = {}
    for side in ("stock", "smtdims"):
        with mode(side), no_gc():
            ms, dims = _timed(lambda: export.symbolic_shape(spec, constraints=cons), JAX_LIMIT_S)
        out[f"jax_scope_{side}_ms"] = ms if not isinstance(dims, str) else f">{JAX_LIMIT_S:.0f}s {dims}"
        scopes[side] = None if isinstance(dims, str) else dims[0].scope
    scope = scopes["stock"]
    if scope is not None:
        jexprs = list(export.symbolic_shape(", ".join(exprs_txt[1:1 + JAX_QUERIES]), scope=scope))
        for side in ("stock", "smtdims"):
            with mode(side):
                forget_scope(scope)
                res = []
                for e, txt in zip(jexprs, exprs_txt[1:], strict=False):
                    c = parse_expr(txt).evaluate(val)
                    res.append(_timed(lambda e=e, c=c: sp._bounds_decision(e - c, sp.BoundsPrecision.FOR_GEQ0_OR_LT0),
                                      JAX_LIMIT_S))
                out[f"jax_cmp_{side}_ms"] = median([r[0] for r in res])
                out[f"jax_cmp_{side}_timeouts"] = sum(r[1] == "timeout" for r in res)
                forget_scope(scope)
    return out


CHECK_SIZES_QUICK = [("chain", 200, 200), ("scale", 50, 100)]
CHECK_SIZES_FULL = [("chain", 200, 200), ("scale", 10, 20), ("scale", 50, 100), ("scale", 200, 500)]


def _check_row(kind: str, n: int, m: int) -> dict:
    """check_constraints on one set, and one bounds question on the same set for scale."""
    import smtdims

    if kind == "chain":
        cons = [f"x{i + 1} >= x{i} + 1" for i in range(m)]
        expr = f"x{m} - x0"
    else:
        names, cons, _ = scale_constraints(n, m)
        expr = f"{names[0]} + {names[-1]}"
    _clear_registry()
    smtdims.reset_stats()
    with no_gc():
        ms, report = _timed(lambda: smtdims.check_constraints(cons, deadline=60), 90)
        checks = smtdims.stats()["solver_checks"]
        _clear_registry()
        bounds_ms, _ = _timed(lambda: smtdims.bounds(expr, cons), 60)
    _clear_registry()
    ok = not isinstance(report, str)
    return {"set": f"{kind} {n} vars / {m} cons", "check_ms": ms, "bounds_ms": bounds_ms,
            "redundant": len(report.redundant) if ok else report, "fixed": len(report.fixed) if ok else "-",
            "complete": (report.reason == "") if ok else False, "solver_checks": checks}


def run(quick: bool = False) -> dict:
    sizes = QUICK_SIZES if quick else FULL_SIZES
    n_queries = 5 if quick else 8
    rows = [_one_size(n, m, n_queries) for n, m in sizes]
    checks = [_check_row(*k) for k in (CHECK_SIZES_QUICK if quick else CHECK_SIZES_FULL)]
    biggest = rows[-1]
    return {
        "rows": rows, "queries_per_size": n_queries, "check_rows": checks,
        "targets": [
            target("5: check-constraints, 200 chain constraints (s)", checks[0]["check_ms"] / 1e3, 2.0),
            target(f"5: bounds query ms after setup ({biggest['vars']} vars/{biggest['constraints']} cons, max)",
                   biggest["bounds_max_ms"], 50.0),
            target("5: queries over budget (solver unknowns)", sum(r["unknowns"] for r in rows), 0),
        ],
    }


def render(d: dict) -> str:
    return "\n".join([
        table(d["rows"], [("vars", "vars"), ("constraints", "cons"), ("parse_ms", "parse ms"),
                          ("setup_first_query_ms", "setup+1st ms"), ("bounds_median_ms", "bounds med ms"),
                          ("bounds_max_ms", "bounds max ms"), ("bounds_max_single_ms", "max single ms"),
                          ("tight", "tight"), ("decide_median_ms", "decide med ms"),
                          ("decide_max_ms", "decide max ms"), ("solvers_created", "solvers"), ("unknowns", "unknowns"),
                          ("jax_scope_stock_ms", "JAX scope stock ms"), ("jax_scope_smtdims_ms", "JAX scope smtdims ms"),
                          ("jax_cmp_stock_ms", "JAX cmp stock ms"), ("jax_cmp_smtdims_ms", "JAX cmp smtdims ms")],
              title=f"5. scale ({d['queries_per_size']} fresh expressions per size, after setup; per query the median of"
                    f" {SMTDIMS_REPS} runs)"),
        "", table(d.get("check_rows", []), [("set", "constraint set"), ("check_ms", "check-constraints ms"),
                                            ("bounds_ms", "one bounds ms"), ("redundant", "redundant"),
                                            ("fixed", "fixed"), ("complete", "complete"),
                                            ("solver_checks", "solver checks")],
                  title="5b. check-constraints at scale (redundancy, fixed variables, exact ranges)"),
        "", targets_table(d["targets"]),
    ])


def main(argv=None) -> dict:
    return cli("bench_scale", run, render, argv)


if __name__ == "__main__":
    main()

"""Benchmark 4: exact bounds, smtdims vs islpy (an exact integer set library), same queries.

Presburger queries (linear, floordiv/mod by constants, max/min, with constraints) as
strings. islpy parses the set and computes dim_min/dim_max each time (it keeps no
state). smtdims is timed two ways through its public API ``smtdims.bounds(expr,
constraints)``: *warm* (the constraint set's session already exists; each expression is
new to it) and *cold* (session registry cleared first: Z3 context, solver, constraint
translation included). Both answers are compared; any disagreement is reported.
Target: smtdims (warm) median <= islpy median.

Run: ``python benchmarks/bench_oracle.py [--quick]``
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import cli, median, no_gc, now, percentile, ratio, table, target, targets_table  # noqa: E402
from benchmarks.corpus import isl_bounds, isl_bounds_with_witnesses, presburger_bound_queries  # noqa: E402


def _clear_registry() -> None:
    from smtdims import reasoner

    reg = getattr(reasoner, "REGISTRY", None)
    if reg is not None:
        reg.clear()


def run(quick: bool = False) -> dict:
    import smtdims
    from smtdims import ConstraintSet, parse_expr

    n, reps = (25, 1) if quick else (200, 3)
    queries = list(dict.fromkeys(presburger_bound_queries(n)))
    isl_t: dict[int, list[int]] = {i: [] for i in range(len(queries))}
    warm_t: dict[int, list[int]] = {i: [] for i in range(len(queries))}
    cold_t: dict[int, list[int]] = {i: [] for i in range(len(queries))}
    islw_t: dict[int, list[int]] = {i: [] for i in range(len(queries))}
    isl_ans: dict[int, tuple] = {}
    smt_ans: dict[int, tuple] = {}
    tight = 0
    smtdims.reset_stats()
    for rep in range(reps):
        with no_gc():
            # islpy: parse + exact min and max
            for i, (e, cons) in enumerate(queries):
                t0 = now()
                ans = isl_bounds(parse_expr(e), ConstraintSet.of(cons))
                isl_t[i].append(now() - t0)
                isl_ans[i] = ans
                t0 = now()
                isl_bounds_with_witnesses(parse_expr(e), ConstraintSet.of(cons))
                islw_t[i].append(now() - t0)
            # smtdims warm: one session per constraint set, warmed by an unrelated query
            _clear_registry()
            for cons in dict.fromkeys(c for _, c in queries):
                smtdims.bounds("a + b + c + 1000", cons)
            for i, (e, cons) in enumerate(queries):
                t0 = now()
                b = smtdims.bounds(e, cons)
                warm_t[i].append(now() - t0)
                smt_ans[i] = (b.lo, b.hi)
                if rep == 0:
                    tight += bool(b.lo_tight and b.hi_tight)
            # smtdims cold: a fresh session per query
            for i, (e, cons) in enumerate(queries):
                _clear_registry()
                t0 = now()
                smtdims.bounds(e, cons)
                cold_t[i].append(now() - t0)
    stats = smtdims.stats()
    _clear_registry()
    isl_q = [median(v) / 1e6 for v in isl_t.values()]
    warm_q = [median(v) / 1e6 for v in warm_t.values()]
    cold_q = [median(v) / 1e6 for v in cold_t.values()]
    islw_q = [median(v) / 1e6 for v in islw_t.values()]
    disagree = [(queries[i], isl_ans[i], smt_ans[i]) for i in range(len(queries)) if tuple(isl_ans[i]) != tuple(smt_ans[i])]
    rows = [
        {"solver": "islpy (parse + dim_min + dim_max)", "median_ms": median(isl_q), "p90_ms": percentile(isl_q, 90),
         "max_ms": max(isl_q), "ratio": 1.0},
        {"solver": "islpy, and a sample point at each finite end (info)", "median_ms": median(islw_q),
         "p90_ms": percentile(islw_q, 90), "max_ms": max(islw_q), "ratio": ratio(median(islw_q), median(isl_q))},
        {"solver": "smtdims.bounds, warm session", "median_ms": median(warm_q), "p90_ms": percentile(warm_q, 90),
         "max_ms": max(warm_q), "ratio": ratio(median(warm_q), median(isl_q))},
        {"solver": "smtdims.bounds, cold session", "median_ms": median(cold_q), "p90_ms": percentile(cold_q, 90),
         "max_ms": max(cold_q), "ratio": ratio(median(cold_q), median(isl_q))},
    ]
    return {
        "queries": len(queries), "reps": reps, "rows": rows, "both_tight": tight,
        "disagreements": len(disagree), "disagreement_examples": [list(map(str, d)) for d in disagree[:5]],
        "smtdims_stats": stats,
        "targets": [
            target("4: smtdims warm / islpy median ratio", ratio(median(warm_q), median(isl_q)), 1.0),
            target("4: smtdims cold / islpy median ratio", ratio(median(cold_q), median(isl_q)), 1.0),  # issue 44
            target("4: disagreements with islpy", len(disagree), 0),
        ],
    }


def render(d: dict) -> str:
    return "\n".join([
        table(d["rows"], [("solver", "exact bounds by"), ("median_ms", "median ms"), ("p90_ms", "p90 ms"),
                          ("max_ms", "max ms"), ("ratio", "ratio")],
              title=f"4. exact bounds vs islpy ({d['queries']} Presburger queries, per-query median of {d['reps']})"),
        f"   both ends proven tight: {d['both_tight']}/{d['queries']}; disagreements: {d['disagreements']} "
        f"{d['disagreement_examples'] if d['disagreements'] else ''}",
        f"   smtdims counters (all passes): {d['smtdims_stats']}",
        "", targets_table(d["targets"]),
    ])


def main(argv=None) -> dict:
    return cli("bench_oracle", run, render, argv)


if __name__ == "__main__":
    main()

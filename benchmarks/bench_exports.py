"""Benchmark 3: whole exports, stock JAX vs smtdims, interleaved in one process.

The suite (benchmarks/models.py): an MLP, a small CNN (SAME/VALID conv, max/avg pooling),
a transformer block (layer norm, attention with reshape to heads, causal mask), a
reshape/slice-heavy preprocessing function, and the seed examples, with symbolic batch,
sequence and spatial dims. Each export uses a fresh function object, a fresh symbolic
scope and ``jax.clear_caches()`` first, on both sides alike. Target (issue 44): smtdims/stock
<= 1.00 for the total export time, read as the median of the passes' own ratios (each pass runs
both sides back to back, alternating which goes first, so a slow stretch of the machine falls on
both sides of a ratio; the ratio of the two medians is printed beside it). Cases stock JAX cannot
export are reported apart.

Run: ``python benchmarks/bench_exports.py [--quick]``
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import (  # noqa: E402
    cli,
    interleaved_order,
    median,
    no_gc,
    now,
    ratio,
    set_mode,
    stats_delta,
    stats_snapshot,
    table,
    target,
    targets_table,
)
from benchmarks.models import CASES, export_case  # noqa: E402


def _one(case) -> tuple[int, str]:
    import jax

    jax.clear_caches()
    exp = None
    with no_gc():
        t0 = now()
        try:
            exp = export_case(case)
            out = str(exp.out_avals)
        except Exception as err:
            out = f"error: {type(err).__name__}"
        dt = now() - t0
    if exp is not None:  # the serialized export, debug locations included: stock's byte for byte
        out += " " + hashlib.sha256(exp.serialize()).hexdigest()
    return dt, out


def run(quick: bool = False) -> dict:
    import smtdims

    reps = 1 if quick else 9
    for m in ("stock", "smtdims"):  # warm-up: imports, lowering rules, first-use caches
        set_mode(m)
        for c in CASES:
            _one(c)
    times: dict[str, dict[str, list[int]]] = {m: {c.name: [] for c in CASES} for m in ("stock", "smtdims")}
    totals: dict[str, list[int]] = {"stock": [], "smtdims": []}
    outs: dict[str, dict[str, str]] = {"stock": {}, "smtdims": {}}
    per_case_stats: dict[str, dict[str, int]] = {}
    for rep in range(reps):
        for m in interleaved_order(rep):
            set_mode(m)
            total = 0
            for c in CASES:
                smtdims.reset_stats()
                before = stats_snapshot()
                dt, out = _one(c)
                times[m][c.name].append(dt)
                outs[m][c.name] = out
                if c.stock_ok:
                    total += dt
                if m == "smtdims":
                    per_case_stats[c.name] = stats_delta(before, stats_snapshot())
            totals[m].append(total)
    set_mode("stock")
    rows = []
    for c in CASES:
        st, sm = median(times["stock"][c.name]) / 1e6, median(times["smtdims"][c.name]) / 1e6
        s = per_case_stats.get(c.name, {})
        rows.append({"case": c.name + ("" if c.stock_ok else " (smtdims only)"), "stock_ms": st, "smtdims_ms": sm,
                     "ratio": ratio(sm, st) if c.stock_ok else float("nan"),
                     "same_out": outs["stock"][c.name] == outs["smtdims"][c.name] if c.stock_ok else None,
                     "stock_out": outs["stock"][c.name][:60], "smtdims_out": outs["smtdims"][c.name][:60],
                     **{k: s.get(k, 0) for k in ("stock_answers", "fast_path_answers", "solver_checks",
                                                 "solvers_created", "cache_hits")}})
    st_t, sm_t = median(totals["stock"]) / 1e6, median(totals["smtdims"]) / 1e6
    paired = median([ratio(sm, st) for sm, st in zip(totals["smtdims"], totals["stock"], strict=True)])
    agg = {k: sum(r[k] for r in rows if "smtdims only" not in r["case"])
           for k in ("stock_answers", "fast_path_answers", "solver_checks", "solvers_created", "cache_hits")}
    rows.append({"case": "TOTAL (stock-exportable)", "stock_ms": st_t, "smtdims_ms": sm_t, "ratio": ratio(sm_t, st_t),
                 "same_out": all(r["same_out"] for r in rows if r["same_out"] is not None), **agg})
    return {
        "reps": reps, "rows": rows, "ratio_of_medians": ratio(sm_t, st_t), "paired_ratio": paired,
        "targets": [target("3: whole-export total ratio (median of paired passes)", paired, 1.00)],  # issue 44
    }


def render(d: dict) -> str:
    return "\n".join([
        table(d["rows"], [("case", "case"), ("stock_ms", "stock ms"), ("smtdims_ms", "smtdims ms"),
                          ("ratio", "ratio"), ("same_out", "same bytes"), ("stock_answers", "stock ans"),
                          ("fast_path_answers", "fast ans"), ("solver_checks", "checks"),
                          ("solvers_created", "solvers"), ("cache_hits", "cache hits")],
              title=f"3. whole exports (median of {d['reps']} interleaved passes; counters: one smtdims export)"),
        f"total: median of the passes' ratios {d['paired_ratio']:.3f}, ratio of the medians {d['ratio_of_medians']:.3f}",
        "", targets_table(d["targets"]),
    ])


def main(argv=None) -> dict:
    return cli("bench_exports", run, render, argv)


if __name__ == "__main__":
    main()

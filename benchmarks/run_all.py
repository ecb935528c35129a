"""Run every smtdims benchmark: ``python benchmarks/run_all.py [--quick] [--only queries,exports,...]``.

Prints each benchmark's table and a summary of all targets; writes
``benchmarks/results/<benchmark>.json`` and ``benchmarks/results/all.json``.
Exit status: 0 when every benchmark ran (missed targets are reported, not failures),
1 when one raised.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import subprocess
import sys
import time
import traceback
from collections.abc import Iterator
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import byte_compile, load, load_text, machine, table, write_json  # noqa: E402

QUICK_NOTE = ("quick mode is a smoke test: small sizes, one pass each, to show every benchmark runs; its times "
              "are not measurements of the library (a missed target here says little, the more so under load); "
              "for numbers run without --quick on a quiet machine")

BENCHMARKS = {
    "queries": "benchmarks.bench_queries",  # 1 + 2
    "exports": "benchmarks.bench_exports",  # 3
    "oracle": "benchmarks.bench_oracle",  # 4
    "scale": "benchmarks.bench_scale",  # 5
    "memory": "benchmarks.bench_memory",  # 6
    "jaxsuite": "benchmarks.bench_jaxsuite",  # 7 (needs --jax-src or SMTDIMS_JAX_SRC)
    "fix": "benchmarks.bench_fix",  # 8: the cost of a fix round (issue 19)
}


@contextlib.contextmanager
def cpu_load(processes: int) -> Iterator[None]:
    """``processes`` CPU-bound processes beside the block (a busy machine: XLA's compiler threads, data
    loaders, other jobs). Separate interpreters, so they compete for cores, not for the GIL."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(processes)]
    try:
        time.sleep(0.5)  # let the scheduler see them before the first timing
        yield
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Run all smtdims benchmarks (stock JAX vs smtdims).")
    p.add_argument("--quick", action="store_true", help="small sizes, one pass each (CI; well under 2 minutes)")
    p.add_argument("--only", default="", help=f"comma-separated subset of {','.join(BENCHMARKS)}")
    p.add_argument("--out", type=Path, default=None, help="folder for the JSON files (default benchmarks/results)")
    p.add_argument("--jax-src", default=None,
                   help="JAX checkout holding tests/shape_poly_test.py, for benchmark 7 (or SMTDIMS_JAX_SRC)")
    p.add_argument("--busy", action="store_true",
                   help="run every benchmark twice: quiet, then beside --busy-procs CPU-bound processes; "
                        "both columns in the summary")
    p.add_argument("--busy-procs", type=int, default=os.cpu_count() or 2, metavar="N",
                   help="CPU-bound processes beside each benchmark in the busy run (default: the CPU count)")
    args = p.parse_args(argv)
    names = [n for n in (args.only.split(",") if args.only else BENCHMARKS) if n]
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        p.error(f"unknown benchmark(s) {unknown}; choose from {list(BENCHMARKS)}")
    byte_compile()  # smtdims as installed, as stock JAX is (see _common.byte_compile)
    t_all = time.perf_counter()
    load_before = load()
    if args.quick:
        print(QUICK_NOTE)
    print(load_text(load_before), flush=True)
    results, targets, failed = {}, [], []
    modes = ("quiet", "busy") if args.busy else ("quiet",)
    for mode in modes:
        for name in names:
            key = name if mode == "quiet" else f"{name}@busy"
            mod = importlib.import_module(BENCHMARKS[name])
            print(f"\n=== {name} ({'quick' if args.quick else 'full'}, {mode}) ===", flush=True)
            t0 = time.perf_counter()
            try:
                with cpu_load(args.busy_procs) if mode == "busy" else contextlib.nullcontext():
                    data = (mod.run(quick=args.quick, jax_src=args.jax_src) if name == "jaxsuite"
                            else mod.run(quick=args.quick))
                    data["load"] = load()
            except Exception:
                failed.append(key)
                traceback.print_exc()
                results[key] = {"error": traceback.format_exc()}
                continue
            data["wall_s"] = round(time.perf_counter() - t0, 2)
            data["quick"] = args.quick
            data["mode"] = mode
            print(mod.render(data))
            print(f"[{name}: {data['wall_s']} s; calibration ratio {data['load']['calibration_ratio']}x]", flush=True)
            write_json(mod.__name__.rsplit(".", 1)[-1] + ("" if mode == "quiet" else "_busy"),
                       {**data, "machine": machine()}, args.out)
            results[key] = data
            targets += [{**t, "mode": mode} for t in data.get("targets", [])]
    load_after = load()
    worst = max(load_before["calibration_ratio"], load_after["calibration_ratio"],
                *(r["load"]["calibration_ratio"] for r in results.values() if "load" in r and r.get("mode") != "busy"))
    for t in targets:
        t["result"] = "skipped" if t.get("skipped") else "met" if t["met"] else f"gap: {_gap(t)}"
        if not t["met"] and not t.get("skipped") and args.quick:
            t["result"] += " (quick mode)"
    info = machine()
    summary = {"machine": info, "quick": args.quick, "modes": list(modes),
               "busy_procs": args.busy_procs if args.busy else 0, "wall_s": round(time.perf_counter() - t_all, 2),
               "load": {"before": load_before, "after": load_after, "worst_calibration_ratio": worst},
               "targets": targets, "failed": failed, "results": results}
    path = write_json("all", summary, args.out)
    print("\n=== summary ===")
    print(f"machine: {info['processor']}, {info['cpus']} CPUs; python {info['python']}, jax {info['jax']}, "
          f"z3 {info['z3']}; {info['date']}")
    print(table(targets, [("target", "target"), ("mode", "machine"), ("value", "measured"), ("limit", "limit"),
                          ("result", "result")]))
    met = sum(t["met"] for t in targets)
    skipped = sum(bool(t.get("skipped")) for t in targets)
    print(f"{met}/{len(targets) - skipped} targets met ({skipped} skipped); {len(failed)} benchmark(s) failed "
          f"{failed or ''}; {summary['wall_s']} s; JSON: {path}")
    print(f"{load_text(load_after)}; worst calibration ratio during the quiet run {worst}x"
          + (" (timings inflated by about that factor)" if worst >= 1.5 else ""))
    if args.quick:
        print(QUICK_NOTE)
    return 1 if failed else 0


def _gap(t: dict) -> str:
    """How far a missed target is: 'x1.7 over' for ratios and times, the shortfall otherwise."""
    v, (op, limit) = t["value"], t["limit"].split(" ", 1)
    try:
        lim = float(limit)
        if op == "<=" and lim > 0:
            return f"{v / lim:.2f}x the limit"
        return f"{v} vs {op} {limit}"
    except (TypeError, ValueError):
        return f"{v} vs {t['limit']}"


if __name__ == "__main__":
    sys.exit(main())

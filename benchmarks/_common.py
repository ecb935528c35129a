"""Shared helpers: timing, stock/smtdims toggling, cache resets, tables, JSON output.

Every benchmark module exposes ``run(quick: bool) -> dict`` (JSON-ready) and a
``main()`` that prints its table and writes ``benchmarks/results/<name>.json``.
"""

from __future__ import annotations

import datetime as _dt
import gc
import json
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

os.environ.setdefault("JAX_PLATFORMS", "cpu")

ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = Path(__file__).resolve().parent / "results"
MODES = ("stock", "smtdims")


def byte_compile() -> bool:
    """Write the bytecode of smtdims and its plugins, as installing a package does.

    Stock JAX is measured as installed, its modules' bytecode written at install time; smtdims
    from this checkout (an editable install) is compiled on every import when nothing wrote its
    bytecode (``PYTHONDONTWRITEBYTECODE``: 0.13-0.20 s of each fresh process, measured 2026-12-06).
    Both sides are measured as a user's install runs them. Returns whether compiling succeeded.
    """
    import compileall

    return all(compileall.compile_dir(str(ROOT / d), quiet=1) for d in ("smtdims", "plugins"))


# -- statistics ---------------------------------------------------------------------------------
def median(xs: Sequence[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def percentile(xs: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100); NaN for no data."""
    if not xs:
        return float("nan")
    s = sorted(xs)
    k = max(0, min(len(s) - 1, math.ceil(p / 100 * len(s)) - 1))
    return s[k]


def ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


def now() -> int:
    return time.perf_counter_ns()


@contextmanager
def no_gc():
    """Collect first, then keep the cyclic GC out of a timed region (both sides alike)."""
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


# -- stock / smtdims ------------------------------------------------------------------------------
def set_mode(mode: str) -> None:
    import smtdims

    if mode == "stock":
        smtdims.uninstall()
    elif mode == "smtdims":
        smtdims.install()
    else:  # pragma: no cover - programming error
        raise ValueError(mode)


@contextmanager
def mode(name: str):
    import smtdims

    was = smtdims.is_installed()
    set_mode(name)
    try:
        yield
    finally:
        set_mode("smtdims" if was else "stock")


def interleaved_order(rep: int) -> tuple[str, str]:
    """Alternate which side goes first, so warm-up and drift hit both sides alike."""
    return MODES if rep % 2 == 0 else MODES[::-1]


def forget_scope(scope: Any) -> None:
    """Drop everything JAX and smtdims cache per scope: the next query starts cold."""
    from smtdims_jax.conversion import STATE_ATTR

    scope._bounds_cache.clear()
    scope._decision_initial_state = None
    scope.__dict__.pop(STATE_ATTR, None)  # smtdims keeps its per-scope state on the scope
    for attr in ("_smtdims_exact_bounds_cache", "_smtdims_exact_decision_state"):  # the exact stock rung's
        scope.__dict__.pop(attr, None)


def stats_snapshot() -> dict[str, int]:
    """smtdims' counters, flat: the per-rung answers appear as ``rung:<name>``."""
    import smtdims

    s = dict(smtdims.stats())
    for rung, n in s.pop("answers_by_rung", {}).items():
        s[f"rung:{rung}"] = n
    return s


def stats_delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: after.get(k, 0) - before.get(k, 0) for k in after}


STAT_KEYS = ("fast_path_answers", "stock_answers", "solver_answers", "solver_checks",
             "solver_unknowns", "solvers_created", "fresh_contexts", "deadline_hits", "cache_hits")


# -- reporting ------------------------------------------------------------------------------------
# -- load ----------------------------------------------------------------------------------------
CALIBRATION_REFERENCE_MS = 22.0  # best of 30 runs of calibration_loop() on the quiet development container (load 0.1)


def calibration_loop() -> float:
    """Milliseconds of a fixed pure-Python loop: the same work every time, so its time is the load."""
    t0 = time.perf_counter()
    x = 0
    for i in range(300_000):
        x += i * i % 7
    return (time.perf_counter() - t0) * 1e3


def load() -> dict[str, Any]:
    """How busy the machine is now: the calibration loop (best of 5) against its reference time,
    and the 1-minute load average per CPU. A ratio of 2 means timings here are about twice what
    the same code takes on a quiet machine like the reference one."""
    ms = min(calibration_loop() for _ in range(5))
    avg = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return {"calibration_ms": round(ms, 1), "calibration_ratio": round(ms / CALIBRATION_REFERENCE_MS, 2),
            "loadavg_1min": round(avg, 2), "cpus": os.cpu_count()}


def load_text(d: dict[str, Any]) -> str:
    return (f"load: calibration loop {d['calibration_ms']} ms = {d['calibration_ratio']}x its reference "
            f"{CALIBRATION_REFERENCE_MS:g} ms; 1-min load average {d['loadavg_1min']} on {d['cpus']} CPUs")


def machine() -> dict[str, Any]:
    import jax
    import z3

    info: dict[str, Any] = {
        "date": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "processor": _cpu_model(),
        "cpus": os.cpu_count(),
        "jax": jax.__version__,
        "z3": z3.get_version_string(),
        "commit": _git("rev-parse", "--short", "HEAD"),
        "core_dirty": bool(_git("status", "--porcelain", "--", "smtdims", "plugins")),
    }
    try:
        import islpy

        info["islpy"] = islpy.version.VERSION_TEXT if hasattr(islpy, "version") else "?"
    except Exception:  # pragma: no cover - islpy is a test extra
        info["islpy"] = None
    return info


def _git(*args: str) -> str:
    import subprocess

    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10).stdout.strip()
    except Exception:
        return ""


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def fmt(v: Any, unit: str = "") -> str:
    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, float):
        if math.isnan(v):
            return "-"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        if unit == "x":
            return f"{v:.3f}"
        if abs(v) >= 100:
            return f"{v:.0f}"
        if abs(v) >= 10:
            return f"{v:.1f}"
        return f"{v:.3g}"
    if v is None:
        return "-"
    return str(v)


def table(rows: Iterable[dict[str, Any]], columns: Sequence[tuple[str, str]], title: str = "") -> str:
    """Plain-text table; ``columns`` are (key, header). Headers ending in 'x' format as ratios."""
    rows = list(rows)
    cells = [[fmt(r.get(k), "x" if h.endswith("ratio") else "") for k, h in columns] for r in rows]
    heads = [h for _, h in columns]
    widths = [max([len(h)] + [len(c[i]) for c in cells]) for i, h in enumerate(heads)]
    out = []
    if title:
        out.append(title)
    out.append("  ".join(h.ljust(w) for h, w in zip(heads, widths, strict=True)))
    out.append("  ".join("-" * w for w in widths))
    for c in cells:
        out.append("  ".join(v.ljust(w) for v, w in zip(c, widths, strict=True)))
    return "\n".join(out)


def _json_default(o: Any) -> Any:
    if isinstance(o, float) and (math.isinf(o) or math.isnan(o)):
        return str(o)
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    return str(o)


def _clean(o: Any) -> Any:
    if isinstance(o, float) and (math.isinf(o) or math.isnan(o)):
        return str(o)
    if isinstance(o, dict):
        return {str(k): _clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_clean(v) for v in o]
    return o


def write_json(name: str, data: dict[str, Any], out_dir: Path | None = None) -> Path:
    out_dir = out_dir or RESULTS_DIR
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.json"
    path.write_text(json.dumps(_clean(data), indent=2, default=_json_default) + "\n")
    return path


def target(name: str, value: float, limit: float, op: str = "<=") -> dict[str, Any]:
    """A target line: ``value op limit`` met or missed (NaN counts as missed)."""
    if isinstance(value, float) and math.isnan(value):
        met = False
    else:
        met = value <= limit if op == "<=" else value >= limit if op == ">=" else value == limit
    return {"target": name, "value": value, "limit": f"{op} {limit}", "met": bool(met)}


def targets_table(targets: Sequence[dict[str, Any]]) -> str:
    return table(targets, [("target", "target"), ("value", "measured"), ("limit", "limit"), ("met", "met")])


def cli(name: str, run: Callable[..., dict[str, Any]], render: Callable[[dict[str, Any]], str],
        argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Standard entry point: ``--quick``, ``--out DIR``; prints the table, writes the JSON."""
    import argparse

    p = argparse.ArgumentParser(description=f"smtdims benchmark: {name}")
    p.add_argument("--quick", action="store_true", help="small sizes, one pass (for CI)")
    p.add_argument("--out", type=Path, default=None, help="folder for the JSON (default benchmarks/results)")
    args = p.parse_args(argv)
    byte_compile()
    t0 = time.perf_counter()
    data = run(quick=args.quick)
    data.setdefault("benchmark", name)
    data["quick"] = args.quick
    data["machine"] = machine()
    data["wall_s"] = round(time.perf_counter() - t0, 2)
    print(render(data))
    path = write_json(name, data, args.out)
    print(f"\n[{name}] {data['wall_s']} s; JSON: {path}")
    sys.stdout.flush()
    return data

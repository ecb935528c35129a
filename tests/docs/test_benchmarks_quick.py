"""The benchmarks run (quick mode) and write the JSON fields the tables of docs/performance.md come from.

Benchmarks are not tests: nothing here looks at a time, a ratio or whether a target is met.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytest.importorskip("islpy")  # the hard corpus's ground truth and benchmark 4's oracle
pytestmark = pytest.mark.soak  # one quick run of every benchmark (a minute or two of CPU): CI's full mode


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bench")
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    p = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "run_all.py"), "--quick", "--out", str(out)],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-4000:]
    assert "=== summary ===" in p.stdout
    (out / "stdout.txt").write_text(p.stdout)
    return out


def _load(results: Path, name: str) -> dict:
    return json.loads((results / f"{name}.json").read_text())


def _check_targets(d: dict) -> None:
    assert d["targets"], "every benchmark states its targets"
    for t in d["targets"]:
        assert set(t) >= {"target", "value", "limit", "met"}


def test_all_json(results):
    d = _load(results, "all")
    assert d["failed"] == []
    assert d["quick"] is True
    assert {"date", "cpus", "jax", "z3"} <= set(d["machine"])
    assert set(d["results"]) == {"queries", "exports", "oracle", "scale", "memory", "jaxsuite", "fix"}
    assert len(d["targets"]) >= 12
    assert all("result" in t for t in d["targets"])  # met, the gap, or skipped


def test_jaxsuite_without_a_checkout_is_skipped_with_the_reason(results):
    d = _load(results, "bench_jaxsuite")
    if os.environ.get("SMTDIMS_JAX_SRC"):
        assert d["rows"] and d["targets"][0]["value"] > 0
    else:
        assert "SMTDIMS_JAX_SRC" in d["skipped"] and d["targets"][0].get("skipped") is True


def test_queries_json(results):
    d = _load(results, "bench_queries")
    a, b, c = d["stock_decided"], d["hard"], d["building"]
    assert {"scopes", "questions", "stock_ms", "smtdims_ms", "ratio", "solvers_created"} <= set(c)
    _check_targets(c)
    assert {"corpus", "rows", "smtdims_stats_per_pass", "solvers_created_target_kinds", "answer_mismatches"} <= set(a)
    total = a["rows"][-1]
    assert total["kind"].startswith("TOTAL") and total["queries"] > 0
    assert {"stock_ms", "smtdims_ms", "ratio"} <= set(total)
    assert {"solvers_created", "solver_checks", "fast_path_answers", "stock_answers", "cache_hits"} <= set(
        a["smtdims_stats_per_pass"])
    assert {"rows", "share_decided_determinate", "unsound_answers", "cold_first_query_ms"} <= set(b)
    assert b["rows"][-1]["queries"] == "ALL"
    f = d["fresh"]
    assert {"questions", "stock_ms", "smtdims_ms", "ratio", "cpu_ratio", "rungs"} <= set(f)
    assert f["differ_where_stock_decided"] == 0 and f["solver_checks"] == 0
    _check_targets(f)
    assert {"smtdims_median_ms", "smtdims_p99_ms", "stock_median_ms"} <= set(b["rows"][-1])
    _check_targets(a)
    _check_targets(b)


def test_exports_json(results):
    d = _load(results, "bench_exports")
    names = [r["case"] for r in d["rows"]]
    assert names[-1].startswith("TOTAL")
    assert any("transformer" in n for n in names) and any("seed" in n for n in names)
    for r in d["rows"]:
        assert {"stock_ms", "smtdims_ms", "ratio", "solvers_created"} <= set(r)
    _check_targets(d)


def test_oracle_json(results):
    d = _load(results, "bench_oracle")
    assert d["queries"] > 0 and len(d["rows"]) == 4
    assert {"disagreements", "both_tight", "smtdims_stats"} <= set(d)
    assert all({"median_ms", "ratio"} <= set(r) for r in d["rows"])
    _check_targets(d)


def test_scale_json(results):
    d = _load(results, "bench_scale")
    assert d["rows"]
    for r in d["rows"]:
        assert {"vars", "constraints", "setup_first_query_ms", "bounds_median_ms", "bounds_max_ms", "unknowns",
                "jax_scope_stock_ms", "jax_scope_smtdims_ms"} <= set(r)
    _check_targets(d)


def test_memory_json(results):
    d = _load(results, "bench_memory")
    assert len(d["rows"]) == 6
    assert {"per_kept_scope_kb", "per_dropped_scope_kb", "samples", "questions_seconds"} <= set(d)
    assert d["samples"]["dropped"] and d["samples"]["kept"] and len(d["samples"]["questions"]) >= 2
    assert d["rows"][3]["solvers"] > 0  # each scope builds a Z3 solver: what the release is measured on
    _check_targets(d)


def test_single_benchmark_cli(tmp_path):
    """Each benchmark also runs on its own and writes its JSON."""
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    p = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_oracle.py"), "--quick", "--out", str(tmp_path)],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-4000:]
    d = json.loads((tmp_path / "bench_oracle.json").read_text())
    assert d["benchmark"] == "bench_oracle" and d["quick"] is True and "machine" in d


def test_quick_mode_says_it_is_a_smoke_test_and_reports_the_load(results):
    """A missed target in quick mode on a loaded machine must not read as a failure of the library."""
    text = (results / "stdout.txt").read_text()
    assert text.count("quick mode is a smoke test") >= 2  # before the tables and after the summary
    assert "calibration loop" in text and "x its reference" in text and "load average" in text
    d = _load(results, "all")
    assert d["load"]["before"]["calibration_ratio"] > 0 and d["load"]["worst_calibration_ratio"] > 0
    for t in d["targets"]:
        if not t["met"] and not t.get("skipped"):
            assert t["result"].endswith("(quick mode)"), t


def test_scale_reports_check_constraints(results):
    d = _load(results, "bench_scale")
    chain = d["check_rows"][0]
    assert chain["set"].startswith("chain 200") and chain["redundant"] == 0 and chain["complete"] is True
    assert any(t["target"].startswith("5: check-constraints") for t in d["targets"])


def test_busy_mode_loads_the_machine_and_cleans_up():
    """``run_all.py --busy`` runs each benchmark beside CPU-bound processes: they really spin,
    and none outlives the block."""
    import time

    sys.path.insert(0, str(ROOT))
    from benchmarks.run_all import cpu_load

    t0 = time.process_time()
    with cpu_load(1):
        children_before = _children_cpu()
        spun = None
        if children_before is not None:
            end = time.monotonic() + 20  # a loaded machine (CI beside other jobs) gives it less than a core
            while (spun := _children_cpu() - children_before) < 0.5 and time.monotonic() < end:
                time.sleep(0.2)
    assert time.process_time() - t0 < 0.5  # the load is in other processes
    assert spun is None or spun >= 0.5, "the load generator did not use a core"


def _children_cpu():
    """CPU seconds of this process's live children (Linux /proc), or None elsewhere."""
    if not os.path.isdir("/proc"):
        return None
    total = 0.0
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if pid.isdigit() and int(fields[1]) == os.getpid():
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total

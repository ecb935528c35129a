"""Benchmark: the cost of the fix loop (issue 19) -- per round, the box of native runs, minimising, verifying.

For each function of tests/fixtures_pipeline/needs_fixes.py (exports that need two or three
fixes), one process measures: the failed export on stock JAX and with smtdims (the price
of the first error message), the native box (``jax.eval_shape`` on every box shape), each
fix round (re-export + the verified candidates from smtdims + their box scores), the
minimisation, and (full run only, one function) the end-to-end verification of the fixed
specification (export, fresh process, samples). Numbers are wall seconds on this machine.

Run: ``python benchmarks/bench_fix.py [--quick]``
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import cli, median, table  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CASES = [("two", ["b"]), ("concat", ["a", "b"]), ("conv", ["1, 1, b"]), ("pool", ["b, c"]),
         ("relate", ["a", "b"]), ("three", ["a", "b"]), ("doubled", ["a", "b"])]


def _fixtures():
    path = ROOT / "tests" / "fixtures_pipeline" / "needs_fixes.py"
    spec = importlib.util.spec_from_file_location("_bench_needs_fixes", path)
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


def _failed_export_s(fn, specs, smtdims: bool) -> float:
    import jax
    import jax.numpy as jnp
    import smtdims_jax
    from jax import export

    scope = export.SymbolicScope(())
    args = [jax.ShapeDtypeStruct(export.symbolic_shape(s, scope=scope), jnp.float32) for s in specs]
    with smtdims_jax.enabled() if smtdims else smtdims_jax.stock_jax():
        t0 = time.perf_counter()
        try:
            export.export(jax.jit(lambda *a: fn(*a)))(*args)
        except Exception as err:  # noqa: BLE001 - the failure is what is timed
            str(err)  # smtdims explains lazily, on str(): part of the price of the message
        return time.perf_counter() - t0


def run(quick: bool = False) -> dict:
    import jax
    from smtdims_jax.pipeline.fixes import synthesize
    from smtdims_jax.pipeline.specs import build_specs

    nf = _fixtures()
    reps = 1 if quick else 3
    rows = []
    for name, specs in CASES:
        fn = getattr(nf, name)
        samples: dict[str, list[float]] = {k: [] for k in ("stock", "smtdims", "box", "round", "minimise", "total")}
        rounds = candidates = shapes = 0
        status = ""
        for _ in range(reps):
            samples["stock"].append(_failed_export_s(fn, specs, smtdims=False))
            samples["smtdims"].append(_failed_export_s(fn, specs, smtdims=True))
            built, scope, _ = build_specs(specs)
            leaves, tree = jax.tree_util.tree_flatten(built)
            t0 = time.perf_counter()
            r = synthesize(lambda *a, fn=fn: fn(*a), leaves, tree, scope, None, name=name)
            total = time.perf_counter() - t0
            box_s = r.box.seconds if r.box is not None else 0.0
            round_s = [x.seconds for x in r.rounds]
            samples["box"].append(box_s)
            samples["round"] += round_s
            samples["minimise"].append(max(0.0, total - box_s - sum(round_s)))
            samples["total"].append(total)
            rounds, status = len(r.rounds), r.status
            candidates = sum(len(x.candidates) for x in r.rounds)
            shapes = r.box.shapes if r.box is not None else 0
        rows.append({"function": name, "status": status, "rounds": rounds, "candidates": candidates, "box_shapes": shapes,
                     **{f"{k}_s": round(median(v), 4) for k, v in samples.items()},
                     "box_ms_per_shape": round(1000 * median(samples["box"]) / max(1, shapes), 3)})
    e2e = None
    if not quick:
        from smtdims_jax.pipeline import export_and_verify

        t0 = time.perf_counter()
        rep = export_and_verify(nf.two, "float32[b]", fix=True, samples=4)
        e2e = {"function": "two", "seconds": round(time.perf_counter() - t0, 3),
               "fix_s": round(rep.fix.seconds, 3), "verified": rep.fix.verified}
    per_round = [r["round_s"] for r in rows]
    return {"cases": rows, "median_round_s": round(median(per_round), 4), "end_to_end": e2e,
            "models": [] if quick else _models()}


# The whole fix of the cores of real architectures (issue 41's target: median <= 5 s, max <= 15 s per
# export_and_verify(fix=True)), each end to end: fix, re-export, verify (the loop over verification too).
MODELS = [("window_partition", ("float32[b, h, w, 3]",)), ("vit_grid", ("float32[b, h, w, 3]",)),
          ("encoder_decoder", ("float32[t, 4]", "float32[u, 4]")), ("patch_merging", ("float32[b, h, w, 3]",)),
          ("patch_tokens", ("float32[b, h, w]",)), ("patch_pool", ("float32[b, h, w]",)),
          ("clip_embed", ("float32[b, h, w, 3]",)), ("token_mixer", ("float32[b, p, q, 4]",))]


def _models() -> list[dict]:
    sys.path.insert(0, str(ROOT))  # the repository's root, never tests/ (where tests/jax would pass for JAX)
    from smtdims_jax.pipeline import export_and_verify

    from tests.fixtures_pipeline import loop_models

    out = []
    for name, specs in MODELS:
        try:
            fn = loop_models.make_token_mixer() if name == "token_mixer" else getattr(loop_models, name)
        except ImportError:  # flax missing
            continue
        t0 = time.perf_counter()
        rep = export_and_verify(fn, *specs, fix=True, samples=4)
        fix = rep.fix
        out.append({"model": name, "seconds": round(time.perf_counter() - t0, 3),
                    "status": fix.status if fix is not None else ("ok" if rep.ok else "no fix"),
                    "fix": fix.cli() if fix is not None and fix.parts else "", "rounds": len(fix.rounds) if fix else 0})
    return out


def render(d: dict) -> str:
    cols = [("function", "function"), ("status", "status"), ("rounds", "rounds"), ("candidates", "cands"),
            ("box_shapes", "box"), ("stock_s", "stock fail s"), ("smtdims_s", "smtdims fail s"), ("box_s", "box s"),
            ("box_ms_per_shape", "ms/shape"), ("round_s", "round s"), ("minimise_s", "minimise s"),
            ("total_s", "loop s")]
    out = table(d["cases"], cols, "fix loop: cost per function (median; box = native eval_shape on every box shape)")
    out += f"\nmedian cost of one fix round: {d['median_round_s']} s"
    if d.get("end_to_end"):
        e = d["end_to_end"]
        out += (f"\nend to end (export_and_verify(two, fix=True): loop + fresh-process verification): {e['seconds']} s "
                f"(the loop {e['fix_s']} s), verified: {e['verified']}")
    if d.get("models"):
        ms = d["models"]
        out += "\n\n" + table(ms, [("model", "model"), ("status", "status"), ("rounds", "rounds"),
                                    ("seconds", "s"), ("fix", "fix")],
                               "whole fix end to end on model cores (export_and_verify(fix=True), samples=4)")
        secs = [m["seconds"] for m in ms]
        out += (f"\nmodels: median {median(secs):.2f} s (target <= 5), max {max(secs):.2f} s (target <= 15); "
                f"{sum(m['status'] == 'fixed' for m in ms)}/{len(ms)} fixed and verified")
    return out


def main(argv=None) -> dict:
    return cli("bench_fix", run, render, argv)


if __name__ == "__main__":
    main()

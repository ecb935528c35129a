"""The export pipeline on this host's accelerator (a TPU or a GPU): every exportable seed row, the
equality trap, a flax GPT at ``t`` up to 512 and a ViT, each through ``export_and_verify``, with the
artifact and JAX's own run of the function side by side on the device. One summary line at the end.

Run by ``scripts/accelerator_check.sh`` (which also runs the README's line in a fresh interpreter and
the case where the program itself holds the device). This process exports on the CPU and leaves the
device to the verification process, which keeps it from one check to the next.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "examples")]  # the root, never tests/ (tests/jax would pass for JAX)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--allow-cpu", action="store_true", help="run even where the device is the CPU (a dry run)")
    p.add_argument("--samples", type=int, default=6)
    args = p.parse_args(argv)

    from smtdims_jax.pipeline import export_and_verify, keep_off_accelerator
    from smtdims_jax.pipeline.fresh import locate

    keep_off_accelerator()
    dev = locate()
    if not dev.usable:
        print(f"accelerator_check: FAILED: the verification process got no device: {dev.why_not()}")
        return 1
    where = f"{dev.platform} ({dev.kind})"
    if dev.platform == "cpu" and not args.allow_cpu:
        print("accelerator_check: SKIPPED: JAX sees no TPU or GPU here")
        return 0
    print(f"accelerator_check: verifying on {where}, stock jax {dev.jax_version}", flush=True)
    from tests.fixtures_pipeline import seed_rows

    results: list[tuple[str, bool, str]] = []
    t0 = time.perf_counter()
    for n in seed_rows.EXPORTABLE:
        fn, specs, kw = seed_rows.row(n)
        r = export_and_verify(fn, *specs, samples=args.samples, **kw)
        print(f"== seed row {n} ==\n{r}\n", flush=True)
        results.append((f"seed row {n}", r.ok, r.verdict()))
    trap = export_and_verify(seed_rows.eq_trap, "int32[b]", samples=4)
    caught = seed_rows.trap_caught(trap)
    print(f"== equality trap ==\n{trap}\n-> {'caught' if caught else 'NOT caught'}\n", flush=True)
    results.append(("trap", caught, "caught at b = 1, the other samples pass" if caught else trap.verdict()))
    try:
        import accelerator_models
    except ImportError as err:
        results.append(("models", False, f"not run: {err} (install flax)"))
    else:
        for name, (fn, specs, constraints) in accelerator_models.MODELS.items():
            r = export_and_verify(fn, *specs, constraints=constraints, samples=args.samples)
            print(f"== {name} ==\n{r}\n", flush=True)
            results.append((name, r.ok, r.verdict()))
    for name, ok, verdict in results:
        print(f"  {'ok  ' if ok else 'FAIL'} {name}: {verdict}")
    rows = [ok for name, ok, _ in results if name.startswith("seed row")]
    models = [(name, ok) for name, ok, _ in results if not name.startswith(("seed row", "trap"))]
    summary = (f"seed rows {sum(rows)}/{len(rows)} verified; trap {'caught' if caught else 'NOT caught'}; "
               + ", ".join(f"{name} {'verified' if ok else 'NOT verified'}" for name, ok in models))
    ok = all(ok for _, ok, _ in results)
    print(f"accelerator_check: {'OK' if ok else 'FAILED'} on {where} in {time.perf_counter() - t0:.0f} s: {summary}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

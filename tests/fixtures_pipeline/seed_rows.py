"""The exportable rows of ../shared/SEED-EXAMPLES.md as pipeline inputs, plus the equality trap.

Named module-level functions so that ``smtdims export path/to/seed_rows.py:mod3_slice``
works too. Run as a script to verify every row (``--platform cuda`` on a GPU machine).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import export, lax


def concat(x):  # row 1
    return jnp.concatenate([x, x], axis=1)


def flatten(x):  # row 2
    return jnp.reshape(x, (x.shape[0] * x.shape[1],))


def add_xy(x, y):  # row 3
    return x + y


def slice_ab(x):  # row 10
    return x[: x.shape[1], :16]


def mod3_slice(x):  # row 13
    return lax.slice_in_dim(x, 0, x.shape[0] % 3)


def batch_mean(x):  # row 14: bounds of batch in [128, 1024]; a reduction over a bounded batch
    return jnp.sum(x, axis=0) / x.shape[0]


def my_top_k(k, x):
    return lax.top_k(x, k)[0]


def top_k_dims(dimensions, x):  # row 16
    return my_top_k(dimensions.shape[1], x)


def eq_trap(x):  # the tutorial's unsound-equality trap: JAX's == says False while tracing
    return x * 2 if x.shape[0] == 1 else x


Row = tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]


def row(n: int) -> Row:
    """(fn, arg_specs, extra kwargs for export_and_verify) of seed row ``n``."""
    if n == 1:
        a, b = export.symbolic_shape("a, b")
        return concat, (jax.ShapeDtypeStruct((a, b), jnp.int32),), {}
    if n == 2:
        return flatten, ("int32[b, 4]",), {}
    if n == 3:
        x, y = np.ones((3, 1), np.int32), np.ones((3, 4), np.int32)
        return add_xy, tuple(export.symbolic_args_specs((x, y), "a, ...")), {}
    if n == 10:
        return slice_ab, ("int32[a, b]",), {"constraints": ("a >= b", "b >= 16")}
    if n == 13:
        return mod3_slice, ("int32[b]",), {}
    if n == 14:
        return batch_mean, ("float32[batch, free]",), {"constraints": ("batch >= 128", "batch <= 1024")}
    if n == 16:
        k, = export.symbolic_shape("k", constraints=["k <= 10"])
        x = np.arange(40, dtype=np.int32).reshape((4, 10))
        return top_k_dims, (jax.ShapeDtypeStruct((0, k), jnp.int32), x), {}
    if n == 19:  # serialize -> deserialize -> call elsewhere: the pipeline's fresh process, plus out=
        return concat, ("int32[a, b]",), {}
    raise KeyError(f"row {n} is not an exportable seed row")


EXPORTABLE = (1, 2, 3, 10, 13, 14, 16, 19)


def trap_caught(report: Any) -> bool:
    """The trap is caught when the artifact fails at b = 1 and runs, matching, at every other sample: a
    sample that did not run (the device held elsewhere, a crash) catches nothing."""
    at_one = [s for s in report.samples if s.valuation == {"b": 1}]
    others = [s for s in report.samples if s.valuation != {"b": 1}]
    return (bool(at_one) and all(s.status == "fail" for s in at_one) and bool(others)
            and all(s.status == "pass" for s in others))


def main(argv: list[str] | None = None) -> int:
    from smtdims_jax.pipeline import export_and_verify, keep_off_accelerator

    keep_off_accelerator()  # this process only exports: the verification process holds the device between rows
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--platform", default=None, help="e.g. tpu, cuda, or cpu,tpu (default: the device's platform)")
    p.add_argument("--samples", type=int, default=6)
    p.add_argument("--rows", default=",".join(map(str, EXPORTABLE)))
    args = p.parse_args(argv)
    failed = []
    for n in [int(r) for r in args.rows.split(",")]:
        fn, specs, kw = row(n)
        report = export_and_verify(fn, *specs, platforms=args.platform, samples=args.samples, **kw)
        print(f"== seed row {n} ==\n{report}\n", flush=True)
        if not report.ok:
            failed.append(n)
    trap = export_and_verify(eq_trap, "int32[b]", platforms=args.platform, samples=4)
    caught = trap_caught(trap)
    print(f"== equality trap (must be caught at b = 1, the other samples passing) ==\n{trap}\n"
          f"-> {'caught' if caught else 'NOT CAUGHT'}\n")
    rows = [int(r) for r in args.rows.split(",")]
    print(f"seed rows: {len(rows) - len(failed)}/{len(rows)} verified{f' (failed: {failed})' if failed else ''}; "
          f"trap {'caught' if caught else 'NOT caught'}; device {trap.device or 'none: ' + trap.not_run}")
    return 0 if not failed and caught else 1


if __name__ == "__main__":
    sys.exit(main())


# -- scalar arguments (a temperature, a step size, a count): rank-0 inputs beside symbolic ones --------
def scaled(x, s):
    return x * s


def stepped(x, lr):
    return x - lr * jnp.tanh(x)


def scaled_tree(tree):
    return tree["x"] * tree["s"] + tree["n"]

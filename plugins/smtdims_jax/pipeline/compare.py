"""Seeded inputs, and the comparison of the artifact's outputs with JAX's own run of the function.

Both sides run under XLA on the same device (:mod:`.fresh`): the reference is ``jax.jit(fn)``
traced at the sample's concrete shapes, the artifact is the symbolic export. Two compilations
of the same computation may still fuse and reassociate differently, so floats are compared
within a tolerance chosen per dtype and platform (:func:`tolerance`), and the report prints
the tolerance and the largest error seen.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np

INT_RANGE = (0, 9)  # integer inputs, inclusive: token ids and indices a model can use (not negative)


def random_input(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype,
                 int_range: tuple[int, int] = INT_RANGE) -> np.ndarray:
    """Seeded data drawn in ``dtype`` itself (no float64 copy: a sample within its byte budget stays
    there): integers in ``int_range`` (inclusive, clipped to the dtype), bools, normal floats."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape, dtype=np.int8).astype(dtype)
    if jnp.issubdtype(dtype, jnp.integer):
        info = np.iinfo(dtype)
        lo, hi = max(int(int_range[0]), int(info.min)), min(int(int_range[1]), int(info.max))
        return rng.integers(lo, hi, size=shape, dtype=dtype, endpoint=True)
    if jnp.issubdtype(dtype, jnp.complexfloating):
        part = np.float32 if dtype.itemsize <= 8 else np.float64
        out = np.empty(shape, dtype)
        out.real = rng.standard_normal(shape, dtype=part)
        out.imag = rng.standard_normal(shape, dtype=part)
        return out
    if dtype in (np.float32, np.float64):
        return rng.standard_normal(shape, dtype=dtype)
    return rng.standard_normal(shape, dtype=np.float32).astype(dtype)  # bfloat16, float16, float8: half the bytes


@dataclass(frozen=True)
class Tolerance:
    """How close two float outputs must be: ``|a - b| <= atol * scale + rtol * |a|``, where ``scale`` is
    the largest magnitude of the reference output (at least 1), so that a sum near zero after cancellation
    is judged against the size of what was summed; ``why`` says where the numbers come from."""

    rtol: float
    atol: float
    why: str

    def text(self, dtype: str) -> str:
        return f"{dtype}: rtol {self.rtol:g}, atol {self.atol:g} x max|reference| ({self.why})"


# Two XLA compilations of one computation agree up to reassociation in reductions and fusion: over the
# <= 2**22 elements a sample holds, a float32 sum's rounding error is below ~ log2(n) * eps * sum|x| with
# pairwise summation (22 * 1.2e-7 ~ 3e-6 of the summed magnitude), so 1e-4 leaves a 30x margin and still
# catches every wrong element (a misplaced slice differs by O(1)). 16-bit floats carry 8-11 bits.
_BASE = {8: (1e-9, "float64: 2**-52 rounding, reassociated reductions"),
         4: (1e-4, "float32: reductions reassociated by two compilations"),
         2: (2e-2, "16-bit float: 8-11 bits of mantissa")}
# A TPU runs float32 matrix products and convolutions with bfloat16 passes by default
# (jax_default_matmul_precision): measured on a v5e, 2e-3 of the result's magnitude against a float64
# reference. Reference and artifact use the same precision, but may fuse differently around it.
_TPU = {4: (1e-2, "float32 on a TPU: matmuls and convolutions at bfloat16 precision by default"),
        2: (5e-2, "16-bit float on a TPU")}


def tolerance(dtype: np.dtype | str, platform: str = "cpu", rtol: float | None = None,
              atol: float | None = None) -> Tolerance:
    """The tolerance for comparing ``dtype`` outputs computed on ``platform``; the user's numbers win."""
    dt = jnp.dtype(dtype)
    size = dt.itemsize // 2 if jnp.issubdtype(dt, jnp.complexfloating) else dt.itemsize
    size = min(max(size, 2), 8)
    table = _TPU if platform == "tpu" and size in _TPU else _BASE
    base, why = table.get(size, _BASE[4])
    if rtol is not None or atol is not None:
        why = "given"
    return Tolerance(base if rtol is None else rtol, base if atol is None else atol, why)


@dataclass(frozen=True)
class Comparison:
    """The verdict on one sample's outputs: ``diff`` None when they agree; the largest errors seen."""

    diff: str | None
    max_abs: float = 0.0  # the largest |artifact - reference| over the float outputs
    max_rel: float = 0.0  # ... divided by max(1, max|reference|)
    tolerances: tuple[str, ...] = ()  # the tolerance used for each float dtype, as text


def compare(reference: Sequence[np.ndarray], exported: Sequence[np.ndarray],
            expected_shapes: Sequence[tuple[int, ...]] | None = None, *, platform: str = "cpu",
            rtol: float | None = None, atol: float | None = None) -> Comparison:
    """Exact for integers and bools, within :func:`tolerance` for floats."""
    if len(reference) != len(exported):
        return Comparison(f"{len(exported)} outputs from the artifact, {len(reference)} from the reference")
    max_abs = max_rel = 0.0
    tols: dict[str, str] = {}
    for i, (a, b) in enumerate(zip(reference, exported, strict=True)):
        a, b = np.asarray(a), np.asarray(b)
        if expected_shapes is not None and tuple(b.shape) != tuple(expected_shapes[i]):
            return Comparison(f"output {i}: shape {tuple(b.shape)} differs from out_avals evaluated here "
                              f"{tuple(expected_shapes[i])}")
        if a.shape != b.shape or a.dtype != b.dtype:
            return Comparison(f"output {i}: artifact gives {b.dtype}{list(b.shape)}, reference gives {a.dtype}{list(a.shape)}")
        if jnp.issubdtype(a.dtype, jnp.inexact):
            tol = tolerance(a.dtype, platform, rtol, atol)
            tols[a.dtype.name] = tol.text(a.dtype.name)
            wide = np.complex128 if jnp.issubdtype(a.dtype, jnp.complexfloating) else np.float64
            aw, bw = a.astype(wide), b.astype(wide)
            finite = np.isfinite(aw)
            scale = max(1.0, float(np.max(np.abs(aw[finite]))) if np.any(finite) else 1.0)
            with np.errstate(invalid="ignore", over="ignore"):  # inf - inf: judged by ``same`` below
                err = np.abs(aw - bw)
            same = (aw == bw) | (np.isnan(aw) & np.isnan(bw))  # equal infinities and NaNs agree
            close = same | (err <= tol.atol * scale + tol.rtol * np.abs(aw))
            real = err[np.isfinite(err)]
            if real.size:
                max_abs = max(max_abs, float(real.max()))
                max_rel = max(max_rel, float(real.max()) / scale)
        else:
            close = a == b
        if not np.all(close):
            idx = tuple(int(x) for x in np.argwhere(~close)[0])
            err_text = f"; largest error {max_abs:.3g}, {max_rel:.3g} of the output's scale" if tols else ""
            return Comparison(f"output {i} differs at index {list(idx)}: artifact {b[idx]!r}, reference {a[idx]!r} "
                              f"({int(np.size(close) - np.count_nonzero(close))} of {np.size(close)} elements differ"
                              f"{err_text})", max_abs, max_rel, tuple(tols.values()))
    return Comparison(None, max_abs, max_rel, tuple(tols.values()))


NAN_EVERYWHERE = "the program's own output is NaN everywhere here"


def nan_everywhere(outputs: Sequence[np.ndarray]) -> bool:
    """Every element of every non-empty floating output is NaN (and there is one): what a learned table
    looked up past its end with ``jnp.take`` (out-of-range rows filled with NaN, not refused) gives once
    attention has spread the NaN rows; nothing a user runs."""
    floats = [np.asarray(o) for o in outputs
              if jnp.issubdtype(np.asarray(o).dtype, jnp.inexact) and np.asarray(o).size]
    return bool(floats) and all(bool(np.all(np.isnan(o))) for o in floats)


def compare_outputs(native: Sequence[np.ndarray], exported: Sequence[np.ndarray],
                    expected_shapes: Sequence[tuple[int, ...]] | None = None,
                    rtol: float | None = None, atol: float | None = None, platform: str = "cpu") -> str | None:
    """None when equal (exactly for integers and bools, within tolerance for floats), else why not."""
    return compare(native, exported, expected_shapes, platform=platform, rtol=rtol, atol=atol).diff

"""Seeded inputs and the comparison of the artifact's outputs with the native function's."""

from __future__ import annotations

from collections.abc import Sequence

import jax.numpy as jnp
import numpy as np


def random_input(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """Seeded data: small ints (exact comparisons stay meaningful), normal floats."""
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape).astype(dtype)
    if jnp.issubdtype(dtype, jnp.unsignedinteger):
        return rng.integers(0, 20, size=shape).astype(dtype)
    if jnp.issubdtype(dtype, jnp.integer):
        return rng.integers(-9, 10, size=shape).astype(dtype)
    if jnp.issubdtype(dtype, jnp.complexfloating):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _tolerance(dtype: np.dtype, rtol: float | None, atol: float | None) -> tuple[float, float]:
    default = 2e-2 if jnp.dtype(dtype).itemsize <= 2 else 1e-5
    return (default if rtol is None else rtol, default if atol is None else atol)


def compare_outputs(native: Sequence[np.ndarray], exported: Sequence[np.ndarray],
                    expected_shapes: Sequence[tuple[int, ...]] | None = None,
                    rtol: float | None = None, atol: float | None = None) -> str | None:
    """None when equal (exactly for integers and bools, within tolerance for floats), else why not."""
    if len(native) != len(exported):
        return f"{len(exported)} outputs from the artifact, {len(native)} from the native function"
    for i, (a, b) in enumerate(zip(native, exported, strict=True)):
        a, b = np.asarray(a), np.asarray(b)
        if expected_shapes is not None and tuple(b.shape) != tuple(expected_shapes[i]):
            return f"output {i}: shape {tuple(b.shape)} differs from out_avals evaluated here {tuple(expected_shapes[i])}"
        if a.shape != b.shape or a.dtype != b.dtype:
            return f"output {i}: artifact gives {b.dtype}{list(b.shape)}, native gives {a.dtype}{list(a.shape)}"
        if jnp.issubdtype(a.dtype, jnp.inexact):
            wide = np.complex128 if jnp.issubdtype(a.dtype, jnp.complexfloating) else np.float64
            rt, at = _tolerance(a.dtype, rtol, atol)
            close = np.isclose(a.astype(wide), b.astype(wide), rtol=rt, atol=at, equal_nan=True)
        else:
            close = a == b
        if not np.all(close):
            idx = tuple(int(x) for x in np.argwhere(~close)[0])
            return (f"output {i} differs at index {list(idx)}: artifact {b[idx]!r}, native {a[idx]!r} "
                    f"({int(np.size(close) - np.count_nonzero(close))} of {np.size(close)} elements differ)")
    return None


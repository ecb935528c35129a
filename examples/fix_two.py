"""A function whose export needs two fixes: ``smtdims export examples/fix_two.py:two --spec b --fix``.

``two`` slices 16 elements and reshapes to pairs, so it runs natively exactly when ``b``
is even and at least 16: the spec ``2*b`` with ``b >= 8``. Exporting it with the bare
spec ``"b"`` fails twice over (JAX stops at the first: ``b >= 16`` is inconclusive);
``--fix`` iterates to the whole fix, verifies it and measures it against native runs.

Run it as a script to see the same from Python (``python examples/fix_two.py``).
"""

from __future__ import annotations

from jax import lax


def two(x):
    y = lax.slice_in_dim(x, 0, 16)
    return x.reshape(-1, 2).sum(1), y


def windows(x, y):
    """``x[a]``, ``y[b]``: a window of ``y``'s length over ``x``, then pairs of ``y``: a >= b and b even."""
    return lax.slice_in_dim(x, 0, y.shape[0]) + y, y.reshape(-1, 2)


if __name__ == "__main__":
    from smtdims_jax.pipeline import export_and_verify

    report = export_and_verify(two, "float32[b]", fix=True, samples=4, progress=True)
    print(report.table())

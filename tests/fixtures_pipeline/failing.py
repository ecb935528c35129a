"""Functions that ``jax.export`` refuses for a bare symbolic ``b``: the failed-export report.

``slice16``: ``b >= 16`` is undetermined (smtdims' fix: add the constraint ``b >= 16``).
``pairs``: the reshape needs ``mod(b, -2) == 0`` (smtdims' fix: write ``2*b`` for ``b``).
"""

from __future__ import annotations

from jax import lax


def slice16(x):
    return lax.slice_in_dim(x, 0, 16)


def pairs(x):
    return x.reshape((-1, 2))


def double(x):  # exports fine: float64 inputs keep their dtype end to end
    return x * 2.0

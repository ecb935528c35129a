"""An artifact stock JAX cannot load in time (its decision procedure is exponential in nested max/floordiv
shapes) is said, never waited for, and the fix's lower bounds make its shapes plain."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from smtdims_jax.pipeline import export_and_verify, fresh

_K = jnp.ones((3, 3, 1, 1), jnp.float32) / 9


def _conv(x):
    return jax.lax.conv_general_dilated(x, _K, (1, 1), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"))


def _pool(x):
    return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")


def _up(x):
    return jnp.repeat(jnp.repeat(x, 2, axis=1), 2, axis=2)


def _crop(skip, like):
    dh, dw = (skip.shape[1] - like.shape[1]) // 2, (skip.shape[2] - like.shape[2]) // 2
    return skip[:, dh:dh + like.shape[1], dw:dw + like.shape[2]]


def unet(x):
    """The original U-Net's arithmetic, two levels: VALID 3x3 convs, 2x2 pools, upsampling, cropped skips."""
    s1 = _conv(_conv(x))
    s2 = _conv(_conv(_pool(s1)))
    u2 = _up(_conv(_conv(_pool(s2))))
    u2 = jnp.concatenate([u2, _crop(s2, u2)], -1)[..., :1]
    u1 = _up(_conv(_conv(u2)))
    return jnp.concatenate([u1, _crop(s1, u1)], -1)


@pytest.fixture
def quick_limit(monkeypatch):
    monkeypatch.setattr(fresh, "LOAD_LIMIT_S", 5.0)  # stock JAX takes minutes on this artifact: 5 s tells it


def test_a_load_past_the_limit_is_said_not_waited_for(quick_limit):
    report = export_and_verify(unet, "float32[1, a, b, 1]", progress=False)
    assert not report.ok and fresh.slow_load(report.not_run), report.not_run
    assert "lower bounds" in report.not_run  # what to do


def test_from_an_example_the_fix_bounds_the_sizes_where_every_array_is_non_empty(quick_limit):
    got = export_and_verify(unet, np.zeros((1, 44, 44, 1), np.float32), dims="auto", progress=False)
    assert got.ok, str(got)
    assert got.constraints == ("a >= 40", "b >= 40"), got.constraints
    # 40 is the least size where every array is non-empty; below it the function runs on empty arrays
    def smallest_dim(h):
        out = jax.make_jaxpr(unet)(jax.ShapeDtypeStruct((1, h, h, 1), np.float32))
        return min(min(v.aval.shape) for e in out.jaxpr.eqns for v in e.outvars)
    assert smallest_dim(40) >= 1 and smallest_dim(39) == 0

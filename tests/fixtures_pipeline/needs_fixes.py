"""Functions whose export needs two or three fixes, and one that admits unsupported shapes.

Each docstring says what the function supports natively; tests/pipeline/test_fix_loop.py checks the
whole fix against native runs on a box of small shapes.
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax


def two(x):  # "b": b even and b >= 16, i.e. spec 2*b with b >= 8
    y = lax.slice_in_dim(x, 0, 16)
    return x.reshape(-1, 2).sum(1), y


def concat(x, y):  # "a", "b": a even and a + b >= 16 (a relation, not a bound on one variable)
    z = jnp.concatenate([x, y])
    return lax.slice_in_dim(z, 0, 16), x.reshape(-1, 2)


def conv(x):  # "1, 1, b": a VALID window of 3 leaves b - 2 >= 8, and b a multiple of 3: spec 3*b, b >= 4
    k = jnp.ones((1, 1, 3), x.dtype)
    y = lax.conv_general_dilated(x, k, (1,), "VALID")
    return lax.slice_in_dim(y, 0, 8, axis=2), x.reshape(-1, 3)


def pool(x):  # "b, c": a 2x2 VALID max-pool then 4x4 of it: b >= 5, c >= 5
    y = lax.reduce_window(x, -jnp.inf, lax.max, (2, 2), (1, 1), "VALID")
    return lax.slice_in_dim(lax.slice_in_dim(y, 0, 4, axis=0), 0, 4, axis=1)


def relate(x, y):  # "a", "b": a window of y's length over x (a >= b), and 4 of y (b >= 4)
    return lax.slice_in_dim(x, 0, y.shape[0]) + y, lax.slice_in_dim(y, 0, 4)


def three(x, y):  # "a", "b": x even, at least 16, and at least as long as y: three fixes
    return lax.slice_in_dim(x, 0, 16), x.reshape(-1, 2), lax.slice_in_dim(x, 0, y.shape[0]) * 2


def doubled(x, y):  # "a", "b": concatenate x twice and add y: b == 2*a (or b == 1, which broadcasts)
    return jnp.concatenate([x, x]) + y


def quarters(x, y):  # "b, 2*d", "b, d": exports, but b*d must be a multiple of 4 at run time
    return y.reshape(y.shape[0] * y.shape[1] // 4, 4), x


def branchy(x):  # "b": Python branches on b >= 16; each side runs natively, no one specification admits both
    return x[:16] * 2 if x.shape[0] >= 16 else x * 2


def blocky(x):  # "b, t": blocks of 8 (t a multiple of 8), and the model's own code refuses t == 1024
    b, t = x.shape
    if t == 1024:
        raise ValueError("a sequence of 1024 takes the dense path, which this model does not export")
    return x.reshape(b, -1, 8).sum(-1)

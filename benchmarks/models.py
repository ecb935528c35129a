"""The export suite: models and seed examples, each a factory returning a fresh function and specs.

``make()`` returns ``(fn, args)`` where ``fn`` is a new function object (so jit caches
never carry over between runs) and ``args`` are ShapeDtypeStructs built from a fresh
symbolic scope. Nothing here imports smtdims.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Case:
    name: str
    make: Callable[[], tuple[Callable, tuple]]
    stock_ok: bool = True  # stock JAX exports it (otherwise: smtdims-only, outside the ratio)


def _jax():
    import jax
    import jax.numpy as jnp
    from jax import export, lax

    return jax, jnp, export, lax


def _w(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)


# -- models --------------------------------------------------------------------------------------------
def make_mlp():
    jax, jnp, export, _ = _jax()
    rng = np.random.default_rng(0)
    w1, b1 = _w(rng, 784, 256), np.zeros(256, np.float32)
    w2, b2 = _w(rng, 256, 128), np.zeros(128, np.float32)
    w3 = _w(rng, 128, 10)

    def mlp(x):
        h = jax.nn.relu(x @ w1 + b1)
        h = jax.nn.gelu(h @ w2 + b2)
        return jax.nn.log_softmax(h @ w3, axis=-1)

    (b,) = export.symbolic_shape("b")
    return mlp, (jax.ShapeDtypeStruct((b, 784), jnp.float32),)


def make_cnn():
    jax, jnp, export, lax = _jax()
    rng = np.random.default_rng(1)
    k1, k2, k3 = _w(rng, 3, 3, 3, 16), _w(rng, 3, 3, 16, 32), _w(rng, 5, 5, 32, 32)
    wd = _w(rng, 32, 10)
    dn = ("NHWC", "HWIO", "NHWC")

    def cnn(x):
        y = lax.conv_general_dilated(x, k1, (1, 1), "SAME", dimension_numbers=dn)
        y = jax.nn.relu(y)
        y = lax.reduce_window(y, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")  # max pool
        y = lax.conv_general_dilated(y, k2, (2, 2), "SAME", dimension_numbers=dn)  # strided SAME
        y = jax.nn.relu(y)
        y = lax.conv_general_dilated(y, k3, (1, 1), "VALID", dimension_numbers=dn)
        y = lax.reduce_window(y, 0.0, lax.add, (1, 3, 3, 1), (1, 1, 1, 1), "SAME") / 9.0  # avg pool
        y = jnp.mean(y, axis=(1, 2))
        return y @ wd

    b, h, w = export.symbolic_shape("b, h, w", constraints=("h >= 32", "w >= 32"))
    return cnn, (jax.ShapeDtypeStruct((b, h, w, 3), jnp.float32),)


def make_transformer():
    jax, jnp, export, _ = _jax()
    rng = np.random.default_rng(2)
    d, heads = 64, 4
    wqkv, wo = _w(rng, d, 3 * d), _w(rng, d, d)
    w1, w2 = _w(rng, d, 4 * d), _w(rng, 4 * d, d)
    g1, g2 = np.ones(d, np.float32), np.ones(d, np.float32)

    def layer_norm(x, g):
        mu = jnp.mean(x, axis=-1, keepdims=True)
        var = jnp.mean((x - mu) ** 2, axis=-1, keepdims=True)
        return (x - mu) / jnp.sqrt(var + 1e-5) * g

    def block(x):
        bsz, seq, _ = x.shape
        h = layer_norm(x, g1)
        qkv = h @ wqkv
        q, k, v = jnp.split(qkv, 3, axis=-1)

        def heads_(t):
            return t.reshape(bsz, seq, heads, d // heads).transpose(0, 2, 1, 3)

        q, k, v = heads_(q), heads_(k), heads_(v)
        s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / np.sqrt(d // heads)
        mask = jnp.arange(seq)[:, None] >= jnp.arange(seq)[None, :]
        s = jnp.where(mask, s, -1e9)
        a = jax.nn.softmax(s, axis=-1)
        o = jnp.einsum("bhqk,bhkd->bhqd", a, v).transpose(0, 2, 1, 3).reshape(bsz, seq, d)
        x = x + o @ wo
        h = layer_norm(x, g2)
        return x + jax.nn.gelu(h @ w1) @ w2

    b, s = export.symbolic_shape("b, s")
    return block, (jax.ShapeDtypeStruct((b, s, d), jnp.float32),)


def make_preprocess():
    jax, jnp, export, lax = _jax()

    def prep(x, y):
        bsz, n = x.shape  # n = 2*s
        a = x[:, 1:] - x[:, :-1]  # differences
        a = jnp.pad(a, ((0, 0), (0, 1)))
        pairs = x.reshape(bsz, n // 2, 2).sum(-1)  # reshape to pairs
        evens, odds = x[:, ::2], x[:, 1::2]
        z = jnp.concatenate([evens, odds, pairs], axis=1)
        z = lax.dynamic_slice_in_dim(z, 1, n // 2, axis=1)
        tail = x[:, n // 2:]
        w = jnp.concatenate([tail, y[:, :tail.shape[1]]], axis=1)
        r = jnp.roll(x, 3, axis=1)
        flat = jnp.reshape(x, (-1,))[: bsz * n // 2]
        return z, w, a + r, flat.reshape(bsz, n // 2)[:, ::3]

    b, s = export.symbolic_shape("b, s")
    return prep, (jax.ShapeDtypeStruct((b, 2 * s), jnp.float32), jax.ShapeDtypeStruct((b, 2 * s + 3), jnp.float32))


# -- seed examples (SEED-EXAMPLES.md) ------------------------------------------------------------------------
def seed_1():
    jax, jnp, export, _ = _jax()
    a, b = export.symbolic_shape("a, b")
    return (lambda x: jnp.concatenate([x, x], axis=1)), (jax.ShapeDtypeStruct((a, b), jnp.int32),)


def seed_2():
    jax, jnp, export, _ = _jax()
    return (lambda x: jnp.reshape(x, (x.shape[0] * x.shape[1],))), (
        jax.ShapeDtypeStruct(export.symbolic_shape("b, 4"), jnp.int32),)


def seed_3():
    jax, jnp, export, _ = _jax()
    x, y = np.ones((3, 1), np.int32), np.ones((3, 4), np.int32)
    specs = export.symbolic_args_specs((x, y), "a, ...")
    return (lambda x, y: x + y), tuple(specs)


def seed_8():
    jax, jnp, export, _ = _jax()

    def f(x):
        return jnp.array(x.shape[0]) * x, jnp.sum(x, axis=0) / x.shape[0]

    return f, (jax.ShapeDtypeStruct(export.symbolic_shape("b, 3"), jnp.float32),)


def seed_9():
    jax, jnp, export, lax = _jax()
    return (lambda x: lax.slice_in_dim(x, 0, 16)), (jax.ShapeDtypeStruct(export.symbolic_shape("b + 15"), jnp.int32),)


def seed_10():
    jax, jnp, export, _ = _jax()
    a, b = export.symbolic_shape("a, b", constraints=("a >= b", "b >= 16"))
    return (lambda x: x[: x.shape[1], :16]), (jax.ShapeDtypeStruct((a, b), jnp.int32),)


def seed_13():
    jax, jnp, export, lax = _jax()
    return (lambda x: lax.slice_in_dim(x, 0, x.shape[0] % 3)), (
        jax.ShapeDtypeStruct(export.symbolic_shape("b"), jnp.int32),)


def seed_16():
    jax, jnp, export, lax = _jax()
    k, b = export.symbolic_shape("k, b", constraints=("k <= 10",))

    def f(dummy, x):
        return lax.top_k(x, dummy.shape[1])[0]

    return f, (jax.ShapeDtypeStruct((0, k), jnp.int32), jax.ShapeDtypeStruct((b, 10), jnp.int32))


CASES: tuple[Case, ...] = (
    Case("mlp", make_mlp),
    Case("cnn (SAME/VALID conv, pooling)", make_cnn),
    Case("transformer block", make_transformer),
    Case("preprocess (reshape/slice)", make_preprocess),
    Case("seed 1 concat", seed_1),
    Case("seed 2 flatten", seed_2),
    Case("seed 3 broadcast", seed_3),
    Case("seed 8 dim as value", seed_8),
    Case("seed 9 slice b+15", seed_9),
    Case("seed 10 constraints", seed_10),
    Case("seed 16 top_k", seed_16),
    Case("seed 13 slice mod(b,3)", seed_13, stock_ok=False),
)


def export_case(case: Case) -> Any:
    jax, _, export, _ = _jax()
    fn, args = case.make()
    return export.export(jax.jit(fn))(*args)

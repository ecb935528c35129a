"""Issue 7: provable symbolic `==` inside JAX, never True for expressions that differ somewhere."""

from __future__ import annotations

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from colliding_key import CollidingKey
from jax import export, lax

import smtdims


def _dim(op, a, b):
    if isinstance(a, int):  # the native function runs on concrete shapes
        return max(a, b) if op == "max" else min(a, b)
    (d,) = export.symbolic_shape(f"{op}(a, b)", scope=a.scope)
    return d


# Each maker takes the inputs and returns two arrays whose leading dims are the two
# spellings of one size.
def pair_halves(x):
    n = x.shape[0]
    return x, jnp.concatenate([lax.slice_in_dim(x, 0, 2 * (n // 2)), lax.slice_in_dim(x, 0, n % 2)])


def pair_floor_ceil(x):
    n = x.shape[0]
    return jnp.concatenate([lax.slice_in_dim(x, 0, n // 2), lax.slice_in_dim(x, 0, (n + 1) // 2)]), x


def pair_mod_shift(x):
    n = x.shape[0]
    return lax.slice_in_dim(x, 0, (n + 2) % 2), lax.slice_in_dim(x, 0, n % 2)


def pair_max_min(x, y):
    a, b = x.shape[0], y.shape[0]
    big = lax.iota(jnp.float32, _dim("max", a, b))
    small = lax.iota(jnp.float32, _dim("min", a, b))
    return jnp.concatenate([big, small]), jnp.concatenate([x, y])


PAIRS = {
    "b vs 2*floordiv(b,2)+mod(b,2)": (pair_halves, 1),
    "floordiv(b,2)+floordiv(b+1,2) vs b": (pair_floor_ceil, 1),
    "mod(b+2,2) vs mod(b,2)": (pair_mod_shift, 1),
    "max(a,b)+min(a,b) vs a+b": (pair_max_min, 2),
}

USES = {
    "broadcast_add": lambda u, v: u + v,
    "concatenate": lambda u, v: jnp.concatenate([u[:, None], v[:, None]], axis=1),
    "where": lambda u, v: jnp.where(u > 2, u, v),
}


def _specs(nargs):
    names = "a, b" if nargs == 2 else "b"
    dims = export.symbolic_shape(names)
    return [jax.ShapeDtypeStruct((d,), jnp.float32) for d in dims]


def _fn(maker, use):
    return lambda *xs: use(*maker(*xs))


@pytest.mark.parametrize("use", sorted(USES))
@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_stock_rejects_the_shapes(stock, pair, use):
    maker, nargs = PAIRS[pair]
    with pytest.raises((TypeError, ValueError), match="(?i)incompatible|shapes that differ"):
        export.export(jax.jit(_fn(maker, USES[use])))(*_specs(nargs))


@pytest.mark.parametrize("use", sorted(USES))
@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_smtdims_exports_and_matches_native(installed, pair, use):
    maker, nargs = PAIRS[pair]
    f = _fn(maker, USES[use])
    exp = export.export(jax.jit(f))(*_specs(nargs))
    sizes = [(n,) for n in range(1, 7)] if nargs == 1 else list(itertools.product([1, 2, 5], [1, 3, 4]))
    rng = np.random.default_rng(0)
    for shape in sizes:
        args = [rng.integers(0, 5, size=(n,)).astype(np.float32) for n in shape]
        np.testing.assert_array_equal(exp.call(*args), f(*args))


def test_equality_can_be_turned_off():
    try:
        smtdims.install(equality=False)
        with pytest.raises(TypeError):
            export.export(jax.jit(_fn(pair_halves, USES["broadcast_add"])))(*_specs(1))
    finally:
        smtdims.uninstall()


def test_equality_never_claims_unequal_expressions_equal(installed):
    a, b = export.symbolic_shape("a, b")
    assert (b == 1) is False
    assert (a == b) is False
    assert (b // 2 + (b + 1) // 2 == b) is True
    assert (b // 2 == (b + 1) // 2) is False  # equal for even b only
    assert (b % 2 == 0) is False
    assert (b != 2 * (b // 2) + b % 2) is False
    c, d = export.symbolic_shape("c, d", constraints=("c >= d", "d >= c"))
    assert (c == d) is True  # equal only because of the constraints
    assert (c + 1 == d) is False


def test_hash_consequence_documented(installed):
    """Equal-but-differently-written dims may hash differently: dict lookups may miss, as in stock."""
    (b,) = export.symbolic_shape("b")
    other = 2 * (b // 2) + b % 2
    assert other == b
    cache = {b: "x"}
    assert cache.get(other) in (None, "x")  # either is allowed; nothing raises


@pytest.mark.parametrize("on", [False, True], ids=["stock", "smtdims"])
def test_lookups_compare_keys_as_stock_does(on):
    """A lookup gets stock's syntactic answer: a cache hands back the entry of the dimension asked
    for, never that of another one smtdims proves equal (which would depend on hash luck).
    The ``==`` that code writes stays provable, also inside a key's ``__eq__``."""
    try:
        if on:
            smtdims.install()
        c, d = export.symbolic_shape("c, d", constraints=("c >= d", "d >= c"))
        assert ((c,) == (d,)) is on and (CollidingKey((c,)) == CollidingKey((d,))) is on
        assert {CollidingKey((c,)): "c"}.get(CollidingKey((d,))) is None
        cached = functools.lru_cache(lambda k: k.shape)
        assert cached(CollidingKey((c,))) == (c,)
        assert str(cached(CollidingKey((d,)))[0]) == "d"
        assert jax.ShapeDtypeStruct((d,), jnp.float32).shape[0] is d
    finally:
        smtdims.uninstall()

"""The whole fix on models written with the libraries people use (issue 26): flax nnx, flax linen and
equinox, random init. Each: stock JAX refuses the export, ``export_and_verify(fix=True)`` finds the fix
a person writes, the fixed export equals the native model at three sizes including the fix's extreme,
and a size the native model refuses is refused by the fixed export at call time.

Skipped where flax or equinox is not installed (the ``test`` extra installs them).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export
from smtdims_jax.pipeline import export_and_verify

import smtdims

nnx = pytest.importorskip("flax.nnx")
nn = pytest.importorskip("flax.linen")
eqx = pytest.importorskip("equinox")

MAXLEN, D, V = 64, 16, 50


class NnxGPT(nnx.Module):
    """nanoGPT's embedding in flax nnx: token table plus the position table sliced to the sequence."""

    def __init__(self, rngs):
        self.tok = nnx.Embed(V, D, rngs=rngs)
        self.pos = nnx.Embed(MAXLEN, D, rngs=rngs)
        self.out = nnx.Linear(D, V, rngs=rngs)

    def __call__(self, ids):
        return self.out(self.tok(ids) + self.pos.embedding[...][: ids.shape[1]])


class LinenGPT(nn.Module):
    @nn.compact
    def __call__(self, ids):
        x = nn.Embed(V, D)(ids)
        pos = self.param("pos", nn.initializers.normal(0.02), (MAXLEN, D))
        return nn.Dense(V)(x + pos[: ids.shape[1]])


class EqxGPT(eqx.Module):
    tok: eqx.nn.Embedding
    pos: eqx.nn.Embedding

    def __init__(self, key):
        k1, k2 = jax.random.split(key)
        self.tok = eqx.nn.Embedding(V, D, key=k1)
        self.pos = eqx.nn.Embedding(MAXLEN, D, key=k2)

    def __call__(self, ids):
        return self.tok.weight[ids] + self.pos.weight[: ids.shape[1]]


class LinenUNet(nn.Module):
    """A 1-D U-Net level: conv, pool by 2 (SAME), conv, upsample by repeating, concatenate with the skip."""

    @nn.compact
    def __call__(self, x):
        skip = nn.Conv(8, (3,), padding="SAME")(x)
        y = nn.max_pool(skip, (2,), strides=(2,), padding="SAME")
        y = jnp.repeat(nn.Conv(8, (3,), padding="SAME")(y), 2, axis=1)
        return jnp.concatenate([skip, y], axis=-1)


class EqxPatches(eqx.Module):
    """Tokens grouped in fours (``reshape(b, -1, 4*D)``) then projected: the sequence must divide by 4."""

    proj: eqx.nn.Linear

    def __init__(self, key):
        self.proj = eqx.nn.Linear(4 * D, D, key=key)

    def __call__(self, x):
        b = x.shape[0]
        return jax.vmap(jax.vmap(self.proj))(x.reshape(b, -1, 4 * D))


_nnx_gpt = NnxGPT(nnx.Rngs(0))
_linen_gpt = LinenGPT()
_linen_gpt_vars = _linen_gpt.init(jax.random.PRNGKey(0), jnp.zeros((1, 4), jnp.int32))
_eqx_gpt = EqxGPT(jax.random.PRNGKey(1))
_unet = LinenUNet()
_unet_vars = _unet.init(jax.random.PRNGKey(2), jnp.zeros((1, 8, 3)))
_patches = EqxPatches(jax.random.PRNGKey(3))


def nnx_gpt(ids):
    return _nnx_gpt(ids)


def linen_gpt(ids):
    return _linen_gpt.apply(_linen_gpt_vars, ids)


def eqx_gpt(ids):
    return _eqx_gpt(ids)


def linen_unet(x):
    return _unet.apply(_unet_vars, x)


def eqx_patches(x):
    return _patches(x)


T = {"b": 1, "t": 1}
# name -> (fn, spec, the person's fix (a constraint or "v := rewrite"), sizes compared, a natively failing size)
CASES = {
    "flax nnx GPT": (nnx_gpt, "int32[b, t]", {"t <= 64"}, [T, {"b": 2, "t": 17}, {"b": 1, "t": 64}], {"b": 1, "t": 65}),
    "flax linen GPT": (linen_gpt, "int32[b, t]", {"t <= 64"}, [T, {"b": 3, "t": 9}, {"b": 1, "t": 64}],
                       {"b": 2, "t": 65}),
    "equinox GPT": (eqx_gpt, "int32[b, t]", {"t <= 64"}, [T, {"b": 2, "t": 40}, {"b": 1, "t": 64}], {"b": 1, "t": 70}),
    "flax linen U-Net": (linen_unet, "float32[b, h, 3]", {"h := 2*h", "mod(h, 2) == 0"},
                         [{"b": 1, "h": 2}, {"b": 2, "h": 6}, {"b": 1, "h": 40}], {"b": 1, "h": 5}),
    "equinox patches (reshape -1)": (eqx_patches, f"float32[b, n, {D}]", {"n := 4*n", "mod(n, 4) == 0"},
                                     [{"b": 1, "n": 4}, {"b": 2, "n": 12}, {"b": 1, "n": 64}], {"b": 1, "n": 6}),
}


def _shape(spec, env):
    from smtdims.parser import parse_expr

    return tuple(parse_expr(d).evaluate(env) for d in spec.split("[")[1].rstrip("]").split(","))


def _arg(spec, env, rng):
    shape = _shape(spec, env)
    if spec.startswith("int32"):
        return rng.integers(0, V, size=shape).astype(np.int32)
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_whole_fix_of_a_library_model(case):
    fn, spec, person, sizes, failing = CASES[case]
    dtype = jnp.int32 if spec.startswith("int32") else jnp.float32
    smtdims.uninstall()
    with pytest.raises(Exception):  # noqa: B017 - stock JAX refuses it (ValueError, TypeError or inconclusive)
        export.export(jax.jit(fn))(jax.ShapeDtypeStruct(export.symbolic_shape(spec.split("[")[1].rstrip("]")), dtype))
    report = export_and_verify(fn, spec, fix=True, samples=4)
    fix = report.fix
    assert fix is not None and fix.ok, "\n".join(fix.lines() if fix else report.lines())
    got = set(fix.constraints) | {f"{p.variable} := {p.text}" for p in fix.parts if p.kind == "spec"}
    assert got & person, (fix.constraints, [str(p) for p in fix.parts])
    exp = fix.report.exported
    rng = np.random.default_rng(0)
    for env in sizes:
        x = _arg(spec, env, rng)
        np.testing.assert_allclose(np.asarray(exp.call(x)), np.asarray(fn(x)), rtol=1e-4, atol=1e-4)
    x = _arg(spec, failing, rng)
    with pytest.raises(Exception):  # noqa: B017 - the native model fails here ...
        jax.eval_shape(fn, x)
    with pytest.raises(Exception):  # noqa: B017 - ... and the fixed export refuses it at call time
        exp.call(x)

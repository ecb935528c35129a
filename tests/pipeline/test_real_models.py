"""The whole fix on the shapes real models have: each pattern stock JAX refuses, the fix a
person writes (or a weaker one) found by ``export_and_verify(fix=True)``, the fixed export equal to
the native model at three sizes including the fix's extreme, and a natively failing size refused.

The models are the layers' own arithmetic (a learned position table, a patchify conv, a U-Net
skip, windowed attention), small and randomly initialised, in plain JAX so that every CI
environment runs them.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export, lax
from smtdims_jax.pipeline import export_and_verify

import smtdims

RNG = np.random.default_rng(0)
TABLE = jnp.asarray(RNG.standard_normal((512, 32)), jnp.float32)
POS = jnp.asarray(RNG.standard_normal((128, 32)), jnp.float32)
PATCH = jnp.asarray(RNG.standard_normal((8, 8, 3, 16)) * 0.1, jnp.float32)
VIT_POS = jnp.asarray(RNG.standard_normal((64, 16)), jnp.float32)


def gpt_lax(x):  # nanoGPT: tok_emb + pos_emb[:t], lax spelling (rank-matched)
    return lax.add(x, TABLE[None, : x.shape[1]])


def gpt_jnp(x):  # BERT/equinox: x + pos[:seq] across ranks
    return x + POS[: x.shape[1]]


def bias_across_ranks(x, bias):
    return x + bias


def unet_skip(x):  # pool by 2 (SAME), upsample by 2, concatenate with the skip
    p = lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 1), (1, 2, 1), "SAME")
    return jnp.concatenate([x, jnp.repeat(p, 2, axis=1)], axis=-1)


def split_halves(x, y):
    a, b = jnp.split(jnp.concatenate([x, y]), 2)
    return a - b


def reshape_minus_one(x):
    return x.reshape(x.shape[0], -1, 4).sum(axis=-1)


def vit(x):  # patchify by 8 (VALID), flatten the grid, add the learned positions
    y = lax.conv_general_dilated(x, PATCH, (8, 8), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    b, hp, wp, d = y.shape
    return y.reshape(b, hp * wp, d) + VIT_POS[: hp * wp]


def windowed(x):  # attention inside windows of 16 positions, then back to (b, t, d)
    b, t, d = x.shape
    w = x.reshape(b * (t // 16), 16, d)
    w = jax.nn.softmax(w @ w.transpose(0, 2, 1), axis=-1) @ w
    return w.reshape(b, -1, d)


# name -> (fn, specs, the person's fix: constraints and/or spec rewrites, sizes (dict) to compare,
#          a size that fails natively, whether stock JAX refuses the export)
CASES = {
    "position table (lax)": (gpt_lax, ["float32[b, t, 32]"], {"t <= 512"}, [{"b": 1, "t": 1}, {"b": 2, "t": 37},
                             {"b": 1, "t": 512}], {"b": 1, "t": 513}),
    "position table (jnp)": (gpt_jnp, ["float32[b, t, 32]"], {"t <= 128"}, [{"b": 1, "t": 1}, {"b": 3, "t": 50},
                             {"b": 1, "t": 128}], {"b": 1, "t": 129}),
    "bias across ranks": (bias_across_ranks, ["float32[b, a, 4]", "float32[c, 4]"], {"a == c", "c := a", "a := c"},
                          [{"b": 1, "a": 1, "c": 1}, {"b": 2, "a": 5, "c": 5}, {"b": 3, "a": 9, "c": 9}],
                          {"b": 1, "a": 2, "c": 3}),
    "U-Net skip": (unet_skip, ["float32[b, h, 8]"], {"h := 2*k", "mod(h, 2) == 0"},
                   [{"b": 1, "h": 2}, {"b": 2, "h": 6}, {"b": 1, "h": 40}], {"b": 1, "h": 5}),
    "split": (split_halves, ["float32[b, 4]", "float32[a, 4]"], {"mod(a + b, 2) == 0"},
              [{"b": 1, "a": 1}, {"b": 2, "a": 4}, {"b": 7, "a": 9}], {"b": 1, "a": 2}),
    "reshape with -1": (reshape_minus_one, ["float32[b, n]"], {"n := 4*k", "mod(n, 4) == 0"},
                        [{"b": 1, "n": 4}, {"b": 3, "n": 12}, {"b": 2, "n": 64}], {"b": 1, "n": 6}),
}


def _person_fix_found(fix, person) -> bool:
    got = set(fix.constraints) | {f"{p.variable} := {p.text}" for p in fix.parts if p.kind == "spec"}
    return bool(got & person)


def _args(specs, env):
    """Concrete inputs of the original specification's shapes at ``env``."""
    from smtdims.lang.parser import parse_expr

    out = []
    for spec in specs:
        shape = tuple(parse_expr(d).evaluate(env) for d in spec.split("[")[1].rstrip("]").split(","))
        out.append(RNG.standard_normal(shape).astype(np.float32))
    return out


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_whole_fix_of_a_real_model_pattern(case):
    fn, specs, person, sizes, failing = CASES[case]
    smtdims.uninstall()
    structs = [jax.ShapeDtypeStruct(export.symbolic_shape(s.split("[")[1].rstrip("]"), scope=scope), jnp.float32)
               for scope in [export.SymbolicScope()] for s in specs]
    with pytest.raises(Exception):  # noqa: B017 - stock JAX refuses it (TypeError, ValueError or inconclusive)
        export.export(jax.jit(fn))(*structs)
    report = export_and_verify(fn, *specs, fix=True, samples=4)
    fix = report.fix
    assert fix is not None and fix.ok, "\n".join(fix.lines() if fix else report.lines())
    assert _person_fix_found(fix, person), (fix.constraints, [str(p) for p in fix.parts])
    exp = fix.report.exported
    for env in sizes:
        args = _args(specs, env)
        np.testing.assert_allclose(np.asarray(exp.call(*args)), np.asarray(fn(*args)), rtol=1e-4, atol=1e-4)
    if failing is not None:
        args = _args(specs, failing)
        with pytest.raises(Exception):  # noqa: B017 - the native model fails here ...
            jax.eval_shape(fn, *args)
        with pytest.raises(Exception):  # noqa: B017 - ... and the fixed export refuses it at call time
            exp.call(*args)


def test_vit_gets_the_nonlinear_condition():
    """Patchify then slice the positions: the condition is nonlinear (stock JAX cannot even state it);
    the fix admits exactly the grids with at most 64 patches."""
    report = export_and_verify(vit, "float32[b, h, w, 3]", fix=True, samples=4)
    fix = report.fix
    assert fix is not None and fix.ok and len(fix.constraints) == 1
    from smtdims.lang.constraints import Constraint

    c = Constraint.parse(fix.constraints[0])
    for h in range(8, 80, 3):
        for w in range(8, 80, 5):
            assert c.holds({"h": h, "w": w, "b": 1}) == ((h // 8) * (w // 8) <= 64)


def test_windowed_attention_divisibility_from_an_intermediate_shape():
    """``floordiv(t, 16)`` appears only between the reshapes: the diagnosis reads every intermediate shape
    (it used to propose only ``t >= 16``, admitting t = 17..19, which fail natively)."""
    report = export_and_verify(windowed, "float32[b, t, 8]", fix=True, samples=4)
    _assert_admits_exactly(report, lambda env: env["t"] % 16 == 0, ("b", "t"))


def test_verification_on_empty_arrays_is_not_verification():
    """A stride-2 conv, a 2x2 pool and 4x4 patches: small shapes give empty outputs. A sample where every
    array is non-empty is chosen, so the failure at (1, 29, 18, 3) is found and both variables constrained."""
    k = jnp.asarray(RNG.standard_normal((3, 3, 3, 4)), jnp.float32)

    def conv_pool_patches(x):
        y = lax.conv_general_dilated(x, k, (2, 2), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        y = lax.reduce_window(y, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        b, h, w, c = y.shape
        return y.reshape(b, h // 4, 4, w // 4, 4, c).mean(axis=(2, 4))

    report = export_and_verify(conv_pool_patches, "float32[b, h, w, 3]", fix=True, samples=4)

    def pooled_multiple_of_4(n):
        return ((n - 3) // 2 - 1) // 2 + 1

    def runs(env):
        return pooled_multiple_of_4(env["h"]) % 4 == 0 and pooled_multiple_of_4(env["w"]) % 4 == 0

    checks = {c.name: c.status for c in report.checks}
    if report.exported:  # JAX >= 0.8 exports it (floordiv in the reshape); its samples fail natively
        assert checks["non-empty sample"] == "pass" and not report.ok
    _assert_admits_exactly(report, runs, ("b", "h", "w"), values=range(1, 45, 3))


def _assert_admits_exactly(report, runs_natively, names, values=range(1, 60)):
    """The verified fix (a failed export's whole fix: JAX 0.7 refuses the reshape while exporting) or the
    diagnosis (an export whose samples fail natively: newer JAX checks the division at call time) admits
    exactly the valuations where the model runs, on a grid beyond the box. A spec rewrite (``t -> 16*k``)
    admits exactly the multiples, the constraints reading on the new variable."""
    import itertools

    from smtdims.lang.constraints import ConstraintSet

    fix = report.fix  # a failed export's whole fix, or an exported one's whose samples failed natively
    assert fix is not None and fix.ok, report.table() + "\n" + "\n".join(fix.lines() if fix else ())
    scale, named = {}, {}
    for p in fix.parts:  # v -> m*w: v admitted exactly at the multiples of m, the constraints read on w = v / m
        if p.kind == "spec":
            m, _, w = p.text.partition("*")
            assert m.isdigit() and w.isidentifier() and p.variable not in scale, p
            scale[p.variable], named[p.variable] = int(m), w
    cs = ConstraintSet.of(fix.constraints)
    for vals in itertools.product(values, repeat=len(names)):
        env = dict(zip(names, vals, strict=True))
        admitted = all(env[v] % k == 0 for v, k in scale.items()) and cs.holds(
            {named.get(v, v): x // scale.get(v, 1) for v, x in env.items()})
        assert admitted == runs_natively(env), (env, scale, cs)


def keras_like_call(x):
    """Keras' traceback filtering re-creates the error as ``e.__class__(message)`` and raises it ``from None``
    (keras/src/utils/traceback_utils.py); a framework may also wrap it in its own type."""
    try:
        return gpt_jnp(x)
    except Exception as e:  # noqa: BLE001 - the re-raise under test
        raise e.__class__(f"Exception encountered when calling layer 'embeddings'.\n\n{e}") from None


def wrapped_call(x):
    try:
        return gpt_jnp(x)
    except Exception as e:  # noqa: BLE001 - the re-raise under test
        raise RuntimeError("layer call failed") from e


@pytest.mark.parametrize("fn", [keras_like_call, wrapped_call], ids=["e.__class__(msg) from None", "RuntimeError from e"])
def test_a_framework_reraised_error_still_gets_its_fix(fn):
    """The loop reads the equation from JAX's seam, not from the exception: a re-created or wrapped error
    changes nothing (keras-hub's BertBackbone raised RuntimeError and the loop crashed)."""
    report = export_and_verify(fn, "float32[b, t, 32]", fix=True, samples=4)
    assert report.fix is not None and report.fix.ok, report.table()
    assert report.fix.constraints == ("t <= 128",)



def make_pad_to_16():
    """A fresh function each time (JAX caches a trace by the function: stock's and smtdims' exports
    must not share one)."""

    def pad_to_16(x):  # pad the sequence to a multiple of 16, then split it into blocks of 16
        b, t, d = x.shape
        pad = (-t) % 16
        y = jnp.pad(x, ((0, 0), (0, pad), (0, 0)))
        return y.reshape(b, -1, 16, d)

    return pad_to_16


def test_pad_to_a_multiple_then_reshape_exports_as_written(installed):
    """The reshape asks whether ``mod(8*b*mod(-t, 16) + 8*b*t, -128*b)`` is 0: the common factor ``8*b``
    of the remainder's operands divided out, the linear rungs prove ``mod(t + mod(-t, 16), -16) == 0``.
    Stock JAX refuses it (it cannot divide the remainder's operands); no constraint or fix is needed."""
    fn = make_pad_to_16()
    exp = export.export(jax.jit(fn))(jax.ShapeDtypeStruct(export.symbolic_shape("b, t, 8"), jnp.float32))
    for t in (1, 15, 16, 17, 33):
        x = jnp.asarray(RNG.standard_normal((2, t, 8)), jnp.float32)
        got, want = exp.call(x), jax.jit(fn)(x)
        assert got.shape == want.shape == (2, -(-t // 16), 16, 8)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    installed.uninstall()
    with pytest.raises(Exception, match="should be 0"):  # stock JAX: an inconclusive remainder
        export.export(jax.jit(make_pad_to_16()))(jax.ShapeDtypeStruct(export.symbolic_shape("b, t, 8"), jnp.float32))

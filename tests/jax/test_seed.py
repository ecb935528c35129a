"""Every row of shared/SEED-EXAMPLES.md, with smtdims installed, as the smtdims column says."""

from __future__ import annotations

import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export, lax

import smtdims

pytestmark = pytest.mark.usefixtures("installed")


def spec(shape, dtype=jnp.int32):
    return jax.ShapeDtypeStruct(shape, dtype)


def valuations_in(message: str) -> list[dict[str, int]]:
    """Parse 'a = 1, b = 3 makes ...' valuations out of an error message."""
    out = []
    for m in re.finditer(r"((?:\w+ = -?\d+(?:, )?)+) makes", message):
        out.append({k: int(v) for k, v in re.findall(r"(\w+) = (-?\d+)", m.group(1))})
    return out


def test_row1_concatenate():
    a, b = export.symbolic_shape("a, b")
    exp = export.export(jax.jit(lambda x: jnp.concatenate([x, x], axis=1)))(spec((a, b)))
    assert str(exp.in_avals) == "(ShapedArray(int32[a,b]),)"
    assert str(exp.out_avals) == "(ShapedArray(int32[a,2*b]),)"
    assert exp.call(np.ones((3, 4), np.int32)).shape == (3, 8)


def test_row2_flatten():
    (b, four) = export.symbolic_shape("b, 4")
    exp = export.export(jax.jit(lambda x: jnp.reshape(x, (x.shape[0] * x.shape[1],))))(spec((b, four)))
    assert str(exp.out_avals) == "(ShapedArray(int32[4*b]),)"


def test_row3_symbolic_args_specs():
    x, y = np.ones((3, 1), np.int32), np.ones((3, 4), np.int32)
    specs = export.symbolic_args_specs((x, y), "a, ...")
    exp = export.export(jax.jit(lambda x, y: x + y))(*specs)
    assert str(exp.in_avals) == "(ShapedArray(int32[a,1]), ShapedArray(int32[a,4]))"
    s1, s2 = export.symbolic_args_specs((np.ones((2, 3, 4)), np.ones((5,))), ("(b, _, _)", None))
    assert str(s1.shape[0]) == "b" and s1.shape[1:] == (3, 4) and s2.shape == (5,)
    s3, s4 = export.symbolic_args_specs((np.ones((2, 3)), np.ones((2,))), ("(batch, ...)", "(batch,)"))
    assert s3.shape[0] is s4.shape[0] or s3.shape[0] == s4.shape[0]


def test_row4_type_errors_are_not_comparisons():
    (v,) = export.symbolic_shape("v")
    with pytest.raises(TypeError):
        export.export(jax.jit(lambda x: x + jnp.ones((4,), jnp.int32)))(spec((v,)))
    with pytest.raises(TypeError):
        export.export(jax.jit(lambda x: jnp.matmul(x, x)))(spec((v, 4)))
    v, = export.symbolic_shape("v")
    exp = export.export(jax.jit(lambda x: jnp.matmul(x, x)))(spec((v, v)))
    assert str(exp.out_avals) == "(ShapedArray(int32[v,v]),)"


def test_row5_undetermined_comparison_shows_witnesses():
    a, b = export.symbolic_shape("a, b")
    with pytest.raises(Exception, match="inconclusive") as info:
        export.export(jax.jit(lambda x: 0 if x.shape[0] + 1 >= x.shape[1] else 1))(spec((a, b)))
    msg = str(info.value)
    assert "'a + 1' >= 'b' is inconclusive" in msg
    points = valuations_in(msg)
    assert len(points) == 2
    outcomes = {p["a"] + 1 >= p["b"] for p in points}
    assert outcomes == {True, False}  # one valuation on each side, and they really are


def test_row5_error_class_is_jax_shape_poly_one():
    from jax._src.export.shape_poly import InconclusiveDimensionOperation

    a, b = export.symbolic_shape("a, b")
    with pytest.raises(InconclusiveDimensionOperation):
        export.export(jax.jit(lambda x: 0 if x.shape[0] + 1 >= x.shape[1] else 1))(spec((a, b)))


def test_row6_true_comparisons():
    a, b = export.symbolic_shape("a, b")
    assert b >= 1
    assert 2 * a + b >= 3
    assert smtdims.decide(b, ">=", 1).status == "true"
    assert smtdims.decide(2 * a + b, ">=", 3).value is True


@pytest.mark.parametrize("lhs,rhs", [("b", 2), ("a", "b"), ("a - b", 0)])
def test_row7_undetermined_with_witnesses(lhs, rhs):
    a, b = export.symbolic_shape("a, b")
    env = {"a": a, "b": b}
    left = eval(lhs, {}, env)
    right = eval(rhs, {}, env) if isinstance(rhs, str) else rhs
    with pytest.raises(Exception, match="inconclusive"):
        left >= right  # noqa: B015 - the comparison itself is the test
    d = smtdims.decide(left, ">=", right)
    assert d.status == "undetermined"
    for w, expected in ((d.witness_true, True), (d.witness_false, False)):
        vals = {"a": w.get("a", 1), "b": w.get("b", 1)}
        r = rhs if isinstance(rhs, int) else eval(rhs, {}, vals)
        assert (eval(lhs, {}, vals) >= r) is expected


def test_row8_dimensions_as_values():
    (b,) = export.symbolic_shape("b")
    exp = export.export(jax.jit(lambda x: jnp.array(x.shape[0]) * x))(spec((b,)))
    np.testing.assert_array_equal(exp.call(np.arange(3, dtype=np.int32)), 3 * np.arange(3))
    with pytest.raises(TypeError, match="Shapes must be 1D sequences of concrete values of integer type"):
        export.export(jax.jit(lambda x: x.reshape(jnp.array(x.shape[0]) * 2)))(spec((b,)))
    exp = export.export(jax.jit(lambda x: jnp.sum(x, axis=0) / x.shape[0]))(spec((b,), jnp.float32))
    np.testing.assert_allclose(exp.call(np.arange(4, dtype=np.float32)), 1.5)


def test_row9_slice_needs_constraint_with_witnesses():
    (b,) = export.symbolic_shape("b")
    with pytest.raises(Exception, match="'b' >= '16' is inconclusive") as info:
        export.export(jax.jit(lambda x: lax.slice_in_dim(x, 0, 16)))(spec((b,)))
    points = valuations_in(str(info.value))
    assert {p["b"] >= 16 for p in points} == {True, False}
    (b,) = export.symbolic_shape("b + 15")
    exp = export.export(jax.jit(lambda x: lax.slice_in_dim(x, 0, 16)))(spec((b,)))
    assert str(exp.out_avals) == "(ShapedArray(int32[16]),)"
    (b,) = export.symbolic_shape("b")
    exp = export.export(jax.jit(lambda x: x[0:16]))(spec((b,)))
    assert str(exp.out_avals) == "(ShapedArray(int32[min(b, 16)]),)"
    # and with the constraint the fix suggests, the original export goes through
    (b,) = export.symbolic_shape("b", constraints=("b >= 16",))
    exp = export.export(jax.jit(lambda x: lax.slice_in_dim(x, 0, 16)))(spec((b,)))
    assert str(exp.out_avals) == "(ShapedArray(int32[16]),)"


def test_row10_constraints_export():
    a, b = export.symbolic_shape("a, b", constraints=("a >= b", "b >= 16"))
    exp = export.export(jax.jit(lambda x: x[: x.shape[1], :16]))(spec((a, b)))
    assert str(exp.out_avals) == "(ShapedArray(int32[b,16]),)"
    out = exp.call(np.ones((20, 17), np.int32))
    assert out.shape == (17, 16)


def test_row11_sum_of_bounds():
    a, b = export.symbolic_shape("a, b", constraints=("a >= 16", "b >= 8"))
    assert a + 2 * b >= 32
    assert smtdims.decide(a + 2 * b, ">=", 32).status == "true"


def test_row12_difference_constraint():
    a, b = export.symbolic_shape("a, b", constraints=("a - b >= 8",))
    assert a >= 9
    assert smtdims.decide(a, ">=", 9).status == "true"
    assert smtdims.decide(a, ">=", 10).status == "undetermined"


def test_row13_mod_slice_exports_without_workaround():
    (b,) = export.symbolic_shape("b")
    f = lambda x: lax.slice_in_dim(x, 0, x.shape[0] % 3)  # noqa: E731
    exp = export.export(jax.jit(f))(spec((b,)))
    assert str(exp.out_avals) == "(ShapedArray(int32[mod(b, 3)]),)"
    for n in range(1, 11):
        x = np.arange(n, dtype=np.int32) * 7 + 1
        np.testing.assert_array_equal(exp.call(x), f(x))


def test_row13_stock_needs_workaround(stock):
    (b,) = export.symbolic_shape("b")
    with pytest.raises(Exception, match="'b' >= 'mod\\(b, 3\\)' is inconclusive"):
        export.export(jax.jit(lambda x: lax.slice_in_dim(x, 0, x.shape[0] % 3)))(spec((b,)))


def test_row14_bounds():
    batch, free = export.symbolic_shape("batch, free", constraints=("batch >= 128", "batch <= 1024"))
    assert smtdims.symbolic_dim_bounds(batch) == (128, 1024)
    assert smtdims.symbolic_dim_bounds(2 * batch + 1) == (257, 2049)
    assert smtdims.symbolic_dim_bounds(free) == (1, math.inf)
    b = smtdims.bounds(2 * batch + 1)
    assert b == (257, 2049) and b.lo_tight and b.hi_tight
    assert b.lo_witness == {"batch": 128} and b.hi_witness == {"batch": 1024}
    f = smtdims.bounds(free)
    assert f.hi == math.inf and f.hi_tight and f.lo_witness["free"] == 1


def test_row15_mixing_scopes():
    (a1,) = export.symbolic_shape("a")
    (a2,) = export.symbolic_shape("a")
    with pytest.raises(ValueError, match="Invalid mixing of symbolic scopes"):
        a1 + a2  # noqa: B018
    with pytest.raises(ValueError, match="Invalid mixing of symbolic scopes"):
        smtdims.decide(a1, ">=", a2)
    scope = export.SymbolicScope()
    (c1,) = export.symbolic_shape("a", scope=scope)
    (c2,) = export.symbolic_shape("a", scope=scope)
    assert c1 + c2 == 2 * c1


def test_row16_dim_var_only_in_output():
    from jax._src.export.shape_poly import UnexpectedDimVar

    b, k = export.symbolic_shape("b, k", constraints=("k <= 8",))
    with pytest.raises(UnexpectedDimVar, match="'k'"):
        export.export(jax.jit(lambda x: lax.top_k(x, k)[0]))(spec((b, 8)))
    g = lambda kk, x: lax.top_k(x, kk.shape[1])[0]  # noqa: E731
    exp = export.export(jax.jit(g))(spec((0, k)), spec((b, 8)))
    x = np.arange(16, dtype=np.int32).reshape(2, 8)
    np.testing.assert_array_equal(exp.call(np.zeros((0, 3), np.int32), x), [[7, 6, 5], [15, 14, 13]])


def test_row17_nonlinear_spec_not_solvable():
    (aa,) = export.symbolic_shape("a*a")
    with pytest.raises(ValueError, match="Cannot solve for values of dimension variables {'a'}"):
        export.export(jax.jit(lambda x: x))(spec((aa,)))


def test_row18_division_remainder():
    b, d2 = export.symbolic_shape("b, 2*d")
    exp = export.export(jax.jit(lambda x: x))(spec((b, b, d2)))
    with pytest.raises(ValueError, match="Division had remainder 1 when computing the value of 'd'"):
        exp.call(np.ones((3, 3, 5), np.int32))


def test_row19_serialization_roundtrip():
    (b,) = export.symbolic_shape("b")
    f = lambda x: lax.slice_in_dim(x, 0, x.shape[0] % 3)  # noqa: E731
    exp = export.export(jax.jit(f))(spec((b,)))
    blob = exp.serialize()
    assert isinstance(blob, (bytes, bytearray))
    exp2 = export.deserialize(blob)
    for n in (4, 8):
        x = np.arange(n, dtype=np.int32)
        np.testing.assert_array_equal(exp2.call(x), f(x))


def test_row20_equality_is_jax_unsound_smtdims_three_valued():
    a, b = export.symbolic_shape("a, b")
    assert (b == 1) is False and (a == b) is False  # JAX's == stays two-valued
    assert smtdims.decide(b, "==", 1).status == "undetermined"
    assert smtdims.decide(a, "==", b).status == "undetermined"
    assert smtdims.decide(a + b - a, "==", b).status == "true"


def test_row9_message_has_fix_and_user_frame_computed_lazily():
    (b,) = export.symbolic_shape("b")
    try:
        export.export(jax.jit(lambda x: lax.slice_in_dim(x, 0, 16)))(spec((b,)))
    except Exception as err:  # noqa: BLE001 - inspected below
        caught = err
    before = smtdims.stats()["solver_checks"]
    msg = str(caught)
    assert smtdims.stats()["solver_checks"] > before  # the explanation ran only when asked for
    assert "suggested fix: add the constraint 'b >= 16'" in msg
    assert "test_seed.py" in msg  # where the comparison arose
    assert str(caught) == msg  # computed once

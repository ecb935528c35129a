"""The fixed specification as a person writes it: the same shapes in plainer words, exported by JAX."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from smtdims_jax.pipeline import export_and_verify
from smtdims_jax.pipeline.attempt import Spec
from smtdims_jax.pipeline.forms import in_lattice_form, in_plain_dims
from smtdims_jax.pipeline.job import ExportJob

from smtdims.lang.parser import parse_expr


def _pool(x):  # 2x2 max pool, 'SAME'
    return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "SAME")


def _up(x):
    return jnp.repeat(jnp.repeat(x, 2, axis=1), 2, axis=2)


def two_level_skip(x):
    """Two pool/upsample levels with skips: h and w must be multiples of 4."""
    p1 = _pool(x)
    u1 = jnp.concatenate([_up(_pool(p1)), p1], axis=-1)
    return jnp.concatenate([_up(u1[..., :1]), x], axis=-1)


def test_two_levels_of_pool_and_upsample_read_4k_not_a_floordiv_constraint():
    fix = export_and_verify(two_level_skip, "float32[b, h, w, 1]", fix=True, progress=False).fix
    assert fix.status == "fixed", fix.status
    assert fix.in_avals == ("float32[b, 4*k_h, 4*k_w, 1]",) and fix.constraints == (), (fix.in_avals, fix.constraints)
    assert fix.stock  # the form stock JAX exports too (it refuses the floordiv constraint it replaces)
    for h in range(1, 41):  # the same family the constraint form said: exactly the sizes that run
        runs = True
        try:
            jax.eval_shape(two_level_skip, jax.ShapeDtypeStruct((1, h, 8, 1), np.float32))
        except Exception:  # noqa: BLE001 - a size where the function does not run
            runs = False
        assert runs == (h % 4 == 0), h


_TABLE = np.ones((64, 4), np.float32)


def _masked(ids, mask):
    x = jnp.asarray(_TABLE)[: ids.shape[1]][None] + ids[..., None]
    return x * mask[..., None]


def _job(fn, spec: Spec) -> ExportJob:
    args, scope = spec.build(jax.tree_util.tree_structure(tuple(range(len(spec.dims)))))
    leaves, tree = jax.tree_util.tree_flatten(args)
    job = ExportJob.of(fn, leaves, tree, scope, None).fixing(60.0, None)
    return job.traced(job.spec(), None, "eval_shape")


def test_a_min_the_constraints_decide_is_the_side_it_is():
    spec = Spec(((parse_expr("b"), parse_expr("t")), (parse_expr("b"), parse_expr("min(64, t)"))),
                (np.dtype(np.float32), np.dtype(np.float32)), ("t <= 64",))
    got, done = in_plain_dims(_job(_masked, spec), spec)
    assert done is not None and done.ok
    assert got.shape_texts() == ("b, t", "b, t") and got.constraints == ("t <= 64",)


def test_without_the_bound_a_min_stays():
    spec = Spec(((parse_expr("b"), parse_expr("t")), (parse_expr("b"), parse_expr("min(64, t)"))),
                (np.dtype(np.float32), np.dtype(np.float32)), ())
    got, done = in_plain_dims(_job(lambda a, b: a, spec), spec)
    assert done is None and got is spec


@pytest.mark.parametrize(("constraints", "dims", "want"), [
    (("mod(h, 8) == 0",), "b, h", ("b, 8*h", ())),
    (("mod(floordiv(h - 2, 2) - 1, 2) == 0", "mod(h, 2) == 0", "h <= 64"), "b, h", ("b, 4*h", ("h <= 16",))),
    (("floordiv(-h, 2) == 2*floordiv(floordiv(-h, 2), 2)",), "b, h", None),  # h in 3, 4, 7, 8, ...: kept
])
def test_constraints_on_one_residue_class_become_the_rewrite(constraints, dims, want):
    spec = Spec(((*(parse_expr(d) for d in dims.split(", ")),),), (np.dtype(np.float32),), constraints)
    job = _job(lambda x: x, spec)
    got, done = in_lattice_form(job, spec)
    if want is None:
        assert done is None and got is spec
    else:
        assert done is not None and done.ok and (got.shape_texts()[0], got.constraints) == want


def test_a_min_inside_a_division_is_replaced_too_and_the_rewrite_ends():
    spec = Spec(((parse_expr("b"), parse_expr("t")), (parse_expr("b"), parse_expr("floordiv(min(64, t), 2) + 1"))),
                (np.dtype(np.float32), np.dtype(np.float32)), ("t <= 64",))
    got, done = in_plain_dims(_job(lambda a, b: a, spec), spec)
    assert done is not None and done.ok and got.shape_texts() == ("b, t", "b, floordiv(t, 2) + 1"), got.shape_texts()

"""The commonest failed export, a broadcast of a dimension against ``min(K, d)`` (``x + pos_table[:t]``
with a 512-row table), gets a hint with smtdims installed: the equation the broadcast
needed, the fix (``t <= 512``) and the ``smtdims export ... --fix`` command, as an ``add_note`` note
and ``smtdims_*`` attributes. The error is stock's otherwise: same class, same args, same message,
constructible as ``type(e)(*e.args)``, picklable; uninstalling restores ``jax.export.export``.
(``smtdims run`` and ``pytest --smtdims`` list it: tests/pipeline/test_run.py, tests/jax/test_pytest_plugin.py.)
"""

from __future__ import annotations

import copy
import pickle

import jax
import jax.numpy as jnp
import pytest
from jax import export
from jax._src.export import _export

import smtdims

TABLE = jnp.zeros((512, 8), jnp.float32)


def pos_add(x):  # jnp's + on a traced array: lax's TypeError "add got incompatible shapes for broadcasting"
    return x + TABLE[:x.shape[0]]


def pos_add_jnp(x):  # jnp.broadcast_arrays: jnp's ValueError "Incompatible shapes for broadcasting"
    return jnp.broadcast_arrays(x, TABLE[:x.shape[0]])[0].sum()


def _fail(fn, spec="t, 8", constraints=()):
    with pytest.raises((TypeError, ValueError)) as info:
        export.export(jax.jit(fn))(jax.ShapeDtypeStruct(export.symbolic_shape(spec, constraints=constraints),
                                                        jnp.float32))
    return info.value


@pytest.fixture
def stock_error():
    smtdims.uninstall()
    return _fail(pos_add)


def test_a_failed_broadcast_names_the_fix_and_the_command(stock_error):
    with smtdims.enabled():
        err = _fail(pos_add)
    assert type(err) is type(stock_error) and err.args == stock_error.args and str(err) == str(stock_error)
    assert err.smtdims_equation == "t == min(512, t)"
    assert err.smtdims_fix == "add the constraint 't <= 512'"
    assert err.smtdims_command.startswith("smtdims export ") and err.smtdims_command.endswith(
        ':pos_add --spec "float32[t,8]" --fix')
    note = err.__notes__[-1]
    assert note.splitlines() == [
        "smtdims: the broadcast needs t == min(512, t), which smtdims cannot prove from the scope's constraints",
        "smtdims: suggested fix: add the constraint 't <= 512'",
        f"smtdims: the whole fix, verified end to end: {err.smtdims_command}",
    ]
    assert not any("smtdims" in n for n in getattr(stock_error, "__notes__", []))


def test_the_error_stays_stocks(stock_error):
    with smtdims.enabled():
        err = _fail(pos_add)
    again = type(err)(*err.args)  # Keras' re-raise
    assert str(again) == str(stock_error)
    for clone in (pickle.loads(pickle.dumps(err)), copy.copy(err), copy.deepcopy(err)):
        assert type(clone) is type(err) and clone.args == err.args
        assert clone.smtdims_fix == err.smtdims_fix


def test_jnp_broadcast_and_constraints_in_the_command():
    with smtdims.enabled():
        err = _fail(pos_add_jnp, constraints=("t >= 2",))
    assert type(err) is ValueError and str(err).startswith("Incompatible shapes for broadcasting")
    assert err.smtdims_fix == "add the constraint 't <= 512'"
    assert err.smtdims_command.endswith(':pos_add_jnp --spec "float32[t,8]" -c "t >= 2" --fix')


def test_a_constraint_that_settles_it_exports_and_other_errors_get_no_hint():
    with smtdims.enabled():
        export.export(jax.jit(pos_add))(jax.ShapeDtypeStruct(
            export.symbolic_shape("t, 8", constraints=("t <= 512",)), jnp.float32))
        with pytest.raises(TypeError) as info:
            export.export(jax.jit(lambda x: x + jnp.zeros((3,))))(jax.ShapeDtypeStruct((2,), jnp.float32))
    assert not hasattr(info.value, "smtdims_equation")  # no symbolic dimension: nothing to say


def test_installed_wraps_export_and_uninstall_restores_it():
    stock = _export.export  # JAX's own (smtdims patches only the jax.export namespace)
    smtdims.uninstall()
    assert jax.export.export is stock
    with smtdims.enabled():
        assert jax.export.export is not stock and jax.export.export.__wrapped__ is stock
        assert jax.export.export.__name__ == stock.__name__ and jax.export.export.__doc__ == stock.__doc__
        hinted = jax.export.export
    assert jax.export.export is stock
    err = None
    try:  # a wrapper kept past uninstall (``from jax.export import export``) answers as stock
        hinted(jax.jit(pos_add))(jax.ShapeDtypeStruct(export.symbolic_shape("t, 8"), jnp.float32))
    except TypeError as e:
        err = e
    assert err is not None and not hasattr(err, "smtdims_equation")

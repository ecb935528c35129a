"""Equality: JAX's own shape checks get proofs (never True for expressions that differ somewhere);
a program's ``==``, ``!=``, ``in``, lookups and ``hash`` are exactly stock JAX's, in every spelling."""

from __future__ import annotations

import copy
import functools
import itertools
import operator
import pickle

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export, lax

import smtdims
from tests.jax import equality_sites
from tests.jax.colliding_key import CollidingKey


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


@pytest.mark.parametrize("site", [k for k, (_, how) in equality_sites.SITES.items() if how != "hash"])
def test_jax_shape_checks_get_proofs(site):
    """Every shape check of the table in docs/equality.md, on the JAX at hand (CI: 0.7.2, 0.10.2, 0.12.0.1):
    stock refuses ``c`` against ``d`` although ``c >= d, d >= c``; smtdims exports, and the export
    computes what the function computes natively."""
    fn, _ = equality_sites.SITES[site]
    smtdims.uninstall()
    assert not equality_sites.exports(fn)
    smtdims.install()
    try:
        assert equality_sites.exports(fn) and equality_sites.matches_native(fn)
    finally:
        smtdims.uninstall()


def test_definitely_equal_is_hooked_by_function_with_the_frame_rules_answers(installed, monkeypatch):
    """``core.definitely_equal`` (broadcasting, dot_general, reshape, einsum ask through it) is smtdims'
    while installed: it answers without reading a frame, and as stock's function does, whose ``x == y``
    reaches ``_DimExpr.__eq__`` from a frame of JAX's (the bytecode rule); uninstalled, it is stock's."""
    from jax._src import core  # JAX-private: the function replaced
    from smtdims_jax import equality, jax_internals

    b, c, d = export.symbolic_shape("b, c, d", constraints=("c >= d", "d >= c"))
    (other,) = export.symbolic_shape("c")  # another scope
    pairs = [(c, d), (d, c), (c, d + 1), (b // 2 + (b + 1) // 2, b), (b, 1), (1, b), (3, 3), (b, b), (c, other),
             (c, np.int64(3)), (np.int64(3), c), (c, 2.5), ((c,), (d,))]
    assert core.definitely_equal is equality.definitely_equal
    by_frame = [jax_internals.STOCK_DEFINITELY_EQUAL(x, y) for x, y in pairs]
    assert [core.definitely_equal(x, y) for x, y in pairs] == by_frame == [
        True, True, False, True, False, False, True, True, False, False, False, False, True]
    read: list = []  # the dimension pairs (an int first too) are answered without reading a frame
    monkeypatch.setattr(equality, "asker", lambda frame: read.append(frame) or equality.KEY_COMPARISON)
    assert [core.definitely_equal(x, y) for x, y in pairs[:9]] == by_frame[:9] and read == []
    assert core.definitely_equal_shape((c, 1), (d, 1)) is True and read == []
    smtdims.uninstall()
    assert core.definitely_equal is jax_internals.STOCK_DEFINITELY_EQUAL and core.definitely_equal(c, d) is False


def test_jax_equality_never_claims_unequal_expressions_equal(installed):
    from smtdims_jax.jax_internals import definitely_equal

    a, b = export.symbolic_shape("a, b")
    assert definitely_equal(b, 1) is False
    assert definitely_equal(a, b) is False
    assert definitely_equal(b // 2 + (b + 1) // 2, b) is True
    assert definitely_equal(b // 2, (b + 1) // 2) is False  # equal for even b only
    assert definitely_equal(b % 2, 0) is False
    assert definitely_equal(b, 2 * (b // 2) + b % 2) is True
    c, d = export.symbolic_shape("c, d", constraints=("c >= d", "d >= c"))
    assert definitely_equal(c, d) is True  # equal only because of the constraints
    assert definitely_equal(c + 1, d) is False


def _spellings(c, d):
    """Every way a program compares two dimensions; stock JAX's answers are syntactic."""
    dims = [c]
    memo = {CollidingKey((c,)): 1}
    return {
        "==": c == d, "!=": c != d, "operator.eq": operator.eq(c, d), "operator.ne": operator.ne(c, d),
        "in": d in [c], "not in": d not in [c], "count": [c].count(d), "index if in": dims.index(d) if d in dims else None,
        "tuple ==": (c,) == (d,), "list ==": [c, 1] == [d, 1], "colliding memo": memo[CollidingKey((d,))]
        if CollidingKey((d,)) in memo else "miss", "key __eq__": CollidingKey((c,)) == CollidingKey((d,)),
        "set": len({c, d}), "hash": hash(c) == hash(d), "ShapeDtypeStruct": jax.ShapeDtypeStruct((c,), jnp.float32)
        == jax.ShapeDtypeStruct((d,), jnp.float32),
    }


def test_programs_compare_as_on_stock_in_every_spelling():
    """With ``c == d`` provable, a program's answers are stock's (they used to
    depend on the spelling: ``c == d`` True but ``operator.eq`` False, ``d in dims`` True but
    ``dims.index(d)`` a ValueError, a colliding memo a KeyError). Also inside a jitted function."""
    def spellings():
        c, d = export.symbolic_shape("c, d", constraints=("c >= d", "d >= c"))
        return _spellings(c, d)

    smtdims.uninstall()
    stock = spellings()
    assert stock["=="] is False and stock["index if in"] is None and stock["colliding memo"] == "miss"
    smtdims.install()
    try:
        assert spellings() == stock
        c, d = export.symbolic_shape("c, d", constraints=("c >= d", "d >= c"))
        seen = {}

        def f(x, y):
            seen.update(_spellings(x.shape[0], y.shape[0]))
            return x

        export.export(jax.jit(f))(jax.ShapeDtypeStruct((c,), jnp.float32), jax.ShapeDtypeStruct((d,), jnp.float32))
        assert seen == stock
    finally:
        smtdims.uninstall()


@pytest.mark.parametrize("on", [False, True], ids=["stock", "smtdims"])
def test_lookups_compare_keys_as_stock_does(on):
    """A lookup gets stock's syntactic answer: a cache hands back the entry of the dimension asked
    for, never that of another one smtdims proves equal (which would depend on hash luck)."""
    try:
        if on:
            smtdims.install()
        c, d = export.symbolic_shape("c, d", constraints=("c >= d", "d >= c"))
        assert {CollidingKey((c,)): "c"}.get(CollidingKey((d,))) is None
        cached = functools.lru_cache(lambda k: k.shape)
        assert cached(CollidingKey((c,))) == (c,)
        assert str(cached(CollidingKey((d,)))[0]) == "d"
        assert jax.ShapeDtypeStruct((d,), jnp.float32).shape[0] is d
    finally:
        smtdims.uninstall()


def test_a_clock_cut_answer_is_not_kept(installed):
    """A JAX shape check cut by the deadline fails that export only: the next export in the same scope,
    with time to prove ``c == d``, succeeds (the cut answer used to be cached for the scope's life)."""
    from smtdims import options

    c, d = export.symbolic_shape("c, d", constraints=("c >= d", "d >= c"))
    args = (jax.ShapeDtypeStruct((c,), jnp.float32), jax.ShapeDtypeStruct((d,), jnp.float32))
    f = USES["concatenate"]
    with options.scoped(deadline=1e-9), pytest.raises(TypeError, match="Cannot concatenate"):
        export.export(jax.jit(f))(*args)
    assert export.export(jax.jit(f))(*args).out_avals[0].shape == (c, 2)


# -- who asked: JAX's written comparisons, a program's, a key comparison ---------------------------
def _asked(code_text: str, module: str, **env):
    """Run ``code_text`` compiled as a function of module ``module``; return who asked each ``==``."""
    from smtdims_jax import listeners

    seen = []

    def listener(ev):
        if ev["kind"] == "eq":
            seen.append(ev.get("asked_by"))

    listeners.add_listener(listener)
    ns = {"__name__": module, **env}
    exec(compile(f"def probe():\n    return {code_text}\n", f"<{module}>", "exec"), ns)
    try:
        result = ns["probe"]()
    finally:
        listeners.remove_listener(listener)
    return result, seen


@pytest.mark.parametrize("text,user,jax_", [
    ("c == d", ["user"], ["jax"]),
    ("c != d", ["user"], ["jax"]),
    ("(c, 1) == (d, 1)", ["user"], ["jax"]),
    ("[c] != [d]", ["user"], ["jax"]),
    ("d in [c]", ["user"], []),  # JAX's `in`: stock, as the list.index that may follow it
    ("[c].count(d)", [], []),
    ("{CollidingKey((c,)): 1}.get(CollidingKey((d,)))", [], []),
    ("CollidingKey((c,)) == CollidingKey((d,))", ["user"], ["jax"]),  # through a key's own __eq__
])
def test_who_asked(installed, text, user, jax_):
    """The rule, on this CPython (CI: 3.11, 3.12, and 3.13 in scripts/test_py313.sh): the module
    that wrote the comparison, and whether it wrote one (``dis``)."""
    c, d = export.symbolic_shape("c, d", constraints=("c >= d", "d >= c"))
    env = dict(c=c, d=d, CollidingKey=CollidingKey)
    user_result, user_seen = _asked(text, "my_model", **env)
    jax_result, jax_seen = _asked(text, "jax._src.lax.fake", **env)
    assert user_seen == user and jax_seen == jax_
    if jax_ == ["jax"]:  # a proof: the answer flips from stock's
        assert jax_result != user_result
    else:
        assert jax_result == user_result


# -- exceptions constructed as stock's ------------------------------------------------------------------
def _inconclusive():
    a, b = export.symbolic_shape("a, b")
    try:
        _ = a >= b
    except Exception as err:
        return err
    raise AssertionError("a >= b was decided")


def test_inconclusive_error_is_constructed_like_stocks():
    smtdims.uninstall()
    stock = _inconclusive()
    smtdims.install()
    try:
        err = _inconclusive()
    finally:
        smtdims.uninstall()
    assert isinstance(err, type(stock)) and err.args == stock.args  # args[0]: stock's whole message
    assert str(err).startswith(stock.args[0].split("\n")[0]) and "smtdims: the comparison is undetermined" in str(err)
    assert err.witnesses == ({"a": 1, "b": 2}, {"a": 1, "b": 1}) and err.fix.startswith("add the constraint")
    # Keras' traceback filtering re-raises as e.__class__(message); frameworks also use *e.args
    for again in (type(err)(str(err)), type(err)(*err.args), type(err)("plain")):
        assert type(again) is type(err) and isinstance(again, type(stock))
        assert again.explanation == "" and again.witnesses == (None, None)
    assert type(err)("plain").args == type(stock)("plain").args
    for dup in (copy.copy(err), copy.deepcopy(err), pickle.loads(pickle.dumps(err))):
        assert type(dup) is type(err) and dup.args == err.args and str(dup) == str(err)
        assert dup.witnesses == err.witnesses


def test_inconclusive_errors_reading_travels_as_values_through_copy_and_pickle():
    """The witnesses (dicts), the fix (kind, text, variable) and the location are values on the error,
    the same that its message shows in words; a copy or pickle keeps them, a re-creation from the
    message has none (its words are all it has)."""
    smtdims.install()
    try:
        err = _inconclusive()
    finally:
        smtdims.uninstall()
    reading = err.reading
    assert reading is not None and (reading.false_at, reading.true_at) == err.witnesses
    fix = reading.suggested_fix
    assert fix is not None and fix.kind == "constraint" and fix.text and str(fix) == err.fix == reading.fix
    assert reading.question == "'a' >= 'b'" and f"makes {reading.question} false" in str(err)
    assert reading.location and f"arose at {reading.location}" in str(err)
    for dup in (copy.copy(err), copy.deepcopy(err), pickle.loads(pickle.dumps(err))):
        assert type(dup) is type(err) and dup.args == err.args and str(dup) == str(err)
        assert dup.reading == reading and dup.reading.suggested_fix == fix and dup.reading.location == reading.location
    assert type(err)(str(err)).reading is None


def test_smtdims_errors_are_constructed_like_pythons():
    """``type(e)(*e.args)``, ``type(e)(message)``, copy and pickle, for every error smtdims raises."""
    from smtdims.errors import ParseError, PossibleDivisionByZeroError, UnsatisfiableConstraintsError

    errors = [
        UnsatisfiableConstraintsError.from_conflict(["a >= 3", "a <= 2"]),
        PossibleDivisionByZeroError.from_divisor("b - 1", {"b": 1}),
        ParseError("a + ", 4, "expected a number"),
    ]
    with pytest.raises(UnsatisfiableConstraintsError) as info:  # as raised into JAX
        smtdims.install()
        try:
            (a,) = export.symbolic_shape("a", constraints=("a >= 3", "a <= 2"))
            _ = a >= 2
        finally:
            smtdims.uninstall()
    errors.append(info.value)
    for err in errors:
        assert type(err)(*err.args).args == err.args
        assert str(type(err)(str(err))) == str(err)
        for dup in (copy.copy(err), pickle.loads(pickle.dumps(err))):
            assert type(dup) is type(err) and dup.args == err.args and dup.__dict__ == err.__dict__
    assert errors[0].conflict == ["a >= 3", "a <= 2"] and errors[1].witness == {"b": 1}
    assert sorted(info.value.conflict) == ["a <= 2", "a >= 3"]


def test_a_re_raised_error_keeps_stocks_class():
    """What Keras does to an export's error (``e.__class__(message)`` inside its filter): the
    re-created error is still caught by an ``except`` written for stock JAX."""
    err = None
    smtdims.install()
    try:
        try:
            _raise_like_keras(_inconclusive())
        except _STOCK_INCONCLUSIVE as caught:
            err = caught
    finally:
        smtdims.uninstall()
    assert err is not None and "inconclusive" in str(err)


_STOCK_INCONCLUSIVE = jax.errors.InconclusiveDimensionOperation if hasattr(jax.errors, "InconclusiveDimensionOperation") \
    else Exception


def _raise_like_keras(e):
    raise e.__class__(str(e)).with_traceback(e.__traceback__) from None

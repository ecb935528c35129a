"""``dims="auto"``: from one example per model to the most general verified family of shapes.

For each real-library model (flax nnx and linen, equinox: tests/pipeline/test_library_models.py) and each
real-model pattern (tests/pipeline/test_real_models.py), one example input (a size the model runs at): the
family smtdims infers is verified end to end, admits the example, and is at least as general as
the family a person writes (the model's fix): on a grid of shapes it admits every shape the person's
fix admits, and every further shape it admits runs natively. Plus the pieces: the specification made
from the examples, the table, partial specs, bad input and the command line.
"""

from __future__ import annotations

import itertools
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export
from smtdims_jax.pipeline import export_and_verify
from smtdims_jax.pipeline.auto import AutoReport, auto_specs
from smtdims_jax.pipeline.box import valuation_of
from smtdims_jax.pipeline.specs import split_dims

from smtdims import cli
from smtdims.lang.constraints import ConstraintSet
from smtdims.lang.parser import parse_expr
from tests.pipeline import test_real_models as real

HERE = os.path.dirname(__file__)


def _split(text):
    """``"float32[b, floordiv(t, 2), 4]"`` -> its dimensions, parsed."""
    body = text.split("[", 1)[1].rstrip("]") if "[" in text else text
    return [parse_expr(d) for d in split_dims(body) if d.strip()]


def _shapes(specs, env):
    return tuple(tuple(d.evaluate(env) for d in _split(s)) for s in specs)


def _example(specs, env):
    return [np.zeros(shape, np.int32 if s.startswith("int32") else np.float32)
            for s, shape in zip(specs, _shapes(specs, env))]


def _runs(fn, shapes, specs):
    try:
        jax.eval_shape(fn, *[jax.ShapeDtypeStruct(s, jnp.int32 if sp.startswith("int32") else jnp.float32)
                             for s, sp in zip(shapes, specs)])
    except Exception:  # noqa: BLE001 - any error: the native model refuses these shapes
        return False
    return True


def _assert_at_least_the_persons(fn, specs, person, grid, auto: AutoReport):
    """On the grid: the family admits every shape the person's family admits; each further one runs."""
    dims = tuple(tuple(_split(s)) for s in auto.specs)
    cs = ConstraintSet.of(auto.constraints)
    names = sorted(grid)
    missing, failing = [], []
    for vals in itertools.product(*(grid[n] for n in names)):
        env = dict(zip(names, vals))
        shapes = _shapes(specs, env)
        admitted = valuation_of(dims, cs, shapes) is not None
        if person(env) and not admitted:
            missing.append(env)
        elif admitted and not person(env) and not _runs(fn, shapes, specs):
            failing.append(env)
    assert not missing, f"narrower than the person's family: it excludes {missing[:3]}\n{auto}"
    assert not failing, f"it admits shapes where the model fails natively: {failing[:3]}\n{auto}"


def _check(fn, specs, person, grid, env):
    auto = export_and_verify(fn, *_example(specs, env), dims="auto", samples=3)
    assert isinstance(auto, AutoReport)
    assert auto.ok, str(auto)
    assert auto.report.ok and "the example" in [w for s in auto.report.samples for w in s.why], \
        "the example is among the verified samples"
    assert valuation_of(tuple(tuple(_split(s)) for s in auto.specs), ConstraintSet.of(auto.constraints),
                        _shapes(specs, env)) is not None, "the family admits the example"
    _assert_at_least_the_persons(fn, specs, person, grid, auto)
    assert len(auto.table) == sum(len(_split(s)) for s in specs)
    return auto


# -- the real-model patterns (plain JAX) -------------------------------------------------------------------
def _real_grid(case):
    _, specs, _, sizes, failing = real.CASES[case]
    names = sorted(set().union(*(d.variables() for s in specs for d in _split(s))))
    top = {n: max(max(e[n] for e in sizes), failing[n]) + 3 for n in names}
    return {n: range(1, min(top[n], 40) + 1) if n != "t" else (1, 2, 37, 128, 129, 511, 512, 513) for n in names}


def _real_person(case):
    predicates = {
        "position table (lax)": lambda e: e["t"] <= 512,
        "position table (jnp)": lambda e: e["t"] <= 128,
        "bias across ranks": lambda e: e["a"] == e["c"],
        "U-Net skip": lambda e: e["h"] % 2 == 0,
        "split": lambda e: (e["a"] + e["b"]) % 2 == 0,
        "reshape with -1": lambda e: e["n"] % 4 == 0,
    }
    return predicates[case]


@pytest.mark.parametrize("case", sorted(real.CASES))
def test_auto_family_of_a_real_model_pattern(case):
    fn, specs, _, sizes, _ = real.CASES[case]
    grid = _real_grid(case)
    if case.startswith("position"):
        grid = {"b": (1, 2), "t": grid["t"]}
    _check(fn, specs, _real_person(case), grid, sizes[1])


# -- the library models (flax nnx and linen, equinox) ---------------------------------------------------
lib = pytest.importorskip("tests.pipeline.test_library_models")  # skipped with it where flax or equinox is missing


@pytest.fixture(scope="module")
def model(request):
    return lib.CASES[request.param][0]()


@pytest.mark.parametrize(("case", "model"), [(c, c) for c in lib.CASES], ids=list(lib.CASES), indirect=["model"])
def test_auto_family_of_a_library_model(case, model):
    _, specs, person, grid, sizes, _ = lib.CASES[case]
    auto = _check(model, specs, person, grid, sizes[1])
    if case.endswith("GPT"):  # the person's spec: the batch free, the sequence bounded by the table
        table = 64 if "nnx" in case else 128 if "linen" in case else 256
        assert [r.kinds for r in auto.table] == [("free",), (f"at most {table}",)]


# -- the pieces -------------------------------------------------------------------------------------------------
def test_every_dimension_its_own_variable_sizes_one_and_pins_kept():
    x, mask, s = np.zeros((2, 7, 16), np.float32), np.zeros((2, 1, 7), np.int32), np.float32(0.5)
    specs, shapes = auto_specs([x, mask, s, 0.5, 3], [None] * 5)
    assert specs == ["float32[a, b, c]", "int32[d, 1, e]", "float32[]", "float32[]", "int32[]"]
    assert shapes == [(2, 7, 16), (2, 1, 7), (), (), ()]
    specs, _ = auto_specs([x, mask], ["b, _, 16", None])
    assert specs == ["float32[b, a, 16]", "int32[c, 1, d]"], "a pinned name is not reused"
    with pytest.raises(ValueError, match="one per dimension"):
        auto_specs([x], ["b, _"])


def test_an_export_that_needs_nothing_keeps_every_dimension_free():
    auto = export_and_verify(lambda x: jnp.tanh(x) * 2, np.zeros((3, 5), np.float32), dims="auto", samples=3)
    assert auto.ok and auto.fix is None and auto.status == "verified", str(auto)
    assert auto.specs == ("float32[a, b]",) and auto.constraints == ()
    assert [r.kinds for r in auto.table] == [("free",), ("free",)]


def test_two_dimensions_that_must_agree_become_one_variable():
    auto = export_and_verify(lambda x, y: x @ y.T, np.zeros((3, 5), np.float32), np.zeros((4, 5), np.float32),
                             dims="auto", samples=3)
    assert auto.ok, str(auto)
    assert auto.specs == ("float32[a, b]", "float32[c, b]"), str(auto)  # the later name gives way
    assert auto.table[3].kinds == ("equal to args[0].shape[1]",) and "dot_general" in auto.table[3].cause


def test_a_dimension_the_program_needs_as_a_number_is_pinned_at_the_example():
    def rows(x):  # range(n) needs n as a number
        return jnp.stack([x[i] * i for i in range(x.shape[0])])

    auto = export_and_verify(rows, np.zeros((5, 3), np.float32), dims="auto", samples=3)
    assert auto.ok, str(auto)
    assert auto.specs == ("float32[5, b]",) and auto.table[0].kinds == ("fixed at 5",), str(auto)
    assert auto.table[0].cause, "the pin says which refusal forced it"


def test_auto_input_errors_are_clear():
    with pytest.raises(ValueError, match="concrete"):
        b, = export.symbolic_shape("b")
        export_and_verify(lambda x: x, jax.ShapeDtypeStruct((b,), jnp.float32), dims="auto")
    with pytest.raises(ValueError, match="one per argument"):
        export_and_verify(lambda x: x, np.zeros(3), dims=("b", "c"))
    with pytest.raises(TypeError, match='"auto"'):
        export_and_verify(lambda x: x, np.zeros(3), dims=5)


def test_cli_like_prints_the_family_and_json(capsys):
    gpt = os.path.join(HERE, "..", "..", "examples", "fix_gpt.py")
    rc = cli.main(["export", f"{gpt}:gpt", "--like", "int32[2, 7]", "-q", "--samples", "3"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "constraints b <= 512" in out and "at most 512" in out and '--spec "int32[a, b]" -c "b <= 512"' in out
    rc = cli.main(["export", f"{gpt}:gpt", "--like", "int32[2, 7]", "-q", "--samples", "3", "--json"])
    d = json.loads(capsys.readouterr().out)
    assert rc == 0 and d["ok"] and d["specs"] == ["int32[a, b]"] and d["constraints"] == ["b <= 512"]
    assert d["table"][1]["kinds"] == ["at most 512"] and "examples/fix_gpt.py" in d["table"][1]["cause"]
    assert cli.main(["export", f"{gpt}:gpt", "--like", "int32[b, 7]", "-q"]) == 2
    assert "an example's shape is sizes" in capsys.readouterr().err
    assert cli.main(["export", f"{gpt}:gpt", "--like", "int32[2, 7]", "--spec", "int32[b, t]", "-q"]) == 2


def test_a_pytree_of_parameters_gets_code_in_its_tree_and_no_command_per_leaf():
    """``affine({"w": W, "b": B}, X, 2.0)``: three arguments, four leaves. The command printed four --spec
    for three arguments and ``code()`` raised TypeError; the code now passes the dict as one argument. The
    family is the person's, not "narrower than needed" for a bias of size 1 that broadcasts."""
    def affine(p, x, s):
        return (x @ p["w"] + p["b"]) * s

    w, b, x = np.ones((4, 3), np.float32), np.ones((3,), np.float32), np.ones((2, 4), np.float32)
    auto = export_and_verify(affine, {"w": w, "b": b}, x, np.float32(2), dims="auto", samples=2)
    # the bias's size 1 broadcasts natively, which a symbolic size never does: excused in the renamed round too
    assert auto.ok and auto.status == "fixed", str(auto)
    ns: dict = {"affine": affine}
    exec(auto.code(), ns)  # the family's export code runs as printed
    assert len(ns["exp"].in_avals) == 4
    assert auto.command("m.py:affine").startswith("#") and '--spec "' not in auto.command("m.py:affine")

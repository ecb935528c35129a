"""The drop-in contract beyond answers: JAX's objects copy and pickle as on stock, and the
ladder's satisfiability gate runs before any rung answers at every entry point."""

from __future__ import annotations

import copy
import gc
import io
import pickle
import pickletools
import subprocess
import sys
import weakref

import jax
import jax.numpy as jnp
import pytest
from jax import export, lax
from smtdims_jax import jax_internals as jx

import smtdims
from smtdims.errors import UnsatisfiableConstraintsError


@pytest.fixture(autouse=True)
def _installed():
    smtdims.install()
    yield
    smtdims.uninstall()


def _busy_scope(spec: str = "b, t", constraints: tuple[str, ...] = ("t >= b + 16", "mod(t, 4) == 0", "b <= 512")):
    """Dimensions whose scope has been through every rung: interval, points, stock, ISL/Z3, ==, max."""
    dims = export.symbolic_shape(spec, constraints=constraints)
    b, t = dims
    assert t - b >= 16  # interval / stock
    with pytest.raises(jx.InconclusiveDimensionOperation):
        _ = t >= 2 * b  # undetermined: points
    smtdims.bounds(t - b)  # presburger / solver, with witnesses
    _ = (t == 4 * (t // 4))  # provable ==, cached per scope
    jx.max_dim(b, 16)
    smtdims.decide(t * b, ">=", 16 * b)  # nonlinear
    assert "_smtdims_state" in b.scope.__dict__  # the state the copies must not carry
    return dims


def test_deepcopy_and_pickle_of_dims_after_questions():
    b, t = _busy_scope()
    for obj in (b, t, (b, t), t - 2 * b, b.scope, jax.ShapeDtypeStruct((b, t), jnp.float32)):
        assert copy.deepcopy(obj) is not None
        assert copy.copy(obj) is not None
        again = pickle.loads(pickle.dumps(obj))
        if obj is not b.scope:  # a scope prints its id
            assert str(again) == str(obj)


def test_copies_reason_under_their_constraints():
    b, t = _busy_scope()
    b2, t2 = copy.deepcopy((b, t))
    assert b2.scope is t2.scope and b2.scope is not b.scope
    assert "_smtdims_state" not in b2.scope.__dict__  # a cache: copies start empty
    assert t2 - b2 >= 16
    assert smtdims.bounds(t2 - b2).lo == 16
    assert smtdims.bounds(b2).hi == 512
    b3, t3 = pickle.loads(pickle.dumps((b, t)))
    assert t3 - b3 >= 16 and smtdims.bounds(t3).lo == 20


class _ClassRecorder(pickle.Unpickler):
    """Unpickles and records every (module, name) the pickle asks for: GLOBAL, STACK_GLOBAL
    and any other way, exactly as the loader resolves them."""

    def __init__(self, file):
        super().__init__(file)
        self.globals: set[tuple[str, str]] = set()

    def find_class(self, module, name):
        self.globals.add((module, name))
        return super().find_class(module, name)


# Refuses every smtdims import, so the child unpickles as a machine with stock JAX alone would
# (the test's virtualenv may hold smtdims installed, which no PYTHONPATH change removes).
_NO_SMTDIMS = """
import importlib.abc, sys
class _Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("smtdims", "smtdims_jax", "smtdims_pytest"):
            raise ImportError("smtdims is not importable here: " + name)
        return None
sys.meta_path.insert(0, _Refuse())
"""


def test_pickle_bytes_carry_no_smtdims_state_and_load_on_stock_jax(tmp_path):
    """The pickle names no smtdims module, class or attribute, and loads where smtdims cannot
    be imported. It may carry the checkout's path (a scope keeps the file that made it), so the
    check reads the pickle's opcodes, not its bytes: a clone in a folder named `smtdims` passes."""
    b, t = _busy_scope()
    data = pickle.dumps((b, t, b.scope))
    recorder = _ClassRecorder(io.BytesIO(data))
    recorder.load()
    modules = {module.split(".")[0] for module, _ in recorder.globals}
    assert modules and not modules & {"smtdims", "smtdims_jax", "smtdims_pytest"}, recorder.globals
    # attribute names and keys (`_smtdims_state`) are identifiers; a path is not one
    names = [arg for _, arg, _ in pickletools.genops(data) if isinstance(arg, str) and arg.isidentifier()]
    assert not [n for n in names if "smtdims" in n], names
    path = tmp_path / "dims.pkl"
    path.write_bytes(data)
    # jax.export sets up JAX's decision procedure (jax 0.7 does not when only unpickling)
    code = (_NO_SMTDIMS + "import pickle; from jax import export; b, t, s = pickle.load(open(sys.argv[1], 'rb')); "
            "assert not {m.split('.')[0] for m in sys.modules} & {'smtdims', 'smtdims_jax'}; assert t - b >= 16; print(t - b)")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(t - b)


def test_scope_state_left_out_of_getstate_but_kept_on_the_scope():
    b, t = _busy_scope()
    state = b.scope.__getstate__()
    assert not any("smtdims" in k for k in state)
    assert {"_explicit_constraints", "_bounds_cache"} <= set(state)
    assert "_smtdims_state" in b.scope.__dict__  # the original keeps its cache


def test_copied_scope_state_dies_with_the_copy():
    b, t = _busy_scope()
    b2, t2 = copy.deepcopy((b, t))
    assert t2 - b2 >= 16
    smtdims.bounds(t2 * b2 - b2)  # build a session on the copy
    ref = weakref.ref(b2.scope)
    del b2, t2
    gc.collect()
    assert ref() is None


def _outcome(fn):
    try:
        fn()
        return "ok"
    except Exception as err:  # the class is what must match stock
        return type(err).__name__


def test_copy_outcomes_match_stock_for_exported():
    """Side by side in one process: whatever stock can copy or pickle, smtdims can too."""

    def run():
        b, t = export.symbolic_shape("b, t", constraints=("t >= b + 16",))
        exp = export.export(jax.jit(lambda x: lax.slice_in_dim(x, 0, 16, axis=1)))(
            jax.ShapeDtypeStruct((b, t), jnp.float32))
        objs = {"exported": exp, "in_avals": exp.in_avals, "out_avals": exp.out_avals}
        return {(name, op): _outcome(lambda o=o, f=f: f(o)) for name, o in objs.items()
                for op, f in (("deepcopy", copy.deepcopy), ("copy", copy.copy),
                              ("pickle", lambda x: pickle.loads(pickle.dumps(x))))}

    smtdims.uninstall()
    stock = run()
    smtdims.install()
    ours = run()
    # stock's own bounds cache can make unpickling fail (it hashes half-built dims): smtdims
    # never fills that cache, so it may do better, never worse
    assert {k for k, v in stock.items() if v == "ok"} <= {k for k, v in ours.items() if v == "ok"}
    assert stock[("in_avals", "deepcopy")] == "ok" and stock[("exported", "deepcopy")] == "ok"


# -- the satisfiability gate ------------------------------------------------------------------------
UNSAT_SCOPES = [("t >= 4*b", "b >= t"), ("t >= b + 1", "b >= t"), ("mod(b, 4) == 3", "b == 8*t")]


@pytest.mark.parametrize("constraints", UNSAT_SCOPES)
def test_unsatisfiable_scope_refused_by_export(constraints):
    b, t = export.symbolic_shape("b, t", constraints=constraints)
    with pytest.raises(ValueError, match="Unsatisfiable constraint") as info:
        export.export(jax.jit(lambda x: lax.slice_in_dim(x, 0, 16, axis=1)))(
            jax.ShapeDtypeStruct((b, t), jnp.float32))
    assert isinstance(info.value, UnsatisfiableConstraintsError)
    conflict = info.value.conflict
    assert conflict and all(c in (*constraints, "b >= 1 (dimension variable)", "t >= 1 (dimension variable)")
                            for c in conflict)


@pytest.mark.parametrize("constraints", UNSAT_SCOPES)
@pytest.mark.parametrize("entry", ["geq", "max", "bounds_best", "decide", "bounds", "eq"])
def test_unsatisfiable_scope_gate_at_every_entry(constraints, entry):
    """The first question of the scope, whatever it is, meets the gate (fresh scope per case)."""
    b, t = export.symbolic_shape("b, t", constraints=constraints)
    if entry == "eq":
        # __eq__ serves hashing and never raises: JAX's answer (False) stands
        assert (b + t == t + b + 0 * b) is True
        assert (b == 2 * (b // 2) + b % 2) in (True, False)
        return
    calls = {
        "geq": lambda: b >= 1,
        "max": lambda: jx.max_dim(b, 1),
        "bounds_best": lambda: jx.jax_bounds(b - t),
        "decide": lambda: smtdims.decide(b, ">=", 1),
        "bounds": lambda: smtdims.bounds(b),
    }
    with pytest.raises(UnsatisfiableConstraintsError):
        calls[entry]()


# -- while JAX reads the constraints ---------------------------------------------------------------
def _scope_outcome(constraints: tuple[str, ...]) -> tuple[str, str]:
    """What building the scope gives a program: JAX's normal form of an expression, or the error."""
    try:
        a, b, c = export.symbolic_shape("a, b, c", constraints=constraints)
        return ("ok", str(a + b + c))
    except Exception as err:
        return (type(err).__name__, str(err))


READ_IN_ORDER = [
    # JAX makes -max(-a, -6) the constant 6 under the first constraint (a = 28): the second is then
    # refused with stock's ValueError, not the third with NotImplementedError (found by the fuzzer)
    ("2*a == 3*a - 28", "-max(-a, -6) == -56*a + 1574", "a == 28"),
    ("a >= 10", "max(a, 5) == b"),  # max(a, 5) is a: the rule rewrites a, so a + b + c prints c + 2*b
    ("a >= 10", "min(a, 5) + b == 7"),
    ("a == 4", "max(a, b) == c"),
    ("b <= 3", "a - max(b, 3) >= 0"),
    *((f"a >= {k}", f"max(a, {m}) == b") for k in range(1, 7) for m in range(1, 7)),
    *((f"a <= {k}", f"min(a, {m}) == b + c") for k in range(1, 7) for m in range(1, 7)),
]


@pytest.mark.parametrize("constraints", READ_IN_ORDER)
def test_a_scope_reads_its_constraints_as_stock_does(constraints):
    """JAX simplifies max/min and normalises equalities while it reads a scope's constraints, asking
    under those read so far; smtdims answers under the same ones (it reasoned under none, where
    stock proved these: the scope printed other expressions, or failed with another error)."""
    smtdims.uninstall()
    stock = _scope_outcome(constraints)
    smtdims.install()
    assert _scope_outcome(constraints) == stock


def test_gate_paid_once_per_scope():
    b, t = export.symbolic_shape("b, t", constraints=("t >= b + 16", "b <= 64"))
    smtdims.reset_stats()
    for k in range(1, 18):
        assert t >= k
    assert smtdims.stats()["solver_checks"] == 0  # a known point proved satisfiability


def _export_twice(make, *specs):
    """The same export from one line of code: stock, then with smtdims installed (a fresh function
    each time: JAX would reuse the first trace, locations included, for the same function)."""
    out = []
    for on in (False, True):
        (smtdims.install if on else smtdims.uninstall)()
        out.append(export.export(jax.jit(make()))(*specs))  # one source line for both: equal locations
    return out


@pytest.mark.parametrize("name", ["slice", "conv-like", "reshape"])
def test_exported_modules_are_stocks_byte_for_byte(name):
    """The exported module, its debug locations included, is stock's: JAX records the innermost frame
    outside its own files as the user's, and smtdims' export wrapper sits between the two (it was
    named in every location: ``do_export_hinted`` in ``smtdims_jax/hints.py``)."""
    a, b = export.symbolic_shape("a, b", constraints=("a >= b", "b >= 16"))
    make, spec = {
        "slice": (lambda: lambda x: x[: x.shape[1], :16], jax.ShapeDtypeStruct((a, b), jnp.int32)),
        "conv-like": (lambda: lambda x: x[:, ::2] + 1, jax.ShapeDtypeStruct((a, b), jnp.float32)),
        "reshape": (lambda: lambda x: x.reshape((-1,)) * 2, jax.ShapeDtypeStruct((a, b), jnp.float32)),
    }[name]
    stock, mine = _export_twice(make, spec)
    assert mine.mlir_module() == stock.mlir_module()
    assert mine.mlir_module_serialized == stock.mlir_module_serialized
    assert mine.serialize() == stock.serialize()

"""The pytest plugin: ``--smtdims`` for a session, ``@pytest.mark.smtdims`` for one test.

Each run is a subprocess: installing smtdims must not leak into this test session.
"""

from __future__ import annotations

pytest_plugins = ["pytester"]

TESTS = '''
import sys
import jax, jax.numpy as jnp, pytest
from jax import export, lax

def export_mod3():
    b, = export.symbolic_shape("b")
    return export.export(jax.jit(lambda x: lax.slice_in_dim(x, 0, x.shape[0] % 3)))(
        jax.ShapeDtypeStruct((b,), jnp.int32))

def slice16(x):
    return lax.slice_in_dim(x, 0, 16)

def test_inconclusive_is_reported():
    b, = export.symbolic_shape("b")
    with pytest.raises(Exception, match="inconclusive"):
        export.export(jax.jit(slice16))(jax.ShapeDtypeStruct((b,), jnp.int32))
'''


def _run(pytester, *args):
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:xdist", *args)


def test_session_option_installs_and_summarises(pytester):
    pytester.makepyfile(test_demo=TESTS + '''
def test_mod3_needs_smtdims():
    assert str(export_mod3().out_avals[0]) == "int32[mod(b, 3)]"

def test_uninstall_does_not_leak():
    import smtdims
    smtdims.uninstall()

def test_reinstalled_for_next_test():
    import smtdims
    assert smtdims.is_installed()
''')
    result = _run(pytester, "--smtdims")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines([
        "*= smtdims =*",
        "smtdims was installed for the whole session",
        "jax.export questions: * bounds (*), * comparisons, * equalities*",
        "reasoner: fast path *, solver * (* Z3 checks, 0 unknown), cache hits *",
        "inconclusive comparisons: 1",
        "  test_demo.py:*in slice16: 'b' >= '16' *test_demo.py::test_inconclusive_is_reported*",
    ])


def test_marker_installs_for_one_test(pytester):
    pytester.makepyfile(test_demo=TESTS + '''
@pytest.mark.smtdims
def test_marked():
    import smtdims
    assert smtdims.is_installed()
    export_mod3()

@pytest.mark.smtdims(budget=100_000)
def test_marked_budget():
    from smtdims.reasoner import CONFIG
    assert CONFIG.budget == 100_000

def test_unmarked_is_stock():
    import smtdims
    from smtdims.reasoner import CONFIG, DEFAULT_BUDGET
    assert not smtdims.is_installed() and CONFIG.budget == DEFAULT_BUDGET
    with pytest.raises(Exception, match="inconclusive"):
        export_mod3()
''')
    result = _run(pytester, "-k", "marked or stock")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*= smtdims =*", "smtdims was installed for 2 marked test(s)",
                                 "inconclusive comparisons: 0"])


def test_marker_is_registered_and_plugin_is_lazy(pytester):
    pytester.makepyfile(test_demo='''
import sys

def test_nothing_imported():
    assert "smtdims_jax" not in sys.modules and "jax" not in sys.modules
''')
    result = _run(pytester, "--strict-markers", "--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.smtdims(budget=None, equality=True): *"])
    result = _run(pytester)
    result.assert_outcomes(passed=1)
    assert "= smtdims =" not in result.stdout.str()


def test_marker_rejects_unknown_arguments(pytester):
    pytester.makepyfile(test_demo='''
import pytest

@pytest.mark.smtdims(budgett=5)
def test_typo():
    pass
''')
    result = _run(pytester)
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*takes budget= and equality= only*"])


def test_failed_exports_get_their_first_fix_round(pytester):
    """A relation before a bound that excludes more; a failed reshape with its spec rewrite."""
    pytester.makepyfile(test_fail=TESTS + '''
def test_concat_slice():
    a, b = export.symbolic_shape("a, b")
    f = lambda x, y: lax.slice_in_dim(jnp.concatenate([x, y]), 0, 16)
    with pytest.raises(Exception, match="inconclusive"):
        export.export(jax.jit(f))(jax.ShapeDtypeStruct((a,), jnp.int32), jax.ShapeDtypeStruct((b,), jnp.int32))

def test_pairs():
    c, = export.symbolic_shape("c")
    export.export(jax.jit(lambda x: x.reshape(-1, 2)))(jax.ShapeDtypeStruct((c,), jnp.int32))
''')
    result = _run(pytester, "--smtdims")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines([
        "inconclusive comparisons: 2",
        "*in slice16: 'b' >= '16'*",
        "    fix: add the constraint 'b >= 16'*",
        "*'b + a' >= '16'*test_concat_slice*",
        "    fix: add the constraint 'a + b >= 16'*",
        "failed exports (reshapes that may not divide, broadcasts not proven equal): 1",
        "  test_fail.py:*The remainder mod(c, - 2) should be 0.*test_pairs*",
        "    fix: write '2*c' in the shape specification in place of 'c'*",
        "  (the first fix round only; smtdims export --fix gives the whole fix, verified)",
    ])


def test_a_failed_broadcast_gets_the_hint_and_is_listed(pytester):
    """A test whose export fails on ``x + pos_table[:t]`` shows the hint (the fix, the
    ``smtdims export ... --fix`` command) in its failure, and the summary lists it with the fix."""
    pytester.makepyfile(test_pos='''
import jax, jax.numpy as jnp
from jax import export

TABLE = jnp.zeros((512, 8), jnp.float32)

def embed(x):
    return x + TABLE[:x.shape[0]]

def test_embed():
    export.export(jax.jit(embed))(jax.ShapeDtypeStruct(export.symbolic_shape("t, 8"), jnp.float32))
''')
    result = _run(pytester, "--smtdims")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "E *TypeError: add got incompatible shapes for broadcasting: (t, 8), (min(512, t), 8).",
        "*smtdims: suggested fix: add the constraint 't <= 512'",
        '*smtdims: the whole fix, verified end to end: smtdims export test_pos.py:embed --spec "float32[[]t,8]" --fix',
    ])
    result.stdout.fnmatch_lines([
        "failed exports (reshapes that may not divide, broadcasts not proven equal): 1",
        "  test_pos.py:*add got incompatible shapes for broadcasting*test_embed*",
        "    fix: add the constraint 't <= 512'",
        '    whole fix: smtdims export test_pos.py:embed --spec "float32[[]t,8]" --fix',
    ])


CAUGHT = '''
import jax, jax.numpy as jnp
from jax import export

TABLE = jnp.zeros((128, 8), jnp.float32)

def embed(x):
    return x + TABLE[: x.shape[0]]

def export_embed():
    return export.export(jax.jit(embed))(jax.ShapeDtypeStruct(export.symbolic_shape("t, 8"), jnp.float32))
'''


def test_a_caught_failed_export_is_listed_as_smtdims_run_lists_it(pytester):
    """A test that catches the failed export (``pytest.raises``) still gets it in the summary,
    with the fix ``t <= 128``: the same lines ``smtdims run`` prints for a program that catches it."""
    import subprocess
    import sys

    pytester.makepyfile(test_caught=CAUGHT + '''
import pytest

def test_caught():
    with pytest.raises(TypeError, match="broadcasting"):
        export_embed()
''')
    result = _run(pytester, "--smtdims")
    result.assert_outcomes(passed=1)
    listed = [
        "failed exports (reshapes that may not divide, broadcasts not proven equal): 1",
        "  test_caught.py:*in embed: add got incompatible shapes for broadcasting*test_caught*",
        "    fix: add the constraint 't <= 128'",
        '    whole fix: smtdims export test_caught.py:embed --spec "float32[[]t,8]" --fix',
    ]
    result.stdout.fnmatch_lines(listed)

    prog = pytester.makepyfile(prog_caught=CAUGHT + '''
try:
    export_embed()
except TypeError:
    print("caught")
''')
    run = subprocess.run([sys.executable, "-m", "smtdims", "run", str(prog)], cwd=pytester.path,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    pytest_lines = [ln for ln in result.stdout.lines if ln.startswith("    fix:") or ln.startswith("failed exports")]
    run_lines = [ln for ln in run.stderr.splitlines() if ln.startswith("    fix:") or ln.startswith("failed exports")]
    assert pytest_lines == run_lines

"""``smtdims run script.py [ARGS]`` / ``python -m smtdims run -m module [ARGS]``: an unmodified program
runs with smtdims installed; at exit the pytest plugin's summary goes to stderr; the exit status is the
program's. Subprocess runs cost ~2 s each (JAX imports), so there are few of them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from smtdims_jax.run import FAILED_EXPORTS

from smtdims import cli
from smtdims.cli.run import parse_run_args

PROGRAM = '''
import sys
import jax, jax.numpy as jnp
from jax import export, lax
from smtdims.reasoner import CONFIG

def slice16(x):
    return lax.slice_in_dim(x, 0, 16)

def main():
    print("argv:", sys.argv, "name:", __name__, "budget:", CONFIG.budget)
    b, = export.symbolic_shape("b")
    f = jax.jit(lambda x: lax.slice_in_dim(x, 0, x.shape[0] % 3))
    print("out:", export.export(f)(jax.ShapeDtypeStruct((b,), jnp.int32)).out_avals[0])  # needs smtdims
    try:
        export.export(jax.jit(slice16))(jax.ShapeDtypeStruct((b,), jnp.int32))
    except Exception as e:
        print("caught:", type(e).__name__)
    sys.exit(int(sys.argv[1]))

if __name__ == "__main__":
    main()
'''

MODULE = '''
import sys
print("module argv:", sys.argv[1:], __name__)

def fail():
    raise ValueError("boom in the program")

fail()
'''


def _env() -> dict[str, str]:
    plugins = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "plugins")
    path = os.pathsep.join(p for p in (plugins, os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": path}


def _console_script() -> list[str]:
    script = os.path.join(os.path.dirname(sys.executable), "smtdims")
    return [script] if os.path.exists(script) else [sys.executable, "-m", "smtdims"]


# -- argument handling (in-process, fast) ----------------------------------------------------------------------
@pytest.mark.parametrize("argv,target,args,module,json_path,budget,as_json", [
    (["run", "prog.py", "3", "--json", "x", "-m", "y"], "prog.py", ["3", "--json", "x", "-m", "y"], False, None, None,
     False),
    (["run", "--json-out", "s.json", "prog.py"], "prog.py", [], False, "s.json", None, False),
    (["run", "--json-out=s.json", "--budget=7", "prog.py", "--budget", "9"], "prog.py", ["--budget", "9"], False, "s.json",
     7, False),
    (["--budget", "5", "run", "-m", "pkg.mod", "a", "--help"], "pkg.mod", ["a", "--help"], True, None, 5, False),
    (["run", "-mpkg.mod"], "pkg.mod", [], True, None, None, False),
    (["run", "--", "-odd.py", "x"], "-odd.py", ["x"], False, None, None, False),
    # --json is a flag, as for every other subcommand (it took FILE and overwrote victim.py)
    (["run", "--json", "victim.py", "train_export.py"], "victim.py", ["train_export.py"], False, None, None, True),
    (["--json", "run", "prog.py"], "prog.py", [], False, None, None, True),
])
def test_everything_after_the_program_is_the_programs(argv, target, args, module, json_path, budget, as_json):
    ra = parse_run_args(argv)
    assert (ra.target, ra.args, ra.module, ra.json_path, ra.budget, ra.json) == (
        target, args, module, json_path, budget, as_json)


@pytest.mark.parametrize("argv,needle", [
    (["run"], "no program given"),
    (["run", "--frobnicate", "x.py"], "unknown option '--frobnicate' after 'run'"),
    (["--frobnicate", "run", "x.py"], "unknown option '--frobnicate' before 'run'"),
    (["run", "--json=s.json", "x.py"], "--json is a flag"),
    (["run", "--json", "s.json", "x.py"], "use --json-out s.json"),
    (["run", "--budget", "0", "x.py"], "--budget must be a positive integer"),
    (["run", "--budget", "many", "x.py"], "invalid --budget value 'many'"),
    (["run", "-m"], "-m needs a module name"),
])
def test_run_usage_errors_exit_2(capsys, argv, needle):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and len(err.strip().splitlines()) == 1


def test_run_help(capsys):
    assert cli.main(["run", "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: smtdims run") and "-m MODULE" in out and "exit status" in out
    assert cli.main(["--help"]) == 0
    assert "run a Python program with smtdims installed" in capsys.readouterr().out


# -- exit statuses (in-process: no JAX work in the programs) ------------------------------------------------------
@pytest.mark.parametrize("body,status,stderr", [
    ("pass", 0, ""),
    ("import sys; sys.exit()", 0, ""),
    ("import sys; sys.exit(5)", 5, ""),
    ("raise SystemExit('bad input')", 1, "bad input"),
    ("raise KeyError('missing')", 1, "KeyError: 'missing'"),
])
def test_exit_status_is_the_programs(tmp_path, capsys, monkeypatch, body, status, stderr):
    run = pytest.importorskip("smtdims_jax.run")
    import smtdims_jax

    prog = tmp_path / "prog.py"
    prog.write_text(body + "\n")
    installed_before = smtdims_jax.is_installed()
    argv_before = sys.argv[:]
    assert run.run_program(str(prog), ["a"]) == status
    err = capsys.readouterr().err
    assert stderr in err and "smtdims was installed for the whole run of" in err
    if "Error" in stderr:
        assert "Traceback (most recent call last)" in err and "runpy" not in err and "smtdims_jax" not in err
    assert smtdims_jax.is_installed() == installed_before and sys.argv == argv_before


def test_missing_script_exits_2(tmp_path, capsys):
    rc = cli.main(["run", str(tmp_path / "nope.py")])
    assert rc == 2 and "can't open file" in capsys.readouterr().err


def test_pytest_plugin_and_run_share_the_summary():
    pytest.importorskip("smtdims_jax")
    from smtdims_jax.run import Recorder
    from smtdims_pytest import plugin

    rec = plugin._Recorder()  # private: the pytest plugin's recorder, built without a pytest session
    assert isinstance(rec.core, Recorder)
    rec.core({"kind": "bounds", "answered_by": "stock"})
    rec.marked_tests = 1
    assert rec.summary_lines() == Recorder.summary_lines(rec.core, "1 marked test(s)")
    assert rec.summary_lines()[:2] == ["smtdims was installed for 1 marked test(s)",
                                       "jax.export questions: 1 bounds (stock JAX's sound linear procedure 1, "
                                       "smtdims 0), 0 comparisons, 0 equalities (0 proven by smtdims where stock "
                                       "JAX said False)"]


# -- end to end (subprocesses) ---------------------------------------------------------------------------------------
def test_run_script_end_to_end(tmp_path):
    pytest.importorskip("jax")
    (tmp_path / "prog.py").write_text(PROGRAM)
    cmd = [*_console_script(), "--budget", "1234567", "run", "--json-out", "summary.json", "prog.py", "3", "--json", "x"]
    res = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=180, env=_env())
    assert res.returncode == 3, res.stdout + res.stderr  # the program's sys.exit(3)
    assert "argv: ['prog.py', '3', '--json', 'x'] name: __main__ budget: 1234567" in res.stdout
    assert "out: int32[mod(b, 3)]" in res.stdout and "caught: " in res.stdout
    err = res.stderr.splitlines()
    i = next(k for k, ln in enumerate(err) if "= smtdims =" in ln)
    assert err[i + 1] == "smtdims was installed for the whole run of prog.py"
    assert err[i + 2].startswith("jax.export questions: ") and err[i + 3].startswith("reasoner: fast path ")
    assert err[i + 4] == "inconclusive comparisons: 1"
    assert err[i + 5].startswith("  prog.py:8 in slice16: 'b' >= '16'"), res.stderr
    assert err[i + 6].startswith("    fix: add the constraint 'b >= 16'"), res.stderr
    data = json.loads((tmp_path / "summary.json").read_text())
    assert data["exit_status"] == 3 and data["argv"] == ["prog.py", "3", "--json", "x"]
    assert err[i + 7] == "  (the first fix round only; smtdims export --fix gives the whole fix, verified)"
    assert data["summary"] == err[i + 1:i + 8]
    (inc,) = data["inconclusive"]
    assert inc["location"] == "prog.py:8 in slice16" and inc["question"] == "'b' >= '16'" and "b >= 16" in inc["fix"]
    assert data["questions"]["compare"]["total"] >= 1 and set(data["stats"]) >= {"solver_checks", "fast_path_answers"}


def test_python_m_smtdims_run_module_with_an_uncaught_exception(tmp_path):
    pytest.importorskip("jax")
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "prog.py").write_text(textwrap.dedent(MODULE))
    cmd = [sys.executable, "-m", "smtdims", "run", "-m", "pkg.prog", "a", "-m", "b"]
    res = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=180, env=_env())
    assert res.returncode == 1, res.stdout + res.stderr  # as `python -m pkg.prog` exits
    assert "module argv: ['a', '-m', 'b'] __main__" in res.stdout
    tb = res.stderr.split("= smtdims =")[0]
    assert tb.startswith("Traceback (most recent call last):") and "ValueError: boom in the program" in tb
    assert "runpy" not in tb and "smtdims_jax" not in tb and os.path.join("smtdims", "cli") not in tb
    assert tb.count('  File "') == 2 and "prog.py\", line 8, in <module>" in tb
    assert "smtdims was installed for the whole run of -m pkg.prog" in res.stderr
    assert "inconclusive comparisons: 0" in res.stderr


def test_failed_exports_get_their_first_fix_round(tmp_path, capsys):
    """smtdims run: the weakest first fix (a relation, not 'a >= 15'), and a failed reshape's spec rewrite."""
    from smtdims_jax.run import run_program

    prog = tmp_path / "prog.py"
    prog.write_text(
        "import jax, jax.numpy as jnp\n"
        "from jax import export, lax\n"
        "a, b = export.symbolic_shape('a, b')\n"
        "f = lambda x, y: lax.slice_in_dim(jnp.concatenate([x, y]), 0, 16)\n"
        "try:\n"
        "    export.export(jax.jit(f))(jax.ShapeDtypeStruct((a,), jnp.float32), jax.ShapeDtypeStruct((b,), jnp.float32))\n"
        "except Exception:\n"
        "    pass\n"
        "c, = export.symbolic_shape('c')\n"
        "export.export(jax.jit(lambda x: x.reshape(-1, 2)))(jax.ShapeDtypeStruct((c,), jnp.float32))\n"
    )
    json_path = tmp_path / "s.json"
    assert run_program(str(prog), json_path=str(json_path)) == 1
    err = capsys.readouterr().err
    assert "fix: add the constraint 'a + b >= 16'" in err, err
    assert f"{FAILED_EXPORTS}: 1" in err
    assert "prog.py:10 in <lambda>: Cannot divide evenly" in err
    assert "fix: write '2*c' in the shape specification in place of 'c'" in err
    d = json.loads(json_path.read_text())
    assert d["failed_exports"][0]["fix"].startswith("write '2*c'")


POS_TABLE = """
import jax, jax.numpy as jnp
from jax import export

TABLE = jnp.zeros((512, 8), jnp.float32)

def embed(x):
    return x + TABLE[:x.shape[0]]  # line 8: t positions against min(512, t) rows

if __name__ == "__main__":
    export.export(jax.jit(embed))(jax.ShapeDtypeStruct(export.symbolic_shape("t, 8"), jnp.float32))
"""


def test_a_failed_broadcast_is_a_finding_with_its_fix(tmp_path, monkeypatch, capsys):
    """``x + pos_table[:t]`` fails the export on a broadcast (t against min(512, t)); the
    summary counts it (it counted 0 findings), names the fix and the ``smtdims export --fix`` command,
    and the program's traceback carries the same hint as a note."""
    from smtdims_jax.run import run_program

    (tmp_path / "pos.py").write_text(POS_TABLE)
    monkeypatch.chdir(tmp_path)
    json_path = tmp_path / "s.json"
    assert run_program("pos.py", json_path=str(json_path)) == 1
    err = capsys.readouterr().err
    tb, summary = err.split("= smtdims =")
    assert "TypeError: add got incompatible shapes for broadcasting: (t, 8), (min(512, t), 8)." in tb
    assert "smtdims: suggested fix: add the constraint 't <= 512'" in tb
    command = 'smtdims export pos.py:embed --spec "float32[t,8]" --fix'
    assert f"smtdims: the whole fix, verified end to end: {command}" in tb
    assert f"{FAILED_EXPORTS}: 1" in summary, summary
    assert "  pos.py:8 in embed: add got incompatible shapes for broadcasting" in summary
    assert "    fix: add the constraint 't <= 512'" in summary and f"    whole fix: {command}" in summary
    (failed,) = json.loads(json_path.read_text())["failed_exports"]
    assert (failed["kind"], failed["fix"], failed["command"]) == ("broadcast", "add the constraint 't <= 512'", command)

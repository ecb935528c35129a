"""What a new user met first, at the export and run commands: ``smtdims run --json`` a flag; export
constraints read by smtdims' parser and checked against JAX's int32 dimension values; Ctrl-C during an
export never lost; a failed export's user frame; the smaller items (export's help, the report's columns, an
empty audit). The same pass without JAX (big constants, Ctrl-C, witnesses, stats): tests/core/test_newuser.py."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time

import pytest

import smtdims
from smtdims import cli
from smtdims.cli import common

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = cli.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


# -- 2. smtdims run --json is a flag ---------------------------------------------------------------------------
def test_run_json_flag_prints_the_summary_on_stdout(tmp_path, capsys):
    pytest.importorskip("smtdims_jax.run")
    prog = tmp_path / "victim.py"
    prog.write_text("import sys\nprint('program output', sys.argv[1:])\n")
    rc = cli.main(["run", "--json", str(prog), "train_export.py"])
    out, err = capsys.readouterr()
    assert rc == 0 and prog.read_text().startswith("import sys")  # run, not overwritten
    head, _, tail = out.partition("\n")
    assert head == "program output ['train_export.py']"
    data = json.loads(tail)
    assert data["exit_status"] == 0 and data["argv"] == [str(prog), "train_export.py"] and "summary" in data


# -- 3. export constraints: smtdims' parser first, JAX's syntax and int32 limit after ------------------------
@pytest.mark.parametrize("text,jax_text", [
    ("n <= 2**40 // 1024", "n <= 1073741824"),
    ("n >= n // 2", "n >= floordiv(n, 2)"),
    ("n >= n % 3", "n >= mod(n, 3)"),
    ("2*(n + 1) >= 3", "2*n + 2 >= 3"),
    ("n >= floordiv(n, 2)", "n >= floordiv(n, 2)"),  # JAX's own syntax goes as written
    ("n <= 2^30", "n <= 2^30"),
])
def test_export_constraints_are_written_in_jax_syntax(text, jax_text):
    from jax import export
    from smtdims_jax.pipeline.specs import jax_constraint

    assert jax_constraint(text) == jax_text
    export.SymbolicScope((jax_text,))  # JAX reads it


def test_export_constraint_beyond_int32_is_an_input_error(capsys):
    from smtdims_jax.pipeline import build_specs

    with pytest.raises(ValueError, match=r"out of range for JAX's dimension values, int32 .*2147483647"):
        build_specs(["n"], ["n <= 2^40"])
    build_specs(["int64[n]"], ["n <= 2^40"])  # a 64-bit input turns jax_enable_x64 on: int64 dimensions
    failing = os.path.join(ROOT, "tests", "fixtures_pipeline", "failing.py")
    for c in ("n <= 2^40", "n <= 2**40"):
        rc, out, err = run(capsys, "export", f"{failing}:slice16", "--spec", "n", "-c", c, "-q")
        assert rc == 2 and "int32" in err and "DOUBLESTAR" not in err and "Python integer" not in err, err
    rc, out, err = run(capsys, "export", f"{failing}:slice16", "--spec", "n", "-c", "n >= n // 2 + 16", "-q")
    assert "syntax error" not in err and "constraints n >= floordiv(n, 2) + 16" in out


@pytest.mark.skipif(os.name != "posix", reason="SIGINT to a subprocess: POSIX only")
@pytest.mark.parametrize("delay", [0.05, 0.3, 0.6])
def test_ctrl_c_during_export_fix_exits_130(delay):
    """Measured before the fix: about 2 of 15 runs went on and exited 1 (most often in the first second,
    while jaxlib loads: the signal's handler ran inside _xla_gc_callback); then 7 of 60 on a busy machine
    said "interrupted" and ended by SIGINT (a KeyboardInterrupt that had crossed an ``exec``'d dataclass
    method). The Ctrl-C is sent ``delay`` seconds after the command's first progress line: before it,
    Python is still importing smtdims and its default handler has SIGINT (documented in the CLI's help)."""
    cmd = [sys.executable, "-m", "smtdims", "export", "examples/fix_two.py:two", "--spec", "b", "--fix"]
    env = {**os.environ, "JAX_PLATFORMS": "cpu",
           "PYTHONPATH": os.pathsep.join([os.path.join(ROOT, "plugins"), os.environ.get("PYTHONPATH", "")])}
    p = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert p.stderr is not None
    ready, _, _ = select.select([p.stderr], [], [], 120)
    assert ready, "no progress line within 120 s"
    first = p.stderr.readline()
    assert first.startswith("smtdims: "), first
    time.sleep(delay)
    if p.poll() is not None:
        p.communicate()
        pytest.skip("the run finished before the signal")
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert "Exception ignored" not in err, err[-2000:]  # not in a gc callback, not in the exit's clean-up
    if p.returncode in (0, 1) and "FIXED" in out and "smtdims: interrupted" not in err:
        pytest.skip("the signal came after the report, while the program ended")
    assert p.returncode == common.EXIT_INTERRUPTED, (p.returncode, err[-2000:])
    assert "smtdims: interrupted" in err


@pytest.mark.skipif(os.name != "posix", reason="SIGINT to a subprocess: POSIX only")
@pytest.mark.parametrize("nested", [False, True], ids=["the-module", "a-module-it-imports"])
def test_ctrl_c_while_export_imports_the_users_module_exits_130(tmp_path, nested):
    """The SIGINT handler deferred a Ctrl-C that landed in any import until the import ended (a module
    that slept 30 s at import exited 25 s after Ctrl-C); only an extension's initialisation defers it now."""
    sleeper = "import sys, time\nprint('importing', file=sys.stderr, flush=True)\ntime.sleep(20)\n"
    if nested:
        (tmp_path / "slow_helper.py").write_text(sleeper)
        (tmp_path / "slow_model.py").write_text("import slow_helper  # noqa: F401\ndef fn(x):\n    return x\n")
    else:
        (tmp_path / "slow_model.py").write_text(sleeper + "def fn(x):\n    return x\n")
    cmd = [sys.executable, "-m", "smtdims", "export", str(tmp_path / "slow_model.py") + ":fn", "--spec", "b", "-q"]
    env = {**os.environ, "JAX_PLATFORMS": "cpu",
           "PYTHONPATH": os.pathsep.join([ROOT, os.path.join(ROOT, "plugins"), os.environ.get("PYTHONPATH", "")])}
    p = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert p.stderr is not None
    assert p.stderr.readline().strip() == "importing", p.communicate()
    time.sleep(1.5)
    t = time.monotonic()
    p.send_signal(signal.SIGINT)
    try:
        out, err = p.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        raise AssertionError("Ctrl-C during the import did not stop the run within 10 s") from None
    assert p.returncode == common.EXIT_INTERRUPTED, (p.returncode, err[-2000:])
    assert time.monotonic() - t < 5.0 and "smtdims: interrupted" in err


# -- 5. smtdims run lists a caught reshape failure, as pytest --smtdims lists it -----------------------------------
def test_run_lists_a_caught_reshape_failure(tmp_path, capsys):
    run_mod = pytest.importorskip("smtdims_jax.run")
    prog = tmp_path / "prog.py"
    prog.write_text(
        "import jax, jax.numpy as jnp\n"
        "from jax import export\n"
        "c, = export.symbolic_shape('c')\n"
        "try:\n"
        "    export.export(jax.jit(lambda x: x.reshape(-1, 2)))(jax.ShapeDtypeStruct((c,), jnp.float32))\n"
        "except Exception as e:\n"
        "    print('caught', type(e).__name__)\n"
    )
    assert run_mod.failure_kind(ValueError("Cannot divide evenly ... The remainder mod(c, 2) should be 0.")) == "reshape"
    json_path = tmp_path / "s.json"
    assert run_mod.run_program(str(prog), json_path=str(json_path)) == 0
    err = capsys.readouterr().err
    assert f"{run_mod.FAILED_EXPORTS}: 1" in err, err
    assert "prog.py:5 in <lambda>: Cannot divide evenly" in err
    (failed,) = json.loads(json_path.read_text())["failed_exports"]
    assert failed["fix"].startswith("write '2*c'")
    import jax.export

    assert not getattr(jax.export.export, "_smtdims_watch", False)  # JAX as it was


# -- 7. a failed export from an ordinary bug names the user's line -----------------------------------------------------
def test_failed_export_names_the_innermost_user_frame(tmp_path, capsys):
    pytest.importorskip("smtdims_jax.pipeline")
    mod = tmp_path / "buggy.py"
    mod.write_text(
        "import jax.numpy as jnp\n"
        "def h(x):\n"
        "    n = x.shape[0]\n"
        "    return x[: n // 2]\n"
        "def g(x, y):\n"
        "    return jnp.einsum('ij,jk->ik', x, y)\n"
    )
    rc, out, err = run(capsys, "export", f"{mod}:h", "--spec", "", "-q")
    assert rc == 1 and "IndexError" in err and "buggy.py:3 in h" in err and "--debug" in err, err
    rc, out, err = run(capsys, "export", f"{mod}:g", "--spec", "a, 3", "--spec", "4, b", "-q")
    assert rc == 1 and "buggy.py:6 in g" in err and "opt_einsum" not in err, err


# -- 8. the smaller ones: export's help, the report, the audit ---------------------------------------------------------
def test_export_help_gives_the_real_deadline_default(capsys):
    rc, out, _ = run(capsys, "export", "--help")
    flat = " ".join(out.split())
    assert rc == 0 and f"(default {smtdims.DEFAULT_DEADLINE:g} s)" in flat and "default: none" not in flat


def test_chosen_for_column_is_truncated():
    """A sample chosen for many goals made the table's "chosen for" column 230 characters wide; it
    keeps the whole reasons that fit and says how many more (the verbose table keeps them all)."""
    from smtdims_jax.pipeline.report import CHOSEN_FOR_WIDTH, SampleResult, VerificationReport

    why = ("minimum", "non-empty", "mod(b, 2) == 0", "mod(b, 3) == 1", "largest within 4 MiB", "a + b >= 16 tight") * 6
    whys = [why, ("minimum", "spread", "mod(b, 2) == 0", "largest within 4 MiB"), ("minimum", "spread"), ("x" * 300,)]
    samples = tuple(SampleResult(i, {"b": i + 1}, ((i + 1,),), w, "pass") for i, w in enumerate(whys))
    report = VerificationReport("f", ("cpu",), (), ("float32[b]",), ("float32[b]",), (), samples, ())
    lines = report.table().splitlines()
    (head,) = [ln for ln in lines if "chosen for" in ln]
    start, end = head.index("chosen for"), head.index("compile")
    assert end - start - 2 <= CHOSEN_FOR_WIDTH  # the widest cell, and the column, fit
    cells = [r[start:end].rstrip() for r in lines[lines.index(head) + 1:][:4]]
    assert cells[:3] == ["minimum (+35 more)", "minimum, spread (+2 more)", "minimum, spread"], cells
    assert cells[3].startswith("xxxxxxxx") and cells[3].endswith("..."), cells
    assert ", ".join(why) in report.table(verbose=True)


def test_an_audit_with_nothing_to_show_prints_no_empty_table():
    """A header and a rule over no rows read as a broken table; the summary says it all."""
    import jax
    import jax.numpy as jnp
    from jax import export
    from smtdims_jax.audit import audit

    with audit() as report:
        export.export(jax.jit(lambda x: x + 1))(jax.ShapeDtypeStruct(export.symbolic_shape("b"), jnp.int32))
    text = str(report)
    assert "nothing flagged" in text and "----" not in text and "question" not in text, text


# -- help and messages -----------------------------------------------------------------------------------------------------
def test_export_help_gives_the_real_box_default_and_every_exit_status(capsys):
    rc, out, _ = run(capsys, "export", "--help")
    flat = " ".join(out.split())
    assert rc == 0 and "default 64" not in flat and "default: no grid" in flat, flat
    assert "130 interrupted (Ctrl-C)" in flat and "--spec and --like cannot be combined" in flat
    rc, out, _ = run(capsys, "verify", "--help")
    assert rc == 0 and "130 interrupted (Ctrl-C)" in " ".join(out.split())


def test_like_with_spec_says_they_cannot_be_combined(capsys):
    rc, out, err = run(capsys, "export", "examples/fix_two.py:two", "--spec", "float32[b]", "--like", "float32[4]")
    assert rc == 2 and "--spec and --like cannot be combined" in err and "not some of each" in err, err
    rc, out, err = run(capsys, "export", "examples/fix_two.py:two")
    assert rc == 2 and "give the argument shapes with --spec" in err, err


def test_an_auto_export_of_a_function_that_raises_shows_the_error_and_no_command(tmp_path, capsys):
    pytest.importorskip("smtdims_jax.pipeline")
    mod = tmp_path / "broken.py"
    mod.write_text("def boom(x):\n    raise RuntimeError('the model is not ready: call init() first')\n")
    rc, out, err = run(capsys, "export", f"{mod}:boom", "--like", "float32[4]", "-q")
    assert rc == 1 and "RuntimeError: the model is not ready: call init() first" in out, out
    assert "broken.py:2 in boom" in out and "smtdims export" not in out, out


def test_verify_report_is_headed_as_a_verify_check(tmp_path, capsys):
    pytest.importorskip("smtdims_jax.pipeline")
    art = tmp_path / "two.bin"
    rc, out, _ = run(capsys, "export", "examples/fix_two.py:two", "--spec", "float32[2*k]", "-c", "k >= 8",
                     "--samples", "2", "--out", str(art), "-q")
    assert rc == 0 and out.startswith("smtdims export check of "), out
    rc, out, _ = run(capsys, "verify", str(art), "--against", "examples/fix_two.py:two", "-q")
    assert rc == 0 and out.startswith(f"smtdims verify check of {art} against "), out  # a module name, then :two
    assert "export check" not in out


# -- the verification process starts before the user's module is imported ---------------------------
@pytest.mark.parametrize("command", ["export", "verify"])
def test_verification_prestarts_before_the_users_module_is_imported(tmp_path, capsys, monkeypatch, command):
    fresh = pytest.importorskip("smtdims_jax.pipeline.fresh")
    order: list[str] = []
    monkeypatch.setattr(fresh, "prestart", lambda *a, **k: order.append("prestart"), raising=False)
    monkeypatch.setattr(sys, "_smtdims_test_order", order, raising=False)
    mod = tmp_path / "ordered.py"
    mod.write_text("import sys\nsys._smtdims_test_order.append('import')\ndef f(x):\n    return x\n")
    if command == "export":
        run(capsys, "export", f"{mod}:f", "--spec", "float32[b]", "--samples", "1", "-q")
    else:
        run(capsys, "verify", str(tmp_path / "missing.bin"), "--against", f"{mod}:f", "-q")
    assert order[:2] == ["prestart", "import"], order
    order.clear()
    run(capsys, "export", f"{mod}:f", "--spec", "float32[b", "-q")  # a usage error starts nothing
    assert order == [], order


_EARLY_PROBE = """
import json, sys
from smtdims.cli import main
rc = main(sys.argv[1:])
wp = sys.modules.get("smtdims_jax.pipeline.worker_proc")
fresh = sys.modules.get("smtdims_jax.pipeline.fresh")
print(json.dumps({"rc": rc, "started": wp.processes_started() if wp else 0,
                  "before_jax": wp._stats["before_jax"] if wp else 0,
                  "one_module": fresh is None or fresh._Worker is wp._Worker}))
"""


def _early(*argv: str) -> dict:
    """A fresh interpreter running the command line (JAX not imported before it, as for a user)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, os.path.join(ROOT, "plugins"),
                                                        os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", _EARLY_PROBE, *argv], capture_output=True, text=True, cwd=ROOT,
                         env=env, timeout=600)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_verification_process_started_before_jax_is_the_one_that_verifies():
    pytest.importorskip("smtdims_jax.pipeline.fresh")
    got = _early("export", "examples/fix_two.py:two", "--spec", "float32[2*k]", "-c", "k >= 8", "--samples", "1", "-q")
    # started once, before this process imported JAX, and found again by the pipeline (not a second one)
    assert got == {"rc": 0, "started": 1, "before_jax": 1, "one_module": True}, got
    # a command that stops at a usage error starts nothing: a missing target file, shapes not given
    assert _early("export", "examples/no_such_file.py:two", "--spec", "float32[b]", "-q")["started"] == 0
    assert _early("export", "examples/fix_two.py:two", "-q")["started"] == 0

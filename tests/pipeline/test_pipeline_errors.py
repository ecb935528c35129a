"""The export pipeline's error paths: ambiguous specs and dtypes, failed exports as reports,
spec fixes for reshapes, float64, and the CLI's options, exit statuses and closed pipes.

Failed exports are cheap (no fresh process); one test runs the whole pipeline (float64).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from smtdims_jax import pipeline
from smtdims_jax.pipeline import (
    Check,
    VerificationReport,
    build_specs,
    export_and_verify,
)

from smtdims import cli

HERE = os.path.dirname(__file__)
FAILING = os.path.join(HERE, "..", "fixtures_pipeline", "failing.py")


# -- argument specs (no export) --------------------------------------------------------------------------
@pytest.mark.parametrize("spec, words", [
    (("b", "float"), ["ambiguous", "'float'", "float64"]),
    (("b", "int33"), ["ambiguous", "unknown dtype 'int33'", "'float32[b]'"]),
    (("b", "i4"), ["ambiguous", "'int32'"]),
    (("int32[b]", "float32"), ["already names its dtype", "('b', 'float32')"]),
])
def test_ambiguous_pairs_and_unknown_dtypes_are_refused(spec, words):
    with pytest.raises(ValueError) as info:
        export_and_verify(lambda x: x, spec)
    assert all(w in str(info.value) for w in words), str(info.value)


def test_unambiguous_pairs_and_spec_tuples_still_work():
    specs, _, _ = build_specs([("b", "float32"), ("b", jnp.int8), ("int32[a]", "int16[b]")])
    assert [s.dtype for s in specs[:2]] == [jnp.float32, jnp.int8]
    assert isinstance(specs[2], tuple) and [s.dtype for s in specs[2]] == [jnp.int32, jnp.int16]
    with pytest.raises(TypeError, match="must be a dtype"):
        build_specs([("b", 5)])


# -- a failed export: the reshape remainder gets a spec fix --------------------------------------------
def test_reshape_remainder_suggests_a_verified_spec_rewrite():
    report = export_and_verify(lambda x: x.reshape((-1, 2)), "int32[b]", samples=2)
    assert not report.ok and report.checks[0].status == "fail"
    e = report.export_error
    assert "The remainder mod(b, - 2) should be 0" in e.message
    assert e.fix_kind == "spec" and "write '2*b'" in e.fix and "in place of 'b'" in e.fix
    assert e.fix_verified is True and e.fixed_specs == ("int32[2*b]",)
    assert "in_avals would be int32[2*b]" in report.table()


def test_the_first_fix_is_settled_by_the_round_that_chose_it_as_a_value():
    """A failed export's first fix takes its verdict from the whole fix's first round where that round chose
    the same fix (kind, text, the variable a rewrite replaces; its note aside), not where the words agree."""
    from smtdims_jax.pipeline.failure import settled_by
    from smtdims_jax.pipeline.refusals import FixPart
    from smtdims_jax.pipeline.report import ExportFailure
    from smtdims_jax.pipeline.result import FIXED, FixResult, FixRound

    from smtdims.answers.fixes import Fix

    fix = Fix("spec", "2*b", "b", note="so that b is a multiple of 2")
    failure = ExportFailure("ValueError", "The remainder mod(b, -2) should be 0", fix=str(fix), fix_kind="spec",
                            suggested_fix=fix)

    def whole(*rounds: tuple[FixPart, ...], status: str = FIXED) -> FixResult:
        return FixResult(status, "", (), (), (), (), tuple(FixRound(f"refusal {i}", (), parts, 0.0)
                                                          for i, parts in enumerate(rounds, 1)))

    same = (FixPart("spec", "2*b", "b"),)
    assert settled_by(failure, whole(same)).fix_verified is True
    again = settled_by(failure, whole(same, (FixPart("constraint", "b >= 16"),)))
    assert again.fix_verified is False and again.fix_detail == "refusal 2"
    for other in ((FixPart("spec", "2*b", "c"),), (FixPart("constraint", "2*b"),),
                  (*same, FixPart("constraint", "b >= 16")), ()):
        assert settled_by(failure, whole(other)) is failure
    assert settled_by(replace(failure, suggested_fix=None), whole(same)).fix_verified is None


# -- float64 ------------------------------------------------------------------------------------------
def test_float64_runs_with_x64_and_restores_it(capsys):
    assert not jax.config.jax_enable_x64
    rc = cli.main(["export", f"{FAILING}:double", "--spec", "b", "--dtype", "float64", "--samples", "2",
                   "--json", "-q"])
    out = capsys.readouterr().out
    d = json.loads(out)
    assert rc == 0, out
    assert d["in_avals"] == ["float64[b]"] and d["out_avals"] == ["float64[b]"]
    assert "jax_enable_x64" in d["checks"][0]["detail"]
    assert not jax.config.jax_enable_x64, "the setting must be restored"


# -- CLI --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("extra, named", [
    (["--dtype", "float"], "--dtype 'float'"),
    (["--dtype", "i4"], "--dtype 'i4'"),
    (["--dtype", "int33"], "--dtype 'int33'"),
])
def test_cli_unknown_dtype_is_a_usage_error(capsys, extra, named):
    rc = cli.main(["export", f"{FAILING}:double", "--spec", "b", *extra])
    captured = capsys.readouterr()
    assert rc == 2 and captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and named in lines[0] and "unknown dtype" in lines[0], captured.err


def test_cli_unknown_dtype_in_spec(capsys):
    assert cli.main(["export", f"{FAILING}:double", "--spec", "i33[b]", "--json"]) == 2
    captured = capsys.readouterr()
    assert "--spec 'i33[b]'" in captured.err
    assert "unknown dtype" in json.loads(captured.out)["error"]["message"]


def test_cli_failed_export_is_a_failed_check_with_global_json_and_debug(capsys):
    rc = cli.main(["--json", "export", f"{FAILING}:slice16", "--spec", "b", "-q", "--debug"])
    captured = capsys.readouterr()
    assert rc == 1, captured.err
    d = json.loads(captured.out)
    assert d["ok"] is False and d["checks"][0] == {
        "name": "export", "status": "fail",
        "detail": "InconclusiveDimensionOperation: Symbolic dimension comparison 'b' >= '16' is inconclusive."}
    assert d["export_error"]["fix_verified"] is True and "b >= 16" in d["export_error"]["fix"]
    assert "Traceback" in captured.err  # --debug after `export` is accepted


def _stub_report() -> VerificationReport:
    return VerificationReport("m:f", ("cpu",), (), (), (), (Check("export", "pass"),), (), ())


def test_cli_global_budget_reaches_the_pipeline(capsys, monkeypatch):
    seen = {}

    def fake(fn, *specs, **kw):
        seen.update(kw)
        return _stub_report()

    monkeypatch.setattr(pipeline, "export_and_verify", fake)
    assert cli.main(["--budget", "12345", "export", f"{FAILING}:double", "--spec", "b", "-q"]) == 1
    assert seen["budget"] == 12345
    assert cli.main(["export", f"{FAILING}:double", "--spec", "b", "-q", "--budget", "777"]) == 1
    assert seen["budget"] == 777
    capsys.readouterr()
    assert cli.main(["--budget", "0", "export", f"{FAILING}:double", "--spec", "b"]) == 2
    assert "--budget must be a positive integer" in capsys.readouterr().err


def test_cli_closed_stdout_exits_quietly():
    """`smtdims export ... --json | head -1`: no BrokenPipeError traceback."""
    r, w = os.pipe()
    os.close(r)  # the reader is gone before anything is written
    proc = subprocess.run([sys.executable, "-m", "smtdims", "export", f"{FAILING}:slice16", "--spec", "b",
                           "--json", "-q"], stdout=w, stderr=subprocess.PIPE, text=True, timeout=120)
    os.close(w)
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr
    assert proc.returncode == 141  # 128 + SIGPIPE, as shells report a tool stopped by a closed pipe


# -- platforms and backends ---------------------------------------------------------------------------
def test_cli_unknown_platform_is_refused_up_front(capsys):
    rc = cli.main(["export", f"{FAILING}:double", "--spec", "b", "--platform", "cpux", "-q"])
    err = capsys.readouterr().err
    assert rc == 2 and "unknown platform 'cpux'" in err and "did you mean 'cpu'" in err
    assert all(p in err for p in ("cpu", "cuda", "rocm", "tpu")), err
    with pytest.raises(ValueError, match="unknown platform 'cpux'"):
        export_and_verify(lambda x: x, "b", platforms="cpu,cpux")


@pytest.mark.skipif(any(d.platform == "gpu" for d in jax.devices()), reason="a GPU is here: gpu maps to it")
def test_cli_gpu_is_mapped_as_jax_maps_it_and_refused_without_one(capsys):
    rc = cli.main(["export", f"{FAILING}:double", "--spec", "b", "--platform", "gpu", "-q"])
    err = capsys.readouterr().err
    assert rc == 2 and "platform 'gpu'" in err and "--platform cuda" in err, err


def test_jax_platforms_without_its_backend_is_a_clear_error(tmp_path):
    """JAX_PLATFORMS=cuda on a machine without CUDA: stock JAX asserts deep in xla_bridge; we say what to do."""
    if any(d.platform == "gpu" for d in jax.devices()):
        pytest.skip("CUDA is here")
    prog = tmp_path / "prog.py"
    prog.write_text("import jax\nprint(jax.devices())\n")
    env = dict(os.environ, JAX_PLATFORMS="cuda")
    for argv in (["export", f"{FAILING}:double", "--spec", "b", "-q"], ["run", str(prog)]):
        proc = subprocess.run([sys.executable, "-m", "smtdims", *argv], capture_output=True, text=True, env=env,
                              timeout=300)
        assert proc.returncode == 2, (argv, proc.stderr)
        assert "AssertionError" not in proc.stderr and "JAX_PLATFORMS='cuda'" in proc.stderr, proc.stderr
        assert "JAX_PLATFORMS=cpu" in proc.stderr


# -- inputs checked by smtdims first --------------------------------------------------------------------
def test_constraint_typo_gets_smtdims_parse_error_with_the_position(capsys):
    rc = cli.main(["export", f"{FAILING}:double", "--spec", "batch, t", "-c", "t >== 64", "-q"])
    err = capsys.readouterr().err
    assert rc == 2 and "ParseError" in err and "position 4" in err and "'t >== 64'" in err, err
    assert len(err.strip().splitlines()) == 1


def test_constraint_on_a_variable_in_no_shape_names_the_closest_spelling(capsys):
    rc = cli.main(["export", f"{FAILING}:double", "--spec", "batch, t", "-c", "bacth >= 2", "-q"])
    err = capsys.readouterr().err
    assert rc == 2 and "'bacth'" in err and "did you mean 'batch'" in err, err
    with pytest.raises(ValueError, match="did you mean 'batch'"):
        build_specs(["batch, t"], ["bacth >= 2"])


def test_deadline_is_accepted_after_export(capsys):
    rc = cli.main(["export", f"{FAILING}:slice16", "--spec", "b", "-q", "--deadline", "30"])
    assert rc == 1, capsys.readouterr().err  # a failed export (a check), not a usage error
    capsys.readouterr()
    assert cli.main(["export", f"{FAILING}:slice16", "--spec", "b", "-q", "--deadline", "0"]) == 2
    assert "--deadline must be a positive number" in capsys.readouterr().err


# -- specs read by smtdims' parser before JAX's, and the cheap checks first --------------------------------------
@pytest.mark.parametrize("spec, words", [
    ("float32[b, 1000000000000000000000000000000]", ["argument spec 'float32[b, 1000", "out of range", "int32",
                                                     "write a smaller size"]),
    ("float32[b, 10**30]", ["argument spec 'float32[b, 10**30]'", "out of range", "int32"]),
    ("float32[b", ["argument spec 'float32[b'", "bracket is missing or extra", "'float32[b, 4]'"]),
    ("float32[b, 1)", ["argument spec 'float32[b, 1)'", "bracket"]),
    ("float32[b, 2*]", ["argument spec 'float32[b, 2*]'", "dimension 1 '2*' does not parse", "position"]),
])
def test_bad_spec_is_a_clear_value_error(spec, words):
    """Were: a TypeError from MLIR's get() (a constant past int32), JAX's raw parser errors."""
    with pytest.raises(ValueError) as info:
        export_and_verify(lambda x: x, spec, progress=False)
    msg = str(info.value)
    assert all(w in msg for w in words), msg
    assert "get()" not in msg and "DOUBLESTAR" not in msg and "LSQB" not in msg


def test_spec_constants_in_python_spelling_and_int64():
    specs, _, _ = build_specs(["float32[2**4, b // 2 * 2]"])
    assert str(specs[0].shape[0]) == "16"
    build_specs(["int64[b, 2**40]"])  # a 64-bit input: int64 dimensions
    with pytest.raises(ValueError, match="int32"):
        build_specs(["float32[b, 2**40]"])


@pytest.mark.parametrize("argv, words", [
    (["--spec", "float32[b, 10**30]"], ["argument spec 'float32[b, 10**30]'", "out of range"]),
    (["--spec", "float32[b"], ["argument spec 'float32[b'", "bracket"]),
    (["--spec", "float32[b]", "--dtype", "int32"], ["--spec 'float32[b]' names the dtype float32",
                                                    "--dtype names int32", "int32[b]"]),
    (["--spec", "b", "--spec", "int32[c]", "--dtype", "float32", "--dtype", "float32"], ["names the dtype int32"]),
])
def test_cli_bad_spec_or_dtype_conflict_is_a_usage_error(capsys, argv, words):
    rc = cli.main(["export", f"{FAILING}:slice16", *argv, "-q"])
    err = capsys.readouterr().err
    assert rc == 2 and all(w in err for w in words), err
    assert "Traceback" not in err and "get()" not in err


def test_cli_checks_specs_and_constraints_before_importing_the_module(tmp_path, capsys):
    """The user's module runs last: a bad spec, constraint or file is said at once, not after its import."""
    marker = tmp_path / "imported"
    (tmp_path / "model.py").write_text(f"open({str(marker)!r}, 'w').close()\ndef fn(x):\n    return x\n")
    target = f"{tmp_path / 'model.py'}:fn"
    for argv in (["--spec", "float32[b, 10**30]"], ["--spec", "b", "-c", "b >== 2"],
                 ["--spec", "float32[b]", "--dtype", "int32"]):
        assert cli.main(["export", target, *argv, "-q"]) == 2
        assert not marker.exists(), argv
    assert cli.main(["export", f"{tmp_path / 'missing.py'}:fn", "--spec", "b", "-q"]) == 2
    assert "no such file" in capsys.readouterr().err


# -- a string where an argument's spec or example is expected --------------------------------------------------
def test_a_dtype_name_as_a_spec_is_refused_naming_it():
    """``"double"`` was read as a spec of one dimension named ``double`` (``float32[double]``) and VERIFIED."""
    with pytest.raises(ValueError, match=r"'double' is a dtype's name, not a shape: write float64\[b, 4\]"):
        export_and_verify(lambda x, s: x * 2, "float32[b, 4]", "double", fix=True)


def test_a_string_example_is_refused_naming_the_argument():
    """From examples a string raised numpy's "could not convert string to float", naming no argument."""
    x = np.ones((2, 4), np.float32)
    with pytest.raises(ValueError, match=r"the example args\[1\] is the string 'double'"):
        export_and_verify(lambda x, s: x * 2, x, "double", dims="auto")

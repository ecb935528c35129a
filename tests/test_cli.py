"""The ``smtdims`` command line: answers, JSON, SMT-LIB2, and one-line errors with exit status 2."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import types

import pytest

import smtdims
from smtdims import cli
from smtdims.errors import ScopeMismatchError


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = cli.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


# -- answers ------------------------------------------------------------------------------------------
def test_bounds_seed_row_14(capsys):
    rc, out, err = run(capsys, "bounds", "2*batch + 1", "-c", "batch >= 128", "-c", "batch <= 1024")
    assert rc == 0 and err == ""
    assert "[257, 2049]" in out and "attained at batch = 128" in out
    rc, out, _ = run(capsys, "bounds", "free", "-c", "batch >= 128", "--json")
    d = json.loads(out)
    assert (d["lo"], d["hi"], d["hi_tight"]) == (1, "inf", True)


@pytest.mark.parametrize("argv", [
    ["decide", "a + 1", ">=", "b"],
    ["decide", "a + 1 >= b"],
    ["decide", "a", "+", "1", ">=", "b"],  # unquoted
    ["--json", "decide", "a + 1 >= b"],
])
def test_decide_forms(capsys, argv):
    rc, out, err = run(capsys, *argv, *([] if "--json" in argv else ["--json"]))
    assert rc == 0, err
    d = json.loads(out)
    assert d["status"] == "undetermined" and d["lhs"] == "a + 1" and d["op"] == ">=" and d["rhs"] == "b"
    assert d["witness_true"] and d["witness_false"]


def test_decide_proven_with_constraints(capsys):
    rc, out, _ = run(capsys, "decide", "a", ">=", "9", "-c", "a - b >= 8")
    assert rc == 0 and out.strip() == "a >= 9 under a - b >= 8: true"


def test_explain_decision_with_verified_fixes(capsys):
    rc, out, _ = run(capsys, "explain", "b", ">=", "16", "-c", "b <= 100", "--json")
    assert rc == 0
    d = json.loads(out)
    assert d["status"] == "undetermined"
    assert [f["text"] for f in d["fixes"]][:1] == ["b >= 16"]
    for f in d["fixes"]:
        if f["kind"] == "constraint":
            assert smtdims.decide("b", ">=", 16, constraints=["b <= 100", f["text"]]).status == "true"
    rc, out, _ = run(capsys, "explain", "a >= 9", "-c", "a - b >= 8")
    assert "because: a - b >= 8; b >= 1 (dimension variable)" in out


def test_explain_bounds_when_no_comparison(capsys):
    rc, out, _ = run(capsys, "explain", "2*batch + 1", "-c", "batch >= 128", "-c", "batch <= 1024")
    assert rc == 0
    assert "bounded below by: batch >= 128" in out and "bounded above by: batch <= 1024" in out


def test_check_constraints(capsys):
    rc, out, _ = run(capsys, "check-constraints", "-c", "a >= b", "-c", "b >= 16", "-c", "a >= 10")
    assert rc == 0 and "a >= 10  (implied by: a >= b; b >= 16)" in out
    rc, out, _ = run(capsys, "check-constraints", "-c", "c == 4", "--json")
    assert json.loads(out)["fixed"] == {"c": 4}


def test_budget_is_used(capsys):
    rc, out, _ = run(capsys, "decide", "a*b*c", ">=", "a*b + 1", "--budget", "1", "--json")
    assert rc == 0
    assert json.loads(out)["status"] in ("unknown", "undetermined")


# -- SMT-LIB2 ------------------------------------------------------------------------------------------
def _z3_binary() -> str | None:
    cand = os.path.join(os.path.dirname(sys.executable), "z3")
    return cand if os.path.exists(cand) else shutil.which("z3")


@pytest.mark.parametrize("argv,expected", [
    (["decide", "a", ">=", "9", "-c", "a - b >= 8"], ["unsat", "sat"]),  # never fails: proven true
    (["decide", "a + 1 >= b", "-c", "mod(a, 2) == 0"], ["sat", "sat"]),  # undetermined
    (["decide", "a", "<", "9", "-c", "a - b >= 8"], ["sat", "unsat"]),  # proven false
    (["check-constraints", "-c", "a >= b + 1", "-c", "c >= 3", "-c", "b >= a"], ["unsat", "(c0 c2)"]),  # c1 is not in it
])
def test_smtlib_scripts_reproduce_the_answer_in_z3(capsys, argv, expected):
    rc, out, _ = run(capsys, *argv, "--smtlib")
    assert rc == 0 and "(check-sat)" in out and out.startswith("; smtdims")
    z3bin = _z3_binary()
    if z3bin is None:
        pytest.skip("no z3 executable")
    res = subprocess.run([z3bin, "-in"], input=out, capture_output=True, text=True, timeout=60)
    assert res.stdout.split("\n")[: len(expected)] == expected, res.stdout + res.stderr


def test_smtlib_bounds_objectives(capsys):
    rc, out, _ = run(capsys, "bounds", "2*b + 1", "-c", "b >= 128", "-c", "b <= 1024", "--smtlib")
    assert "(minimize" in out and "(maximize" in out and "; constraint: b >= 128" in out
    z3bin = _z3_binary()
    if z3bin is None:
        pytest.skip("no z3 executable")
    res = subprocess.run([z3bin, "-in"], input=out, capture_output=True, text=True, timeout=60)
    assert " 257)" in res.stdout and " 2049)" in res.stdout, res.stdout


def test_smtlib_in_json(capsys):
    rc, out, _ = run(capsys, "decide", "b >= 16", "--smtlib", "--json")
    d = json.loads(out)
    assert d["status"] == "undetermined" and "(check-sat)" in d["smtlib"]


# -- malformed input: exit 2, one line, the position --------------------------------------------------------
MALFORMED = [
    # (class, argv, text that must appear in the one-line message)
    ("bad syntax", ["decide", "a + * b >= 1"], "position 4 in 'a + * b >= 1'"),
    ("bad syntax in a constraint", ["bounds", "a", "-c", "a >= (b"], "position 7 in 'a >= (b' (at the end)"),
    ("unknown operator", ["decide", "a", "=>", "b"], "unknown comparison operator '=>'"),
    ("unknown operator (symbol)", ["bounds", "a & b"], "unexpected character '&' at position 2"),
    ("unknown operation", ["bounds", "foo(a, 2)"], "unknown operation 'foo'"),
    ("unsupported constraint comparison", ["decide", "a >= b", "-c", "a != b"], "unsupported comparison '!='"),
    ("non-integer constant", ["decide", "a >= 1.5"], "constants must be integers, got '1.5' at position 5"),
    ("non-integer exponent", ["bounds", "a^b"], "non-negative integer exponent at position 2"),
    ("division by constant zero", ["bounds", "mod(a, 0)"], "mod by zero"),
    ("possible division by zero", ["decide", "floordiv(a, b - 1) >= 0"], "possible division by zero: divisor 'b - 1'"),
    ("unsatisfiable constraints", ["decide", "a >= 1", "-c", "a >= b + 1", "-c", "b >= a"], "unsatisfiable"),
    ("unsatisfiable (check)", ["check-constraints", "-c", "a >= 3", "-c", "a <= 2"], "a >= 3; a <= 2"),
    ("missing comparison", ["decide", "a", "b"], "expected a comparison"),
    ("two comparisons", ["decide", "a >= b >= c"], "only one comparison is allowed at position 7"),
    ("empty expression", ["bounds", " "], "empty expression"),
    ("bad budget", ["bounds", "a", "--budget", "0"], "--budget must be a positive integer"),
    ("non-integer budget", ["bounds", "a", "--budget", "x"], "invalid int value"),
    ("unknown subcommand", ["frobnicate"], "invalid choice"),
]


@pytest.mark.parametrize("what,argv,needle", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_input_exits_2_with_one_line(capsys, what, argv, needle):
    rc = cli.main(argv)
    out, err = capsys.readouterr()
    assert rc == 2, (what, out, err)
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("smtdims") and needle in err, err
    assert "Traceback" not in err and out == ""


def test_mixed_scopes_class_maps_to_exit_2(capsys, monkeypatch):
    # Strings on a command line carry no JAX scope; the error class still maps to status 2.
    def boom(args):
        raise ScopeMismatchError("Invalid mixing of symbolic scopes")

    monkeypatch.setitem(cli.COMMANDS, "decide", boom)
    rc, out, err = run(capsys, "decide", "a >= b")
    assert rc == 2 and err.strip() == "smtdims: error: Invalid mixing of symbolic scopes"


def test_debug_shows_the_traceback(capsys):
    rc, _, err = run(capsys, "decide", "a + * b >= 1", "--debug")
    assert rc == 2 and "Traceback" in err and err.strip().splitlines()[-1].startswith("smtdims: error:")


def test_json_errors_carry_the_position(capsys):
    rc, out, _ = run(capsys, "--json", "decide", "a >= 1.5")
    assert rc == 2
    e = json.loads(out)["error"]
    assert e["type"] == "ParseError" and e["position"] == 5 and e["text"] == "a >= 1.5"


def test_format_error_points_at_the_end():
    err = smtdims.ParseError("a + ", 4, "expected a number")
    assert cli.format_error(err) == "expected a number at position 4 in 'a + ' (at the end)"


# -- export subcommand -------------------------------------------------------------------------------------
def test_export_missing_pipeline_is_a_clear_error(capsys, monkeypatch):
    import smtdims_jax

    monkeypatch.setitem(sys.modules, "smtdims_jax.pipeline_cli", None)  # import fails
    monkeypatch.delattr(smtdims_jax, "pipeline_cli", raising=False)
    rc, _, err = run(capsys, "export", "mod:fn")
    assert rc == 2 and "smtdims_jax.pipeline_cli" in err and len(err.strip().splitlines()) == 1
    # the rest of the CLI does not need it
    rc, out, _ = run(capsys, "decide", "b >= 1")
    assert rc == 0 and "true" in out


def test_export_delegates_to_the_pipeline(capsys, monkeypatch):
    calls = []
    fake = types.ModuleType("smtdims_jax.pipeline_cli")

    def add_export_parser(subparsers):
        p = subparsers.add_parser("export")
        p.add_argument("target")
        return p

    def run_export(args):
        calls.append(args.target)
        return 3

    fake.add_export_parser, fake.run_export = add_export_parser, run_export
    monkeypatch.setitem(sys.modules, "smtdims_jax.pipeline_cli", fake)
    import smtdims_jax

    monkeypatch.setattr(smtdims_jax, "pipeline_cli", fake, raising=False)
    rc, _, _ = run(capsys, "--debug", "export", "pkg.mod:fn")
    assert rc == 3 and calls == ["pkg.mod:fn"]


def test_help_returns_zero(capsys):
    assert cli.main(["--help"]) == 0
    assert "check-constraints" in capsys.readouterr().out


def test_expression_starting_with_minus(capsys):
    rc, out, _ = run(capsys, "bounds", "--", "-a + 5")
    assert rc == 0 and "[-inf, 4]" in out


def test_wants_export_skips_option_values():
    assert cli._wants_export(["--budget", "5", "export", "x"])
    assert not cli._wants_export(["decide", "export >= 1"])


# -- entry points ----------------------------------------------------------------------------------------------
def test_console_script_and_python_m():
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    script = os.path.join(os.path.dirname(sys.executable), "smtdims")
    cmds = [[sys.executable, "-m", "smtdims"]] + ([[script]] if os.path.exists(script) else [])
    for cmd in cmds:
        ok = subprocess.run(cmd + ["decide", "b >= 16"], capture_output=True, text=True, timeout=120, env=env)
        assert ok.returncode == 0 and "undetermined" in ok.stdout, ok.stderr
        bad = subprocess.run(cmd + ["bounds", "a +"], capture_output=True, text=True, timeout=120, env=env)
        assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "Traceback" not in bad.stderr

"""The export pipeline: seed rows end to end, the equality trap, outside-spec rejection,
cross-platform lowering, the sample chooser's guarantees, and the CLI.

End-to-end tests each start one fresh Python process (all samples batched into it).
"""

from __future__ import annotations

import argparse
import io
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export, lax
from smtdims_jax.pipeline import (
    PASS,
    SKIP,
    SampleChooser,
    VerificationReport,
    build_specs,
    compare_outputs,
    export_and_verify,
    parse_arg_spec,
)

from smtdims.lang.constraints import ConstraintSet
from smtdims.lang.parser import parse_expr
from smtdims.reasoner import Session
from tests.fixtures_pipeline import seed_rows

HAS_GPU = any(d.platform == "gpu" for d in jax.devices())
SEED_FILE = os.path.join(os.path.dirname(__file__), "..", "fixtures_pipeline", "seed_rows.py")


def _assert_ok(report: VerificationReport) -> None:
    assert report.ok, str(report)
    assert all(s.status == PASS for s in report.samples)
    assert all(c.status == PASS for c in report.checks), report.checks


# -- end to end: every exportable seed row --------------------------------------------------------------
@pytest.mark.parametrize("row", seed_rows.EXPORTABLE)
def test_seed_row_passes(row, tmp_path):
    fn, specs, kw = seed_rows.row(row)
    out = tmp_path / "artifact.bin" if row == 19 else None
    report = export_and_verify(fn, *specs, samples=4, out=out, **kw)
    _assert_ok(report)
    assert len(report.samples) == 4
    assert len({s.shapes for s in report.samples}) == 4, "sample shapes must be distinct"
    assert report.rejections and all(r.status == PASS for r in report.rejections)
    assert report.worker_jax == jax.__version__ and report.device
    # the symbolic claims the tutorial's checklist asks to look at
    if row == 1:
        assert report.in_avals == ("int32[a,b]",) and report.out_avals == ("int32[a,2*b]",)
    if row == 13:
        assert report.out_avals == ("int32[mod(b, 3)]",)
        residues = {s.valuation["b"] % 3 for s in report.samples}
        assert residues == {0, 1, 2}, "divisibility edges of mod(b, 3) must be sampled"
    if row == 10:
        assert report.samples[0].valuation == {"a": 16, "b": 16}  # both at their minimum
    if row == 14:
        batches = {s.valuation["batch"] for s in report.samples}
        assert min(batches) == 128 and all(128 <= b <= 1024 for b in batches)
    if row == 19:
        data = out.read_bytes()
        assert len(data) == report.artifact_bytes
        again = export.deserialize(bytearray(data))
        np.testing.assert_array_equal(again.call(np.ones((3, 4), np.int32)), np.ones((3, 8), np.int32))


def test_equality_trap_is_caught():
    report = export_and_verify(seed_rows.eq_trap, "int32[b]", samples=4)
    assert not report.ok
    failed = [s for s in report.samples if s.status != PASS]
    assert [s.valuation for s in failed] == [{"b": 1}], str(report)
    assert "differs" in failed[0].detail
    assert all(s.status == PASS for s in report.samples if s.valuation != {"b": 1})
    text = str(report)
    assert "FAILED" in text and "b = 1" in text
    assert json.loads(json.dumps(report.to_dict()))["ok"] is False
    # the diagnosis: the native function runs there, and the audit names the line of the unproven ==
    dg = report.diagnosis
    assert dg is not None and not dg.native_fails and dg.artifact_only == ({"b": 1},)
    assert any("seed_rows.py:53 in eq_trap: b == 1" in a for a in dg.audit), dg.audit
    assert "without proof at" in text


def test_outside_spec_rejected_repeated_variable_and_constraint():
    """Spec (b, b, 2*d) with b >= 2: one violated constraint, one mismatched repeated variable."""
    report = export_and_verify(lambda x: x + 1, "int32[b, b, 2*d]", constraints=("b >= 2",), samples=4)
    _assert_ok(report)
    whys = [r.why for r in report.rejections]
    assert any("violates b >= 2" in w for w in whys), whys
    assert all(r.status == PASS and r.how == "shape assertion" for r in report.rejections)
    errors = " ".join(r.error for r in report.rejections)
    assert "symbolic shape constraint b >= 2" in errors
    assert "inconsistency" in errors or "remainder" in errors
    for s in report.samples:
        b, d = s.valuation["b"], s.valuation["d"]
        assert b >= 2 and s.shapes == ((b, b, 2 * d),)


def test_cross_platform_lowering_runs_locally():
    report = export_and_verify(seed_rows.concat, "int32[a, b]", platforms="cpu,cuda", samples=4)
    _assert_ok(report)
    assert report.platforms == ("cpu", "cuda") and report.exported.platforms == ("cpu", "cuda")


@pytest.mark.skipif(HAS_GPU, reason="checks the CPU-only behaviour")
def test_cuda_only_artifact_is_not_claimed_verified_on_cpu():
    progress: list[str] = []
    report = export_and_verify(seed_rows.concat, "int32[a, b]", platforms=("cuda",), samples=2,
                               progress=progress.append)
    assert report.exported.platforms == ("cuda",)
    assert not report.ok, "nothing ran: the report must not say OK"
    assert all(s.status == SKIP for s in report.samples)
    assert not any("compiling" in m for m in progress)


@pytest.mark.skipif(not HAS_GPU, reason="no GPU here (scripts/accelerator_check.sh runs the seed rows on a GPU or TPU)")
def test_seed_row_on_gpu():
    fn, specs, kw = seed_rows.row(13)
    report = export_and_verify(fn, *specs, platforms="cuda", samples=4, **kw)
    _assert_ok(report)
    assert report.device.startswith("gpu")


def test_specialised_dimension_fails_loudly():
    report = export_and_verify(lambda x: x, "int32[b, c]", constraints=("b == 4",), samples=2)
    assert not report.ok
    check = next(c for c in report.checks if c.name == "symbolic dims kept")
    assert check.status == "fail" and "'b'" in check.detail and "constant 4" in check.detail


def test_progress_reports_compile_and_run():
    messages: list[str] = []
    report = export_and_verify(seed_rows.flatten, ("b, 4", "float32"), samples=2, progress=messages.append)
    _assert_ok(report)
    assert any("sample 1/2: compiling" in m for m in messages)
    assert any("sample 2/2: running" in m for m in messages)
    assert report.out_avals == ("float32[4*b]",)


def test_export_error_is_a_failed_check():
    """JAX refusing the function is reported (not raised): witnesses, and a fix re-exported to verify it."""
    report = export_and_verify(lambda x: lax.slice_in_dim(x, 0, 16), "int32[b]", samples=2)
    assert not report.ok and report.exception is not None
    assert [(c.name, c.status) for c in report.checks][0] == ("export", "fail")
    assert all(c.status == SKIP for c in report.checks[1:]) and not report.samples
    e = report.export_error
    assert e.type == "InconclusiveDimensionOperation" and "'b' >= '16' is inconclusive" in e.message
    assert "smtdims" not in e.message and "comparison-of-symbolic-dimensions" not in e.message
    (false_at, true_at) = e.valuations  # any witnesses on either side of b = 16
    assert false_at["b"] < 16 <= true_at["b"] and "makes 'b' >= '16' false" in e.witnesses[0]
    assert e.fix_kind == "constraint" and "'b >= 16'" in e.fix and e.fix_verified is True
    assert e.suggested_fix is not None and (e.suggested_fix.kind, e.suggested_fix.text) == ("constraint", "b >= 16")
    assert e.fixed_constraints == ("b >= 16",)
    text = str(report)
    assert "export failed: InconclusiveDimensionOperation" in text and "verified: the export succeeds" in text
    d = json.loads(json.dumps(report.to_dict()))
    assert d["ok"] is False and d["export_error"]["valuations"] == [false_at, true_at]
    assert "suggested_fix" not in d["export_error"]  # the JSON says the fix in words and kind


# -- argument specs ----------------------------------------------------------------------------------------
def test_spec_forms_share_one_scope():
    specs, scope, specialised = build_specs(
        ["int32[b, 4]", ("b", "float32"), "b, 2", {"k": "bfloat16[b]"}], constraints=("b <= 10",))
    assert [s.dtype for s in specs[:3]] == [jnp.int32, jnp.float32, jnp.float32]
    assert specs[3]["k"].dtype == jnp.bfloat16
    dims = [s.shape[0] for s in specs[:3]] + [specs[3]["k"].shape[0]]
    assert all(d.scope is scope for d in dims) and not specialised
    assert parse_arg_spec(np.zeros((2, 3), np.int8)).shape == (2, 3)


def test_spec_errors_are_explicit():
    with pytest.raises(ValueError, match="symbolic_args_specs"):
        build_specs(["b, ..."])
    with pytest.raises(ValueError, match="unknown dtype"):
        build_specs(["i32[b]"])
    a, = export.symbolic_shape("a")
    with pytest.raises(ValueError, match="cannot be added"):
        build_specs([jax.ShapeDtypeStruct((a,), jnp.int32)], constraints=("a >= 2",))
    b, = export.symbolic_shape("b")
    with pytest.raises(ValueError, match="mixing"):
        build_specs([jax.ShapeDtypeStruct((a,), jnp.int32), jax.ShapeDtypeStruct((b,), jnp.int32)])
    with pytest.raises(TypeError, match="sequence of strings"):
        build_specs(["b"], constraints="b >= 2")


def test_compare_outputs():
    i = np.arange(4, dtype=np.int32)
    assert compare_outputs([i], [i.copy()]) is None
    assert "index [3]" in compare_outputs([i], [i + (i == 3)])
    f = np.linspace(0, 1, 5, dtype=np.float32)
    assert compare_outputs([f], [f * (1 + 1e-7)]) is None
    assert compare_outputs([f], [f + 1e-3]) is not None
    assert "int32[3]" in compare_outputs([i], [i[:3]])
    assert "out_avals" in compare_outputs([i], [i], expected_shapes=[(5,)])


# -- the sample chooser (no JAX process needed) ----------------------------------------------------------
def _chooser(dims, constraints=()):
    session = Session(ConstraintSet.of(constraints))
    return SampleChooser(session, [tuple(parse_expr(d) for d in leaf) for leaf in dims])


@pytest.mark.parametrize("dims, constraints", [
    ([["b"]], ()),
    ([["a", "b"]], ("a >= b", "b >= 16")),
    ([["b", "b", "2*d"]], ("b >= 2",)),
    ([["batch", "free"]], ("batch >= 128", "batch <= 1024")),
    ([["mod(b, 3) + b"], ["floordiv(b, 4)", "c"]], ("c <= b",)),
    ([["a", "b"]], ("a + b <= 5",)),
])
def test_chooser_samples_are_inside_distinct_and_edgy(dims, constraints):
    ch = _chooser(dims, constraints)
    chosen = ch.choose(6)
    cs = ConstraintSet.of(constraints)
    shapes = [ch.shapes(env) for env, _ in chosen]
    assert all(cs.holds(env) for env, _ in chosen)
    assert len(set(shapes)) == len(shapes)
    env0, why0 = chosen[0]
    assert "minimum" in why0 and all(env0[v] == ch.lo[v] for v in ch.shape_vars)
    assert all(not ch.is_outside(s) for s in shapes)
    for shapes_out, _ in ch.outside([env for env, _ in chosen]):
        assert ch.is_outside(shapes_out)


def test_chooser_exhausts_a_finite_spec():
    ch = _chooser([["a", "b"]], ("a + b <= 3",))  # (1,1), (1,2), (2,1) only
    assert sorted(ch.shapes(env) for env, _ in ch.choose(6)) == [((1, 1),), ((1, 2),), ((2, 1),)]


def test_chooser_divisibility_edges():
    ch = SampleChooser(Session(ConstraintSet(())), [(parse_expr("b"),)], [parse_expr("mod(b, 3)")])
    assert {env["b"] % 3 for env, _ in ch.choose(4)} == {0, 1, 2}


def test_outside_shape_of_seed_row_18_is_proven_outside():
    ch = _chooser([["b", "b", "2*d"]])
    assert ch.is_outside(((3, 3, 5),))  # division remainder 1
    assert ch.is_outside(((3, 4, 2),))  # b mismatch
    assert not ch.is_outside(((3, 3, 4),))


# -- scalar arguments --------------------------------------------------------------------------------------
@pytest.mark.parametrize("fn, specs", [
    (seed_rows.scaled, ("float32[b]", "float32[]")),
    (seed_rows.stepped, ("float32[b, 3]", "float32[]")),
    (seed_rows.scaled, ("int32[b]", "int32[]")),
    (seed_rows.scaled_tree, ({"x": "float32[b]", "s": "float32[]", "n": "int8[]"},)),
])
def test_a_scalar_argument_is_sent_as_a_scalar(fn, specs):
    """A rank-0 input reaches the device process as rank 0 (not (1,): every sample failed so)."""
    report = export_and_verify(fn, *specs, samples=3)
    _assert_ok(report)
    assert any(a.endswith("[]") for a in report.in_avals), report.in_avals


def test_rank_zero_arrays_travel_as_rank_zero():
    from smtdims_jax.pipeline.fresh import pack_arrays, unpack_arrays

    arrays = [np.float32(1.5) * np.ones(()), np.int8(3) * np.ones((), np.int8), np.ones((2, 0, 3)), np.arange(4.0)[::2]]
    f = io.BytesIO()
    leaves = pack_arrays(arrays, f)
    back = unpack_arrays(f.getvalue(), leaves)
    assert [a.shape for a in back] == [a.shape for a in arrays]
    for a, b in zip(arrays, back):
        np.testing.assert_array_equal(a, b)


def test_cli_export_takes_a_scalar_spec(capsys):
    rc = _cli(["export", f"{SEED_FILE}:scaled", "--spec", "float32[b]", "--spec", "float32[]", "--samples", "3", "-q"])
    captured = capsys.readouterr()
    assert rc == 0, captured.out + captured.err
    assert "OK: 3/3" in captured.out


# -- CLI -----------------------------------------------------------------------------------------------------
# imported here, not at module level: tests/core/test_cli.py checks the CLI when this module is not importable
def _cli(argv):
    from smtdims_jax.pipeline_cli import add_export_parser, run_export

    parser = argparse.ArgumentParser(prog="smtdims")
    add_export_parser(parser.add_subparsers(dest="command", required=True))
    return run_export(parser.parse_args(argv))


def test_cli_export_passes(capsys, tmp_path):
    out = tmp_path / "mod3.bin"
    rc = _cli(["export", f"{SEED_FILE}:mod3_slice", "--spec", "b", "--dtype", "int32", "--samples", "4",
               "--out", str(out)])
    captured = capsys.readouterr()
    assert rc == 0, captured.out + captured.err
    assert "int32[mod(b, 3)]" in captured.out and "OK: 4/4" in captured.out
    assert "sample 1/4: compiling" in captured.err
    assert out.stat().st_size > 0


def test_cli_trap_fails_with_json(capsys):
    rc = _cli(["export", f"{SEED_FILE}:eq_trap", "--spec", "int32[b]", "--samples", "3", "--json", "-q"])
    captured = capsys.readouterr()
    assert rc == 1
    d = json.loads(captured.out)
    assert d["ok"] is False and d["samples"][0]["valuation"] == {"b": 1} and d["samples"][0]["status"] == "fail"
    assert captured.err == ""


def test_cli_errors_exit_2(capsys):
    assert _cli(["export", "no_such_module_xyz:f", "--spec", "b"]) == 2
    assert "No module named" in capsys.readouterr().err
    assert _cli(["export", f"{SEED_FILE}:concat", "--spec", "b", "--dtype", "int32", "--dtype", "int8",
                 "--dtype", "int8"]) == 2
    assert _cli(["export", f"{SEED_FILE}:concat", "--spec", "a, b", "-c", "a >= oops("]) == 2
    from smtdims_jax.pipeline_cli import load_target

    assert load_target("tests.fixtures_pipeline.seed_rows:concat") is seed_rows.concat


# -- samples that cover the space ---------------------------------------------------------------------
def test_spread_samples_vary_independent_variables_independently():
    ch = _chooser([["b", "2*d"], ["b", "d"]])
    spread = [env for env, why in ch.choose(24) if why == ["spread"]]
    assert len(spread) >= 10
    ratios = {(env["b"] - ch.lo["b"]) / max(1, env["d"] - ch.lo["d"]) for env in spread}
    assert len(ratios) > len(spread) // 2, "the spread samples must not lie on one line"
    assert len({env["b"] for env in spread}) >= 8 and len({env["d"] for env in spread}) >= 8


def test_every_residue_of_a_divisor_is_sampled():
    ch = SampleChooser(Session(ConstraintSet(())), [(parse_expr("b"), parse_expr("d"))], [parse_expr("floordiv(b*d, 4)")])
    assert {env["b"] * env["d"] % 4 for env, _ in ch.choose(8)} == {0, 1, 2, 3}


@pytest.mark.parametrize("out_dims, limit", [((), 1 << 20), ([("b", "b")], 1 << 20)])
def test_largest_sample_fills_the_memory_budget(out_dims, limit):
    dims = [(parse_expr("b"), parse_expr("4"))]
    ch = SampleChooser(Session(ConstraintSet(())), dims, out_dims=[tuple(parse_expr(d) for d in o) for o in out_dims],
                       max_bytes=limit)
    chosen = ch.choose(6)
    assert all(ch.nbytes(env) <= limit for env, _ in chosen)
    big = [env for env, why in chosen if any(w.startswith("largest within 1 MiB") for w in why)]
    assert big and ch.nbytes(big[0]) > 0.9 * limit, [(e, w, ch.nbytes(e)) for e, w in chosen]
    assert big[0]["b"] % 2 and big[0]["b"] % 3 and big[0]["b"] % 5, "no accidental divisibility"

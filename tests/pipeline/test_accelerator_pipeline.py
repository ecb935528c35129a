"""The export pipeline on the target, as far as a CPU-only machine can check it.

The reference is JAX's own run (``jax.jit(fn)`` traced at each sample's shapes, run beside the
artifact in the one process that holds the device); what did not run fails nothing and is said
so; inputs are drawn in their dtype within the byte budget; an artifact made elsewhere is
verified where it runs; the request is one value. A device process that cannot start is
simulated through the environment it inherits (``JAX_PLATFORMS=tpu`` on this CPU machine, or a
``sitecustomize`` that kills it at start-up). The TPU itself: ``scripts/accelerator_check.sh``
(its transcript is docs/accelerator.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from smtdims_jax.pipeline import SKIP, VerifyOptions, export_and_verify, fresh, verify_artifact
from smtdims_jax.pipeline.compare import compare, random_input, tolerance
from smtdims_jax.pipeline.fixes import FIXED, NOT_VERIFIED

from smtdims import cli
from tests.fixtures_pipeline import failing, seed_rows

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SEED_FILE = os.path.join(ROOT, "tests", "fixtures_pipeline", "seed_rows.py")


@pytest.fixture
def no_workers():
    fresh.close_workers()
    yield
    fresh.close_workers()


# -- 1. the reference is JAX's own run ------------------------------------------------------------------------
def test_the_readme_line_verifies_an_int32_sum():
    """NumPy sums int32 into int64; jax.jit keeps int32: the old eager reference failed all 6 samples."""
    report = export_and_verify(lambda x: x.sum(axis=1), "int32[a, b]", constraints=("a >= b", "b >= 16"))
    assert report.ok, report.table()
    assert report.ran_in == fresh.FRESH and all(s.status == "pass" for s in report.samples)


def test_functions_numpy_cannot_run_are_verified():
    """``.at[...]`` is JAX's, not NumPy's: the reference traces the function as jit does."""
    report = export_and_verify(lambda x: x.at[0].set(0.0) + (x > 0).sum(-1), "float32[t]", samples=3)
    assert report.ok, report.table()


def test_a_function_that_fails_at_a_sample_is_the_native_verdict():
    report = export_and_verify(lambda x: x.reshape((-1, 2)), "float32[2*b]", samples=2)
    assert report.ok, report.table()  # fine: every admitted shape reshapes
    report = export_and_verify(failing.pairs, "float32[b]", samples=2)
    assert not report.ok and report.export_error is not None  # refused at export, as before


def test_float_tolerance_is_per_dtype_and_platform_and_printed():
    assert tolerance("float32", "cpu").rtol == 1e-4 and tolerance("float32", "tpu").rtol == 1e-2
    assert tolerance("bfloat16", "cpu").rtol == 2e-2 and tolerance("float64", "cpu").rtol == 1e-9
    assert tolerance("float32", "tpu", rtol=1e-6).rtol == 1e-6 and tolerance("float32", rtol=1e-6).why == "given"
    ref = np.linspace(-3, 3, 1000, dtype=np.float32)
    near = ref + np.float32(1.4e-5) * np.sign(ref)  # round-off of a reassociated reduction: passes
    c = compare([ref], [near])
    assert c.diff is None and 1e-6 < c.max_rel < 1e-4 and c.tolerances and "float32" in c.tolerances[0]
    far = ref.copy()
    far[7] += 1.0  # a wrong element: fails, with the largest error named
    c = compare([ref], [far])
    assert c.diff is not None and "index [7]" in c.diff and "largest error" in c.diff
    assert compare([ref], [ref + 5e-3 * np.abs(ref).max()], platform="tpu").diff is None  # bf16 matmuls on a TPU
    assert compare([np.array([np.nan, np.inf], np.float32)], [np.array([np.nan, np.inf], np.float32)]).diff is None
    report = export_and_verify(lambda x: x @ x.T, "float32[b, 8]", samples=2)
    assert report.ok and report.tolerances and "rtol 0.0001" in report.tolerances[0]
    assert "tolerance" in report.table()


# -- 3. honest reports ----------------------------------------------------------------------------------------
def test_a_device_process_that_cannot_start_runs_nothing_and_fails_nothing(no_workers, monkeypatch):
    monkeypatch.setenv("JAX_PLATFORMS", "tpu")  # the device process inherits it; this process's backend runs already
    report = export_and_verify(seed_rows.eq_trap, "int32[b]", samples=3)
    assert not report.ok and report.not_run and "backend" in report.not_run, report.table()
    assert report.samples and all(s.status == SKIP and s.detail.startswith("not run") for s in report.samples)
    assert report.diagnosis is None  # nothing is diagnosed as a tracing difference
    assert report.verdict().startswith("NOT VERIFIED") and "NOT VERIFIED" in report.table()
    assert next(c for c in report.checks if c.name == "fresh process").status == SKIP
    assert not seed_rows.trap_caught(report)  # no artifact ran: the trap was not caught


def test_a_crashed_device_process_is_not_run_with_its_cause(no_workers, monkeypatch, tmp_path):
    (tmp_path / "sitecustomize.py").write_text("import os\nos._exit(3)\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    report = export_and_verify(seed_rows.concat, "int32[a, b]", samples=2)
    assert not report.ok and "crashed" in report.not_run and "3" in report.not_run, report.not_run
    assert all(s.status == SKIP for s in report.samples) and report.diagnosis is None


def test_busy_and_missing_backends_are_told_apart(no_workers, monkeypatch, tmp_path):
    """The device process reads JAX's error: another process's lock on the TPU is "device busy" (end it),
    anything else "backend unavailable". The lock is simulated by a ``sitecustomize`` whose ``jax.devices``
    raises what libtpu says."""
    lock = "Unable to initialize backend 'tpu': ABORTED: Internal error when accessing libtpu multi-process lockfile"
    (tmp_path / "sitecustomize.py").write_text(f"import jax\n\ndef devices(*a, **k):\n    raise RuntimeError({lock!r})\n\n"
                                               "jax.devices = devices\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    busy = fresh.locate()
    assert busy.cause == "device busy" and not busy.usable and busy.error == f"RuntimeError: {lock}", busy
    assert "held by another process" in busy.why_not()
    monkeypatch.delenv("PYTHONPATH")
    monkeypatch.setenv("JAX_PLATFORMS", "tpu")  # none on this machine
    missing = fresh.locate()
    assert missing.cause == "backend unavailable" and not missing.usable, missing


def test_a_fix_whose_verification_did_not_run_is_not_called_fixed(no_workers, monkeypatch):
    monkeypatch.setenv("JAX_PLATFORMS", "tpu")
    report = export_and_verify(failing.slice16, "float32[b]", fix=True, samples=2, fix_deadline=60)
    fix = report.fix
    assert fix is not None and fix.parts and fix.status == NOT_VERIFIED and not fix.ok, fix.lines()
    assert "did not run" in fix.detail and not report.verdict().startswith("FIXED")
    assert "FIXED" not in report.table() and not report.ok  # the CLI's exit status is report.ok's
    monkeypatch.delenv("JAX_PLATFORMS")
    fresh.close_workers()
    report = export_and_verify(failing.slice16, "float32[b]", fix=True, samples=2, fix_deadline=60)
    assert report.fix.status == FIXED and report.fix.ok and report.verdict().startswith("FIXED")


# -- 4. inputs within the budget, inputs a model takes --------------------------------------------------------
def test_the_largest_bound_jax_accepts_is_verified_within_the_budget():
    """``t <= 2**31 - 1``: the probe past it was drawn in float64 (16 GiB) and died with MemoryError."""
    report = export_and_verify(lambda x: x * 2, "float32[t]", constraints=("t <= 2147483647",), samples=3)
    assert report.ok, report.table()
    assert all(np.prod(s.shapes[0]) * 4 <= 4 << 20 for s in report.samples)


def test_an_outside_spec_probe_over_the_budget_is_compiled_not_allocated():
    report = export_and_verify(lambda x: x + 1, "float32[a, b]", constraints=("a <= 2000",), samples=2,
                               sample_bytes=4096)
    assert report.rejections and all(r.status == "pass" for r in report.rejections), report.table()


def test_inputs_are_drawn_in_their_dtype_and_integers_index():
    rng = np.random.default_rng(0)
    ints = random_input(rng, (1000,), np.dtype(np.int32))
    assert ints.dtype == np.int32 and ints.min() >= 0 and ints.max() <= 9
    assert random_input(rng, (10,), np.dtype(np.int8), (-3, 3)).min() >= -3
    assert random_input(rng, (4,), np.dtype(np.float32)).dtype == np.float32
    assert random_input(rng, (4,), jnp.dtype(jnp.bfloat16)).dtype == jnp.bfloat16
    assert random_input(rng, (4,), np.dtype(np.complex64)).dtype == np.complex64
    table = jnp.arange(10.0)
    report = export_and_verify(lambda ids: table[ids], "int32[b]", samples=2, int_range=(0, 9))
    assert report.ok, report.table()
    with pytest.raises(ValueError, match="int_range"):
        export_and_verify(lambda x: x, "int32[b]", int_range=(5, 1))


# -- 6. verify where it runs ----------------------------------------------------------------------------------
def test_an_artifact_made_elsewhere_is_verified_here(tmp_path, capsys):
    path = tmp_path / "slice.bin"
    made = export_and_verify(seed_rows.slice_ab, "int32[a, b]", constraints=("a >= b", "b >= 16"), samples=3, out=path)
    assert made.ok and (tmp_path / "slice.bin.smtdims.json").exists()
    side = json.loads((tmp_path / "slice.bin.smtdims.json").read_text())
    assert side["constraints"] == ["a >= b", "b >= 16"] and len(side["samples"]) == 3
    report = verify_artifact(path, seed_rows.slice_ab)
    assert report.ok, report.table()
    assert [s.valuation for s in report.samples] == [s.valuation for s in made.samples]  # the sidecar's shapes
    rc = cli.main(["verify", str(path), "--against", f"{SEED_FILE}:slice_ab", "-q"])
    assert rc == 0 and "VERIFIED" in capsys.readouterr().out
    rc = cli.main(["verify", str(path), "--against", f"{SEED_FILE}:concat", "-q"])  # not the function it came from
    assert rc == 1
    capsys.readouterr()
    (tmp_path / "slice.bin.smtdims.json").unlink()  # without the sidecar: chosen again from in_avals and -c
    report = verify_artifact(path, seed_rows.slice_ab, constraints=("a >= b", "b >= 16"))
    assert report.ok, report.table()
    (tmp_path / "junk.bin").write_bytes(b"not an artifact")
    rc = cli.main(["verify", str(tmp_path / "junk.bin"), "--against", f"{SEED_FILE}:slice_ab", "-q"])
    assert rc == 2 and "not a serialized jax.export artifact" in capsys.readouterr().err


def test_verify_subcommand_without_jax_loaded_is_listed():
    proc = subprocess.run([sys.executable, "-m", "smtdims", "verify", "--help"], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert proc.returncode == 0 and "--against" in proc.stdout


# -- 7. the pipeline as values; arguments checked up front ----------------------------------------------------
def test_the_request_is_one_value():
    report = export_and_verify(lambda x: x + 1, "int32[b]", options=VerifyOptions(samples=2, seed=3))
    assert report.ok and len(report.samples) == 2
    with pytest.raises(ValueError, match="samples"):
        VerifyOptions(samples=0).checked()
    with pytest.raises(ValueError, match="unknown platform"):
        VerifyOptions(platforms=("cpux",)).checked()


def test_a_wrong_number_of_specs_is_a_usage_error(capsys):
    """A wrong number of specs is a usage error: exit 2 (not 1, the export's failure), naming the function."""
    rc = cli.main(["export", f"{SEED_FILE}:concat", "--spec", "int32[a, b]", "--spec", "int32[a]", "-q"])
    err = capsys.readouterr().err
    assert rc == 2 and "concat" in err and "2 spec(s)" in err, err
    with pytest.raises(TypeError, match="one spec per positional argument"):
        export_and_verify(lambda x: x, "int32[b]", "int32[b]")


def test_the_table_fits_a_terminal_and_leads_with_the_verdict():
    report = export_and_verify(seed_rows.top_k_dims, *seed_rows.row(16)[1], samples=6)
    lines = report.table().splitlines()
    assert lines[1].strip().startswith(("VERIFIED", "FAILED", "NOT VERIFIED"))
    assert max(map(len, lines)) <= 100, max(lines, key=len)
    assert len(report.table(verbose=True)) >= len(report.table())


def test_mod3_slice_verifies_with_the_reference_on_the_device():
    report = export_and_verify(lambda x: lax.slice_in_dim(x, 0, x.shape[0] % 3), "int32[b]", samples=4)
    assert report.ok, report.table()
    assert jax.devices()[0].platform == "cpu" and report.device.startswith("cpu")


def test_the_verification_process_ends_with_its_caller_and_leaves_no_directory(tmp_path):
    """The pipeline's own process ends with its caller: a caller SIGKILLed while its verification process
    holds the device; the worker ends (its parent's pid changes) and its directory goes at the next sweep."""
    import signal
    import time

    from smtdims.engines import tempdirs

    code = ("import sys, os; sys.path[:0] = sys.argv[1:]\n"
            "from smtdims_jax.pipeline import fresh\n"
            "d = fresh.locate(); (w,) = fresh.workers().values()\n"
            "print(w.proc.pid, w.dir, d.platform, flush=True)\n"
            "import time; time.sleep(60)\n")
    caller = subprocess.Popen([sys.executable, "-c", code, ROOT, os.path.join(ROOT, "plugins")],
                              stdout=subprocess.PIPE, text=True, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    try:
        pid, wdir, platform = caller.stdout.readline().split()
        assert platform == "cpu" and os.path.isdir(wdir)
        os.kill(caller.pid, signal.SIGKILL)
        caller.wait(timeout=30)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                os.kill(int(pid), 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        else:
            pytest.fail("the verification process outlived its caller by 5 s")
        tempdirs.sweep()
        assert not os.path.exists(wdir)
    finally:
        caller.kill()

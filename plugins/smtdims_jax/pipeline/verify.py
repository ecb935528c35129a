"""The pipeline: export with smtdims -> serialize -> the device process -> compare with JAX's own run.

The request is one value (:class:`VerifyOptions`), the export one job (:class:`~.job.ExportJob`: the
function, the specification, the platforms, the budget, the progress); each step takes them and
returns one value: :meth:`~.job.ExportJob.export` (an ``Exported`` or the refusal),
:func:`plan_samples` (solver-chosen shapes, their inputs within the byte budget, the outside-spec
probes), :func:`references` (``jax.jit(fn)`` exported at each sample's concrete shapes: how ``jit``
would trace it, so that the device process runs JAX's own computation without the user's code),
:func:`~.fresh.run_on_device` (both, side by side, where the device is) and :func:`judge` (the
per-sample verdicts). A platform, a reference or a sample policy changes in one place. It knows
nothing of fixes: a refusal, or samples that fail where the function fails too, are reported (the
refusal read, the samples diagnosed); the whole fix stands above it (:mod:`.whole`) and calls
:func:`verify` as its check, and the public entry (:mod:`.entry`) chooses between them.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import math
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import jax
import numpy as np
from jax import export

from smtdims.errors import format_valuation
from smtdims.lang.expr import Expr

from ..conversion import scope_constraints, session_for_scope, to_ir
from ..jax_internals import started_backends
from ._common import Progress, checked_platforms, fn_name, local_platform, progress_fn
from .attempt import Attempt
from .box import valuation_of
from .compare import INT_RANGE, NAN_EVERYWHERE, compare, nan_everywhere, random_input
from .diagnose import SampleDiagnosis, diagnose, intermediate_dims
from .failure import describe_export_error
from .fresh import (
    FRESH,
    Device,
    DeviceRun,
    job_env,
    keeps_off_accelerator,
    locate,
    not_run_cause,
    off_accelerator,
    prestart,
    process_check,
    rejection_check,
    release_exclusive,
    run_on_device,
)
from .job import ExportJob, FixOptions
from .platforms import check_backend, foreseen_platform
from .report import FAIL, PASS, SKIP, Check, SampleResult, VerificationReport, first_line
from .samples import SAMPLE_BYTES, SAMPLES, SampleChooser
from .sidecar import exported_aval_text, read_sidecar, write_sidecar
from .specs import aval_text, build_specs, needs_x64, x64_on


@dataclass(frozen=True)
class VerifyOptions:
    """What :func:`export_and_verify` is asked to do, checked once (:meth:`checked`).

    ``int_range``: integer inputs are drawn from this inclusive range (default 0..9: indices and
    token ids a model can use). ``rtol``/``atol``: override the per-dtype, per-platform tolerance
    (:func:`.compare.tolerance`). ``timeout``: seconds for the device process's job.
    """

    platforms: tuple[str, ...] | None = None
    samples: int | None = None  # None: the samples that decide something, at most SAMPLES; N: exactly N
    seed: int = 0
    rtol: float | None = None
    atol: float | None = None
    timeout: float = 900.0
    budget: int | None = None
    sample_bytes: int = SAMPLE_BYTES
    int_range: tuple[int, int] = INT_RANGE
    out: str | os.PathLike[str] | None = None
    fix: FixOptions | None = None
    # the user's example inputs' shapes (one tuple of leaf shapes each): sampled first, and a fix must admit them
    examples: tuple[tuple[tuple[int, ...], ...], ...] = ()

    def checked(self) -> VerifyOptions:
        def positive_int(name: str, v: Any, what: str = "") -> None:
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{name} must be a positive int{what}, got {v!r}")

        if self.samples is not None:
            positive_int("samples", self.samples)
        if self.budget is not None:
            positive_int("budget", self.budget, " (a Z3 rlimit)")
        positive_int("sample_bytes", self.sample_bytes)
        for name in ("rtol", "atol"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, (int, float)) or isinstance(v, bool) or not v >= 0):
                raise ValueError(f"{name} must be a number >= 0, got {v!r}")
        if not isinstance(self.timeout, (int, float)) or isinstance(self.timeout, bool) or not self.timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {self.timeout!r}")
        lo_hi = self.int_range
        if (not isinstance(lo_hi, tuple) or len(lo_hi) != 2 or not all(isinstance(x, int) and not isinstance(x, bool)
                                                                       for x in lo_hi) or lo_hi[0] > lo_hi[1]):
            raise ValueError(f"int_range must be a pair of ints (lo, hi) with lo <= hi, got {lo_hi!r}")
        return replace(self, platforms=checked_platforms(self.platforms))


def prepared(fn: Callable[..., Any], arg_specs: Sequence[Any], constraints: Sequence[str],
             opts: VerifyOptions) -> tuple[VerifyOptions, tuple[Any, ...], Any, list[str], bool]:
    """The request checked before anything runs: the options (a misspelt platform first, before the
    backend), the backend, the specs in one scope, one per argument; ``(opts, specs, scope, specialised,
    x64)``. The verification process is started here, to import JAX while this one exports."""
    opts = opts.checked()
    if started_backends() or keeps_off_accelerator():
        check_backend()  # JAX_PLATFORMS naming a backend this machine lacks: said here, with what to do
    # else starting a backend here would take the device from the verification process, which says
    # itself when it cannot start one (its samples are then "not run", with JAX's reason)
    specs, scope, specialised = build_specs(arg_specs, constraints)
    _check_arity(fn, specs)
    x64 = not jax.config.jax_enable_x64 and needs_x64(jax.tree_util.tree_leaves(specs))
    if not x64:  # the verification process imports JAX and opens the device while this one exports
        prestart()  # (with 64-bit inputs it needs JAX_ENABLE_X64: the job's own environment starts it)
    return opts, specs, scope, specialised, x64


def _check_arity(fn: Callable[..., Any], specs: tuple[Any, ...]) -> None:
    """One spec per positional argument: a wrong count is the caller's error (exit 2), not a failed export."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin or a C callable: JAX will say
        return
    try:
        sig.bind(*specs)
    except TypeError as err:
        raise TypeError(f"{fn_name(fn)} cannot take the {len(specs)} spec(s) given ({err}): give one spec per "
                        "positional argument") from None


# -- the steps ------------------------------------------------------------------------------------------------
@dataclass
class SamplePlan:
    """The shapes to run: each sample's valuation, why it was chosen and its inputs; the outside-spec probes
    (their shapes, why, avals, and inputs where they fit the byte budget, else None)."""

    chooser: SampleChooser
    chosen: list[tuple[dict[str, int], list[str]]]
    inputs: list[list[np.ndarray]]
    outside: list[tuple[tuple[tuple[int, ...], ...], str]]
    probes: list[tuple[list[tuple[str, tuple[int, ...]]], list[np.ndarray] | None]] = field(default_factory=list)
    skipped_probes: list[str] = field(default_factory=list)


def plan_samples(job: ExportJob, exp: Any, opts: VerifyOptions) -> SamplePlan:
    """The samples of ``exp``: shapes chosen by the solver (the user's examples first), their inputs, and the
    shapes outside the specification to probe."""
    spec_leaves, say = job.leaves, job.say
    session = session_for_scope(job.scope)
    dims = [tuple(to_ir(d) for d in s.shape) for s in spec_leaves]
    out_dims = [tuple(to_ir(d) for d in a.shape) for a in exp.out_avals]
    say(f"choosing {opts.samples or f'up to {SAMPLES}'} sample shapes with the solver")
    branches: list[tuple[Expr, Expr]] = []
    work: list[Expr] = []
    inner = intermediate_dims(job.fn, spec_leaves, job.in_tree, opts.budget, branches=branches, work=work)
    chooser = SampleChooser(session, dims, [e for leaf in out_dims for e in leaf],
                            itemsizes=[np.dtype(x.dtype).itemsize for x in spec_leaves], out_dims=out_dims,
                            out_itemsizes=[np.dtype(a.dtype).itemsize for a in exp.out_avals], max_bytes=opts.sample_bytes,
                            nonempty=[*inner, *(e for leaf in out_dims for e in leaf)], branches=branches, work=work)
    chosen = chooser.choose(opts.samples or SAMPLES, seeds=example_valuations(dims, chooser.constraints, opts.examples),
                            fill=opts.samples is not None)
    dtypes = [np.dtype(s.dtype) for s in spec_leaves]
    inputs = []
    for i, (env, _) in enumerate(chosen, 1):
        rng = np.random.default_rng(opts.seed + i)
        shapes = chooser.shapes(env)
        inputs.append([random_input(rng, shape, dt, opts.int_range) for shape, dt in zip(shapes, dtypes, strict=True)])
    outside = chooser.outside([env for env, _ in chosen])
    plan = SamplePlan(chooser, chosen, inputs, [])
    limit = (1 << 63) - 1 if jax.config.jax_enable_x64 else (1 << 31) - 1
    rng = np.random.default_rng(opts.seed)
    for shapes, why in outside:
        if any(n > limit for leaf in shapes for n in leaf):
            plan.skipped_probes.append(f"{', '.join(map(str, shapes))}: a dimension past {limit} (JAX's dimension "
                                       "integers cannot hold it, so no call can give it)")
            continue
        nbytes = sum(math.prod(leaf) * dt.itemsize for leaf, dt in zip(shapes, dtypes, strict=True))
        data = ([random_input(rng, leaf, dt, opts.int_range) for leaf, dt in zip(shapes, dtypes, strict=True)]
                if nbytes <= opts.sample_bytes else None)
        plan.outside.append((shapes, why))
        plan.probes.append(([(dt.name, leaf) for leaf, dt in zip(shapes, dtypes, strict=True)], data))
    return plan


def example_valuations(dims: Sequence[Sequence[Any]], constraints: Any,
                       examples: Sequence[tuple[tuple[int, ...], ...]]) -> list[dict[str, int]]:
    """The valuations of a specification's variables that give the examples' shapes (those it admits)."""
    out = []
    for shapes in examples:
        env = valuation_of(tuple(tuple(d) for d in dims), constraints, tuple(tuple(s) for s in shapes))
        if env is not None:
            out.append(env)
    return out


def references(job: ExportJob, plan: SamplePlan, platform: str) -> tuple[list[bytes | None], list[str]]:
    """``jax.jit(fn)`` exported for ``platform`` at each sample's concrete shapes, and per sample the error
    when ``fn`` itself fails there ("" when it traced): how ``jit`` would run it, without smtdims (no
    symbolic dimension is left to ask about)."""
    fn, in_tree, spec_leaves = job.fn, job.in_tree, job.leaves
    refs: list[bytes | None] = []
    errors: list[str] = []
    run = _RUN_REFERENCES.get()
    for i, (env, _) in enumerate(plan.chosen, 1):
        args = [jax.ShapeDtypeStruct(shape, s.dtype) for shape, s in zip(plan.chooser.shapes(env), spec_leaves, strict=True)]
        key = (id(fn), tuple((a.shape, str(a.dtype)) for a in args), platform, bool(jax.config.jax_enable_x64))
        if run is not None and key in run:  # an earlier round of this call traced it: the same program
            ref, error = run[key]
        else:
            job.say(f"sample {i}/{len(plan.chosen)}: tracing jax.jit({fn_name(fn).split(':')[-1]}) at "
                    f"{format_valuation(env)}")
            try:
                ref, error = bytes(export.export(jax.jit(fn), platforms=(platform,))(
                    *jax.tree_util.tree_unflatten(in_tree, args)).serialize()), ""
            except Exception as err:  # the function itself fails at these shapes: the native verdict
                ref, error = None, f"the native function raised {type(err).__name__}: {first_line(str(err))}"
            if run is not None:
                run[key] = (ref, error)
        refs.append(ref)
        errors.append(error)
    return refs, errors


# The references traced in one public call (every round of the fix, every step of auto): a shape traced
# once per call. Not across calls: the program may have changed in between (a model's weights).
_RUN_REFERENCES: contextvars.ContextVar[dict[Any, tuple[bytes | None, str]] | None] = contextvars.ContextVar(
    "smtdims_run_references", default=None)


@contextlib.contextmanager
def one_run() -> Iterator[None]:
    """The block is one public call: the references it traces are kept until it ends (nested: the outer's)."""
    if _RUN_REFERENCES.get() is not None:
        yield
        return
    token = _RUN_REFERENCES.set({})
    try:
        yield
    finally:
        _RUN_REFERENCES.reset(token)


def nan_everywhere_errors(plan: SamplePlan, run: DeviceRun, native_errors: Sequence[str]) -> list[str]:
    """``native_errors`` with each sample whose reference (``jax.jit`` of the program) computes NaN in
    every output element counted as the program failing there, where another sample's reference is
    finite: artifact and program agree (NaN == NaN), but the family admits a size the program does not
    compute at (a table looked up past its end; a conv front end with zero frames, whose mean over no
    frames is NaN). One sample alone says nothing (NaN may be the model's)."""
    out = list(native_errors)
    refs = [r if r is not None and not native_errors[i] else None for i, r in enumerate(run.references)]
    nan = [r is not None and nan_everywhere(r) for r in refs]
    finite = [plan.chosen[i][0] for i, r in enumerate(refs) if r is not None and not nan_everywhere(r)]
    if finite:
        for i, is_nan in enumerate(nan):
            if is_nan:
                out[i] = f"{NAN_EVERYWHERE} (finite at {format_valuation(finite[0])})"
    return out


def judge(plan: SamplePlan, run: DeviceRun | None, native_errors: Sequence[str], out_dims: Sequence[Sequence[Any]],
          not_run: str, opts: VerifyOptions) -> tuple[list[SampleResult], list[str], float]:
    """Each sample's verdict: pass, fail (the artifact or the function failed, or they differ) or skip ("not
    run", with the cause); the tolerances used; the largest error relative to the output's scale."""
    results: list[SampleResult] = []
    tols: dict[str, None] = {}
    worst = 0.0
    rows = {s["index"]: s for s in (run.result.get("samples", []) if run is not None else [])}
    platform = run.device.platform if run is not None else ""
    for i, (env, why) in enumerate(plan.chosen, 1):
        w = rows.get(i, {})
        native = native_errors[i - 1]
        if not_run:
            status, detail = SKIP, f"not run: {not_run}"
        elif native:
            status, detail = FAIL, native
        elif w.get("error"):
            status, detail = FAIL, f"the artifact raised {first_line(w['error'], 300)}"
        elif w.get("ref_error"):
            status, detail = SKIP, f"not run: the reference (jax.jit of the function) raised on the device: " \
                                   f"{first_line(w['ref_error'], 300)}"
        elif run is None or run.outputs[i - 1] is None or run.references[i - 1] is None:
            status, detail = SKIP, "not run: no result from the device process"
        else:
            expected = [tuple(e.evaluate(env) for e in leaf) for leaf in out_dims]
            c = compare(run.references[i - 1], run.outputs[i - 1], expected, platform=platform, rtol=opts.rtol, atol=opts.atol)
            tols.update(dict.fromkeys(c.tolerances))
            worst = max(worst, c.max_rel)
            status, detail = (FAIL, c.diff) if c.diff else (PASS, f"largest error {c.max_rel:.2g}" if c.tolerances else "")
        results.append(SampleResult(
            i, {v: env[v] for v in plan.chooser.shape_vars}, plan.chooser.shapes(env), tuple(why), status, detail,
            w.get("ref_run_s"), w.get("compile_s"), w.get("run_s"),
        ))
    return results, list(tols), worst


@dataclass(frozen=True)
class Verified:
    """What :func:`verify` found: the report, the job it ran (what a fix starts from) and, where JAX refused
    the export as given, that refused export (the fix loop's first round)."""

    report: VerificationReport
    job: ExportJob
    refused: Attempt | None
    x64: bool


def verify(fn: Callable[..., Any], specs: tuple[Any, ...], scope: Any, specialised: list[str], opts: VerifyOptions,
           say: Progress, x64: bool, exported: Any = None) -> Verified:
    """The pipeline on ``specs``: export, samples, the device, the judge, the report; ``exported``: their
    export, where the fix loop already made it (each export runs once)."""
    name = fn_name(fn)
    spec_leaves, in_tree = jax.tree_util.tree_flatten(specs)
    dev: Device | None = None
    plats = opts.platforms
    foreseen = None
    if plats is None:  # export for the device the samples run on
        foreseen = None if started_backends() - {"cpu"} else foreseen_platform(job_env())
        if foreseen is not None:  # only the CPU here: export now, while the verification process starts
            plats = (foreseen,)
        else:  # ask the device process which device it got
            say("starting the verification process (it holds the device; stock JAX, no smtdims)")
            dev = locate()
            plats = (dev.platform,) if dev.usable else None
    job = ExportJob.of(fn, spec_leaves, in_tree, scope, plats, opts.budget, say, name)
    say(f"exporting {name} for {', '.join(plats) if plats else 'the default platform'} with smtdims installed"
        + (" (jax_enable_x64 on for the 64-bit inputs)" if x64 else ""))
    t0 = time.perf_counter()
    if exported is not None and (plats is None or tuple(exported.platforms) == tuple(plats)):
        exp = exported
    else:
        # listening to what JAX asks: a refusal is round 1 of the fix loop as it is (raises smtdims' own bugs)
        got = job.export()
        if not got.ok:  # JAX refused the function: a failed check, reported like the others
            assert got.error is not None
            say(f"export failed: {type(got.error).__name__}" + ("; looking for a fix" if opts.fix is not None else ""))
            return Verified(_failed_export(job, got, opts), job, got, x64)
        exp = got.exported
    export_s = time.perf_counter() - t0
    made = "by the fix loop" if exp is exported else f"{export_s:.2f}s"
    checks = [Check("export", PASS, f"{made} for {', '.join(exp.platforms)}"
                    + ("; jax_enable_x64 on for the 64-bit inputs" if x64 else ""))]
    mismatched = [f"input {i}: exported as {a}, specified as {s.dtype.name}{list(s.shape)}"
                  for i, (a, s) in enumerate(zip(exp.in_avals, spec_leaves, strict=True))
                  if str(a.shape) != str(tuple(s.shape)) or np.dtype(a.dtype) != np.dtype(s.dtype)]
    bad = specialised + mismatched
    checks.append(Check("symbolic dims kept", FAIL if bad else PASS, "; ".join(bad)))

    artifact = bytes(exp.serialize())
    if opts.out is not None:
        Path(opts.out).write_bytes(artifact)
    checks.append(Check("serialize", PASS, f"{len(artifact)} bytes" + (f" -> {opts.out}" if opts.out else "")))

    plan = plan_samples(job, exp, opts)
    if foreseen is not None:
        dev = locate()
        if dev.usable and dev.platform != foreseen:  # foreseen wrongly: the export is for the device it has
            say(f"the verification process has {dev.platform}, not {foreseen}: exporting for {dev.platform}")
            return verify(fn, specs, scope, specialised, replace(opts, platforms=(dev.platform,)), say, x64)
    if opts.out is not None:
        write_sidecar(opts.out, exp, plan, tuple(c.text for c in scope_constraints(scope)))
    return Verified(_check_artifact(job, exp, artifact, opts, checks, plan, dev), job, None, x64)


def _check_artifact(job: ExportJob, exp: Any, artifact: bytes, opts: VerifyOptions, checks: list[Check],
                    plan: SamplePlan, dev: Device | None) -> VerificationReport:
    """Run ``artifact`` beside JAX's own run of the job's function on the device, and report (the half that
    ``smtdims verify`` shares with the export)."""
    dev = dev or locate()
    out_dims = [tuple(to_ir(d) for d in a.shape) for a in exp.out_avals]
    not_run = ""
    run: DeviceRun | None = None
    native_errors = [""] * len(plan.chosen)
    if not dev.usable:
        not_run = dev.why_not()
    elif dev.platform not in exp.platforms:
        not_run = (f"the artifact has no code for {dev.platform!r}, the device here; it was exported for "
                   f"{'/'.join(exp.platforms)} (run it there: smtdims verify ARTIFACT --against MODULE:FUNCTION)")
    else:
        refs, native_errors = references(job, plan, dev.platform)
        run = run_on_device(artifact, plan.inputs, plan.probes, job.say, opts.timeout, references=refs)
        dev = run.device
        not_run = (dev.why_not() if not dev.usable else not_run_cause(run)) if run.failure else ""
        if not not_run:
            native_errors = nan_everywhere_errors(plan, run, native_errors)
    checks.append(process_check(dev, run, not_run))
    results, tolerances, worst = judge(plan, run, native_errors, out_dims, not_run, opts)
    ran = [r for r in results if r.status != SKIP]
    checks.append(Check("samples", PASS if results and all(r.status == PASS for r in results) else
                        SKIP if not ran else FAIL,
                        f"{sum(r.status == PASS for r in results)}/{len(results)} match JAX's own run of the function"
                        + (f" (largest error {worst:.2g} of the output's scale)" if tolerances and ran else "")
                        + (f"; {len(results) - len(ran)} not run" if len(ran) < len(results) else "")))
    chooser = plan.chooser
    if chooser.flat and ran:  # a pass on empty arrays compares nothing: say so, and do not call it verified
        full = [r for r in results if r.status == PASS and chooser.is_nonempty(r.valuation)]
        checks.append(Check("non-empty sample", PASS if full else FAIL,
                            f"{len(full)} passing sample(s) where every output and intermediate array is non-empty"
                            if full else "no passing sample computes a non-empty array (every output or some "
                            "intermediate is empty): nothing was compared; no valuation within the sample budget "
                            "makes them all non-empty" if not any(chooser.is_nonempty(env) for env, _ in plan.chosen)
                            else "no passing sample computes a non-empty array: nothing was compared"))
    diagnosis = _diagnosed(job, exp, results, native_errors, opts)
    done = (run.result.get("reject") if run is not None else None) or []
    rejections = tuple(rejection_check(shapes, why, done[k] if k < len(done) and not not_run else None)
                       for k, (shapes, why) in enumerate(plan.outside))
    if rejections:
        failing = [r for r in rejections if r.status != PASS]
        checks.append(Check("outside spec rejected", (failing[0].status if failing else PASS),
                            f"{len(rejections) - len(failing)}/{len(rejections)} rejected"))
    else:
        checks.append(Check("outside spec rejected", SKIP, "no shape outside the specification was found"
                            + (f" that JAX can take ({plan.skipped_probes[0]})" if plan.skipped_probes else "")))
    return VerificationReport(
        function=job.name,
        platforms=tuple(exp.platforms),
        constraints=tuple(c.text for c in chooser.session.constraints),
        in_avals=tuple(str(a) for a in exp.in_avals),
        out_avals=tuple(str(a) for a in exp.out_avals),
        checks=tuple(checks),
        samples=tuple(results),
        rejections=rejections,
        artifact_bytes=len(artifact),
        artifact_path=str(opts.out) if opts.out is not None else None,
        device=f"{dev.platform}: {dev.kind}" if dev.usable and dev.kind else "",
        worker_jax=dev.jax_version if dev.where == FRESH else "",
        diagnosis=diagnosis,
        exported=exp,
        ran_in=dev.where if not not_run else "",
        not_run=not_run,
        tolerances=tuple(tolerances),
    )


def _diagnosed(job: ExportJob, exp: Any, results: Sequence[SampleResult], native_errors: Sequence[str],
               opts: VerifyOptions) -> SampleDiagnosis | None:
    """The failed samples' diagnosis (:mod:`.diagnose`); None when no sample that ran failed."""
    failed = [(r, native_errors[r.index - 1]) for r in results if r.status == FAIL]
    if not failed:  # only samples that ran: one that did not run says nothing about tracing
        return None
    native_fails = [r.valuation for r, n in failed if n]
    job.say("diagnosing the failed samples" + (" (the native function fails there too)" if native_fails else ""))
    nan = [r.valuation for r, n in failed if n.startswith(NAN_EVERYWHERE)]
    return diagnose(job, exp, native_fails, next((n for _, n in failed if n), ""),
                    [r.valuation for r, n in failed if not n], box_side=opts.fix.box if opts.fix is not None else None,
                    nan=nan, finite=[r.valuation for r in results if r.status == PASS] if nan else [])


def _failed_export(job: ExportJob, first: Attempt, opts: VerifyOptions) -> VerificationReport:
    """JAX refused the export as given (``first``): the refusal read (a whole fix, where one is asked for,
    starts from it: :mod:`.whole`)."""
    err = first.error
    assert err is not None
    # with the whole fix to come, its first round re-exports with the first fix: not here a second time
    failure = describe_export_error(err, job.fn, job.plats, job.leaves, job.in_tree, job.scope, opts.budget,
                                    reexport=opts.fix is None)
    skipped = "not run: the export failed"
    checks = [Check("export", FAIL, f"{failure.type}: {first_line(failure.message, 300)}")]
    checks += [Check(c, SKIP, skipped) for c in
               ("symbolic dims kept", "serialize", "fresh process", "samples", "outside spec rejected")]
    return VerificationReport(
        function=job.name, platforms=job.plats or (local_platform(),),
        constraints=tuple(c.text for c in scope_constraints(job.scope)),
        in_avals=tuple(aval_text(x) for x in job.leaves), out_avals=(), checks=tuple(checks),
        samples=(), rejections=(), export_error=failure, exception=err,
    )


# -- verify where it runs -------------------------------------------------------------------------------
def verify_artifact(artifact: str | os.PathLike[str], against: Callable[..., Any], *,
                    constraints: Sequence[str] | None = None, progress: bool | Progress | None = None,
                    options: Any = None) -> VerificationReport:
    """Check a serialized artifact (made anywhere, for this host's platform among others) on this host's
    device against ``against``, the function it was exported from: the sidecar's samples and
    outside-spec shapes, or shapes chosen again from its in_avals and ``constraints``."""
    say = progress_fn(progress)
    opts = (options or VerifyOptions()).checked()
    path = Path(artifact)
    try:
        blob = path.read_bytes()
    except OSError as err:
        raise ValueError(f"cannot read the artifact {os.fspath(artifact)!r}: {err.strerror or err}") from None
    side = read_sidecar(path)
    try:
        exp = export.deserialize(bytearray(blob))
    except Exception as err:  # noqa: BLE001 - any decoding failure means the same to the user
        raise ValueError(f"{os.fspath(artifact)!r} is not a serialized jax.export artifact "
                         f"({type(err).__name__}: {str(err)[:200]}); write one with smtdims export --out PATH") from None
    texts = side["in_avals"] if side else [exported_aval_text(a) for a in exp.in_avals]
    cons = tuple(constraints) if constraints is not None else tuple(side["constraints"]) if side else ()
    specs, scope, _ = build_specs(texts, cons)
    _check_arity(against, specs)
    spec_leaves, in_tree = jax.tree_util.tree_flatten(specs)
    checks = [Check("export", SKIP, f"made elsewhere for {', '.join(exp.platforms)}"),
              Check("serialize", PASS, f"{len(blob)} bytes read from {path}, deserialized by stock JAX")]
    if not side and constraints is None:
        checks.append(Check("constraints", SKIP, "none given and no sidecar: a serialized artifact does not keep them, "
                            "so the samples may include shapes its constraints exclude (pass them with -c)"))
    x64 = not jax.config.jax_enable_x64 and needs_x64(spec_leaves)
    try:
        with off_accelerator(), x64_on() if x64 else contextlib.nullcontext():
            job = ExportJob.of(against, spec_leaves, in_tree, scope, tuple(exp.platforms), opts.budget, say,
                               fn_name(against))
            plan = plan_samples(job, exp, opts)
            if side and side.get("samples"):
                chosen = [({k: int(v) for k, v in s["valuation"].items()}, list(s["why"])) for s in side["samples"]]
                plan.chosen = chosen
                dtypes = [np.dtype(x.dtype) for x in spec_leaves]
                plan.inputs = [[random_input(np.random.default_rng(opts.seed + i), shape, dt, opts.int_range)
                                for shape, dt in zip(plan.chooser.shapes(env), dtypes, strict=True)]
                               for i, (env, _) in enumerate(chosen, 1)]
            report = _check_artifact(job, exp, blob, replace(opts, out=os.fspath(path)), checks, plan, None)
            # a check of an artifact made elsewhere, not of an export made here
            return replace(report, title=f"smtdims verify check of {os.fspath(artifact)} against {fn_name(against)}")
    finally:
        release_exclusive()

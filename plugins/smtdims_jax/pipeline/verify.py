"""The pipeline: export with smtdims -> serialize -> fresh process -> compare on solver-chosen shapes."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np
from jax import export

from smtdims.errors import format_valuation

from .. import adapter, enabled
from ._common import Progress, _fn_name, _local_platform, _normalise_platforms, _progress_fn, _raised_by_smtdims, _solver_budget
from .compare import compare_outputs, random_input
from .diagnose import diagnose, intermediate_dims
from .failure import describe_export_error
from .fixes import DEFAULT_DEADLINE, DEFAULT_ROUNDS, FixOptions, synthesize
from .fresh import _rejection, run_fresh_process
from .platforms import check_backend
from .report import FAIL, PASS, SKIP, Check, SampleResult, VerificationReport, _first_line
from .samples import SAMPLE_BYTES, SampleChooser
from .specs import _aval_text, _needs_x64, _x64_on, build_specs


def export_and_verify(
    fn: Callable[..., Any],
    *arg_specs: Any,
    constraints: Sequence[str] = (),
    platforms: str | Sequence[str] | None = None,
    samples: int = 6,
    out: str | os.PathLike[str] | None = None,
    seed: int = 0,
    progress: bool | Progress | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    timeout: float = 900.0,
    budget: int | None = None,
    fix: bool = False,
    fix_rounds: int = DEFAULT_ROUNDS,
    fix_deadline: float = DEFAULT_DEADLINE,
    box: int | None = None,
    sample_bytes: int = SAMPLE_BYTES,
) -> VerificationReport:
    """Export ``jax.jit(fn)`` with smtdims, then verify the artifact on solver-chosen shapes.

    ``arg_specs``: one per positional argument of ``fn``: ``"int32[b, 4]"``,
    ``("b, 4", "int32")``, a bare ``"b, 4"`` (float32), a ``jax.ShapeDtypeStruct`` (e.g. from
    ``jax.export.symbolic_args_specs``), an array (static shape), or a pytree of these.
    String specs share one scope with ``constraints``. ``platforms``: lowering targets
    (default: the local one); samples run on the local device when it is among them.
    64-bit dtypes (``float64``, ``int64``, ...) turn ``jax_enable_x64`` on for the export,
    the native runs and the fresh process, and back off afterwards. ``budget``: Z3 rlimit
    for the export and the sample choice (default: smtdims' configured budget).

    Bad arguments (specs, dtypes, ``samples``) raise ``TypeError``/``ValueError``. An
    export that JAX refuses (e.g. an inconclusive comparison) is a failed check: the
    report has ``ok`` False, the ``export`` check failed, and ``export_error`` carries JAX's
    message, smtdims' witnesses and a fix (re-exported to verify it). Everything after
    the export is reported too.

    ``sample_bytes``: the memory budget of one sample (inputs and outputs together); the
    "largest" sample fills it, every sample stays within it (default 4 MiB).

    ``fix=True``: a failed export gets its whole fix (:mod:`.fixes`, in ``report.fix``):
    fix, re-export and repeat (at most ``fix_rounds`` rounds, ``fix_deadline`` seconds),
    minimise, verify the fixed specification with this whole pipeline, and measure it on
    a box of small shapes (every variable in ``1..box``; default 64 for one variable,
    fewer for several) against native runs. Off by default because it traces the native
    function on a few hundred shapes and starts a second fresh process (seconds, where a
    failed export's report otherwise costs one re-export); ``smtdims export --fix`` turns
    it on. Without it the first fix is still reported and re-exported.
    """
    if not isinstance(samples, int) or isinstance(samples, bool) or samples < 1:
        raise ValueError(f"samples must be a positive int, got {samples!r}")
    if budget is not None and (not isinstance(budget, int) or isinstance(budget, bool) or budget <= 0):
        raise ValueError(f"budget must be a positive int (a Z3 rlimit), got {budget!r}")
    if not isinstance(fix_rounds, int) or isinstance(fix_rounds, bool) or fix_rounds < 1:
        raise ValueError(f"fix_rounds must be a positive int, got {fix_rounds!r}")
    if not isinstance(fix_deadline, (int, float)) or isinstance(fix_deadline, bool) or not fix_deadline > 0:
        raise ValueError(f"fix_deadline must be a positive number of seconds, got {fix_deadline!r}")
    if not isinstance(sample_bytes, int) or isinstance(sample_bytes, bool) or sample_bytes < 1:
        raise ValueError(f"sample_bytes must be a positive int, got {sample_bytes!r}")
    if box is not None and (not isinstance(box, int) or isinstance(box, bool) or box < 1):
        raise ValueError(f"box must be a positive int (every variable in 1..box), got {box!r}")
    plats = _normalise_platforms(platforms)  # before the backend: a misspelt name is the first thing to say
    check_backend()
    specs, scope, specialised = build_specs(arg_specs, constraints)
    x64 = not jax.config.jax_enable_x64 and _needs_x64(jax.tree_util.tree_leaves(specs))
    with _x64_on() if x64 else contextlib.nullcontext(), _solver_budget(budget):
        return _verify(fn, specs, scope, specialised, plats, samples, out, seed,
                       _progress_fn(progress), rtol, atol, timeout, budget, x64,
                       FixOptions(fix_rounds, float(fix_deadline), box) if fix else None, sample_bytes)


def _verify(fn: Callable[..., Any], specs: tuple[Any, ...], scope: Any, specialised: list[str],
            plats: tuple[str, ...] | None, samples: int, out: Any, seed: int, say: Progress,
            rtol: float | None, atol: float | None, timeout: float, budget: int | None, x64: bool,
            fix: FixOptions | None = None, sample_bytes: int = SAMPLE_BYTES) -> VerificationReport:
    name = _fn_name(fn)
    spec_leaves, in_tree = jax.tree_util.tree_flatten(specs)
    say(f"exporting {name} for {', '.join(plats) if plats else 'the default platform'} with smtdims installed"
        + (" (jax_enable_x64 on for the 64-bit inputs)" if x64 else ""))
    t0 = time.perf_counter()
    try:
        with enabled(budget=budget):
            exp = export.export(jax.jit(fn), platforms=plats)(*specs)
    except Exception as err:  # JAX refused the function: a failed check, reported like the others
        if _raised_by_smtdims(err):
            raise  # a bug of smtdims' own (not JAX refusing the function): not the user's to fix
        say(f"export failed: {type(err).__name__}; looking for a fix")
        failure = describe_export_error(err, fn, plats, spec_leaves, in_tree, scope, budget)
        skipped = "not run: the export failed"
        checks = [Check("export", FAIL, f"{failure.type}: {_first_line(failure.message, 300)}")]
        checks += [Check(c, SKIP, skipped) for c in
                   ("symbolic dims kept", "serialize", "fresh process", "samples", "outside spec rejected")]
        whole = None
        if fix is not None:
            whole = synthesize(
                fn, spec_leaves, in_tree, scope, plats, budget=budget, rounds=fix.rounds, deadline=fix.deadline,
                box_side=fix.box, say=say, name=name,
                verify=lambda s, sc: _verify(fn, s, sc, [], plats, samples, out, seed, say, rtol, atol, timeout,
                                             budget, x64, None, sample_bytes),
            )
        return VerificationReport(
            function=name, platforms=plats or (_local_platform(),),
            constraints=tuple(c.text for c in adapter.scope_constraints(scope)),
            in_avals=tuple(_aval_text(x) for x in spec_leaves), out_avals=(), checks=tuple(checks),
            samples=(), rejections=(), export_error=failure, exception=err, fix=whole,
        )
    export_s = time.perf_counter() - t0
    checks = [Check("export", PASS, f"{export_s:.2f}s for {', '.join(exp.platforms)}"
                    + ("; jax_enable_x64 on for the 64-bit inputs" if x64 else ""))]
    mismatched = [f"input {i}: exported as {a}, specified as {s.dtype.name}{list(s.shape)}"
                  for i, (a, s) in enumerate(zip(exp.in_avals, spec_leaves, strict=True))
                  if str(a.shape) != str(tuple(s.shape)) or np.dtype(a.dtype) != np.dtype(s.dtype)]
    bad = specialised + mismatched
    checks.append(Check("symbolic dims kept", FAIL if bad else PASS, "; ".join(bad)))

    artifact = bytes(exp.serialize())
    if out is not None:
        Path(out).write_bytes(artifact)
    checks.append(Check("serialize", PASS, f"{len(artifact)} bytes" + (f" -> {out}" if out else "")))

    session = adapter.session_for_scope(scope)
    dims = [tuple(adapter.to_ir(d) for d in s.shape) for s in spec_leaves]
    out_dims = [tuple(adapter.to_ir(d) for d in a.shape) for a in exp.out_avals]
    say(f"choosing {samples} sample shapes with the solver")
    chooser = SampleChooser(session, dims, [e for leaf in out_dims for e in leaf],
                            itemsizes=[np.dtype(x.dtype).itemsize for x in spec_leaves], out_dims=out_dims,
                            out_itemsizes=[np.dtype(a.dtype).itemsize for a in exp.out_avals], max_bytes=sample_bytes,
                            nonempty=[*intermediate_dims(fn, spec_leaves, in_tree, budget),
                                      *(e for leaf in out_dims for e in leaf)])
    chosen = chooser.choose(samples)
    outside = chooser.outside([env for env, _ in chosen])

    inputs, natives, native_s = [], [], []
    for i, (env, _) in enumerate(chosen, 1):
        rng = np.random.default_rng(seed + i)
        leaves = [random_input(rng, shape, np.dtype(s.dtype)) for shape, s in zip(chooser.shapes(env), spec_leaves, strict=True)]
        inputs.append(leaves)
        say(f"sample {i}/{len(chosen)}: native {name.split(':')[-1]} at {format_valuation(env)}")
        t0 = time.perf_counter()
        try:
            res = fn(*jax.tree_util.tree_unflatten(in_tree, leaves))
            natives.append([np.asarray(x) for x in jax.tree_util.tree_leaves(jax.block_until_ready(res))])
        except Exception as err:  # the tutorial's guarantee presumes native success
            natives.append(f"the native function raised {type(err).__name__}: {_first_line(str(err))}")
        native_s.append(time.perf_counter() - t0)
    rng = np.random.default_rng(seed)
    reject_inputs = [[random_input(rng, shape, np.dtype(s.dtype)) for shape, s in zip(shapes, spec_leaves, strict=True)]
                     for shapes, _ in outside]

    local = _local_platform()
    worker: dict[str, Any] = {}
    not_run = ""
    outs: list[list[np.ndarray] | None] = [None] * len(chosen)
    if local in exp.platforms:
        try:
            worker, outs = run_fresh_process(artifact, inputs, reject_inputs, say, timeout)
        except RuntimeError as err:  # crashed or timed out: a failed check, with its stderr
            worker = {"fatal": str(err)}
        stray = worker.get("smtdims_loaded")
        if worker.get("fatal"):
            lines = [x for x in worker["fatal"].strip().splitlines() if x.strip()]
            detail = lines[0] + (f" ... {lines[-1].strip()}" if len(lines) > 1 else "")
            checks.append(Check("fresh process", FAIL, detail))
        elif stray:
            checks.append(Check("fresh process", FAIL, f"smtdims was imported there: {stray}"))
        else:
            checks.append(Check("fresh process", PASS, f"stock jax {worker['jax_version']}, smtdims not imported"))
    else:
        not_run = f"not run: the artifact has no code for the local platform {local!r}; run on {'/'.join(exp.platforms)}"
        checks.append(Check("fresh process", SKIP, not_run))

    results = []
    wsamples = {s["index"]: s for s in worker.get("samples", [])}
    for i, (env, why) in enumerate(chosen, 1):
        w = wsamples.get(i, {})
        native = natives[i - 1]
        if not worker:
            status, detail = SKIP, not_run
        elif w.get("error"):
            status, detail = FAIL, f"the artifact raised {_first_line(w['error'], 300)}"
        elif isinstance(native, str):
            status, detail = FAIL, native
        elif outs[i - 1] is None:
            status, detail = FAIL, "no result from the fresh process"
        else:
            expected = [tuple(e.evaluate(env) for e in leaf) for leaf in out_dims]
            diff = compare_outputs(native, outs[i - 1], expected, rtol, atol)
            status, detail = (FAIL, diff) if diff else (PASS, "")
        results.append(SampleResult(
            i, {v: env[v] for v in chooser.shape_vars}, chooser.shapes(env), tuple(why), status, detail,
            native_s[i - 1], w.get("compile_s"), w.get("run_s"),
        ))
    checks.append(Check("samples", PASS if results and all(r.status == PASS for r in results) else FAIL,
                        f"{sum(r.status == PASS for r in results)}/{len(results)} match the native function"))
    if chooser.flat:  # a pass on empty arrays compares nothing: say so, and do not call it verified
        full = [r for r in results if r.status == PASS and chooser.is_nonempty(r.valuation)]
        checks.append(Check("non-empty sample", PASS if full else FAIL,
                            f"{len(full)} passing sample(s) where every output and intermediate array is non-empty"
                            if full else "no passing sample computes a non-empty array (every output or some "
                            "intermediate is empty): nothing was compared; no valuation within the sample budget "
                            "makes them all non-empty" if not any(chooser.is_nonempty(env) for env, _ in chosen)
                            else "no passing sample computes a non-empty array: nothing was compared"))
    diagnosis = None
    failed = [(r, natives[r.index - 1]) for r in results if r.status == FAIL]
    if failed:
        native_fails = [r.valuation for r, n in failed if isinstance(n, str)]
        say("diagnosing the failed samples" + (" (the native function fails there too)" if native_fails else ""))
        diagnosis = diagnose(
            fn, spec_leaves, in_tree, scope, exp, plats, budget, native_fails,
            next((n for _, n in failed if isinstance(n, str)), ""),
            [r.valuation for r, n in failed if not isinstance(n, str)],
            box_side=fix.box if fix is not None else None,
            verify=(lambda s, sc: _verify(fn, s, sc, [], plats, samples, out, seed, say, rtol, atol, timeout, budget, x64,
                                          None, sample_bytes))
            if fix is not None else None,
        )

    done = worker.get("reject") or []
    rejections = tuple(_rejection(shapes, why, done[k] if k < len(done) else None) for k, (shapes, why) in enumerate(outside))
    if rejections:
        bad = [r for r in rejections if r.status != PASS]
        checks.append(Check("outside spec rejected", (bad[0].status if bad else PASS),
                            f"{len(rejections) - len(bad)}/{len(rejections)} rejected"))
    else:
        checks.append(Check("outside spec rejected", SKIP, "no shape outside the specification was found"))

    return VerificationReport(
        function=name,
        platforms=tuple(exp.platforms),
        constraints=tuple(c.text for c in session.constraints),
        in_avals=tuple(str(a) for a in exp.in_avals),
        out_avals=tuple(str(a) for a in exp.out_avals),
        checks=tuple(checks),
        samples=tuple(results),
        rejections=rejections,
        artifact_bytes=len(artifact),
        artifact_path=str(out) if out is not None else None,
        device=worker.get("device", ""),
        worker_jax=worker.get("jax_version", ""),
        diagnosis=diagnosis,
        exported=exp,
    )



"""The public entry: :func:`export_and_verify` checks its arguments into one :class:`~.verify.VerifyOptions`
and chooses the path: the pipeline alone (:mod:`.verify`), the whole fix over it (:mod:`.whole`), or the
family from example inputs (:mod:`.auto`, whose every step is the whole fix); nothing else. The whole call
is one run (:func:`.verify.one_run`): a reference traced for one round serves the next.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from ._common import Progress, fn_name, progress_fn
from .auto import auto_export
from .compare import INT_RANGE
from .job import DEFAULT_DEADLINE, DEFAULT_ROUNDS, FixOptions
from .report import VerificationReport
from .samples import SAMPLE_BYTES
from .verify import VerifyOptions, one_run
from .whole import export_checked


def export_and_verify(
    fn: Callable[..., Any],
    *arg_specs: Any,
    constraints: Sequence[str] = (),
    platforms: str | Sequence[str] | None = None,
    samples: int | None = None,
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
    int_range: tuple[int, int] = INT_RANGE,
    options: VerifyOptions | None = None,
    dims: Any = None,
) -> Any:
    """Export ``jax.jit(fn)`` with smtdims, then verify the artifact on solver-chosen shapes, on the device.

    ``arg_specs``: one per positional argument of ``fn``: ``"int32[b, 4]"``,
    ``("b, 4", "int32")``, a bare ``"b, 4"`` (float32), a ``jax.ShapeDtypeStruct`` (e.g. from
    ``jax.export.symbolic_args_specs``), an array (static shape), or a pytree of these.
    String specs share one scope with ``constraints``. ``platforms``: lowering targets
    (default: the platform of the device the verification runs on: the TPU or GPU where there
    is one, else the CPU). 64-bit dtypes (``float64``, ``int64``, ...) turn ``jax_enable_x64``
    on for the export and the device process, and back off afterwards. ``budget``: Z3 rlimit
    for the export and the sample choice (default: smtdims' configured budget).

    Where it runs: this process exports (kept off the accelerator while it does, when it has
    started no JAX backend yet); one fresh process that never imports smtdims holds the device
    and runs, for every sample, JAX's own run of ``fn`` (``jax.jit(fn)`` at the sample's shapes)
    and the artifact, side by side. A process that already holds a TPU runs them itself (one
    process at a time may hold a TPU) and says so. Float outputs are compared within a
    tolerance per dtype and platform (``rtol``/``atol`` override it); the report prints it and
    the largest error seen. A sample that could not run (the device is held elsewhere, the
    backend is missing, the process crashed) is "not run", and the report says "not verified".

    Bad arguments (specs, dtypes, ``samples``, a number of specs ``fn`` cannot take) raise
    ``TypeError``/``ValueError``. An export that JAX refuses is a failed check: the report has
    ``ok`` False, the ``export`` check failed, and ``export_error`` carries JAX's message,
    smtdims' witnesses and a fix (re-exported to verify it).

    ``samples``: how many sample shapes; None (the default) spends a sample only where it decides
    something (the examples, the minimum, every array non-empty, each branch and divisibility edge, one
    large sample spanning every variable, sized by the elements its program computes, each constraint
    tight, each maximum), at most 6, since each costs two compiles; an int makes up that many.
    ``sample_bytes``: the memory budget of one sample (inputs and outputs together); the
    "largest" sample fills it, every sample and the outside-spec probe stay within it (a probe
    too large to allocate is only compiled: JAX's shape checks run while compiling).
    ``int_range``: integer inputs are drawn from it (inclusive; default 0..9).

    ``fix=True``: a failed export gets its whole fix (:mod:`.fixes`, in ``report.fix``):
    fix, re-export and repeat (at most ``fix_rounds`` rounds, ``fix_deadline`` seconds),
    minimise, verify the fixed specification with this whole pipeline, and measure it against
    native runs at shapes chosen by reasoning (``box=N``: the grid ``1..N``). The fix is "fixed"
    only when that verification passed and it excludes no traced shape where the function runs.
    ``options``: all of the above as one :class:`VerifyOptions` (the keyword arguments are ignored then).

    ``dims="auto"``: the positional arguments are *example inputs* (arrays, or ``ShapeDtypeStruct``
    with concrete shapes), and the result is an :class:`~.auto.AutoReport`: the most general family of
    shapes found from them and verified (every dimension its own variable, sizes 0 and 1 kept, then the
    whole fix with the examples as its examples; :mod:`.auto`). ``dims`` may also give one partial spec
    per argument (``("b, _", None)``: ``_`` and None are inferred).
    """
    with one_run():
        if not isinstance(fix_rounds, int) or isinstance(fix_rounds, bool) or fix_rounds < 1:
            raise ValueError(f"fix_rounds must be a positive int, got {fix_rounds!r}")
        if not isinstance(fix_deadline, (int, float)) or isinstance(fix_deadline, bool) or not fix_deadline > 0:
            raise ValueError(f"fix_deadline must be a positive number of seconds, got {fix_deadline!r}")
        if box is not None and (not isinstance(box, int) or isinstance(box, bool) or box < 1):
            raise ValueError(f"box must be a positive int (every variable in 1..box), got {box!r}")
        base = options or VerifyOptions(
            platforms=platforms if platforms is None or isinstance(platforms, str) else tuple(platforms),
            samples=samples, seed=seed, rtol=rtol, atol=atol, timeout=timeout, budget=budget,
            sample_bytes=sample_bytes, int_range=tuple(int_range) if isinstance(int_range, list) else int_range,
            out=out, fix=FixOptions(fix_rounds, float(fix_deadline), box) if fix else None)
        say = progress_fn(progress)
        if dims is None:
            return export_checked(fn, arg_specs, constraints, base, say)
        # from examples: every step of auto is the whole fix over the pipeline, in this one call
        fx = base.fix or FixOptions(fix_rounds, float(fix_deadline), box)

        def run(specs: tuple[Any, ...], example_shapes: tuple[Any, ...]) -> VerificationReport:
            return export_checked(fn, specs, constraints, replace(base, fix=fx, examples=example_shapes), say)

        return auto_export(fn, arg_specs, dims, run, budget, fn_name(fn))


__all__ = ["export_and_verify"]

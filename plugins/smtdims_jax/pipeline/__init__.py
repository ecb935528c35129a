"""The tutorial's closing checklist, automated: export -> serialize -> fresh process -> compile -> compare.

:func:`export_and_verify` exports ``jax.jit(fn)`` with smtdims installed, checks that the
dimensions the user made symbolic stayed symbolic, serializes the artifact, and then
deserializes, compiles and runs it in a *fresh Python process that never imports
smtdims* (so a pass also proves the artifact runs on stock JAX), on the device that process
holds (the TPU or GPU where there is one: one process at a time may hold a TPU, so this
process stays off it), beside JAX's own run of the function (``jax.jit(fn)`` at each
sample's shapes). :func:`verify_artifact` checks an artifact made elsewhere. The sample shapes are
chosen by the solver, not by hand: each variable's minimum, divisibility edges of every
``mod``/``floordiv``, large values, tight constraint boundaries, maxima. One shape that is
provably outside the specification must be rejected by JAX's shape checks.

Why a solver picks the shapes: the bugs shape polymorphism hides live at the edges
(``b == 1`` evaluated as False while tracing, ``mod(b, 3) == 0``, ``a == b`` under
``a >= b``); hand-picked "two shapes" rarely hit them.

A function that JAX refuses to export is a failed check, not an exception: the report's
``export`` check fails and :class:`ExportFailure` carries JAX's message, smtdims'
witnesses (valuations on either side of an inconclusive comparison), and a fix that was
re-exported to verify it (the constraint smtdims suggests, or for a reshape's "The
remainder mod(b, -2) should be 0" the spec rewrite ``2*b`` for ``b``). Bad arguments
(specs, dtypes) still raise. On the command line (:mod:`smtdims_jax.pipeline_cli`): exit status 0
all checks passed, 1 a check failed (the export included), 2 usage or input error.

With ``fix=True`` a failed export gets its whole fix (:mod:`.fixes`): fix, re-export,
repeat, minimise, verify end to end, measured against native runs at shapes chosen by
reasoning (:mod:`.box`); ``dims="auto"`` starts from example inputs (:mod:`.auto`). Failed
samples are diagnosed (:mod:`.diagnose`).

The verification process starts when a call starts (its JAX import, 1.5-2 s, overlaps the export);
a script that builds its model first can start it earlier with :func:`prestart` right after this
import, so that the model's build hides it too (``smtdims export`` does so before it imports JAX).

The steps, one module each: :mod:`.specs` (argument specs -> one scope, checked by
smtdims first), :mod:`.platforms` (platform names, the local backend), :mod:`.verify`
(the pipeline), :mod:`.samples` (solver-chosen shapes), :mod:`.compare` (inputs and
outputs), :mod:`.fresh` (the fresh process; ``_verify_worker.py`` runs there),
:mod:`.failure` (a failed export's reading and first fix), :mod:`.attempt` (one export of a
specification, read), :mod:`.job` (the export job the steps take, and the fix it builds),
:mod:`.fixes` (the whole fix's loop), :mod:`.verdict` (the fix's words and its verdict),
:mod:`.result` (its values), :mod:`.box` (native traces at chosen shapes), :mod:`.auto`
(``dims="auto"``), :mod:`.diagnose` (failed samples), :mod:`.report` (the report).
"""

from __future__ import annotations

from .compare import compare_outputs, random_input
from .diagnose import SampleDiagnosis
from .entry import export_and_verify
from .failure import describe_export_error
from .fresh import Device, keep_off_accelerator, prestart, run_fresh_process
from .platforms import BackendUnavailable, PlatformError
from .refusals import FixPart
from .report import FAIL, PASS, SKIP, Check, ExportFailure, RejectionCheck, SampleResult, VerificationReport
from .result import FixResult, FixRound
from .samples import MAX_ELEMENTS, SAMPLE_BYTES, SampleChooser
from .specs import SPEC_RE, as_dtype, build_specs, check_specs, parse_arg_spec  # noqa: F401 - the CLI reads the spec grammar here
from .verify import VerifyOptions, verify_artifact

__all__ = [
    "FAIL", "MAX_ELEMENTS", "PASS", "SAMPLE_BYTES", "SKIP", "BackendUnavailable", "Check", "Device", "ExportFailure",
    "FixPart", "VerifyOptions", "keep_off_accelerator", "prestart", "verify_artifact",
    "FixResult", "FixRound", "PlatformError", "RejectionCheck", "SampleChooser", "SampleDiagnosis", "SampleResult",
    "VerificationReport", "build_specs", "compare_outputs", "describe_export_error", "export_and_verify",
    "parse_arg_spec", "random_input", "run_fresh_process",
]

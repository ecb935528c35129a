"""The whole fix over verification: the fix loop above the pipeline, which it calls as its check.

:mod:`.verify` exports, samples, runs on the device, judges and reports; it knows nothing of fixes. Here a
report that failed (JAX refused the export, or samples failed where the function fails too) gets its
whole fix: the rounds and the minimisation (:func:`.fixes.search`), then the fixed specification verified
end to end by :func:`.verify.verify`, the exclusion of natively failing samples added while there is one
(:func:`.verdict.exclude`), then the verdict (:func:`.verdict.conclude`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from ._common import Progress, solver_budget
from .attempt import Attempt
from .diagnose import load_bounds
from .failure import settled_by
from .fixes import VERIFY_ROUNDS, search
from .fresh import off_accelerator, release_exclusive, slow_load
from .job import ExportJob, FixDraft
from .refusals import FixPart
from .report import VerificationReport
from .result import FIXED, FixResult, FixRound, group_text
from .specs import x64_on
from .verdict import conclude, exclude, exclusion, pinned_where_paths_differ
from .verify import Verified, VerifyOptions, example_valuations, prepared, verify


def export_checked(fn: Callable[..., Any], arg_specs: Sequence[Any], constraints: Sequence[str], opts: VerifyOptions,
                   say: Progress) -> VerificationReport:
    """The pipeline on ``fn`` at ``arg_specs`` (:func:`.verify.verify`) and, with ``opts.fix``, the whole fix
    of a failure it reports, in its ``fix``."""
    opts, specs, scope, specialised, x64 = prepared(fn, arg_specs, constraints, opts)
    try:
        with off_accelerator(), x64_on() if x64 else contextlib.nullcontext(), solver_budget(opts.budget):
            got = verify(fn, specs, scope, specialised, opts, say, x64)
            return with_fix(got, opts) if opts.fix is not None else got.report
    finally:
        release_exclusive()  # a TPU held by the verification process goes back to the program


def with_fix(got: Verified, opts: VerifyOptions) -> VerificationReport:
    """``got``'s report with the whole fix of its failure: a refused export's (its first round the refusal),
    or that of samples which fail where the function fails too (from the diagnosis's exclusion)."""
    report = got.report
    if got.refused is not None:
        whole = whole_fix(got.job, opts, got.x64, replace(opts, fix=None), first=got.refused)
        assert report.export_error is not None
        return replace(report, fix=whole, export_error=settled_by(report.export_error, whole))
    if report.not_run and slow_load(report.not_run):
        return replace(report, fix=fix_from_load(got.job, opts, got.x64))
    d = report.diagnosis
    if d is None or not ((d.native_fails and d.constraints) or (d.artifact_only and d.audit)):
        return report
    return replace(report, fix=fix_from_samples(got.job, opts, got.x64, d))


def fix_from_load(job: ExportJob, opts: VerifyOptions, x64: bool) -> FixResult | None:
    """The export succeeded but stock JAX did not load it in time (:func:`.fresh.slow_load`): the whole fix
    starts from the lower bounds under which its shapes are plain (:func:`.diagnose.load_bounds`)."""
    return _fix_from(job, opts, x64, load_bounds(job, job.spec(), limited=False),
                     "stock JAX does not load the export in time")


def fix_from_samples(job: ExportJob, opts: VerifyOptions, x64: bool, diagnosis: Any) -> FixResult | None:
    """The export succeeded but samples fail where the function itself fails: the whole fix starts from
    the diagnosis's exclusion (as a spec rewrite where it is a divisibility of a spec variable) and the
    same loop as a failed export's verifies it, adding exclusions until it verifies (:func:`whole_fix`)."""
    found = exclusion(job, diagnosis, job.spec(), limited=False) or pinned_where_paths_differ(
        job, diagnosis, job.spec(), limited=False)
    return _fix_from(job, opts, x64, found, "the export succeeds but samples fail")


def _fix_from(job: ExportJob, opts: VerifyOptions, x64: bool, found: tuple[list[FixPart], Any, str] | None,
              what: str) -> FixResult | None:
    """The whole fix of an export that succeeded, from the parts ``found`` (with why), or None without."""
    if found is None:
        return None
    group, _, why = found
    job.say(f"fix: {what}; {group_text(group)}")
    # the export as given was written to ``out`` already: the fixed one is verified, not written over it
    return whole_fix(job, opts, x64, replace(opts, fix=None, out=None), start=group,
                     start_round=FixRound(why, ((group_text(group), 0, 0, 0),), tuple(group), 0.0))


def whole_fix(job: ExportJob, opts: VerifyOptions, x64: bool, checked: VerifyOptions, *, first: Attempt | None = None,
              start: Sequence[FixPart] = (), start_round: FixRound | None = None) -> FixResult:
    """The whole fix, one path: the rounds and the minimisation (:func:`.fixes.search`), then the fixed
    specification through the pipeline (``checked``: its options), the exclusion of natively failing
    samples added while there is one (:func:`.verdict.exclude`), then the verdict (:func:`.verdict.conclude`)."""
    fx = opts.fix
    assert fx is not None
    spec = job.spec()  # the user's examples in its variables: traced first, and a pinned size is pinned there
    job = replace(job, examples=tuple(example_valuations(spec.dims, spec.constraint_set(), opts.examples)))
    job, draft = search(job, fx, first=first, start=start, start_round=start_round)
    for _pass in range(VERIFY_ROUNDS):
        if draft.status != FIXED:
            break
        verify_fixed(job, draft, checked, x64)
        if draft.verified or not exclude(job, draft, draft.report):
            break
    return conclude(job, draft)


def verify_fixed(job: ExportJob, draft: FixDraft, opts: VerifyOptions, x64: bool) -> None:
    """The fix loop's check: the fixed specification through the whole pipeline, with the export the loop
    made where it is of this specification (no second export); recorded in the draft."""
    job.say("fix: verifying the fixed specification end to end")
    specs, scope = draft.spec.build(job.in_tree)
    t0 = time.perf_counter()
    report = verify(job.fn, specs, scope, [], opts, job.say, x64, draft.exported()).report
    draft.verified_by(report, time.perf_counter() - t0)


__all__ = ["export_checked", "fix_from_load", "fix_from_samples", "verify_fixed", "whole_fix", "with_fix"]

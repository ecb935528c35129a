"""The report: what :func:`~smtdims_jax.pipeline.export_and_verify` checked, as data, a table and JSON."""

from __future__ import annotations

import dataclasses
import textwrap
from dataclasses import dataclass, field
from typing import Any

from smtdims.answers.fixes import Fix
from smtdims.errors import format_valuation

# -- report ------------------------------------------------------------------------------------------
PASS, FAIL, SKIP = "pass", "fail", "skip"


@dataclass(frozen=True)
class Check:
    """One line of the checklist: ``status`` is ``"pass"``, ``"fail"`` or ``"skip"``."""

    name: str
    status: str
    detail: str = ""


@dataclass(frozen=True)
class SampleResult:
    """One solver-chosen shape run through the artifact and JAX's own run of the function (the reference).

    ``status``: ``"pass"``, ``"fail"`` (the artifact or the function failed there, or they differ) or
    ``"skip"`` (not run: ``detail`` says why; a sample that did not run is no verdict on the artifact).
    ``native_s``: the reference's run time on the device.
    """

    index: int
    valuation: dict[str, int]
    shapes: tuple[tuple[int, ...], ...]
    why: tuple[str, ...]
    status: str  # pass | fail | skip
    detail: str = ""
    native_s: float | None = None
    compile_s: float | None = None
    run_s: float | None = None


@dataclass(frozen=True)
class RejectionCheck:
    """A shape provably outside the specification, and how the artifact refused it.

    ``how``: ``"shape assertion"`` (JAX's "Input shapes do not match ..." error),
    ``"shape refinement"`` (refused while refining shapes, before the assertion was
    reached; deserialized artifacts of jax 0.10.2 carry no explicit constraints for the
    Python-side check), ``"other error"`` or ``"accepted"``; the first two pass.
    """

    shapes: tuple[tuple[int, ...], ...]
    why: str
    status: str  # pass | fail | skip
    how: str = ""
    error: str = ""


@dataclass(frozen=True)
class ExportFailure:
    """Why ``jax.export`` refused the function: JAX's message and smtdims' reading of it.

    ``witnesses``: smtdims' valuations on either side of an inconclusive comparison (as
    text; ``valuations`` the same as dicts). ``fix``: the first fix smtdims verified for
    that comparison, or for a reshape's "remainder ... should be 0" a spec rewrite such as
    writing ``2*b`` for ``b`` (``suggested_fix``: the same as a value, which the whole fix's
    first round is compared with). ``fix_verified``: True when exporting again with the fix
    succeeded, False when the export still failed (``fix_detail`` says how), None when
    not tried (then the fix is a suggestion only).
    """

    type: str
    message: str
    smtdims: tuple[str, ...] = ()  # smtdims' lines of the error message, verbatim
    witnesses: tuple[str, ...] = ()
    valuations: tuple[dict[str, int], ...] = ()
    location: str = ""
    fix: str = ""
    fix_kind: str = ""  # "constraint" | "spec" | ""
    fix_verified: bool | None = None
    fix_detail: str = ""
    fixed_specs: tuple[str, ...] = ()  # the in_avals with a spec fix applied
    fixed_constraints: tuple[str, ...] = ()  # the constraints with the fix applied
    suggested_fix: Fix | None = None


@dataclass(frozen=True)
class VerificationReport:
    """What :func:`export_and_verify` checked; ``ok`` (verified) only when everything ran and passed.

    ``ran_in``: where the samples ran (``"fresh process"``, or ``"this process"`` when it held the
    device); ``not_run``: why they did not run ("" when they did); ``tolerances``: the float
    tolerance used per dtype, with its reason.
    """

    function: str
    platforms: tuple[str, ...]
    constraints: tuple[str, ...]
    in_avals: tuple[str, ...]
    out_avals: tuple[str, ...]
    checks: tuple[Check, ...]
    samples: tuple[SampleResult, ...]
    rejections: tuple[RejectionCheck, ...]
    artifact_bytes: int = 0
    artifact_path: str | None = None
    device: str = ""
    worker_jax: str = ""
    export_error: ExportFailure | None = None  # set when the export failed (then nothing else ran)
    fix: Any = None  # a FixResult (pipeline.fixes) when the whole fix was asked for (fix=True)
    diagnosis: Any = None  # a SampleDiagnosis (pipeline.diagnose) when samples failed
    exported: Any = field(default=None, repr=False, compare=False)  # the jax.export.Exported
    exception: BaseException | None = field(default=None, repr=False, compare=False)  # the export's error
    ran_in: str = ""
    not_run: str = ""
    tolerances: tuple[str, ...] = ()
    title: str = ""  # the table's first line ("" : "smtdims export check of FUNCTION")

    @property
    def verified(self) -> bool:
        """The same as :attr:`ok`: exported, run on the device beside JAX's own run, every check passed."""
        return self.ok

    @property
    def ok(self) -> bool:
        return (
            all(c.status != FAIL for c in self.checks)
            and bool(self.samples)
            and all(s.status == PASS for s in self.samples)
            and all(r.status != FAIL for r in self.rejections)
        )

    @property
    def failures(self) -> list[str]:
        """One line per failed (or not run) check, sample or rejection."""
        out = [f"{c.name}: {c.detail}" for c in self.checks if c.status == FAIL and c.name != "samples"]
        if self.not_run and self.samples:  # one cause for every sample: said once
            out.append(f"samples: all {len(self.samples)} not run: {self.not_run}")
        out += [
            f"sample {s.index} ({format_valuation(s.valuation)}): {'not run' if s.status == SKIP else s.status}: "
            + (s.detail[len("not run: "):] if s.detail.startswith("not run: ") else s.detail)
            for s in self.samples if s.status != PASS and not self.not_run
        ]
        out += [f"outside spec {', '.join(map(str, r.shapes))}: {r.how}: {first_line(r.error, 300)}"
                for r in self.rejections if r.status == FAIL]
        return out

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(dataclasses.replace(self, exported=None, exception=None, fix=None, diagnosis=None))
        d["diagnosis"] = self.diagnosis.to_dict() if self.diagnosis is not None else None
        d.pop("exported", None)
        d.pop("exception", None)
        d["fix"] = self.fix.to_dict() if self.fix is not None else None
        if d["export_error"] is not None:  # JSON has the fix in words and kind (fix, fix_kind); the value is the loop's
            d["export_error"].pop("suggested_fix")
        d["ok"] = self.ok
        for s in d["samples"]:
            s["shapes"] = [list(x) for x in s["shapes"]]
            s["why"] = list(s["why"])
        for r in d["rejections"]:
            r["shapes"] = [list(x) for x in r["shapes"]]
        for k in ("platforms", "constraints", "in_avals", "out_avals", "checks", "samples", "rejections", "tolerances"):
            d[k] = list(d[k])
        return d

    def __str__(self) -> str:
        return self.table()

    def verdict(self) -> str:
        """One line, first in the table: verified, fixed, failed or not verified, and why."""
        short = self.function.split(":")[-1]
        if self.fix is not None and self.fix.ok:
            fix = self.fix
            if any(p.kind == "spec" for p in fix.parts):  # rewrites: the specification to write, not the steps
                what = f"write {', '.join(fix.in_avals)}" + (f" with {', '.join(fix.constraints)}" if fix.constraints else "")
            else:
                what = "; ".join(str(p) for p in fix.parts)
            if fix.status != "fixed":  # verified, but it excludes shapes where the function runs: said first
                return f"FIX FOUND, NARROWER THAN NEEDED: {what} (verified end to end; {fix.detail})"
            excluded = "; ".join(f"it excludes {n} traced shape(s) where {short} runs, e.g. {format_valuation(env)}: {why}"
                                 for why, n, env in fix.excluded)
            return f"FIXED: {what} (verified end to end" + (f"; {excluded})" if excluded else ")")
        if self.fix is not None and self.fix.status == "no symbolic family":
            return f"NO SYMBOLIC FIX: {self.fix.detail}"
        if self.export_error is not None:
            return f"FAILED: the export failed ({self.export_error.type})"
        if self.not_run:
            return f"NOT VERIFIED: the samples did not run: {self.not_run}"
        if self.ok:
            n = len(self.samples)
            where = f" on {_device_words(self.device)}" if self.device else ""
            return (f"VERIFIED{where}: {n}/{n} sample shapes match jax.jit({short}); "
                    f"{len(self.rejections)} outside-spec shape(s) rejected")
        bad = [s for s in self.samples if s.status == FAIL]
        if bad:
            return f"FAILED: {len(bad)}/{len(self.samples)} sample(s) differ from or fail where jax.jit({short}) runs"
        unrun = [s for s in self.samples if s.status == SKIP]
        if unrun:
            return f"NOT VERIFIED: {len(unrun)}/{len(self.samples)} sample(s) did not run"
        return "FAILED: " + (self.failures[0] if self.failures else "a check failed")

    def table(self, verbose: bool = False) -> str:
        """The report for a terminal: the verdict and the fix first, lines within 100 columns (``verbose``:
        every check's detail and each sample's reasons in full)."""
        def t(x: float | None) -> str:
            return "-" if x is None else f"{x:.3f}s"

        lines = [self.title or f"smtdims export check of {self.function}", *_wrap(self.verdict(), "  ")]
        fixed = self.fix is not None and self.fix.ok
        if fixed:  # the answer first: what to write, verified; the failed export as specified follows
            lines.append("    " + self.fix.command())  # pasted, not read: whole
        head = [
            ("platforms", ", ".join(self.platforms)),
            ("constraints", ", ".join(self.constraints) or "none"),
            ("in_avals", ", ".join(self.in_avals)),
            ("out_avals", ", ".join(self.out_avals) or "-"),
            ("artifact", "none (the export failed)" if self.export_error else
             f"{self.artifact_bytes} bytes" + (f" -> {self.artifact_path}" if self.artifact_path else "")),
            ("ran on", self._ran_on()),
        ]
        for k, v in head:
            lines += _wrap(v, f"  {k:<12}", " " * 14)
        for tol in self.tolerances:
            lines += _wrap(tol, f"  {'tolerance':<12}", " " * 14)
        if self.export_error is not None:
            lines.append("")
            for ln in self._error_lines():
                indent = ln[: len(ln) - len(ln.lstrip())]
                lines += _wrap(ln.strip(), indent, indent + "  ")
        if self.fix is not None:
            lines += [""]
            pasted = {*self.fix.code().splitlines(), self.fix.command()} if self.fix.parts else set()
            for ln in self.fix.lines():
                indent = "  " + ln[: len(ln) - len(ln.lstrip())]
                # code and commands stay whole: they are pasted, not read
                lines += [indent + ln.strip()] if ln.strip() in pasted else _wrap(ln.strip(), indent, indent + "  ")
        rows = [("#", "valuation", "input shapes", "chosen for", "compile", "run", "result")]
        for s in self.samples:
            shapes = ", ".join(str(x) for x in s.shapes)
            rows.append((str(s.index), format_valuation(s.valuation), shapes,
                         ", ".join(s.why) if verbose else _chosen_for(s.why),
                         t(s.compile_s), t(s.run_s), {PASS: "pass", FAIL: "FAIL", SKIP: "not run"}.get(s.status, s.status)))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        if self.samples:
            lines.append("")
            for r in rows:
                lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
        for r in self.rejections:
            lines += _wrap(f"{', '.join(str(x) for x in r.shapes)}: {r.why}", "  outside spec  ", " " * 16)
            got = {PASS: f"rejected by {r.how}", SKIP: "not run"}.get(r.status, r.how.upper())
            lines += _wrap(got + (f": {first_line(r.error, 300 if verbose else 110)}" if r.error else ""),
                           " " * 16 + "-> ", " " * 19)
        if verbose and any(r.how == "shape refinement" for r in self.rejections):
            lines += _wrap("(a deserialized artifact keeps its shape assertions in the module but not the scope's "
                           "explicit constraints, so JAX may refuse such shapes while refining them, before the "
                           "assertion reports)", "  ")
        lines.append("")
        lines += _wrap(" | ".join(f"{c.name} {c.status}" for c in self.checks), "  checks: ", " " * 10)
        if verbose:
            lines += [ln for c in self.checks if c.detail for ln in _wrap(c.detail, f"    {c.name}: ", " " * 6)]
        fails = self.failures
        if fails:
            if fixed:
                lines += _wrap("; ".join(first_line(f, 160) for f in fails), "  as specified: ", " " * 4)
                label = "  FIXED: " if self.fix.status == "fixed" else "  FIX FOUND (narrower than needed): "
                lines += _wrap(f"with {self.fix.cli()} every check passes (the whole fix above)", label, " " * 4)
            else:
                lines.append("  FAILED:" if not self.not_run else "  NOT VERIFIED:")
                for f in fails[:8] if not verbose else fails:
                    lines += _wrap(f if verbose else first_line(f, 300), "    ", "      ")
                if len(fails) > 8 and not verbose:
                    lines.append(f"    ... and {len(fails) - 8} more (--verbose, or --json)")
            if self.diagnosis is not None:
                lines.append("  why:")
                for ln in self.diagnosis.lines(self.function.split(":")[-1]):
                    lines += _wrap(ln, "    ", "      ")
        else:
            n = len(self.samples)
            lines.append(f"  OK: {n}/{n} sample shapes match jax.jit({self.function.split(':')[-1]}); "
                         f"{len(self.rejections)} outside-spec shape(s) rejected")
        return "\n".join(lines)

    def _ran_on(self) -> str:
        if self.not_run:
            return f"not run: {self.not_run}"
        if not self.device:
            return "not run"
        if self.ran_in == "this process":
            return f"{_device_words(self.device)} (this process holds it; smtdims uninstalled for the run)"
        return f"{_device_words(self.device)} (fresh process, stock jax {self.worker_jax}, beside jax.jit of the function)"

    def _error_lines(self) -> list[str]:
        e = self.export_error
        assert e is not None
        out = [f"  export failed: {e.type}"]
        out += [f"    {ln}" for ln in e.message.splitlines()]
        out += [f"    {ln}" for ln in e.smtdims if not ln.startswith("smtdims: suggested fix")]
        if e.fix:
            how = {True: "verified: the export succeeds with it", False: f"the export still fails with it: {e.fix_detail}",
                   None: f"a suggestion, not re-exported{': ' + e.fix_detail if e.fix_detail else ''}"}[e.fix_verified]
            out.append(f"    fix: {e.fix}")
            out.append(f"         ({how})")
            if e.fix_kind == "spec" and e.fixed_specs:
                out.append(f"         in_avals would be {', '.join(e.fixed_specs)}"
                           + (f"; constraints {', '.join(e.fixed_constraints)}" if e.fixed_constraints else ""))
            elif e.fixed_constraints:
                out.append(f"         constraints would be {', '.join(e.fixed_constraints)}")
            if e.fix_verified is False and self.fix is None:
                out.append("    (smtdims export --fix, or export_and_verify(..., fix=True), iterates to the whole fix)")
        return out


CHOSEN_FOR_WIDTH = 28  # the table's "chosen for" column (--verbose and to_dict() keep every reason)


def _chosen_for(why: list[str] | tuple[str, ...], width: int = CHOSEN_FOR_WIDTH) -> str:
    """The reasons a sample was chosen, as many whole ones as fit in ``width`` then ``(+N more)``
    (a sample that covers many goals would make the column 230 characters wide)."""
    out = ""
    for i, reason in enumerate(why):
        more = f" (+{len(why) - i} more)" if i else ""
        text = f"{out}, {reason}" if out else reason
        rest = f" (+{len(why) - i - 1} more)" if i + 1 < len(why) else ""
        if len(text) + len(rest) > width:
            if not out:  # even the first one is too long: cut it
                cut = width - len(rest) - 3
                return reason[:max(cut, 8)] + "..." + rest
            return out + more
        out = text
    return out


def _device_words(device: str) -> str:
    """``"tpu: TPU v5 lite"`` as ``tpu (TPU v5 lite)``, ``"cpu: cpu"`` as ``cpu``."""
    platform, _, kind = device.partition(": ")
    return platform if not kind or kind.lower() == platform.lower() else f"{platform} ({kind})"


WIDTH = 100  # the terminal the table is written for


def _wrap(text: str, first: str, rest: str | None = None, width: int = WIDTH) -> list[str]:
    """``text`` after ``first`` in lines of at most ``width`` columns, continued under ``rest`` (a word longer
    than a line, a path, stays whole)."""
    rest = " " * len(first) if rest is None else rest
    return textwrap.wrap(text, width, initial_indent=first, subsequent_indent=rest, break_long_words=False,
                         break_on_hyphens=False) or [first.rstrip()]


def first_line(text: str, limit: int = 160) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


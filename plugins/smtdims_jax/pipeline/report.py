"""The report: what :func:`~smtdims_jax.pipeline.export_and_verify` checked, as data, a table and JSON."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

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
    """One solver-chosen shape run through the artifact and the native function."""

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
    writing ``2*b`` for ``b``. ``fix_verified``: True when exporting again with the fix
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


@dataclass(frozen=True)
class VerificationReport:
    """What :func:`export_and_verify` checked; ``ok`` only when everything ran and passed."""

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
        out += [
            f"sample {s.index} ({format_valuation(s.valuation)}): {s.status}: {s.detail}"
            for s in self.samples if s.status != PASS
        ]
        out += [f"outside spec {', '.join(map(str, r.shapes))}: {r.how}: {_first_line(r.error, 300)}"
                for r in self.rejections if r.status == FAIL]
        return out

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(dataclasses.replace(self, exported=None, exception=None, fix=None, diagnosis=None))
        d["diagnosis"] = self.diagnosis.to_dict() if self.diagnosis is not None else None
        d.pop("exported", None)
        d.pop("exception", None)
        d["fix"] = self.fix.to_dict() if self.fix is not None else None
        d["ok"] = self.ok
        for s in d["samples"]:
            s["shapes"] = [list(x) for x in s["shapes"]]
            s["why"] = list(s["why"])
        for r in d["rejections"]:
            r["shapes"] = [list(x) for x in r["shapes"]]
        for k in ("platforms", "constraints", "in_avals", "out_avals", "checks", "samples", "rejections"):
            d[k] = list(d[k])
        return d

    def __str__(self) -> str:
        return self.table()

    def table(self) -> str:
        def t(x: float | None) -> str:
            return "-" if x is None else f"{x:.3f}s"

        lines = [f"smtdims export check of {self.function}"]
        fixed = self.fix is not None and self.fix.ok
        if fixed:  # the answer first: what to write, verified; the failed export as specified follows
            lines.append(f"  FIXED: {'; '.join(str(p) for p in self.fix.parts)} (verified end to end)")
            lines.append(f"    {self.fix.command()}")
        head = [
            ("platforms", ", ".join(self.platforms)),
            ("constraints", ", ".join(self.constraints) or "none"),
            ("in_avals", ", ".join(self.in_avals)),
            ("out_avals", ", ".join(self.out_avals) or "-"),
            ("artifact", "none (the export failed)" if self.export_error else
             f"{self.artifact_bytes} bytes" + (f" -> {self.artifact_path}" if self.artifact_path else "")),
            ("ran on", f"{self.device} (fresh process, stock jax {self.worker_jax})" if self.device else "not run"),
        ]
        lines += [f"  {k:<12}{v}" for k, v in head]
        if self.export_error is not None:
            lines += ["", *self._error_lines()]
        if self.fix is not None:
            lines += ["", *("  " + ln for ln in self.fix.lines())]
        rows = [("#", "valuation", "input shapes", "chosen for", "compile", "run", "result")]
        for s in self.samples:
            shapes = ", ".join(str(x) for x in s.shapes)
            rows.append((str(s.index), format_valuation(s.valuation), shapes, _chosen_for(s.why),
                         t(s.compile_s), t(s.run_s), s.status.upper() if s.status != PASS else s.status))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        if self.samples:
            lines.append("")
            for r in rows:
                lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
        for r in self.rejections:
            lines.append(f"  outside spec  {', '.join(str(x) for x in r.shapes)}: {r.why}")
            got = {PASS: f"rejected by {r.how}", SKIP: "not run"}.get(r.status, r.how.upper())
            lines.append(f"                -> {got}" + (f": {_first_line(r.error, 110)}" if r.error else ""))
        if any(r.how == "shape refinement" for r in self.rejections):
            lines.append("  (a deserialized artifact keeps its shape assertions in the module but not the scope's explicit "
                         "constraints, so JAX may refuse such shapes while refining them, before the assertion reports)")
        lines.append("")
        lines.append("  checks: " + " | ".join(f"{c.name} {c.status}" for c in self.checks))
        fails = self.failures
        if fails:
            if fixed:
                lines.append("  as specified: " + "; ".join(_first_line(f, 160) for f in fails))
                lines.append(f"  FIXED: with {self.fix.cli()} every check passes (the whole fix above)")
            else:
                lines.append("  FAILED:")
                lines += [f"    {f}" for f in fails]
            if self.diagnosis is not None:
                lines.append("  why:")
                lines += [f"    {ln}" for ln in self.diagnosis.lines(self.function.split(":")[-1])]
        else:
            n = len(self.samples)
            lines.append(f"  OK: {n}/{n} sample shapes match native {self.function.split(':')[-1]}; "
                         f"{len(self.rejections)} outside-spec shape(s) rejected")
        return "\n".join(lines)

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


CHOSEN_FOR_WIDTH = 48  # the table's "chosen for" column; to_dict() keeps every reason


def _chosen_for(why: list[str] | tuple[str, ...], width: int = CHOSEN_FOR_WIDTH) -> str:
    """The reasons a sample was chosen, as many whole ones as fit in ``width`` then ``(+N more)``
    (a sample that covers many goals made the column 230 characters wide, issue 29)."""
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


def _first_line(text: str, limit: int = 160) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


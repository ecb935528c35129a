"""The whole fix's values: how it ended (a status), each round, and the fix as a person writes it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from smtdims.errors import format_valuation

from .box import BoxCount
from .refusals import FixPart, Why
from .report import first_line
from .specs import jax_form

NOT_NEEDED, FIXED, NO_FIX, ROUND_LIMIT, DEADLINE = "not needed", "fixed", "no fix found", "round limit", "deadline"
NOT_VERIFIED = "found, not verified"  # the export succeeds with the fix, but its end-to-end verification did not pass
# verified end to end, but it excludes traced shapes where the function runs on non-empty arrays
NARROW = "found, narrower than needed"
# the export succeeds only with every size fixed: no specification with a symbolic size exports it
NO_SYMBOLIC = "no symbolic family"


def group_text(parts: Sequence[FixPart]) -> str:
    """A group of parts as the rounds' record writes it (a candidate's words, the chosen ones')."""
    return "; ".join(str(p) for p in parts)


# -- value objects --------------------------------------------------------------------------------
@dataclass(frozen=True)
class FixRound:
    """One round: the error, the verified candidates with their box scores, the parts chosen (as values:
    a failed export's first fix is compared with them, not with their words)."""

    error: str
    # (fix, admitted shapes that run natively, admitted that fail, admitted that run with non-empty outputs)
    candidates: tuple[tuple[str, int, int, int], ...]
    parts: tuple[FixPart, ...]
    seconds: float
    location: str = ""  # the line of the user's code the refusal arose at ("" where none is the user's)

    @property
    def chosen(self) -> str:
        """The chosen parts as the record writes them ("" where none was found)."""
        return group_text(self.parts)

    def to_dict(self) -> dict[str, Any]:
        return {"error": self.error, "chosen": self.chosen, "seconds": round(self.seconds, 3), "location": self.location,
                "candidates": [{"fix": f, "admitted_ok": ok, "admitted_failing": bad, "admitted_nonempty": ne}
                               for f, ok, bad, ne in self.candidates]}


@dataclass(frozen=True)
class FixResult:
    """The whole fix of a failed export, as the user would write it, with how it was found and checked.

    ``status``: ``"fixed"`` (the export succeeds with ``parts``, the fixed specification verified
    end to end, and it admits every traced shape where the function runs on non-empty arrays that the
    original specification admitted, apart from sizes the fix must pin), ``"found, narrower than
    needed"`` (verified, but it excludes such shapes: ``box.excluded_ok`` has examples), ``"found, not
    verified"`` (the export succeeds with ``parts``, but the verification failed or could not run:
    ``detail`` says which), ``"no symbolic family"`` (the export succeeds only with every size fixed:
    ``detail`` says which refusal and where), ``"no fix found"``, ``"round limit"``, ``"deadline"`` or
    ``"not needed"``.
    ``verified``: the whole pipeline passed with the fixed specification (None: not run). ``box``: the fixed
    specification measured against native runs on small shapes.
    """

    status: str
    detail: str
    parts: tuple[FixPart, ...]
    in_avals: tuple[str, ...]
    shapes: tuple[str, ...]  # the symbolic_shape text of each input
    constraints: tuple[str, ...]
    rounds: tuple[FixRound, ...]
    dropped: tuple[str, ...] = ()  # parts the minimisation removed
    box: BoxCount | None = None
    verified: bool | None = None
    verification: tuple[str, ...] = ()  # the final pipeline's checks, one line each
    function: str = ""
    seconds: float = 0.0
    report: Any = field(default=None, repr=False, compare=False)  # the final VerificationReport
    target: str = ""  # MODULE:FUNCTION or path/file.py:FUNCTION for `smtdims export`; "" if none names it
    # the fix's edges measured natively: (valuation, runs natively, the fix admits it); t = 512 and t = 513
    extremes: tuple[tuple[dict[str, int], bool, bool], ...] = ()  # (valuation, runs natively, admitted)
    extremes_nonempty: tuple[bool, ...] = ()  # each edge computes on something natively (empty arrays only: False)
    stock: bool | None = None  # stock JAX exports with the fix too (None: not tried); code() says so
    platforms: tuple[str, ...] | None = None  # the platforms exported for (None: the default one)
    # where the time went: (what, how many, seconds): native traces, exports, the verification
    timing: tuple[tuple[str, int, float], ...] = ()
    # traced shapes a "fixed" fix excludes although the function runs there, and why (a part's reason: the
    # size used as a number, another branch, another solution of the equation): (why, how many, one of them)
    excluded: tuple[tuple[str, int, dict[str, int]], ...] = ()
    # each traced shape the original specification admits: its native verdict and the fix's admission
    # (:class:`.picture.TracedShape`; what report.plot() draws)
    traced: tuple[Any, ...] = field(default=(), repr=False, compare=False)

    @property
    def ok(self) -> bool:
        """The fixed specification exports and verified end to end (a narrower one too: it says so)."""
        return self.status in (FIXED, NARROW) and self.verified is True

    def code(self) -> str:
        """Ready-to-paste ``jax.export`` code for the fixed specification."""
        name = self.function.split(":")[-1].split(".")[-1]
        name = name if name.isidentifier() else "f"  # a lambda: name it
        cons = repr(tuple(jax_form(c) for c in self.constraints))  # JAX's rule form for an equality
        plats = f", platforms={tuple(self.platforms)!r}" if self.platforms else ""
        lines = ["import jax", "import jax.numpy as jnp", "from jax import export"]
        if self.stock is False:
            lines += ["import smtdims", "smtdims.install()  # stock JAX does not export with this fix: smtdims proves it"]
        if len(self.shapes) == 1:
            dt = self.in_avals[0].split("[")[0]
            lines.append(f"spec = jax.ShapeDtypeStruct(export.symbolic_shape({self.shapes[0]!r}, constraints={cons}), "
                         f"jnp.{dt})")
            lines.append(f"exp = export.export(jax.jit({name}){plats})(spec)")
        else:
            lines.append(f"scope = export.SymbolicScope({cons})")
            for i, (s, a) in enumerate(zip(self.shapes, self.in_avals, strict=True)):
                lines.append(f"x{i} = jax.ShapeDtypeStruct(export.symbolic_shape({s!r}, scope=scope), jnp.{a.split('[')[0]})")
            lines.append(f"exp = export.export(jax.jit({name}){plats})({', '.join(f'x{i}' for i in range(len(self.shapes)))})")
        lines.append(f"# or: export.symbolic_args_specs(args, {list(self.shapes)!r}, constraints={cons})")
        return "\n".join(lines)

    def cli(self) -> str:
        """The same fix as ``smtdims export`` arguments."""
        return " ".join([*(f'--spec "{a}"' for a in self.in_avals), *(f'-c "{c}"' for c in self.constraints)])

    def command(self) -> str:
        """The whole ``smtdims export`` command, ready to paste (``MODULE:FUNCTION`` where one can be named)."""
        return f"smtdims export {self.target or 'MODULE:FUNCTION'} {self.cli()}"

    def lines(self) -> list[str]:
        spent = "; ".join(f"{n} {what} {t:.1f}s" if n else f"{what} {t:.1f}s" for what, n, t in self.timing)
        out = [f"whole fix: {self.status}" + (f" ({self.detail})" if self.detail else "")
               + f", {len(self.rounds)} round(s), {self.seconds:.1f}s" + (f" ({spent})" if spent else "")]
        for i, r in enumerate(self.rounds, 1):
            out.append(f"  round {i}: {first_line(r.error, 140)}")
            for f, ok, bad, ne in r.candidates[:4]:
                mark = "->" if f == r.chosen else "  "
                failing = f", {bad} native-failing" if bad else ""
                out.append(f"    {mark} {f}  [admits {ok} native-ok ({ne} non-empty){failing} traced shapes]")
        if self.dropped:
            out.append(f"  minimised: dropped {'; '.join(self.dropped)}")
        if self.parts:
            label = {FIXED: "the fix", NARROW: "the fix found (verified; NARROWER than needed: see the count below)",
                     NOT_VERIFIED: "the fix found (the export succeeds with it; NOT verified)"}.get(
                self.status, "partial fix (the export still fails with it)")
            out.append(f"  {label}: " + "; ".join(str(p) for p in self.parts))
            # a size pinned where the program needs a number says which size, and whether it was a choice
            out += [f"    ({p.note})" for p in self.parts if p.why == Why.NUMBER and p.note]
            out.append(f"  in_avals {', '.join(self.in_avals)}; constraints {', '.join(self.constraints) or 'none'}")
            if self.status in (FIXED, NARROW, NOT_VERIFIED):  # a command and code only where the export succeeds
                out.append(f"  {self.command()}")
                if not self.target:
                    out.append("  (MODULE:FUNCTION: the function is a lambda or local; define it at module level to name it)")
                out += ["  " + ln for ln in self.code().splitlines()]
        if self.box is not None:
            out.append("  " + self.box.sentence(self.function.split(":")[-1]))
        out += [f"  excludes {n} traced shape(s) where it runs, e.g. {format_valuation(env)}: {why}"
                for why, n, env in self.excluded]
        nonempties = self.extremes_nonempty or (True,) * len(self.extremes)
        for (env, runs, admits), nonempty in zip(self.extremes, nonempties, strict=True):
            verdict = ("admitted, runs natively" if admits and runs else "excluded, fails natively" if not admits and not runs
                       else "admitted, FAILS natively" if admits
                       else "excluded; runs natively on empty arrays only (nothing a user runs)" if not nonempty
                       else "excluded, but RUNS natively (the fix is too strong)")
            out.append(f"  at the fix's edge {format_valuation(env)}: {verdict}")
        if self.verified is not None:
            out.append("  verified end to end (export, fresh process, samples): " + ("yes" if self.verified else "NO"))
            if not self.verified:
                out += [f"    {ln}" for ln in self.verification]
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status, "detail": self.detail, "ok": self.ok, "parts": [p.to_dict() for p in self.parts],
            "in_avals": list(self.in_avals), "shapes": list(self.shapes), "constraints": list(self.constraints),
            "rounds": [r.to_dict() for r in self.rounds], "dropped": list(self.dropped),
            "box": self.box.to_dict() if self.box is not None else None, "verified": self.verified,
            "extremes": [{"valuation": env, "runs_natively": runs, "admitted": admits, "nonempty": nonempty}
                         for (env, runs, admits), nonempty in zip(self.extremes, self.extremes_nonempty
                                                                   or (True,) * len(self.extremes), strict=True)],
            "verification": list(self.verification),
            "code": self.code() if self.parts and self.status in (FIXED, NARROW, NOT_VERIFIED) else "",
            "cli": self.cli() if self.parts else "",
            "command": self.command() if self.parts and self.status in (FIXED, NARROW, NOT_VERIFIED) else "",
            "target": self.target, "seconds": round(self.seconds, 3), "stock": self.stock,
            "platforms": list(self.platforms) if self.platforms else None,
            "timing": [{"what": what, "count": n, "seconds": round(t, 3)} for what, n, t in self.timing],
            "excluded": [{"why": why, "count": n, "example": env} for why, n, env in self.excluded],
            "traced": [t.to_dict() for t in self.traced],
        }

    def plot(self, x: str | None = None, y: str | None = None) -> Any:
        """The family drawn over two sizes, the traced shapes coloured by what they say (a matplotlib
        ``Figure``; ``x``, ``y``: which sizes): :func:`.picture.plot_fix`."""
        from .picture import plot_fix
        return plot_fix(self, x=x, y=y)

    def _repr_html_(self) -> str:
        """In a notebook: the picture above the report's text (the text alone where it cannot be drawn)."""
        from .picture import report_html
        return report_html("\n".join(self.lines()), self.plot)


__all__ = ["DEADLINE", "FIXED", "NARROW", "NO_FIX", "NO_SYMBOLIC", "NOT_NEEDED", "NOT_VERIFIED", "ROUND_LIMIT",
           "FixResult", "FixRound", "group_text"]

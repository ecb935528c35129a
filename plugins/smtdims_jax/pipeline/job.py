"""One export job, and the whole fix it builds: the values every step of an export takes.

:class:`ExportJob` is what stays the same for the job (the function, the specification as given, the
inputs' tree, the platforms, the solver budget, the progress callback, the user's examples) and,
once a fix starts, its clocks (the deadline, the native traces). Every export of a specification
goes through :meth:`ExportJob.attempt`, so a candidate's time limit is one rule in one place.
:class:`FixDraft` is the fix as far as the steps took it: the loop's rounds and minimisation
(:mod:`.fixes`), the verification and its exclusions (:mod:`.verify`, :mod:`.verdict`) add to it, and
:func:`.verdict.conclude` reads it into a :class:`~.result.FixResult`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from smtdims.lang.expr import Expr

from ._common import Progress
from .attempt import Attempt, Spec, attempt, export_attempt, spec_of
from .box import BoxCount, NativeBox
from .refusals import FixPart
from .result import ROUND_LIMIT, FixRound

# An export under a candidate may take ATTEMPT_SCALE times the longer of a whole native trace of the
# function (the box's slowest where it runs) and the refused export of the specification as given, and
# never less than ATTEMPT_FLOOR seconds: a symbolic export costs a few native traces, but a candidate
# that keeps JAX's own arithmetic busy for minutes (a product of floor divisions equal to a constant)
# is no fix to wait for; the round's next candidate is tried instead.
ATTEMPT_SCALE, ATTEMPT_FLOOR = 10.0, 5.0


DEFAULT_ROUNDS = 8
DEFAULT_DEADLINE = 120.0  # seconds for the rounds and the minimisation (the final verification runs after)


@dataclass(frozen=True)
class FixOptions:
    """How far the whole fix may go: rounds, seconds, and the grid's side (None: shapes chosen by
    reasoning, :mod:`.box`). A value of the request (:class:`~.verify.VerifyOptions` carries it), so that
    verification reads it without importing the fix loop."""

    rounds: int = DEFAULT_ROUNDS
    deadline: float = DEFAULT_DEADLINE
    box: int | None = None


def _quiet(message: str) -> None:
    """No progress messages."""


@dataclass(frozen=True, eq=False)
class ExportJob:
    """What the steps of one export share; a step that learns something for the others (the fix's clock,
    the native traces, the refused export's seconds) returns a new job with it."""

    fn: Callable[..., Any]
    leaves: tuple[Any, ...]  # the specification as given: its ShapeDtypeStruct leaves ...
    scope: Any  # ... their SymbolicScope ...
    in_tree: Any  # ... and the pytree they make
    plats: tuple[str, ...] | None
    budget: int | None = None
    say: Progress = _quiet
    name: str = ""
    examples: tuple[dict[str, int], ...] = ()  # valuations of the specification's variables the user runs
    stop: float | None = None  # time.monotonic() past which the fix's rounds and minimisation stop
    box: NativeBox | None = field(default=None, repr=False)  # the fix's native traces
    given_seconds: float = 0.0  # the refused export of the specification as given

    @classmethod
    def of(cls, fn: Callable[..., Any], leaves: Sequence[Any], in_tree: Any, scope: Any,
           plats: tuple[str, ...] | None, budget: int | None = None, say: Progress = _quiet, name: str = "",
           examples: Sequence[dict[str, int]] = ()) -> ExportJob:
        """A job for ``fn`` at the specification ``leaves`` (in ``scope``) that make ``in_tree``."""
        return cls(fn, tuple(leaves), scope, in_tree, plats, budget, say, name, tuple(examples))

    def spec(self) -> Spec:
        """The specification as given, as data."""
        return spec_of(self.leaves, self.scope)

    def fixing(self, deadline: float, first: Attempt | None) -> ExportJob:
        """The job with the fix's clock started: ``deadline`` seconds for the rounds and the minimisation;
        ``first``: the refused export of the specification as given, where the caller ran it."""
        return replace(self, stop=time.monotonic() + deadline,
                       given_seconds=first.seconds if first is not None else 0.0)

    def traced(self, spec: Spec, side: int | None, native: str) -> ExportJob:
        """The job with native traces of ``spec`` (:class:`.box.NativeBox`: shapes chosen by reasoning, or
        the grid ``1..side``), under the fix's clock."""
        box = NativeBox(self.fn, spec.dims, spec.dtypes, self.in_tree, spec.constraint_set(), side=side,
                        native=native, deadline=self.stop, say=self.say, examples=self.examples, budget=self.budget)
        return replace(self, box=box)

    def given(self, att: Attempt) -> ExportJob:
        """The job once the specification as given was exported (its seconds scale a candidate's limit)."""
        return replace(self, given_seconds=max(self.given_seconds, att.seconds))

    def running(self) -> bool:
        """Whether the fix's clock has time left."""
        assert self.stop is not None
        return time.monotonic() < self.stop

    def limit(self) -> float:
        """Seconds an export under a candidate may take (see ATTEMPT_SCALE); at least 0.1 s, even past
        the deadline (an exclusion after it is still tried, briefly)."""
        assert self.stop is not None and self.box is not None
        return max(0.1, min(self.stop - time.monotonic(),
                            max(ATTEMPT_FLOOR, ATTEMPT_SCALE * max(self.given_seconds, self.box.slowest_run))))

    def attempt(self, spec: Spec, *, limited: bool = True) -> Attempt:
        """Export with ``spec``, listening to what JAX asks (:func:`.attempt.attempt`); ``limited``: within
        :meth:`limit` (a candidate's export), else without a limit."""
        return attempt(self.fn, spec, self.in_tree, self.plats, self.budget, self.limit() if limited else None)

    def export(self) -> Attempt:
        """The export of the specification as given, in the user's own scope (no limit: it is what the
        user asked for)."""
        return export_attempt(self.fn, self.leaves, self.in_tree, self.scope, self.plats, self.budget)


@dataclass(eq=False)
class FixDraft:
    """The whole fix as far as the steps took it: the specification with its parts, the rounds' record,
    how it ended so far, and what its checks found."""

    original: Spec
    spec: Spec
    parts: list[FixPart]
    rounds: list[FixRound]
    start: tuple[FixPart, ...] = ()  # found by samples that failed natively: minimisation keeps them
    status: str = ROUND_LIMIT
    detail: str = ""
    done: Attempt | None = None  # the export that succeeded, of the specification it was made with
    # the sizes each refused equation compared, with the dimensions of the specification it was asked of
    # (its variables: a round after a rename asks in the renamed ones)
    sides: list[tuple[Expr, Any]] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)  # the parts the minimisation removed
    count: BoxCount | None = None  # the fixed specification measured on the native traces
    exports: int = 0  # the exports the fix ran (the refused one as given included) ...
    export_seconds: float = 0.0  # ... and their seconds
    report: Any = None  # the last end-to-end verification (None: not run)
    verified: bool | None = None
    lines: tuple[str, ...] = ()  # its failed checks, one line each
    verify_seconds: float = 0.0
    # traced shapes the fix excludes where the function runs, by a reason a part carries: (why, how many, one)
    excluded: list[tuple[str, int, dict[str, int]]] = field(default_factory=list)
    t_start: float = field(default_factory=time.perf_counter)

    def ran(self, att: Attempt) -> Attempt:
        """``att``, counted among the fix's exports."""
        self.exports += 1
        self.export_seconds += att.seconds
        return att

    def exported(self) -> Any:
        """The fixed specification's ``Exported``, where the loop made it (each export runs once)."""
        return self.done.exported if self.done is not None and self.done.spec == self.spec else None

    def verified_by(self, report: Any, seconds: float) -> None:
        """Record an end-to-end verification of the fixed specification."""
        self.report, self.verify_seconds = report, self.verify_seconds + seconds
        self.verified, self.lines = bool(report.ok), tuple(report.failures)


__all__ = ["ATTEMPT_FLOOR", "ATTEMPT_SCALE", "DEFAULT_DEADLINE", "DEFAULT_ROUNDS", "ExportJob", "FixDraft", "FixOptions"]

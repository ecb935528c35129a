"""The question's clock and state: its deadline, why an answer is unknown or clock-shaped, and the
per-thread state of the question being answered.

A public call (or one question JAX asks) opens a question (:func:`question`); its deadline
(:class:`Deadline`) is the wall-clock backstop of ``options.deadline``. When it passes, the
watchdog (:mod:`smtdims.watchdog`) interrupts the running Z3 check and the question is answered
"unknown" / with its sound looser bound, reason ``deadline``. Where questions open (the entry
points, JAX's seam, the scope and the walk) the state is found here (:func:`asking`,
:func:`clock`); below them it is a parameter.
"""

from __future__ import annotations

import contextvars
import math
import threading
import time
from collections.abc import Callable
from typing import Any

from .options import current

# Why a question was answered "unknown" (``Decision.reason`` starts with one of these).
REASON_BUDGET = "budget"
REASON_DEADLINE = "deadline"
REASON_INCOMPLETE = "incomplete"
REASON_INTERRUPTED = "interrupted"  # Ctrl-C cut a check and Python's SIGINT handler did not raise
# Whether any valuation meets the constraints at all is unknown (the satisfiability gate's check came
# back unknown): no valuation is claimed (no witness, no tight end, no "undetermined"). The reason is
# ``f"{REASON_SATISFIABILITY}: {why}"`` with ``why`` the gate check's own reason (budget, deadline...).
REASON_SATISFIABILITY = "satisfiability-unknown"

# Why an answer is shaped by a clock (``Deadline.clocked``): such an answer is marked
# ``deterministic=False``, never cached, and counted (``stats()["clock_shaped_answers"]``).
CLOCK_DEADLINE = REASON_DEADLINE  # the question's deadline cut a check or a search
CLOCK_INTERRUPTED = REASON_INTERRUPTED  # SIGINT cut a check
CLOCK_ISL = "isl-call-limit"  # ISL's answer was abandoned as late (here or earlier in the scope)
CLOCK_FAST_SOLVER = "fast-solver-timeout"  # the fast linear solver's timeout left an unknown


class Deadline:
    """The wall-clock end of one question. ``expired`` is sticky once observed.

    ``clocked`` names the first clock that shaped the answer (``CLOCK_*``), None while the
    answer is the one a run without clocks gives. A deadline that passes unobserved shapes
    nothing: the work finished as it would have anyway.
    """

    __slots__ = ("end", "seconds", "fired", "clocked")

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.end = time.monotonic() + seconds
        self.fired = False
        self.clocked: str | None = None

    def remaining(self) -> float:
        return self.end - time.monotonic()

    @property
    def expired(self) -> bool:
        if not self.fired and time.monotonic() >= self.end:
            self.fire(CLOCK_DEADLINE)
        return self.fired

    def fire(self, why: str = CLOCK_DEADLINE) -> None:
        """End the question now (the deadline passed, or Ctrl-C cut a check): later checks are skipped."""
        self.fired = True
        self.clocked = self.clocked or why

    def mark(self, why: str) -> None:
        """Record that a clock (``CLOCK_*``) shaped the answer, unless one already did."""
        if self.clocked is None:
            self.clocked = why


class QuestionState:
    """The state of the question this thread is answering: the one place smtdims keeps it.

    A public call (or JAX's seam, which can pass nothing) opens one; every sub-question on the
    same thread shares it. It holds the clock (``deadline``, shared with a question asked from
    another thread that inherited this context: same end, same sticky expiry), and what is the
    asking thread's alone: how many Z3 checks ran (``checks``; ``starts`` marks where each outer
    question began, a question asked of a scope, so a rung's answer counts as a solver answer only
    if Z3 ran in it), and the fresh Z3 contexts the checks of the outermost outer question share
    (``contexts``, ``keep``; ``depth``, the outer questions open, nested where a rung asks its own
    scope again, is how many start marks there are, and the contexts are dropped when it returns
    to 0, so the next question starts from nothing: no answer depends on the questions asked
    before it), and the rung that answered last (``rung``: audit mode reads who answered JAX's
    question before the question ends).

    The scope and the entry points find it (:func:`asking`); below them it is a parameter: the rung
    questions carry it, the Z3 engine's calls take it. ``bounded``: False for the stand-in that
    :func:`asking` gives outside any question (no deadline: the engine checks in process, as before).
    """

    __slots__ = ("deadline", "bounded", "thread", "checks", "starts", "contexts", "keep", "rung")

    def __init__(self, deadline: Deadline, bounded: bool = True):
        self.deadline = deadline
        self.bounded = bounded
        self.thread = threading.get_ident()
        self.checks = 0
        self.starts: list[int] = []
        self.contexts: dict[int, Any] = {}
        self.keep: list[Any] = []
        self.rung: str | None = None

    @property
    def depth(self) -> int:
        """The outer questions open on this question (one start mark each)."""
        return len(self.starts)


# The question being answered (see :class:`QuestionState`): a context variable, not a thread-local, so
# that an asyncio task or a copied context carries its own.
_ACTIVE: contextvars.ContextVar[QuestionState | None] = contextvars.ContextVar("smtdims_question", default=None)


def question() -> _Open:
    """Open a question (nested calls share the outermost one); the block's value is its deadline."""
    return _Open()


def outer_question() -> _Open:
    """One outer question (a question asked of a scope) inside the current question (opened if
    none): the block marks where its checks start and counts its depth, for :func:`this_question`'s
    fresh contexts."""
    return _Open(True)


def this_question() -> QuestionState | None:
    """This thread's open question, or None (also when the context came from another thread)."""
    q = _ACTIVE.get()
    return q if q is not None and q.thread == threading.get_ident() else None


class _Open:
    """:func:`question`'s block: a class, not a generator, as every question enters it (a generator
    context manager costs microseconds to enter and leave: with several per question, a measurable
    part of a small question)."""

    __slots__ = ("_outer", "_token", "_q", "_own")

    def __init__(self, outer: bool = False):
        self._outer = outer

    def __enter__(self) -> Deadline:
        q = _ACTIVE.get()
        self._own = q is None  # this block sets the clock: its end is the end of the question
        if q is None or q.thread != threading.get_ident():
            q = QuestionState(Deadline(current().deadline) if q is None else q.deadline)
            self._token = _ACTIVE.set(q)
        else:
            self._token = None
        if self._outer:
            q.starts.append(q.checks)
        self._q = q
        return q.deadline

    def __exit__(self, *exc: object) -> None:
        q = self._q
        if self._outer:
            q.starts.pop()
            if not q.starts:
                q.contexts, q.keep = {}, []
        if self._token is not None:
            _ACTIVE.reset(self._token)
            if self._own:
                for hook in AFTER_QUESTION:
                    hook()


# Called when an outermost question ends, answered or not (smt's heap trim): housekeeping that must
# not run inside a question's time.
AFTER_QUESTION: list[Callable[[], None]] = []


def active_deadline() -> Deadline | None:
    q = _ACTIVE.get()
    return None if q is None else q.deadline


def limits_in_force() -> tuple[int, float]:
    """``(budget, deadline)`` of the question being answered: the per-call or scoped limits, and the
    deadline of the outermost question when one is running (what its answers quote)."""
    d = active_deadline()
    return current().budget, d.seconds if d is not None else current().deadline


def asking() -> QuestionState:
    """The question the layers below the scope are handed: this thread's open question; else a
    stand-in with the open question's clock (a context copied from another thread: its deadline,
    none of its counters or contexts), or, outside any question, one with no deadline
    (``bounded`` False) whose counts and marks are dropped."""
    q = _ACTIVE.get()
    if q is not None and q.thread == threading.get_ident():
        return q
    return QuestionState(q.deadline) if q is not None else QuestionState(Deadline(math.inf), bounded=False)


def clock() -> Deadline:
    """The clock the layers below the scope are handed (the rungs, the language, ISL's engine): the
    open question's deadline, or outside a question one that never passes (a new one each time, so
    that what is marked on it is dropped, as :func:`mark_clocked` drops it outside a question).

    Read here, at the scope and the entry points, and passed down as a parameter: a function of
    those layers that needs the clock takes it, so a caller that forgets it fails at once
    (TypeError) instead of running without a deadline."""
    q = _ACTIVE.get()
    return q.deadline if q is not None else Deadline(math.inf)


def deadline_passed() -> bool:
    """Whether the current question's deadline has passed (False outside a question)."""
    q = _ACTIVE.get()
    return q is not None and q.deadline.expired


def mark_clocked(why: str) -> None:
    """Record that a clock (``CLOCK_*``) shaped the current question's answer."""
    q = _ACTIVE.get()
    if q is not None and q.deadline.clocked is None:
        q.deadline.clocked = why


def clocked() -> str | None:
    """The clock that shaped the current question's answer so far, or None (also outside a question)."""
    q = _ACTIVE.get()
    return None if q is None else q.deadline.clocked

"""Budgets and deadlines: process defaults, scoped overrides, and the watchdog that enforces them.

Two limits bound every question:

- ``budget``: Z3's ``rlimit`` per check. Deterministic: the same question with the same
  budget gets the same answer. It is the primary limit.
- ``deadline``: wall-clock seconds per question (a public call, or one question JAX asks).
  A backstop: Z3 does not consult ``rlimit`` in some nonlinear loops (Grobner bases,
  polynomial factorisation), and one check has run for minutes. When the deadline
  passes, the watchdog calls ``ctx.interrupt()`` on the context of the running check
  (measured to stop such a check within about a second), and the question is answered
  "unknown" / with its sound looser bound, reason ``deadline``.

Defaults are process-wide (``install(budget=..., deadline=...)`` sets them); ``scoped``
overrides them for a block, per thread and per async task (``contextvars``), so nothing
is saved and restored by hand.
"""

from __future__ import annotations

import contextvars
import math
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

DEFAULT_BUDGET = 5_000_000  # Z3 rlimit per check: deterministic, up to about a second of work
DEFAULT_DEADLINE = 10.0  # seconds per question: a backstop, not the budget

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


@dataclass(frozen=True)
class Options:
    """The limits a question runs under."""

    budget: int = DEFAULT_BUDGET
    deadline: float = DEFAULT_DEADLINE
    presburger: bool = True  # the ISL rung (smtdims.engines.presburger) where islpy is installed

    def __post_init__(self) -> None:
        check_budget(self.budget)
        check_deadline(self.deadline)
        check_flag("presburger", self.presburger)


def check_budget(budget: Any) -> int:
    if isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0:
        raise ValueError(f"budget must be a positive int (a Z3 rlimit per check, e.g. {DEFAULT_BUDGET}), got {budget!r}")
    return budget


def check_deadline(deadline: Any) -> float:
    if isinstance(deadline, bool) or not isinstance(deadline, (int, float)) or not deadline > 0 or math.isnan(deadline):
        raise ValueError(f"deadline must be a positive number of seconds (e.g. {DEFAULT_DEADLINE}), got {deadline!r}")
    return float(deadline)


def check_flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return value


_DEFAULTS = [Options()]  # a one-cell box: replaced whole, read without a lock
_SCOPED: contextvars.ContextVar[Options | None] = contextvars.ContextVar("smtdims_options", default=None)


def current() -> Options:
    """The options in force here: the innermost :func:`scoped` block, else the process defaults."""
    o = _SCOPED.get()
    return o if o is not None else _DEFAULTS[0]


def _overrides(budget: int | None, deadline: float | None, presburger: bool | None = None) -> dict[str, Any]:
    """The given limits, validated; None means "keep what is in force"."""
    kw: dict[str, Any] = {}
    if budget is not None:
        kw["budget"] = check_budget(budget)
    if deadline is not None:
        kw["deadline"] = check_deadline(deadline)
    if presburger is not None:
        kw["presburger"] = check_flag("presburger", presburger)
    return kw


def set_defaults(*, budget: int | None = None, deadline: float | None = None, presburger: bool | None = None) -> Options:
    """Change the process-wide defaults (``install(budget=..., deadline=...)``).

    ``presburger=False`` turns off the ISL rung (:mod:`smtdims.engines.presburger`): every exact
    bound then comes from Z3, e.g. to cross-check the two engines.
    """
    _DEFAULTS[0] = replace(_DEFAULTS[0], **_overrides(budget, deadline, presburger))
    return _DEFAULTS[0]


@contextmanager
def scoped(*, budget: int | None = None, deadline: float | None = None,
           presburger: bool | None = None) -> Iterator[Options]:
    """Override the budget, the deadline and/or the ISL rung for the block (this thread / task only)."""
    kw = _overrides(budget, deadline, presburger)
    # the options in force, pinned for the block (a copy only where something is overridden: every
    # public call opens this block, most with no override)
    token = _SCOPED.set(replace(current(), **kw) if kw else current())
    try:
        yield current()
    finally:
        _SCOPED.reset(token)


class _Config:
    """Backwards-compatible view of the process defaults (``CONFIG.budget``)."""

    @property
    def budget(self) -> int:
        return current().budget

    @budget.setter
    def budget(self, value: int) -> None:
        set_defaults(budget=value)

    @property
    def deadline(self) -> float:
        return current().deadline

    @deadline.setter
    def deadline(self, value: float) -> None:
        set_defaults(deadline=value)


CONFIG = _Config()


# -- fork ----------------------------------------------------------------------------------------------
# ``fork()`` copies only the calling thread: a lock that another thread held at that moment stays
# held in the child forever (multiprocessing's default start method on Linux, data loaders and
# servers fork). Every lock smtdims keeps is registered here and reinitialised in the child
# (``_at_fork_reinit``, what the standard library does for its own locks); modules with more
# state (the ISL worker, the shared Z3 context, the watchdog) register hooks of their own.
_FORK_LOCKS: weakref.WeakSet = weakref.WeakSet()


def fork_safe(lock: Any) -> Any:
    """``lock`` (a Lock, RLock or Condition), reinitialised (unheld) in a forked child."""
    _FORK_LOCKS.add(lock)
    return lock


def _reinit_locks_in_child() -> None:
    for lock in list(_FORK_LOCKS):
        lock._at_fork_reinit()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reinit_locks_in_child)


# -- deadlines -----------------------------------------------------------------------------------------
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


class Question:
    """The state of the question this thread is answering: the one place smtdims keeps it.

    A public call (or JAX's seam, which can pass nothing) opens one; every sub-question on the
    same thread shares it. It holds the clock (``deadline``, shared with a question asked from
    another thread that inherited this context: same end, same sticky expiry), and what is the
    asking thread's alone: how many Z3 checks ran (``checks``; ``starts`` marks where each nested
    session question began, so a rung's answer counts as a solver answer only if Z3 ran in it),
    and the fresh Z3 contexts the checks
    of the outermost session question share (``contexts``, ``keep``; ``depth``, the nested session
    questions open, is how many start marks there are, and the contexts are dropped when it returns
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
        """The session questions open on this question (one start mark each)."""
        return len(self.starts)


# The question being answered (see :class:`Question`): a context variable, not a thread-local, so
# that an asyncio task or a copied context carries its own.
_ACTIVE: contextvars.ContextVar[Question | None] = contextvars.ContextVar("smtdims_question", default=None)


def question() -> _Open:
    """Open a question (nested calls share the outermost one); the block's value is its deadline."""
    return _Open()


def session_question() -> _Open:
    """One session question inside the current question (opened if none): the block marks where
    its checks start and counts its depth, for :func:`this_question`'s fresh contexts."""
    return _Open(True)


def this_question() -> Question | None:
    """This thread's open question, or None (also when the context came from another thread)."""
    q = _ACTIVE.get()
    return q if q is not None and q.thread == threading.get_ident() else None


class _Open:
    """:func:`question`'s block: a class, not a generator, as every question enters it (a generator
    context manager costs microseconds to enter and leave: with several per question, a measurable
    part of a small question)."""

    __slots__ = ("_session", "_token", "_q", "_own")

    def __init__(self, session: bool = False):
        self._session = session

    def __enter__(self) -> Deadline:
        q = _ACTIVE.get()
        self._own = q is None  # this block sets the clock: its end is the end of the question
        if q is None or q.thread != threading.get_ident():
            q = Question(Deadline(current().deadline) if q is None else q.deadline)
            self._token = _ACTIVE.set(q)
        else:
            self._token = None
        if self._session:
            q.starts.append(q.checks)
        self._q = q
        return q.deadline

    def __exit__(self, *exc: object) -> None:
        q = self._q
        if self._session:
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


def asking() -> Question:
    """The question the layers below the scope are handed: this thread's open question; else a
    stand-in with the open question's clock (a context copied from another thread: its deadline,
    none of its counters or contexts), or, outside any question, one with no deadline
    (``bounded`` False) whose counts and marks are dropped."""
    q = _ACTIVE.get()
    if q is not None and q.thread == threading.get_ident():
        return q
    return Question(q.deadline) if q is not None else Question(Deadline(math.inf), bounded=False)


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


class Watchdog:
    """One thread that interrupts Z3 checks running past their question's deadline.

    ``arm(ctx, end)`` before a check returns a token; ``disarm(token)`` after it. The
    interrupt is issued under the same lock that ``disarm`` takes, so it can only reach
    the check it was armed for (Z3's interrupt of an idle context has no lasting effect:
    a later check on it runs normally).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._armed: dict[int, tuple[float, Any]] = {}
        self._fired: set[int] = set()
        self._next = 0
        self._thread: threading.Thread | None = None
        # when the thread wakes up next (inf: it sleeps until an arm). An arm wakes it only for an
        # earlier end: a question's checks share one deadline, and waking the thread at every check
        # would cost a thread switch each (on a busy machine, milliseconds a check: most of a cold
        # bound's time)
        self._wake_at = math.inf
        self.interrupts = 0

    @property
    def thread(self) -> threading.Thread | None:
        """The watchdog's thread, None until the first armed check (diagnostics: it must stay alive)."""
        return self._thread

    def after_fork_in_child(self) -> None:
        """A forked child has no watchdog thread, and the armed checks were other threads': forget them."""
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._armed.clear()
        self._fired.clear()
        self._thread = None
        self._wake_at = math.inf

    def arm(self, ctx: Any, end: float) -> int:
        with self._lock:
            self._next += 1
            token = self._next
            self._armed[token] = (end, ctx)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="smtdims-watchdog", daemon=True)
                self._thread.start()
            if end < self._wake_at:
                self._cond.notify()
            return token

    def disarm(self, token: int) -> bool:
        """Forget ``token``; True when its check was interrupted."""
        with self._lock:
            self._armed.pop(token, None)
            if token in self._fired:
                self._fired.discard(token)
                return True
            return False

    def _run(self) -> None:
        with self._lock:
            while True:
                if not self._armed:
                    self._wake_at = math.inf
                    if not self._cond.wait(timeout=30.0) and not self._armed:
                        self._thread = None
                        return
                    continue
                now = time.monotonic()
                token = min(self._armed, key=lambda t: self._armed[t][0])
                end = self._armed[token][0]
                if end <= now:
                    # (the context is looked up here, not kept in a local while the thread waits:
                    # that kept a retired shared context, and every term in it, alive)
                    ctx = self._armed.pop(token)[1]
                    self._fired.add(token)
                    self.interrupts += 1
                    try:
                        ctx.interrupt()
                    except Exception:  # pragma: no cover - a dead context has nothing to stop
                        pass
                    del ctx
                    continue
                self._wake_at = end
                # deadline=math.inf: a wait past threading.TIMEOUT_MAX raises OverflowError, which
                # would end this thread; it wakes once an hour instead
                self._cond.wait(timeout=min(end - now, 3600.0))


WATCHDOG = Watchdog()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=WATCHDOG.after_fork_in_child)

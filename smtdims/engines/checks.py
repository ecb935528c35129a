"""One Z3 check under the question's deadline, and what its answer means.

A check runs here or in a Z3 worker process (:class:`KillableSolver`): the watchdog interrupts a
check in process at the deadline, but Z3 may not stop at its interrupt, so a check in a context of
its own goes to a worker that is killed when late. Ctrl-C ends a check as the user expects, whichever
runs it. An "unknown" answer says why, in the user's terms (budget, deadline, incompleteness).
"""

from __future__ import annotations

import _signal
import itertools
import math
import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import z3

from .. import clocks, watchdog
from ..clocks import REASON_BUDGET, REASON_DEADLINE, REASON_INCOMPLETE, REASON_INTERRUPTED
from ..lang.bigints import text_int
from . import _z3_strategy as _strategy
from . import workers
from .context import gate_enter, gate_leave, z3_work
from .counters import COUNTERS
from .memory import retire_shared
from .smtlib import to_smtlib

SAT, UNSAT, UNKNOWN = "sat", "unsat", "unknown"


@dataclass
class CheckResult:
    status: str  # SAT | UNSAT | UNKNOWN
    model: dict[str, int] | None = None
    core: list[str] | None = None
    reason: str = ""


def unknown_reason(z3_reason: str, interrupted: bool) -> str:
    """Why a check came back unknown, in the user's terms (budget, deadline, incompleteness)."""
    if interrupted or z3_reason == DEADLINE_IN_WORKER:
        return REASON_DEADLINE
    # Z3 reports an exhausted rlimit as "max. resource limit exceeded", and as "canceled"
    # inside nonlinear tactics: without our interrupt, a cancellation is the budget's.
    if "resource" in z3_reason or "rlimit" in z3_reason or "cancel" in z3_reason:
        return REASON_BUDGET
    return REASON_INCOMPLETE


def make_solver(ctx: z3.Context, budget: int, *, fast: bool = False, nonlinear: bool = False,
                killable: bool = False) -> z3.Solver | KillableSolver:
    """A solver with the budget and a fixed seed (:func:`smtdims.engines._z3_strategy.solver`); ``killable``:
    its checks under a deadline run in a worker process killed when late (:class:`KillableSolver`)."""
    COUNTERS.bump("solvers_created")
    if killable:
        return KillableSolver(ctx, budget, fast=fast, nonlinear=nonlinear)
    with z3_work():
        return _strategy.solver(ctx, budget, fast=fast, nonlinear=nonlinear)


def nonlinear_tactic(ctx: z3.Context) -> z3.Tactic:
    """Z3's QF_NIA preamble and its SMT core (:func:`smtdims.engines._z3_strategy.nonlinear_tactic`)."""
    with z3_work():
        return _strategy.nonlinear_tactic(ctx)


# Checks that Z3 may not stop at its interrupt run in worker processes killed when late.
Z3_WORKERS = workers.Pool("_z3_worker.py", 4, spin=0.0)  # 4: questions from several threads at once
KILL_GRACE = 0.25  # seconds past the deadline before a worker still checking is killed (Z3 usually stops within ms)
WORKER_START_LIMIT = 10.0  # seconds for a worker to start (import z3) before it is given up in this process
DEADLINE_IN_WORKER = "smtdims: deadline"  # reason_unknown of a check the deadline stopped in the worker
_SOLVER_KEYS = itertools.count(1)


class _RemoteModel:
    """The integer constants of a worker's model; like ``z3.ModelRef.eval(const, model_completion=True)``
    (a constant the model leaves free is 0, Z3's completion for integers)."""

    def __init__(self, values: dict[str, str]):
        self.values = values

    def eval(self, t: z3.ExprRef, model_completion: bool = False) -> int:
        return text_int(self.values.get(t.decl().name(), "0"))


class KillableSolver:
    """A solver whose checks under a deadline run in a Z3 worker process killed when late.

    Why: Z3 may go on long past ``ctx.interrupt()`` (seconds on high-degree products, for good on a
    108-factor monomial; no syntactic test tells which checks it stops), and a thread cannot be
    killed. The formulas are built here, in the caller's context, and sent as SMT-LIB text
    (declarations and assertions added since the worker last saw this solver); the worker checks
    them with the same strategy and parameters (:mod:`smtdims.engines._z3_strategy`) and a timer that
    interrupts at the deadline; ``KILL_GRACE`` seconds past it the worker is killed and the check is
    "unknown", reason deadline. Nothing runs on after a late answer. Without a deadline, or where no
    worker can start (not POSIX), the check runs here.

    The answer is a function of the formulas and the budget, as in process: the worker keeps one
    context per caller context (a question's :class:`~smtdims.engines.z3side.Fresh` context), so a
    check sees the terms of its own question only; the rlimit count of a check may differ by a few
    units from the same check in the caller's context (term ids), never with the process's history.
    """

    def __init__(self, ctx: z3.Context, budget: int, *, fast: bool, nonlinear: bool):
        self.ctx = ctx
        self.budget, self.fast, self.nonlinear = budget, fast, nonlinear
        self._local: z3.Solver | None = None  # built only for a check here (building the strategy is costly)
        self._settings: list[tuple[tuple, dict]] = []
        self._added: list[z3.BoolRef] = []
        self._local_n = 0  # how many of them the local solver holds
        self._key = next(_SOLVER_KEYS)
        self._held: tuple[workers.Worker, int, int, frozenset[str]] | None = None  # worker, generation, sent, declared
        self._last: dict | None = None  # the worker's answer to the last check; None: the local solver's
        self._assumptions: list[z3.BoolRef] = []

    def add(self, *formulas: z3.BoolRef) -> None:
        self._added += formulas  # the local solver gets them only if it checks (adding costs a Z3 call each)

    @property
    def local(self) -> z3.Solver:
        """The same solver in the caller's context, for checks without a deadline or worker."""
        if self._local is None:
            with z3_work():
                self._local = _strategy.solver(self.ctx, self.budget, fast=self.fast, nonlinear=self.nonlinear)
            for args, kwargs in self._settings:
                self._local.set(*args, **kwargs)
        return self._local

    def set(self, *args: object, **kwargs: object) -> None:
        self._settings.append((args, kwargs))
        if self._local is not None:
            self._local.set(*args, **kwargs)

    def check(self, *assumptions: z3.BoolRef, deadline: clocks.Deadline | None = None) -> z3.CheckSatResult:
        """Z3's ``check``; under a ``deadline`` (:func:`run_check` gives the question's) in a worker."""
        self._assumptions = list(assumptions)
        d = deadline
        if d is not None:
            answer = self._remote(d, assumptions)
            if answer is not None:
                self._last = answer
                return {"sat": z3.sat, "unsat": z3.unsat}.get(answer["r"], z3.unknown)
        self._last = None
        if self._local_n < len(self._added):
            self.local.add(*self._added[self._local_n:])
            self._local_n = len(self._added)
        return self.local.check(*assumptions)

    def _remote(self, d: clocks.Deadline, assumptions: tuple[z3.BoolRef, ...]) -> dict | None:
        """The worker's answer; None where no worker can start (the check then runs here)."""
        late = {"r": "unknown", "reason": DEADLINE_IN_WORKER}
        with Z3_WORKERS.worker(max(0.0, d.remaining())) as w:
            if w is None:
                return late  # every worker busy with other questions until the deadline
            if w.broken:
                return None  # no worker process can run here (not POSIX): the check runs in process
            if w.down:
                # its start failed moments ago (a loaded machine): no answer until it is tried again.
                # Not in process: there Z3 may run on past the deadline's interrupt without end
                COUNTERS.bump("workers_down")
                return late
            for _ in range(2):  # once more, from the start, if the worker does not hold this solver
                held = self._held
                fresh = held is None or held[0] is not w or held[1] != w.generation
                sent, declared = (0, frozenset()) if fresh else (held[2], held[3])
                text, declared = to_smtlib(self.ctx, self._added[sent:], declared)
                request = {"ctx": _context_key(self.ctx), "key": self._key, "reset": fresh, "smt2": text, "budget": self.budget,
                           "fast": self.fast, "nonlinear": self.nonlinear,
                           "until": d.end if d.end < math.inf else None,
                           "assume": [b.decl().name() for b in assumptions]}
                try:
                    with _ctrl_c_ends_the_wait():
                        answer, generation = w.call(request, max(0.0, d.remaining()) + KILL_GRACE,
                                                    min(WORKER_START_LIMIT, max(0.0, d.remaining()) + KILL_GRACE),
                                                    WORKER_START_LIMIT)
                except _CtrlC:
                    # the worker was killed; as after a check Z3 cut in process, run_check delivers
                    # SIGINT again, to Python's own handler (KeyboardInterrupt by default)
                    self._held = None
                    return {"r": "unknown", "reason": _KEYBOARD}
                if answer is None:
                    self._held = None
                    COUNTERS.bump("workers_down" if w.down else "abandoned_checks")
                    return late
                if answer.get("missing"):
                    self._held = None
                    continue
                self._held = (w, generation, len(self._added), declared)
                if answer.get("deadline"):
                    answer["reason"] = DEADLINE_IN_WORKER
                return answer
        return late

    def model(self) -> z3.ModelRef | _RemoteModel:
        if self._last is None:
            return self.local.model()
        return _RemoteModel(self._last.get("model", {}))

    def unsat_core(self) -> list[z3.BoolRef]:
        if self._last is None:
            return list(self.local.unsat_core())
        names = set(self._last.get("core", ()))
        return [b for b in self._assumptions if b.decl().name() in names]

    def reason_unknown(self) -> str:
        return self.local.reason_unknown() if self._last is None else self._last.get("reason", "")


def _context_key(ctx: z3.Context) -> int:
    """A number naming ``ctx`` for the workers (unique in the process, unlike ``id``)."""
    key = getattr(ctx, "_smtdims_key", None)
    if key is None:
        key = ctx._smtdims_key = next(_SOLVER_KEYS)  # type: ignore[attr-defined]
    return key


# -- Ctrl-C ------------------------------------------------------------------------------------------
# Z3 handles SIGINT itself while a check runs (its handler replaces Python's for the check and
# cancels every check that enabled it; Python's handler never runs), so by itself a Ctrl-C
# only turns the check into "unknown". Measured (z3 4.x/5.4): a Solver then says "interrupted
# from keyboard" (the cancel's origin, not the tactic's text), an Optimize says "canceled" as
# it does for an exhausted rlimit, but with an rlimit count below the budget. So:
# - Z3's handler is enabled only in the main thread (where Python acts on SIGINT) and only
#   when SIGINT is not ignored: a check in another thread must not swallow the main thread's
#   Ctrl-C, and an ignored SIGINT must not cut a check;
# - a check cut by SIGINT ends its question (``Deadline.fire``; the answer is clock-shaped,
#   never cached) and the signal is delivered again with ``signal.raise_signal`` once Z3 has put
#   Python's handler back: whatever handler is installed decides (KeyboardInterrupt by default;
#   asyncio's cancels its task; SIG_DFL ends the process).
_SIGINT = int(signal.SIGINT)
_MAIN = threading.main_thread()
_KEYBOARD = "interrupted from keyboard"


def _ctrl_c_wanted() -> bool:
    """Z3's own SIGINT handling: in the main thread, unless SIGINT is ignored or the program sees it as it
    lands and interrupts the check itself (:data:`smtdims.watchdog.CTRL_C`: Z3's handler would swallow a
    Ctrl-C whose check still comes back sat or unsat)."""
    return threading.get_ident() == _MAIN.ident and _signal.getsignal(_SIGINT) != signal.SIG_IGN \
        and not watchdog.CTRL_C.taken()


def _arm_ctrl_c(s: z3.Solver | z3.Optimize) -> None:
    """Z3's SIGINT handling on ``s`` as :func:`_ctrl_c_wanted` says (set only when it changes: a Z3 call)."""
    want = _ctrl_c_wanted()
    if getattr(s, "_smtdims_ctrl_c", True) is not want:
        s.set("ctrl_c", want)
        s._smtdims_ctrl_c = want  # type: ignore[union-attr]


def _cut_by_sigint(s: z3.Solver | z3.Optimize, z3_reason: str) -> bool:
    """Whether an unknown check (not interrupted by the watchdog) was cancelled by Ctrl-C."""
    if not getattr(s, "_smtdims_ctrl_c", True):
        return False
    if z3_reason == _KEYBOARD:
        return True
    if isinstance(s, z3.Optimize) and "cancel" in z3_reason:
        budget = getattr(s, "_smtdims_budget", None)
        if budget is None:
            return False
        st = s.statistics()
        used = next((st.get_key_value(k) for k in st.keys() if k == "rlimit count"), budget)
        return used < budget  # an exhausted rlimit reads exactly the budget
    return False


class _CtrlC(BaseException):
    """SIGINT arrived while the main thread waited for a worker (:func:`_ctrl_c_ends_the_wait`)."""


def _raise_ctrl_c(signum: int, frame: object) -> None:
    raise _CtrlC


@contextmanager
def _ctrl_c_ends_the_wait() -> Iterator[None]:
    """While the main thread waits for a Z3 worker, Ctrl-C ends the wait (:class:`_CtrlC`), as Z3's
    own handler ends a check in process; the caller then delivers SIGINT again to the handler in
    place before (one that does not raise still ends the question, as "interrupted")."""
    if not _ctrl_c_wanted():
        yield
        return
    prev = _signal.getsignal(_SIGINT)
    signal.signal(_SIGINT, _raise_ctrl_c)
    try:
        yield
    finally:
        signal.signal(_SIGINT, prev)


def run_check(s: z3.Solver | z3.Optimize, ctx: z3.Context, assumptions: list | None = None, *,
              ask: clocks.QuestionState) -> tuple[object, str]:
    """``s.check(*assumptions)`` under the question's deadline (``ask``'s; none where it is not
    ``bounded``): ``(z3 result, unknown reason or "")``.

    A check cut by Ctrl-C re-delivers SIGINT to Python (see above): by default that raises
    KeyboardInterrupt here; under a handler that does not raise, the question ends as
    "unknown" with reason ``interrupted``, clock-shaped.
    """
    d = ask.deadline if ask.bounded else None
    if d is not None and d.expired:
        COUNTERS.bump("deadline_hits")
        return z3.unknown, REASON_DEADLINE
    _arm_ctrl_c(s)
    token = watchdog.WATCHDOG.arm(ctx, d.end) if d is not None else None
    # the program's own Ctrl-C thread interrupts this check (not a worker's: its wait is Python's)
    pressable = watchdog.CTRL_C.taken() and threading.get_ident() == _MAIN.ident and not isinstance(s, KillableSolver)
    if pressable:
        watchdog.CTRL_C.checking(ctx)
    pressed = False
    gate_enter()
    try:
        r = s.check(*(assumptions or ()), deadline=d) if isinstance(s, KillableSolver) else s.check(*(assumptions or ()))
    finally:
        gate_leave()
        pressed = watchdog.CTRL_C.ended() if pressable else False
        interrupted = watchdog.WATCHDOG.disarm(token) if token is not None else False
        if interrupted or pressed:
            retire_shared(ctx)
    if pressed:  # Python's handler runs at the next bytecode (the signal is pending there): the question ends
        COUNTERS.bump("interrupts")
        if d is not None:
            d.fire(clocks.CLOCK_INTERRUPTED)
        return z3.unknown, REASON_INTERRUPTED
    if interrupted and r != z3.unknown:
        # the deadline fired between the check's end and disarm: the context's cancel flag is
        # set and evaluating the model raises ("canceled"; seen in a fork stress run). The
        # question is over anyway: the check counts as cut by the deadline.
        r = z3.unknown
    if r == z3.unknown:
        z3_reason = s.reason_unknown()
        if not interrupted and _cut_by_sigint(s, z3_reason):
            COUNTERS.bump("interrupts")
            if d is not None:
                d.fire(clocks.CLOCK_INTERRUPTED)
            signal.raise_signal(_SIGINT)  # Python's handler runs now (KeyboardInterrupt by default)
            return r, REASON_INTERRUPTED
        reason = unknown_reason(z3_reason, interrupted)
        if reason == REASON_DEADLINE:
            COUNTERS.bump("deadline_hits")
            if d is not None:
                d.fire(clocks.CLOCK_DEADLINE)
        return r, reason
    return r, ""


def minimise_by_deletion(rest: list[z3.BoolRef], check: Callable[[list[z3.BoolRef]], tuple[object, str]],
                         core: Callable[[], Iterable[z3.BoolRef]]) -> list[z3.BoolRef]:
    """A minimal unsatisfiable subset of the assumptions ``rest`` (an unsat core), by deletion.

    A fact whose removal leaves the rest satisfiable is needed (and stays needed in every smaller
    unsatisfiable subset); a removal that stays unsat shrinks the rest to ``core()``, the new core.
    ``check(facts)`` is one deadline-bounded check under those assumptions; when the deadline stops
    it, what is left is kept: still unsatisfiable, perhaps not minimal.
    """
    needed: list[z3.BoolRef] = []
    while rest:
        b = rest.pop()
        r, reason = check(needed + rest)
        if r == z3.unsat:
            kept = {x.get_id() for x in core()}
            rest = [x for x in rest if x.get_id() in kept]
        elif reason == REASON_DEADLINE:
            needed += [b, *rest]
            break
        else:
            needed.append(b)
    return needed

"""The watchdog: one thread that interrupts Z3 checks running past their question's deadline.

Z3 does not consult ``rlimit`` in some nonlinear loops (Grobner bases, polynomial factorisation),
and one check has run for minutes; when the question's deadline passes, the watchdog calls
``ctx.interrupt()`` on the context of the running check (measured to stop such a check within
about a second). The engines arm it around each check (``smtdims.engines.checks``).
"""

from __future__ import annotations

import math
import os
import threading
import time
from typing import Any

from .forking import fork_safe


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


class CtrlC:
    """Ctrl-C for the main thread's Z3 check, where a thread of the program sees SIGINT at once.

    Z3's own SIGINT handler (its ``ctrl_c`` option) cancels a check, but a check that still comes back
    sat or unsat has swallowed the signal: Python's handler never runs and the Ctrl-C is lost (2 to 4
    runs in 20 of a ``--fix`` interrupted early). The command line therefore takes SIGINT itself
    (``signal.set_wakeup_fd``: the byte is written the moment the signal lands, while the main thread
    is inside Z3) and calls :meth:`pressed` from a thread of its own; Z3's handler stays off
    (:meth:`taken`), the running check is interrupted, and Python's handler runs at the main thread's
    next bytecode whatever the check returned.
    """

    def __init__(self) -> None:
        self._lock = fork_safe(threading.Lock())
        self._owners = 0
        self._ctx: Any = None  # the context of the main thread's running check
        self._hit = False  # pressed while it ran

    def take(self) -> None:
        with self._lock:
            self._owners += 1

    def release(self) -> None:
        with self._lock:
            self._owners = max(0, self._owners - 1)

    def taken(self) -> bool:
        """Whether a thread of the program sees SIGINT as it lands (then Z3's handler stays off)."""
        return self._owners > 0

    def checking(self, ctx: Any) -> None:
        """The main thread starts a check in ``ctx`` (None: it ended)."""
        with self._lock:
            self._ctx, self._hit = ctx, False

    def ended(self) -> bool:
        """The main thread's check ended; whether Ctrl-C was pressed while it ran."""
        with self._lock:
            hit, self._ctx, self._hit = self._hit, None, False
            return hit

    def pressed(self) -> None:
        """SIGINT landed: interrupt the main thread's running check, if any (an idle context's
        interrupt has no lasting effect, see :class:`Watchdog`)."""
        with self._lock:
            if self._ctx is not None:
                self._hit = True
                self._ctx.interrupt()


CTRL_C = CtrlC()

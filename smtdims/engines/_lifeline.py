"""A worker process's tie to its caller: the worker ends with the process that started it.

Loaded by the worker scripts (:mod:`smtdims.engines._z3_worker`, :mod:`smtdims.engines._isl_worker`) from their
own directory; imports nothing of smtdims. Why: a caller killed (SIGKILL or SIGTERM) during a long
question cannot kill its worker, which would run on past it (with ``deadline=math.inf``, for good).

Two ties, because one engine releases the interpreter while it works and the other does not:

- :func:`watch`: the caller holds the write end of a pipe (``$SMTDIMS_LIFELINE`` names the read end
  here) and never writes to it. However the caller ends, the kernel closes its end, and a read here
  returns end-of-file: a thread waiting in that read calls ``os._exit`` at once. Z3 runs in C with
  the interpreter released (ctypes), so the thread runs while Z3 is busy. Measured: the worker ends
  within milliseconds of the caller's SIGKILL, mid-check.
- :func:`alarm`: islpy holds the interpreter while ISL runs, so no thread of this process runs
  until the call returns, which can take seconds. Each request carries the time past which
  its caller would kill the worker anyway (``expires``, on the machine's monotonic clock, a little
  after the caller's own limit); the kernel's real-time timer ends the process then (SIGALRM's
  default action), interpreter or not. A caller that is alive kills a late worker first, so this
  changes nothing for it; a dead caller's worker ends at most that long after the request began
  (ISL's requests: ``smtdims.engines.presburger.CALL_LIMIT`` and :data:`SLACK`).

Why not Linux's ``PR_SET_PDEATHSIG``: the "parent" it watches is the *thread* that started the
worker, not the process; a worker started from a thread that then ends (a thread pool's, JAX's)
would be killed under a living caller, mid-answer.
"""

from __future__ import annotations

import os
import signal
import threading
import time

ENV = "SMTDIMS_LIFELINE"  # the read end's descriptor number, set by smtdims.engines.workers
SLACK = 0.5  # seconds past the caller's own kill time that ``expires`` adds (smtdims.engines.workers)


def watch() -> None:
    """End this process as soon as its caller is gone (a daemon thread; see the module's docstring).

    Without ``$SMTDIMS_LIFELINE`` (a worker started by hand), the thread watches ``os.getppid()``
    instead, five times a second: a process whose parent ended is adopted by another."""
    fd = os.environ.pop(ENV, None)
    parent = os.getppid()

    def wait() -> None:
        if fd is not None:
            try:
                while os.read(int(fd), 64):  # the caller never writes: only end-of-file comes
                    pass
            except (OSError, ValueError):
                pass
        else:
            while os.getppid() == parent:
                time.sleep(0.2)
        os._exit(0)

    threading.Thread(target=wait, name="smtdims-lifeline", daemon=True).start()
    if hasattr(signal, "SIGALRM"):
        signal.signal(signal.SIGALRM, signal.SIG_DFL)  # the kernel's timer ends the process (alarm)


def alarm(expires: float | None) -> None:
    """Have the kernel end this process at ``expires`` (``time.monotonic()``), or disarm (None)."""
    if not hasattr(signal, "setitimer"):
        return
    if expires is None:
        signal.setitimer(signal.ITIMER_REAL, 0)
    else:
        signal.setitimer(signal.ITIMER_REAL, max(expires - time.monotonic(), 0.001))

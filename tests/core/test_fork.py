"""A process forked while other threads are busy in smtdims gets a working smtdims.

``fork()`` copies only the calling thread: every lock another thread held stays held in the
child, and the ISL worker, the shared Z3 context and the watchdog thread are the parent's. Before
the fix, 20 of 20 children hung on the ISL worker's lock, and 9 of 20 on other locks with the
ISL rung off. Here three threads keep every rung busy (ISL worker calls, Z3 checks in the
shared and in fresh contexts, the watchdog armed on checks that run into their deadline) while
the main thread forks 20 children; each child must answer correctly within a timeout.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

import smtdims
from smtdims import options

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="fork() is POSIX only")

CHILDREN = 20
CHILD_TIMEOUT = 60.0  # seconds for a child's three questions (measured: well under 1 s each)
CONSTRAINTS = ("a <= 9", "b <= a")


def _child() -> int:
    """The child's questions; its exit status says whether every answer was right."""
    signal.alarm(int(CHILD_TIMEOUT) + 30)  # a hung child ends itself even if the parent is gone
    faulthandler.dump_traceback_later(CHILD_TIMEOUT - 10)  # where it hangs, if it does (stderr)
    ok = tuple(smtdims.bounds("3*a - b", constraints=CONSTRAINTS)) == (2, 26)  # the ISL rung where islpy is
    with options.scoped(presburger=False):
        ok &= tuple(smtdims.bounds("3*a - b + 1", constraints=CONSTRAINTS)) == (3, 27)  # Z3, shared context
    ok &= tuple(smtdims.bounds("a*b - b", constraints=CONSTRAINTS)) == (0, 72)  # Z3, a fresh context
    return 0 if ok else 1


def _busy(stop: threading.Event, kind: str) -> None:
    i = 0
    while not stop.is_set():
        i += 1
        if kind == "isl":  # linear, small: ISL worker calls (a new question each time: no cache)
            smtdims.bounds(f"3*a - b + {i}*c", constraints=(*CONSTRAINTS, "c <= 5"))
        elif kind == "z3":  # nonlinear checks in fresh contexts, linear ones in the shared context
            smtdims.bounds(f"a*b - {i}*c", constraints=CONSTRAINTS)
            with options.scoped(presburger=False):
                smtdims.bounds(f"2*a - b + {i}*c", constraints=(*CONSTRAINTS, "c <= 7"))
        else:  # the watchdog armed, and firing: checks that run into a short deadline
            smtdims.decide("a^3 + b^3", "!=", f"c^3 + {i}", budget=10**9, deadline=0.2)


def _wait(pid: int, timeout: float) -> int | None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return None


def scenario() -> tuple[int, int, list[int | None]]:
    """Three busy threads, 20 forked children: (hung, answered wrongly, exit statuses)."""
    stop = threading.Event()
    threads = [threading.Thread(target=_busy, args=(stop, k), daemon=True) for k in ("isl", "z3", "watchdog")]
    for t in threads:
        t.start()
    time.sleep(1.0)  # every thread well inside its loop (the ISL worker started)
    statuses = []
    try:
        for _ in range(CHILDREN):
            time.sleep(0.05)
            pid = os.fork()
            if pid == 0:  # pragma: no cover - the child
                code = 1
                try:
                    code = _child()
                finally:
                    os._exit(code)
            statuses.append(_wait(pid, CHILD_TIMEOUT))
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
    hung = statuses.count(None)
    wrong = sum(1 for s in statuses if s not in (0, None))
    return hung, wrong, statuses


@pytest.mark.soak
def test_children_forked_while_every_rung_is_busy_answer():
    """The scenario runs in a process of its own: forking a pytest worker (pytest-xdist) copies its
    pipes to the controller into every child, and a crash there would take the worker with it."""
    res = subprocess.run([sys.executable, "-X", "faulthandler", __file__], capture_output=True, text=True,
                         timeout=CHILDREN * CHILD_TIMEOUT + 120)
    assert res.returncode == 0 and "hung 0 wrong 0" in res.stdout, (res.returncode, res.stdout[-2000:],
                                                                    res.stderr[-6000:])


if __name__ == "__main__":
    hung, wrong, statuses = scenario()
    print(f"hung {hung} wrong {wrong} of {CHILDREN}: {statuses}")
    sys.exit(0 if (hung, wrong) == (0, 0) else 1)

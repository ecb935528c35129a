"""The process's shared Z3 context, its lock, and the fork gate: what every Z3 call must hold or pass.

Linear checks of every scope share one context (a context costs memory and time to build, and a scope
needs only a solver). Z3 contexts are not thread-safe, so all work in it holds :data:`Z3_LOCK`; and a
fork must not copy a mutex Z3 holds inside, so every Z3 call passes the gate a fork waits at.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import z3

from .. import forking

# One shared Z3 context for the linear solvers of every scope: a context costs memory and
# time to build, and a scope needs only a solver. Z3 contexts are not thread-safe, so all
# work in it holds Z3_LOCK.
Z3_LOCK = forking.fork_safe(threading.RLock())
_CONTEXT: list[z3.Context] = []


def _after_fork_in_child() -> None:
    """A forked child gets a shared context of its own on first use: a thread of the parent may have
    been inside a check in the old one (a solver pushed, never popped), and sessions rebuild their
    solvers in a new context by themselves (see :func:`smtdims.engines.memory.retire_shared`). (The
    parent's Z3 workers are forgotten by :mod:`smtdims.engines.workers`' own hook.)"""
    _CONTEXT.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def is_shared_context(ctx: z3.Context) -> bool:
    """Whether ``ctx`` is the process's shared context (without creating one)."""
    return bool(_CONTEXT) and ctx is _CONTEXT[0]


def _new_shared_context() -> z3.Context:
    """A context for the shared linear solvers. Its terms are built and checked under Z3_LOCK, but
    Python releases a term (``Z3_dec_ref``) in whichever thread drops its last reference, outside
    the lock (a check's formulas, when the function that built them returns): racing another
    thread's calls into the context, that crashes the process (SIGSEGV in ``Z3_mk_ge``, SIGABRT in
    ``Z3_solver_assert``: tests/core/test_fork.py's busy threads). With concurrent dec-ref, Z3 queues
    such releases for the thread that next enters the context."""
    with z3_work():
        ctx = z3.Context()
        try:
            z3.Z3_enable_concurrent_dec_ref(ctx.ref())
        except (z3.Z3Exception, AttributeError):  # a z3-solver without the call (single-threaded build)
            pass
    return ctx


def shared_context() -> z3.Context:
    with Z3_LOCK:
        if not _CONTEXT:
            _CONTEXT.append(_new_shared_context())
        return _CONTEXT[0]


def replace_shared(ctx: z3.Context) -> bool:
    """Retire ``ctx`` if it is the shared one (the next :func:`shared_context` makes a new one); whether it
    was. The new one is made on its first use, not here: after a check Ctrl-C cut, the KeyboardInterrupt
    is pending, and one raised inside ``z3.Context.__init__`` leaves a half-built context whose
    ``__del__`` fails ("Exception ignored ... no attribute 'owner'")."""
    with Z3_LOCK:
        if _CONTEXT and _CONTEXT[0] is ctx:
            _CONTEXT.clear()
            return True
        return False


def z3_locked(method: Callable) -> Callable:
    """``method`` run holding :data:`Z3_LOCK`."""

    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        with Z3_LOCK:
            return method(*args, **kwargs)

    return wrapper


# -- fork gate -----------------------------------------------------------------------------------------
# A fork while another thread is inside a Z3 check can copy a mutex Z3 holds inside (children hung
# in Z3_solver_check_assumptions with every Python lock reset). So a fork waits, up to FORK_WAIT
# seconds, until no check is running, and no check starts until it is done. Checks are short (the
# budget, the deadline); past FORK_WAIT the fork goes ahead anyway.
FORK_WAIT = 2.0
_GATE = threading.Condition(threading.Lock())
_GATE_STATE = {"running": 0, "forking": False}


def gate_enter() -> None:
    """A Z3 call begins (after a fork that is under way): :func:`gate_leave` when it ends."""
    with _GATE:
        while _GATE_STATE["forking"]:
            _GATE.wait()
        _GATE_STATE["running"] += 1


def gate_leave() -> None:
    with _GATE:
        _GATE_STATE["running"] -= 1
        if not _GATE_STATE["running"]:
            _GATE.notify_all()


@contextmanager
def z3_work() -> Iterator[None]:
    """Z3 work outside a check (a new context, the encoding of its constraints, a strategy) under the
    fork gate too: a fork in the middle of such calls can copy a mutex Z3 holds (a child hung in
    ``Z3_mk_context_rc`` while another thread built a fresh context)."""
    gate_enter()
    try:
        yield
    finally:
        gate_leave()


def _before_fork() -> None:
    with _GATE:
        _GATE_STATE["forking"] = True
        _GATE.wait_for(lambda: not _GATE_STATE["running"], timeout=FORK_WAIT)


def _after_fork_in_parent() -> None:
    with _GATE:
        _GATE_STATE["forking"] = False
        _GATE.notify_all()


def _after_fork_gate_in_child() -> None:
    global _GATE
    _GATE = threading.Condition(threading.Lock())
    _GATE_STATE.update(running=0, forking=False)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                        after_in_child=_after_fork_gate_in_child)

"""Locks that survive ``fork()``: every lock smtdims keeps is made through :func:`fork_safe`.

``fork()`` copies only the calling thread: a lock that another thread held at that moment stays
held in the child forever (multiprocessing's default start method on Linux, data loaders and
servers fork). Every lock smtdims keeps is registered here and reinitialised in the child
(``_at_fork_reinit``, what the standard library does for its own locks); modules with more
state (the ISL worker, the shared Z3 context, the watchdog) register hooks of their own.
"""

from __future__ import annotations

import os
import weakref
from typing import Any

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

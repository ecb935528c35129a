"""Room on Python's stack for deeply nested expressions, without changing it for everyone.

Python's recursion limit is process-wide: raising it changes every other thread's limit too. So
:func:`deep_recursion` raises it only for a question whose expressions need it, counts the
questions in flight that raised it, and restores it after the last.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext

FRAMES_PER_LEVEL = 12  # Python frames one nesting level costs, at most (the parser ~6, atoms() 2)
_FRAMES_SPARE = 300  # frames kept free for what a question calls besides the recursion (Z3's API, JAX)

_RECURSION = {"users": 0, "saved": 0}
_RECURSION_LOCK = threading.Lock()


def _after_fork_in_child() -> None:
    """Other threads' deep calls did not survive a fork (one may have held the lock): start over."""
    global _RECURSION_LOCK
    _RECURSION_LOCK = threading.Lock()
    _RECURSION["users"] = 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _stack_within(n: int) -> bool:
    """Whether the caller's stack is at most ``n`` frames deep (one C-level walk, not a Python loop)."""
    if n < 0:
        return False
    try:
        sys._getframe(n + 1)  # counted from deep_recursion's frame, as the stack it measures
    except ValueError:
        return True
    return False


_AS_IS = nullcontext()  # reusable: the recursion limit stays as it is


def deep_recursion(depth: int | None = None, limit: int = 20_000) -> AbstractContextManager[None]:
    """Room for expressions nested ``depth`` levels deep (``None``: unknown, assume deep).

    The limit is raised only when the stack now in use plus ``FRAMES_PER_LEVEL`` frames per level
    does not fit under it (200 nested ``max`` under the default limit of 1,000); the expressions of
    real programs nest a few levels and leave the limit as it is. When raised, it is counted across
    threads, so one thread cannot restore the limit while another is deep. (Every question enters
    this: the common case returns a shared no-op context, and the stack is measured by one C call.)
    """
    if depth is not None and _stack_within(sys.getrecursionlimit() - depth * FRAMES_PER_LEVEL - _FRAMES_SPARE):
        return _AS_IS
    return _raised_recursion(limit)


@contextmanager
def _raised_recursion(limit: int) -> Iterator[None]:
    with _RECURSION_LOCK:
        if _RECURSION["users"] == 0:
            _RECURSION["saved"] = sys.getrecursionlimit()
            if _RECURSION["saved"] < limit:
                sys.setrecursionlimit(limit)
        _RECURSION["users"] += 1
    try:
        yield
    finally:
        with _RECURSION_LOCK:
            _RECURSION["users"] -= 1
            if _RECURSION["users"] == 0:
                sys.setrecursionlimit(_RECURSION["saved"])

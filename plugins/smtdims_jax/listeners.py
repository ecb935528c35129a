"""Observers of the decisions made at JAX's seam (audit mode, ``smtdims run``, the pytest plugin).

Its own module because both the seam's hooks (:mod:`.seam`) and equality (:mod:`.equality`) report
to them, and the seam installs equality.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable
from typing import Any

from smtdims import forking

Listener = Callable[[dict[str, Any]], None]

# The listeners called for every decision; changed in place only (the hot paths test it for emptiness).
CALLED: list[Listener] = []
_LOCK = forking.fork_safe(threading.Lock())


def add_listener(fn: Listener) -> None:
    """Call ``fn(event)`` for every decision made while installed (see :func:`emit` for the keys)."""
    with _LOCK:
        CALLED.append(fn)


def remove_listener(fn: Listener) -> None:
    with _LOCK:
        if fn in CALLED:
            CALLED.remove(fn)


def listeners() -> tuple[Listener, ...]:
    """The listeners now called for every decision (a copy)."""
    with _LOCK:
        return tuple(CALLED)


def emit(**event: Any) -> None:
    """Events: ``kind`` ("bounds" | "compare" | "eq"), ``question``, ``answer``, ``answered_by``
    ("stock" | "smtdims"), plus kind-specific keys (``expr``, ``prec``, ``stock``, ``lhs``, ``rhs``,
    ``proven_equal``, ``asked_by``, ``scope``, ``error``). Listener errors are reported as warnings, never
    raised into JAX.

    ``eq`` events are the ``==``/``!=`` that code wrote, not the key comparisons of dict/set
    lookups and JAX's caches (see :func:`.equality.asker`)."""
    for fn in list(CALLED):
        try:
            fn(event)
        except Exception as err:  # pragma: no cover - a broken listener must not break exports
            warnings.warn(f"smtdims listener {fn!r} failed: {err!r}", stacklevel=3)


__all__ = ["CALLED", "Listener", "add_listener", "emit", "listeners", "remove_listener"]

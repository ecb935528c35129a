"""How much Z3 memory lives: the Z3 sides built in the shared context, least recently used family
released past a bound, every one built in a retired context released with it, and the freed heap
pages given back to the system after a question. Without it, memory follows every scope ever asked
about, not the scopes in use.
"""

from __future__ import annotations

import ctypes
import itertools
import math
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable

import z3

from .. import clocks
from .context import Z3_LOCK, replace_shared
from .counters import COUNTERS

# Objects whose Z3 side is built in the shared context (a session's solvers and terms, a recession
# cone's LP), by family (a scope's session with its focus sessions and cones), least recently used
# family first (under Z3_LOCK). Past the limit the oldest family's Z3 sides are released
# (``_release()``; each is rebuilt on its next use): a solver holding a scope's constraints costs
# 0.1-4 MB of Z3 memory, and sessions live as long as their scope (JAX) or the registry's capacity
# (public calls), so without this bound memory grows with the number of scopes asked about, not with
# the number in use. By family, not by object: one question on a large scope touches many focus
# sessions, and releasing them one by one rebuilt 500-constraint solvers within a question.
LIVE_Z3_FAMILIES = 16
_LIVE: OrderedDict[int, weakref.WeakSet] = OrderedDict()
_FAMILY_KEYS = itertools.count(1)


def new_family() -> int:
    return next(_FAMILY_KEYS)


def touch(holder: object, family: int) -> None:
    """``holder`` (with ``_release()`` and a ``_z3_ctx``) has just used its Z3 side: its family is the
    most recent."""
    with Z3_LOCK:
        members = _LIVE.pop(family, None)
        if members is None:
            members = weakref.WeakSet()
        members.add(holder)
        _LIVE[family] = members
        if len(_LIVE) > LIVE_Z3_FAMILIES:
            for key in [k for k, m in _LIVE.items() if not m]:  # families whose objects are all gone
                del _LIVE[key]
        while len(_LIVE) > LIVE_Z3_FAMILIES:
            for other in list(_LIVE.popitem(last=False)[1]):
                other._release()
            _trim_state["due"] = True


def retire_shared(ctx: z3.Context) -> None:
    """Replace the shared context after the watchdog interrupted a check in it.

    Z3's interrupt can outlive the check it was meant for (in some code paths the next
    check on the context comes back "canceled"), so an interrupted shared context is not
    used again: every session rebuilds its solver in the new one on its next check.
    """
    with Z3_LOCK:
        if replace_shared(ctx):
            # now, not at their next check: a session that is not asked again would keep the old
            # context alive with every term in it
            for members in list(_LIVE.values()):
                for holder in list(members):
                    if holder._z3_ctx is ctx:
                        holder._release()
            _trim_state["due"] = True


# Giving released Z3 memory back to the system. Z3 allocates with malloc; after a family or a retired
# context is released, glibc keeps the freed pages in its heaps (fragmented by what is still live),
# and RSS stays tens of MB above what is in use after many large scopes. ``malloc_trim`` returns them.
# It costs milliseconds on a large heap, so it runs at the end of a public question (never inside one:
# that question's latency), only after a release or a question's fresh context (freed with the
# question), at most once per TRIM_EVERY seconds (math.inf: never).
TRIM_EVERY = 1.0
_trim_state = {"due": False, "last": -math.inf}


def mark_trim_due() -> None:
    """Z3 memory was freed (or will be, with its question): the next question's end trims the heap."""
    _trim_state["due"] = True


def _find_malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None (musl, macOS, Windows: nothing to do there)."""
    try:
        fn = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError, TypeError):  # TypeError: Windows has no CDLL(None)
        return None
    fn.argtypes, fn.restype = [ctypes.c_size_t], ctypes.c_int
    return fn


_MALLOC_TRIM = _find_malloc_trim()


def _trim_after_question() -> None:
    """At the end of an outermost question: return freed heap pages if a release made them free."""
    if not _trim_state["due"] or _MALLOC_TRIM is None:
        return
    now = time.monotonic()
    if now - _trim_state["last"] < TRIM_EVERY:
        return
    _trim_state["due"], _trim_state["last"] = False, now
    COUNTERS.bump("heap_trims")
    _MALLOC_TRIM(0)


clocks.AFTER_QUESTION.append(_trim_after_question)

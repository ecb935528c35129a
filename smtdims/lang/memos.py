"""Memos bounded by the size of what they keep, and the size limits of the caches of expressions.

Why not ``functools.lru_cache``: it keeps any result. A memo of parsed expressions that keeps
thousands of expanded powers of thousands of terms each holds hundreds of thousands of tuples
alive in a long-running process, and every full garbage collection then walks them all, inside
whichever call triggered it (answers past their deadline). Parsing such an expression again
costs milliseconds.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

# Caches (a scope's answers, the Z3 encoder's terms) keep expressions of at most this many terms: an
# expanded power of 12,000 terms costs megabytes as a key (its text and Z3 terms with it), and asking
# it again costs less than keeping every such question alive.
CACHE_MAX_TERMS = 2_000
# What the text-to-IR memos keep in all (each), in Expr.size() units (terms and factors, operands of
# max/mod... included; about 2 tracked objects a unit): a process that parsed many large expressions
# must not keep them all alive for the garbage collector to walk. Nested operands count: counted in
# terms alone, the memos' objects kept growing after their totals stopped.
PARSE_CACHE_SIZE = 30_000


_ABSENT = object()


class SizedMemo:
    """A thread-safe, least-recently-used memo of ``fn(key)`` that keeps at most ``entries`` results of
    ``total`` size (``size(result)``) together, none of size more than :data:`CACHE_MAX_TERMS`."""

    def __init__(self, fn: Callable[[Any], Any] | None, entries: int, total: int, size: Callable[[Any], int]):
        """``fn`` None: a store whose values the caller computes (:meth:`peek`, then :meth:`keep`)."""
        from ..forking import fork_safe

        self._fn, self._entries, self._total, self._size = fn, entries, total, size
        self._data: OrderedDict[Any, tuple[Any, int]] = OrderedDict()
        self._held = 0  # size held
        self._lock = fork_safe(threading.Lock())
        if fn is not None:
            functools.update_wrapper(self, fn)

    def __call__(self, key: Any) -> Any:
        hit = self.peek(key, _ABSENT)
        if hit is not _ABSENT:
            return hit
        if self._fn is None:
            raise TypeError("this SizedMemo computes nothing: peek(key), then keep(key, value)")
        return self.keep(key, self._fn(key))  # an exception is not memoised (as with lru_cache)

    def peek(self, key: Any, default: Any = None) -> Any:
        """The result kept for ``key`` (now the most recently used), else ``default``; computes nothing."""
        with self._lock:
            hit = self._data.get(key)
            if hit is None:
                return default
            self._data.move_to_end(key)
            return hit[0]

    def keep(self, key: Any, value: Any) -> Any:
        """Keep ``value`` for ``key`` unless one is kept already, and return the one kept: threads
        that raced to compute it all get one value. A value too large to keep is returned, not kept."""
        n = self._size(value)
        if n > CACHE_MAX_TERMS:
            return value
        with self._lock:
            kept = self._data.get(key)
            if kept is None:
                self._data[key] = (value, n)
                self._held += n
            else:  # another thread computed it meanwhile: every caller gets the one kept
                value = kept[0]
            while len(self._data) > self._entries or self._held > self._total:
                self._held -= self._data.popitem(last=False)[1][1]
        return value

    def __len__(self) -> int:
        return len(self._data)

    @property
    def held(self) -> int:
        """The total size of the kept results (at most ``total``)."""
        return self._held

    def entries(self) -> list[tuple[Any, int]]:
        """``(result, size)`` of each kept result, least recently used first: a copy, for diagnostics."""
        with self._lock:
            return list(self._data.values())

    def cache_clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._held = 0


def sized_memo(entries: int, total: int, size: Callable[[Any], int]) -> Callable[[Callable[[Any], Any]], SizedMemo]:
    """Decorator form of :class:`SizedMemo`."""
    return lambda fn: SizedMemo(fn, entries, total, size)

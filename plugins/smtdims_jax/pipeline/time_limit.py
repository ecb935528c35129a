"""A limit for Python code that has no deadline of its own: an export under a candidate specification.

JAX's symbolic arithmetic can run for minutes under some constraints (a product of floor divisions
set equal to a constant: every division of a reshape is normalised against it), and it calls no
hook of smtdims' while it does; the whole fix's deadline must hold all the same. A timer thread
raises :class:`TimeLimitExceeded` in the limited thread (``PyThreadState_SetAsyncExc``), as Ctrl-C
raises KeyboardInterrupt in the main thread: between two bytecodes, never inside C code (a Z3
check, XLA), which ends when it returns.

Why it is safe: smtdims' own code is written to be cut anywhere by KeyboardInterrupt (a solver
worker interrupted mid-request is killed, a question's lock is released by its ``with``); the timer
fires only while the limited thread runs none of smtdims' code at all (its frames are read first,
and read again a few milliseconds later otherwise), which makes even that case rare. The exception
derives from BaseException so that the ``except Exception`` of a framework (Keras re-raises shape
errors as its own) does not swallow it. Past the block a pending exception is withdrawn, so it never
escapes where no one expects it.
"""

from __future__ import annotations

import contextlib
import ctypes
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import smtdims

_SMTDIMS = (str(Path(smtdims.__file__).resolve().parent), str(Path(__file__).resolve().parents[1]))
# frames that only wait for the limited export or wrap it (the broadcast hint's ``jax.export.export``):
# they hold no state a cut could break, unlike the reasoning JAX calls from inside the export
_WRAPPERS = (str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1] / "hints.py"))
_RETRY = 0.005  # seconds between two readings of the limited thread's frames


class TimeLimitExceeded(BaseException):  # noqa: N818 - the name says what happened, as KeyboardInterrupt's does
    """The block ran past its limit (raised in the limited thread by the timer)."""


def _in_smtdims(frame: object, outer: object) -> bool:
    """Whether a frame of the block (those inside ``outer``, the frame that opened it) runs smtdims'
    reasoning (the pipeline's own frames do not count)."""
    f = frame
    while f is not None and f is not outer:
        name = f.f_code.co_filename  # type: ignore[attr-defined]
        if name.startswith(_SMTDIMS) and not name.startswith(_WRAPPERS):
            return True
        f = f.f_back  # type: ignore[attr-defined]
    return False


def _raise_in(thread_id: int, exc: type[BaseException] | None) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id),
                                               ctypes.py_object(exc) if exc is not None else None)


@contextlib.contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Raise :class:`TimeLimitExceeded` in this thread when the block runs past ``seconds`` (None: no limit)."""
    if seconds is None:
        yield
        return
    target = threading.get_ident()
    outer = sys._getframe(2)  # the frame whose `with` opened the block (this generator's, contextlib's inside it)
    lock = threading.Lock()
    state = {"done": False, "fired": False}
    end = time.monotonic() + max(0.0, seconds)

    def watch() -> None:
        while True:
            left = end - time.monotonic()
            if left > 0:
                time.sleep(min(left, 0.05))
            with lock:
                if state["done"]:
                    return
                if left > 0:
                    continue
                frame = sys._current_frames().get(target)
                if frame is not None and not _in_smtdims(frame, outer):
                    state["fired"] = True
                    _raise_in(target, TimeLimitExceeded)
                    return
            time.sleep(_RETRY)

    timer = threading.Thread(target=watch, name="smtdims-time-limit", daemon=True)
    timer.start()
    try:
        yield
    finally:
        with lock:
            state["done"] = True
            if state["fired"]:
                _raise_in(target, None)  # not delivered yet (the block ended first): withdrawn

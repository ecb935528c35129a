"""Ctrl-C on the command line: never lost, always exit status 130."""

from __future__ import annotations

import contextlib
import gc
import importlib.machinery
import os
import signal
import sys
import threading
from types import CodeType, FrameType
from typing import Any

from ..lang.results import json_dumps
from ..watchdog import CTRL_C
from .common import EXIT_INTERRUPTED


class Interrupts:
    """Ctrl-C that is never lost: a SIGINT handler for the CLI's run.

    Python runs a signal handler at the next bytecode of the main thread. After C work (an
    extension module's import, an XLA compile) that is often JAX's ``_xla_gc_callback`` (a
    ``gc.callbacks`` hook), where gc prints "Exception ignored" and drops the KeyboardInterrupt;
    a bare ``except:`` in a library drops it too, and the run would go on to exit 1. So the handler
    records the Ctrl-C; it raises KeyboardInterrupt only where the exception can travel (not
    inside a gc callback, a ``__del__`` or an extension's initialisation, not while a
    KeyboardInterrupt is already unwinding, not in the frame of ``home``, the function that takes
    the interrupt in hand), and a watcher thread re-delivers SIGINT every ``REDELIVER_S`` seconds
    until that function has it. The CLI returns 130 whenever one was recorded. (A Ctrl-C while
    ``smtdims.cli`` itself is being imported gets Python's default: a traceback, and death by
    SIGINT, which shells report as 130 too.)
    """

    REDELIVER_S = 0.2

    def __init__(self, home: CodeType) -> None:
        self.home = home
        self.seen = False
        self.done = False  # home has the interrupt in hand (or finished): never raise again
        self._prev: Any = None
        self._stop = threading.Event()
        self._watcher: threading.Thread | None = None
        self.installed = False  # it took SIGINT from Python's default handler
        self._wakeup: tuple[int, int] | None = None  # the pipe SIGINT's byte lands in (read, write)
        self._reader: threading.Thread | None = None

    def install(self) -> Interrupts:
        """Take SIGINT if Python's default handler has it, in the main thread; otherwise do nothing
        (an embedding program's own handler, or SIGINT ignored, stays as it is)."""
        if threading.current_thread() is threading.main_thread() \
                and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            self._prev = signal.signal(signal.SIGINT, self._on_sigint)
            self.installed = True
            self._see_at_once()
        return self

    def _see_at_once(self) -> None:
        """Have SIGINT's byte written to a pipe the moment it lands (``signal.set_wakeup_fd``) and a thread
        interrupt the main thread's running Z3 check from there (:data:`smtdims.watchdog.CTRL_C`): Python's
        handler runs only at the main thread's next bytecode, after the check. Not where the program
        already has a wakeup fd (an event loop's)."""
        r, w = os.pipe()
        os.set_blocking(w, False)
        try:
            prev = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
        except (ValueError, OSError):
            os.close(r)
            os.close(w)
            return
        if prev != -1:  # someone else's: give it back
            signal.set_wakeup_fd(prev)
            os.close(r)
            os.close(w)
            return
        self._wakeup = (r, w)
        CTRL_C.take()
        self._reader = threading.Thread(target=self._read_wakeup, args=(r,), name="smtdims-ctrl-c-at-once", daemon=True)
        self._reader.start()

    @staticmethod
    def _read_wakeup(r: int) -> None:
        while True:
            try:
                got = os.read(r, 64)
            except OSError:
                return
            if not got:  # the write end closed: the run is over
                return
            if int(signal.SIGINT) in got:
                CTRL_C.pressed()

    def close(self, *, ignore_after: bool = False) -> None:
        """Stop re-delivering, then give SIGINT back to the handler it had; with ``ignore_after``
        (the program ends with 130 now) ignore SIGINT instead, set *before* the watcher stops, so that
        no Ctrl-C (nor one the watcher delivered that is still pending) ever meets Python's default
        handler: it would raise KeyboardInterrupt outside ``home`` and the interpreter would end by
        SIGINT (status -2) after "interrupted" was said."""
        self.done = True
        if ignore_after and self.installed:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            self._prev = None
        self._stop.set()
        if self._watcher is not None:
            self._watcher.join()
        if self._wakeup is not None:
            CTRL_C.release()
            signal.set_wakeup_fd(-1)
            r, w = self._wakeup
            os.close(w)  # the reader sees the end and returns
            if self._reader is not None:
                self._reader.join(timeout=1.0)
            os.close(r)
            self._wakeup = None
        if self._prev is not None:
            signal.signal(signal.SIGINT, self._prev)
            self._prev = None

    def _on_sigint(self, signum: int, frame: FrameType | None) -> None:
        self.seen = True
        if self.done:
            return
        if self._watcher is None:
            self._watcher = threading.Thread(target=self._redeliver, name="smtdims-ctrl-c", daemon=True)
            self._watcher.start()
        if frame is None or frame.f_code is self.home or _unwinding_interrupt() or _swallowing(frame):
            return  # the watcher delivers it again where it can travel
        raise KeyboardInterrupt

    def _redeliver(self) -> None:
        main_id = threading.main_thread().ident
        while not self._stop.wait(self.REDELIVER_S):
            if main_id is not None:
                signal.pthread_kill(main_id, signal.SIGINT)


def _unwinding_interrupt() -> bool:
    """A KeyboardInterrupt is being handled (an ``except``/``finally`` on its way out): let it finish."""
    return isinstance(sys.exc_info()[1], KeyboardInterrupt)


def _swallowing(frame: FrameType) -> bool:
    """Whether ``frame`` runs where an exception is dropped or fatal: a ``gc.callbacks`` hook, a
    ``__del__`` or a weakref callback (Python prints "Exception ignored" and goes on), or an extension
    module's initialisation (a KeyboardInterrupt in Python code that jaxlib's extension calls while it
    initialises aborts the process, SIGABRT), or Z3's Python wrappers (an object whose ``__init__`` an
    exception cut short fails in its ``__del__``: "Exception ignored ... no attribute 'owner'"; they run
    for microseconds, a check's time is spent in C). A pure-Python import is not one: the user's module
    may sleep or compute at import for minutes (``smtdims export file.py:fn``), and a KeyboardInterrupt
    there travels as from any other code."""
    hooks = {getattr(cb, "__code__", None) for cb in gc.callbacks}
    f: FrameType | None = frame
    while f is not None:
        code = f.f_code
        if code in hooks or code.co_name == "__del__" or code in _EXTENSION_INIT \
                or os.path.basename(code.co_filename) in ("weakref.py", "_weakrefset.py") \
                or _in_z3(code.co_filename):  # weakref callbacks too; Z3's wrappers
            return True
        f = f.f_back
    return False


def _in_z3(filename: str) -> bool:
    """Whether ``filename`` is one of Z3's Python wrappers (``z3/z3.py``, ``z3/z3core.py``, ...)."""
    head, name = os.path.split(filename)
    return os.path.basename(head) == "z3" and name.startswith("z3")


# The frames that run an extension module's C initialisation (Python code it calls sits above them).
_EXTENSION_INIT = frozenset({importlib.machinery.ExtensionFileLoader.create_module.__code__,
                             importlib.machinery.ExtensionFileLoader.exec_module.__code__})


def forget_unhandled_interrupt() -> None:
    """Clear CPython's note of a KeyboardInterrupt that escaped ``exec``'d code, once the CLI has the
    Ctrl-C in hand and exits 130.

    CPython runs ``exec``/``eval`` of a string through ``PyRun_StringFlags``, which notes in a
    process-wide flag a KeyboardInterrupt escaping that code, and does not clear the note when the
    exception is caught further up; at exit the interpreter then kills itself by SIGINT (status -2,
    after "interrupted" was said) instead of exiting 130. A Ctrl-C that lands in a dataclass's
    generated ``__eq__`` while a module imports does exactly that (measured: 7 runs in 60 on a busy
    machine). Every such run resets the flag before it starts, so running an empty string clears it.
    """
    exec("")  # the reset, not the code, is the point


def interrupted(json_out: bool) -> int:
    """Say that Ctrl-C stopped the run (with --json also ``{"error": {...}}`` on stdout); 130."""
    if json_out:
        with contextlib.suppress(OSError):
            print(json_dumps({"error": {"type": "KeyboardInterrupt", "message": "interrupted (Ctrl-C)",
                                        "exit_status": EXIT_INTERRUPTED}}), flush=True)
    with contextlib.suppress(OSError):
        print("smtdims: interrupted", file=sys.stderr)
    return EXIT_INTERRUPTED

"""Temporary directories that do not outlive their process, however it ends.

``tempfile.mkdtemp`` and ``TemporaryDirectory`` leave their directory behind when the process ends
by a signal: SIGTERM's default action ends it without ``finally`` blocks or ``atexit``, and nothing
runs at all after SIGKILL (the export pipeline's verification directories would stay after both).
Here:

- **exit** (normal, ``sys.exit``, an uncaught exception): an ``atexit`` hook removes what is left;
- **SIGTERM**: while this process holds a directory, and only where the program has no SIGTERM
  handler of its own (the disposition is ``SIG_DFL``) and the first directory is made in the main
  thread, a handler removes them and then ends the process as SIGTERM's default action does (it
  restores ``SIG_DFL`` and sends the signal again: the exit status is the same, -15). A program with
  its own handler keeps it (its exit then runs the ``atexit`` hook); ``SIG_IGN`` stays ignored. When
  the last directory is removed, ``SIG_DFL`` is restored: the handler exists only while there is
  something to clean;
- **SIGKILL** (or a crash): each directory's name holds its owner's pid and the owner's start time
  (``smtdims.<pid>.<start>.<tag>.<random>`` in ``tempfile.gettempdir()``); the first directory a
  later process makes, and :func:`sweep`, remove those of owners that no longer run, if they belong
  to this user (the start time tells a reused pid from the owner: Linux; elsewhere a live pid keeps
  its directories, the safe side).

A forked child owns none of its parent's directories (it does not remove them at its exit).

For the export pipeline (``plugins/smtdims_jax/pipeline``): ``tempdirs.mkdtemp(tag)`` in place of
``tempfile.mkdtemp(prefix=...)`` (with ``tempdirs.remove(path)`` in place of ``shutil.rmtree``), and
``tempdirs.TemporaryDirectory(tag)`` in place of ``tempfile.TemporaryDirectory(prefix=...)``.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import signal
import stat
import tempfile
import threading
from types import TracebackType

PREFIX = "smtdims."
_NAME = re.compile(r"smtdims\.(\d+)\.(\d+)\.")
_LOCK = threading.RLock()  # reentrant: the SIGTERM handler may run while the main thread holds it
_LIVE: set[str] = set()  # this process's directories
_STATE = {"swept": False, "atexit": False, "handler": False}


def _start_time(pid: int) -> int:
    """When ``pid`` started (Linux: clock ticks since boot, ``/proc/<pid>/stat`` field 22); 0 unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return 0


def _owner_runs(pid: int, start: int) -> bool:
    """Whether the process that made a directory still runs (a reused pid is not it)."""
    if pid == os.getpid() or os.name != "posix":  # Windows: os.kill(pid, 0) would end the process
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process has the pid now: ours only if the start time says so
    except OSError:  # pragma: no cover - cannot tell: keep
        return True
    now = _start_time(pid)
    return not (start and now and now != start)


def sweep(root: str | None = None) -> list[str]:
    """Remove the directories left in ``root`` (default: ``tempfile.gettempdir()``) by processes of
    this user that no longer run; returns their paths. Never follows a link, never touches another
    user's directory or a running process's."""
    root = root or tempfile.gettempdir()
    removed = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return removed
    uid = os.getuid() if hasattr(os, "getuid") else None
    for entry in entries:
        m = _NAME.match(entry.name)
        if m is None:
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode) or (uid is not None and st.st_uid != uid):
            continue
        if _owner_runs(int(m.group(1)), int(m.group(2))):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(entry.path)
    return removed


def mkdtemp(tag: str = "tmp", root: str | None = None) -> str:
    """A new directory, removed at exit, on SIGTERM, or after a SIGKILL by the next process that makes
    one (see the module's docstring); ``tag`` says what it is for (letters, digits, ``-``, ``_``)."""
    if not re.fullmatch(r"[\w-]*", tag):
        raise ValueError(f"tag must be letters, digits, '-' or '_', got {tag!r}")
    with _LOCK:
        first = not _STATE["swept"]
        _STATE["swept"] = True
    if first:
        sweep(root)
    pid = os.getpid()
    path = tempfile.mkdtemp(prefix=f"{PREFIX}{pid}.{_start_time(pid)}.{tag}.", dir=root)
    with _LOCK:
        _LIVE.add(path)
        if not _STATE["atexit"]:
            atexit.register(_remove_all)
            _STATE["atexit"] = True
    _install_sigterm()
    return path


def remove(path: str) -> None:
    """Remove a directory made by :func:`mkdtemp` (and forget it)."""
    shutil.rmtree(path, ignore_errors=True)
    with _LOCK:
        _LIVE.discard(path)
        last = not _LIVE
    if last:
        _restore_sigterm()


class TemporaryDirectory:
    """``with TemporaryDirectory("verify") as d:``: :func:`mkdtemp`, removed when the block ends."""

    def __init__(self, tag: str = "tmp", root: str | None = None) -> None:
        self.name = mkdtemp(tag, root)

    def __enter__(self) -> str:
        return self.name

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.cleanup()

    def cleanup(self) -> None:
        remove(self.name)


def _remove_all() -> None:
    with _LOCK:
        paths = list(_LIVE)
        _LIVE.clear()
    for p in paths:
        shutil.rmtree(p, ignore_errors=True)


def _on_sigterm(signum: int, frame: object) -> None:
    """Remove this process's directories, then end it as SIGTERM's default action does."""
    _remove_all()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def _install_sigterm() -> None:
    """Only over ``SIG_DFL`` (the program has no handler), and only from the main thread (where
    Python allows it; elsewhere the ``atexit`` hook and the next process's sweep remain)."""
    if not hasattr(signal, "SIGTERM") or threading.current_thread() is not threading.main_thread():
        return
    try:
        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _on_sigterm)
            _STATE["handler"] = True
    except (ValueError, OSError):  # pragma: no cover - not the main interpreter
        pass


def _restore_sigterm() -> None:
    if not _STATE["handler"] or threading.current_thread() is not threading.main_thread():
        return
    try:
        if signal.getsignal(signal.SIGTERM) is _on_sigterm:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        _STATE["handler"] = False
    except (ValueError, OSError):  # pragma: no cover
        pass


def live() -> frozenset[str]:
    """This process's directories not yet removed (diagnostics: none should outlive its owner)."""
    with _LOCK:
        return frozenset(_LIVE)


def handles_sigterm() -> bool:
    """Whether SIGTERM's handler is this module's now (it is, exactly while a directory lives)."""
    return signal.getsignal(signal.SIGTERM) is _on_sigterm


def _after_fork_in_child() -> None:
    """The parent's directories are the parent's: a child does not remove them (nor keep our handler)."""
    global _LOCK
    _LOCK = threading.RLock()
    _LIVE.clear()
    _restore_sigterm()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)

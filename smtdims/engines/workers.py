"""Worker processes killed when an answer is late: the one way smtdims stops work that will not stop.

Two engines can ignore being asked to stop: ISL while it runs (islpy holds the interpreter, and
its operation quota does not count everything) and Z3's nonlinear core (on high-degree products it
can run on for many seconds past ``ctx.interrupt()``, and for good on a monomial of a hundred
factors). A thread cannot be killed; a process can. So both run here: a script started with
this interpreter reads one JSON request per line and writes one JSON answer per line; a caller
that has not had its answer by its limit kills the process (SIGKILL, then ``wait``) and a new
one starts on the next call. Nothing is left running after a late answer, and nothing of the
killed process's state can leak into later answers.

Answers are read in the calling thread with ``select`` on the pipe (a reader thread would cost a
GIL hand-off per answer, a sizeable part of a small answer's time): POSIX only. Ctrl-C while a
caller waits raises KeyboardInterrupt in the caller as usual, and the worker, whose answer is now
unwanted, is killed.

A worker ends with its caller, however the caller ends (exit, SIGTERM, SIGKILL: nobody is left to
kill it then): it holds the read end of a pipe whose write end only the caller holds (closed in a
forked child), and each request says when the caller would kill it (``expires``); the worker's side
is :mod:`smtdims.engines._lifeline`.
"""

from __future__ import annotations

import json
import math
import os
import select
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager

from . import _lifeline

RETRY_FIRST, RETRY_MOST = 1.0, 60.0  # seconds before a worker whose start failed is tried again (doubling)
_SPIN = 0.002  # seconds to poll for an answer before blocking, while a core is idle
# Each poll gives the core away if another process waits for it (on an idle core sched_yield
# returns at once): on a busy machine that process may be the very worker polled for, and a poll
# that kept the core made each round trip cost a scheduler slice, milliseconds.
_yield = getattr(os, "sched_yield", lambda: None)
_CORES = os.cpu_count() or 1
_IDLE = [0.0, False]  # (when looked up, whether a core was idle)


def idle_core() -> bool:
    """Whether polling can pay: a core is free for the worker polled for (looked up twice a second
    at most). With every core taken, a poll only takes CPU from the process it waits for: beside
    CPU-bound processes, cold exact bounds are slower polling than blocking at once, where on an
    idle machine the two cost the same."""
    now = time.monotonic()
    if now - _IDLE[0] > 0.5:
        # this process and one other may run (the worker polled for, itself polling between
        # requests), not more: a third would wait for a core while this one polled
        _IDLE[1] = runnable() <= _CORES
        _IDLE[0] = now
    return bool(_IDLE[1])


def runnable() -> float:
    """Processes running or waiting for a core now, this one included (Linux: ``/proc/loadavg``'s
    fourth field), else the 1-minute load average; ``inf`` where neither is known (do not poll).

    Why not the load average alone: it trails a change of load by a minute. A build or a test
    run that starts beside an export keeps the average under the core count for tens of seconds,
    while every poll takes the core from the worker it waits for."""
    try:
        with open("/proc/loadavg", "rb") as f:
            return float(f.read().split()[3].split(b"/")[0])
    except (OSError, IndexError, ValueError):
        pass
    try:
        return os.getloadavg()[0]
    except (OSError, AttributeError):
        return math.inf


# Every worker and pool, so that a forked child forgets the parent's processes (one at-fork hook)
_LIVE: weakref.WeakSet = weakref.WeakSet()


class Worker:
    """One worker process: one request at a time, killed when an answer is late or unwanted."""

    def __init__(self, script: str, spin: float = _SPIN) -> None:
        self.script = os.path.join(os.path.dirname(os.path.abspath(__file__)), script)
        self.spin = spin  # seconds to poll before blocking: for engines that answer in well under a millisecond
        self.lock = threading.Lock()
        self.proc: subprocess.Popen | None = None
        self.lifeline: int | None = None  # the write end of the process's lifeline (never written)
        self.buffer = b""
        self.generation = 0  # bumped per start: state sent to an earlier process is gone
        # No process can run here (not POSIX): callers use their in-process path for good.
        self.broken = os.name != "posix"
        # A process failed to start (it died, or was slower than its start limit, or the system
        # refused to start it): callers get no answer from it until ``retry_at``, then it is tried
        # again (:data:`RETRY_FIRST` seconds, doubling to :data:`RETRY_MOST`). Never for good: a
        # start that fails once on a loaded machine (a fork refused, a start slowed past its
        # limit) would keep the worker off for the process's life, and the Z3 checks would run in
        # process, where Z3 may ignore the deadline's interrupt for as long as an hour.
        self.failed_starts = 0
        self.retry_at = 0.0
        self.broken_by_clock = False  # the last start failed by being slower than its limit, not by dying
        self.kills = 0
        self.pid = os.getpid()
        self.ready = False  # the process said it is ready
        _LIVE.add(self)

    @property
    def down(self) -> bool:
        """Whether no answer can come from this worker now: never here, or inside a start's back-off."""
        return self.broken or (self.failed_starts > 0 and time.monotonic() < self.retry_at)

    def _start_failed(self, by_clock: bool) -> None:
        self.failed_starts += 1
        self.retry_at = time.monotonic() + min(RETRY_MOST, RETRY_FIRST * 2 ** (self.failed_starts - 1))
        self.broken_by_clock = by_clock

    def after_fork_in_child(self) -> None:
        """A forked child: forget the parent's process (and a lock some thread may have held at the fork).

        The parent's pipes are closed here, not the parent's worker: it is still the parent's.
        A new worker starts on the child's first call.
        """
        self.lock = threading.Lock()
        proc, self.proc, self.buffer, self.pid = self.proc, None, b"", os.getpid()
        self._close_lifeline()  # the parent's worker must end with the parent, not wait for this child
        if proc is not None:
            for f in (proc.stdin, proc.stdout):
                if f is not None:
                    try:
                        f.close()
                    except OSError:  # pragma: no cover
                        pass
            proc.returncode = 0  # not this process's child: never wait for it here

    def spawn(self) -> bool:
        """Start the process without waiting for it to be ready (the caller goes on meanwhile)."""
        if self.proc is not None and self.proc.poll() is None:
            return True
        self._close_lifeline()
        try:
            r, w = os.pipe()  # both ends close on exec: only the worker gets r (pass_fds), only we keep w
        except OSError:  # out of descriptors (for now)
            self._start_failed(by_clock=False)
            return False
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p), **{_lifeline.ENV: str(r)})
        try:
            self.proc = subprocess.Popen([sys.executable, self.script], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, bufsize=0,
                                         pass_fds=(r,))
        except OSError:  # no process now (EAGAIN, ENOMEM), or none ever (no interpreter at sys.executable)
            os.close(w)
            self._start_failed(by_clock=False)
            self.proc = None
            return False
        finally:
            os.close(r)
        self.lifeline = w
        self.buffer = b""
        self.generation += 1
        self.ready = False
        return True

    def _start(self, timeout: float, start_limit: float) -> bool:
        """A ready process: spawned if need be, then its "ready" line awaited."""
        if not self.spawn():
            return False
        assert self.proc is not None
        if self.ready:
            return True
        if self._answer(timeout) != {"ready": True}:
            # it died (the engine is not importable there, ...) or did not start within the start
            # limit: it stays off for the back-off; if only the caller's deadline was short, the
            # next call retries
            died = self.proc.poll() is not None
            if died or timeout >= start_limit:
                self._start_failed(by_clock=not died)
            self._kill()
            return False
        self.ready = True
        self.failed_starts, self.broken_by_clock = 0, False
        return True

    def _answer(self, timeout: float) -> dict | None:
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        now = time.monotonic()
        end = now + timeout
        spin = min(end, now + self.spin) if self.spin and idle_core() else now
        while b"\n" not in self.buffer:
            # most ISL answers take a fraction of a millisecond: poll for them before sleeping in
            # select, whose wake-up alone costs a sizeable part of such an answer
            if not select.select([fd], [], [], 0)[0]:
                now = time.monotonic()
                if now < spin:
                    _yield()
                    continue
                # (no deadline, deadline=math.inf: block; select refuses an infinite timeout)
                if now >= end or not select.select([fd], [], [], None if end == math.inf else end - now)[0]:
                    return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return None  # the worker died
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def _kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        self.proc = None
        self._close_lifeline()

    def _close_lifeline(self) -> None:
        fd, self.lifeline = self.lifeline, None
        if fd is not None:
            try:
                os.close(fd)
            except OSError:  # pragma: no cover
                pass

    def call(self, request: dict, timeout: float, start_timeout: float, start_limit: float | None = None
             ) -> tuple[dict | None, int]:
        """(the answer, or None when it was late or the worker failed; the worker's generation).

        ``start_timeout``: seconds to wait for a new process to say it is ready; ``start_limit``:
        the start time past which a slow start counts as a failed one (the worker backs off; default: the timeout).
        """
        with self.lock:
            if self.down:
                return None, self.generation
            if self.pid != os.getpid():  # a forked child: the parent's worker is not ours to use
                self.proc, self.buffer, self.pid = None, b"", os.getpid()
            try:
                if (self.proc is None or self.proc.poll() is not None or not self.ready) and \
                        not self._start(start_timeout, start_timeout if start_limit is None else start_limit):
                    return None, self.generation
                assert self.proc is not None and self.proc.stdin is not None
                try:
                    if timeout < math.inf:  # the worker ends itself past this, if we are gone (_lifeline.alarm)
                        request = {**request, "expires": time.monotonic() + timeout + _lifeline.SLACK}
                    data = (json.dumps(request) + "\n").encode()
                    fd = self.proc.stdin.fileno()
                    while data:
                        data = data[os.write(fd, data):]
                except OSError:
                    self._kill()
                    return None, self.generation
                answer = self._answer(timeout)
            except BaseException:
                # KeyboardInterrupt (or any exception) mid-request: the answer may still come, and
                # the next request would read it as its own. A worker in that state is killed.
                self._kill()
                raise
            if answer is None:  # late, or the worker died: kill it, start afresh next time
                self.kills += 1
                self._kill()
            elif answer.pop("bye", False):  # the worker ends after this answer: the next call starts another
                self._kill()
            return answer, self.generation

    def cpu_seconds(self) -> float:
        """CPU time the live process has used (Linux; 0.0 elsewhere or with no process): tests read
        it to see that nothing runs once an answer is given or given up."""
        proc = self.proc
        if proc is None or not sys.platform.startswith("linux"):
            return 0.0
        try:
            with open(f"/proc/{proc.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Pool:
    """Up to ``size`` workers of one script, so that questions asked from several threads at once
    do not wait for each other; a caller waits for a free one no longer than it may wait at all."""

    def __init__(self, script: str, size: int, spin: float = _SPIN) -> None:
        self.script = script
        self.size = size
        self.spin = spin
        self._cond = threading.Condition(threading.Lock())
        self._free: list[Worker] = []
        self._all: list[Worker] = []
        _LIVE.add(self)

    def after_fork_in_child(self) -> None:
        """A forked child: every worker is free (the threads that held them are the parent's)."""
        self._cond = threading.Condition(threading.Lock())
        self._free = list(self._all)

    def prestart(self) -> None:
        """Have one worker's process starting (importing its engine takes a fraction of a second) before the
        first call needs it: a question about to need a worker calls this while it encodes."""
        with self._cond:
            if not hasattr(os, "fork") or any(w.proc is not None and w.proc.poll() is None for w in self._all):
                return  # one is running or starting already (one that died since is started again)
            if not self._all:
                self._all.append(Worker(self.script, self.spin))
                self._free.append(self._all[0])
            if not self._free:
                return
            w = self._free[-1]  # the one the next call takes
        if w.lock.acquire(blocking=False):  # else a call holds it and starts it itself
            try:
                if not w.down and (w.proc is None or w.proc.poll() is not None):
                    w.spawn()
            finally:
                w.lock.release()

    def stop(self) -> None:
        """Kill every worker's process (each starts again on its next call): tests and diagnostics."""
        for w in self.workers():
            with w.lock:
                w._kill()

    def workers(self) -> tuple[Worker, ...]:
        with self._cond:
            return tuple(self._all)

    @contextmanager
    def worker(self, timeout: float) -> Iterator[Worker | None]:
        """A worker of the pool for one call, or None when none was free within ``timeout`` seconds."""
        end = time.monotonic() + timeout
        with self._cond:
            while not self._free and len(self._all) >= self.size:
                left = end - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            up = [x for x in self._free if not x.down]  # one whose start just failed waits out its back-off
            if up:
                w: Worker | None = up[-1]
                self._free.remove(w)
            elif len(self._all) < self.size:
                w = Worker(self.script, self.spin)
                self._all.append(w)
            elif self._free:
                w = self._free.pop()  # every free one is backing off: the caller answers "unknown" now
            else:
                w = None
        try:
            yield w
        finally:
            if w is not None:
                with self._cond:
                    self._free.append(w)
                    self._cond.notify()


def _after_fork_in_child() -> None:
    for obj in list(_LIVE):
        obj.after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)

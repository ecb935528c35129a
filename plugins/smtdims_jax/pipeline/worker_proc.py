"""The verification process as a process: start it, find it, keep one per environment, end it.

JAX-free on purpose (stdlib and smtdims' core only, absolute imports): ``smtdims export`` starts the
process from here before this process imports JAX (:func:`start_before_jax`, called by the command line
through ``pipeline_cli.start_early``), so that the two imports (1.5-2 s each) overlap instead of following
one another; the job then adopts it by what JAX set in its environment (:func:`_adopt`). :mod:`.fresh`
adds what needs JAX (the job's environment, the device check, the jobs).
"""

from __future__ import annotations

import atexit
import json
import os
import queue
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from smtdims.engines import tempdirs
from smtdims.forking import fork_safe

_WORKER = Path(__file__).with_name("_verify_worker.py")
EXCLUSIVE = frozenset({"tpu"})  # devices one process at a time may hold
# a TPU backend starts in up to half a minute; ten times that leaves room for a machine that waits
# for a free chip
START_TIMEOUT_S = 300.0
IDLE_S = 120.0  # a worker with no job for this long exits (it holds JAX: about 150 MiB, and maybe the device)
MAX_JOBS = 32  # then it is replaced, so that what JAX keeps between jobs stays bounded
_stats = {"started": 0, "before_jax": 0}  # processes started; of them, by start_before_jax


@dataclass(frozen=True)
class Device:
    """What a verification process got: a device (``platform``, ``kind``) or, with ``cause``, none.

    ``where``: :data:`FRESH` (a fresh process, stock JAX) or :data:`IN_PROCESS` (this process holds
    the device); ``cause`` is ``""`` when the device is usable, else "device busy" (another process
    holds it), "backend unavailable" or "crashed", with JAX's ``error``.
    """

    where: str
    platform: str = ""
    kind: str = ""
    jax_version: str = ""
    cause: str = ""
    error: str = ""

    @property
    def usable(self) -> bool:
        return not self.cause

    def why_not(self) -> str:
        """The cause and what to do, in one sentence."""
        first = self.error.strip().splitlines()[-1] if self.error.strip() else ""
        first = first if len(first) <= 200 else first[:197] + "..."
        if self.cause == "device busy":
            return (f"the {self.platform or 'device'} is held by another process (one process at a time may hold "
                    f"a TPU): end it, or run the verification where nothing else holds the chip ({first})")
        if self.cause == "backend unavailable":
            return f"JAX could not start a backend in the verification process ({first})"
        return f"the verification process {self.cause or 'did not start'}" + (f": {first}" if first else "")


FRESH, IN_PROCESS = "fresh process", "this process"


class _Worker:
    """A stock-JAX interpreter that holds the device and runs verification jobs one after another.

    It starts JAX's backend first and says which device it got (:attr:`device`); later jobs deserialize,
    compile and run their artifacts in the same interpreter, where smtdims was still never imported
    (each job reports ``sys.modules``). Another environment (``JAX_ENABLE_X64``, ``JAX_PLATFORMS``...)
    gets its own.
    """

    def __init__(self, env: dict[str, str]):
        self.dir = tempdirs.mkdtemp("verify-worker")  # removed at exit, on SIGTERM, or by the next process
        shutil.copy(_WORKER, os.path.join(self.dir, "worker.py"))  # run from here: sys.path holds nothing of ours
        self.err = open(os.path.join(self.dir, "stderr.txt"), "w+")
        try:
            self.proc = subprocess.Popen([sys.executable, "worker.py", "--serve", str(IDLE_S)], cwd=self.dir,
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err, text=True,
                                         env=env)
        except BaseException:  # nothing started: leave no directory behind
            self.err.close()
            tempdirs.remove(self.dir)
            raise
        self.env = dict(env)
        self.env_added: dict[str, str] = {}  # what JAX's start set in its environment (its ready line)
        self.early = False  # started before this process imported JAX (start_before_jax): adopted by key later
        self.jobs = 0
        self.busy = False  # a job was handed over and its end not read: the worker reads no input now
        self.lock = threading.Lock()
        self._device: Device | None = None
        _stats["started"] += 1

    def device(self, timeout: float = START_TIMEOUT_S) -> Device:
        """The device this process got (read once from its first line: it starts the backend first)."""
        if self._device is not None:
            return self._device
        assert self.proc.stdout is not None
        lines: queue.Queue[str] = queue.Queue()
        reader = threading.Thread(target=lambda: lines.put(self.proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        try:
            line = lines.get(timeout=timeout)
        except queue.Empty:
            self.proc.kill()
            self._device = Device(FRESH, cause=f"did not start its backend within {timeout:g} s")
            return self._device
        try:
            ev = json.loads(line)
        except ValueError:
            ev = {}
        if isinstance(ev, dict) and "ready" in ev:
            r = ev["ready"]
            self._device = Device(FRESH, r.get("platform", ""), r.get("device", ""), r.get("jax_version", ""))
            self.env_added = {str(k): str(v) for k, v in (r.get("env_added") or {}).items()}
        elif isinstance(ev, dict) and "unavailable" in ev:
            u = ev["unavailable"]
            self._device = Device(FRESH, cause=u.get("cause", "backend unavailable"), error=u.get("error", ""))
        else:
            self.proc.wait()
            self.err.seek(0)
            self._device = Device(FRESH, cause=f"crashed (exit status {self.proc.returncode})", error=self.err.read()[-2000:])
        return self._device

    def device_known(self) -> bool:
        """Whether its first line (the device, or why none) was read: a prestarted worker's is not, yet."""
        return self._device is not None

    def alive(self) -> bool:
        return self.proc.poll() is None and self.jobs < MAX_JOBS

    def close(self, *, at_exit: bool = False) -> None:
        """End the worker and remove its directory.

        An idle worker ends its loop when its input closes. One in the middle of a job (a Ctrl-C or a
        timeout cut the wait for it), or still starting its backend, reads no input until it is done,
        seconds on a large compile: it is killed at once, so that Ctrl-C ends the run in a fraction of
        a second. ``at_exit``: an idle worker that holds no exclusive device is killed too (it has
        nothing to finish; its interpreter's own exit is half a second of the user's wait); one that
        holds a TPU exits by itself, handing the chip back. A Ctrl-C while an idle one ends (at exit)
        kills it too, instead of leaving a traceback and the worker."""
        idle = not self.busy and self._device is not None
        quick = at_exit and idle and self._device is not None and self._device.platform not in EXCLUSIVE
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
            if not idle or quick:
                self.proc.kill()
            self.proc.wait(timeout=2)
        except (OSError, ValueError, subprocess.TimeoutExpired, KeyboardInterrupt):
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()
        self.err.close()
        tempdirs.remove(self.dir)


# What changes without changing what a job does: pytest sets PYTEST_CURRENT_TEST for every test (a
# worker keyed on it was started once per test). A worker keeps the value it started with. JAX's import
# sets TF_CPP_MIN_LOG_LEVEL (setdefault) and its backend start TPU_SKIP_MDS_QUERY (on a machine without a
# TPU chip): a worker started before this process imported JAX (start_before_jax) sets the same values in
# its own import, on the same machine, so it serves the same jobs.
_VOLATILE = frozenset({"PYTEST_CURRENT_TEST", "TF_CPP_MIN_LOG_LEVEL", "TPU_SKIP_MDS_QUERY"})
_WORKERS: dict[tuple[tuple[str, str], ...], _Worker] = {}
_WORKERS_LOCK = fork_safe(threading.Lock())
if hasattr(os, "register_at_fork"):  # a forked child starts with none: the parent's pipes are the parent's
    os.register_at_fork(after_in_child=_WORKERS.clear)


_CACHE_OFF = frozenset({"0", "off", "false", "no", "none"})


def compile_cache_dir() -> str | None:
    """Where the verification process keeps JAX's persistent compilation cache, or None (turned off
    with ``SMTDIMS_COMPILE_CACHE=0``, or the directory cannot be made: no cache, never a failure).

    Default: ``$XDG_CACHE_HOME/smtdims/jax-cache`` (``~/.cache`` without it); ``SMTDIMS_COMPILE_CACHE``
    set to a path puts it there. A second run of the same model then compiles nothing: what a user
    who re-runs a fix waits for is the reasoning, not XLA.
    """
    given = os.environ.get("SMTDIMS_COMPILE_CACHE", "").strip()
    if given.lower() in _CACHE_OFF:
        return None
    if given:
        path = Path(given).expanduser()
    else:
        base = os.environ.get("XDG_CACHE_HOME", "").strip()
        path = (Path(base) if base else Path.home() / ".cache") / "smtdims" / "jax-cache"
    try:
        path.mkdir(parents=True, exist_ok=True)
        if not os.access(path, os.W_OK | os.X_OK):
            return None
    except (OSError, RuntimeError):  # RuntimeError: no home directory to expand
        return None
    return str(path)


def _key(env: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in env.items() if k not in _VOLATILE))


def _adopt(key: tuple[tuple[str, str], ...]) -> None:
    """Under ``_WORKERS_LOCK``, where no worker is kept for ``key``: a worker started before this process
    imported JAX (:func:`start_before_jax`) is kept under ``key`` if its environment, with what JAX's start
    set in it, is ``key``'s (JAX's import sets the same variables here: on a TPU host, several), and ended
    otherwise (it may hold the TPU, which one process at a time may hold: the job's own worker needs it).
    Waits for its first line: the job needs a worker now."""
    for old, w in list(_WORKERS.items()):
        if not w.early:
            continue
        del _WORKERS[old]
        w.early = False
        w.device()
        if w.alive() and _key({**w.env, **w.env_added}) == key:
            _WORKERS[key] = w
        else:
            w.close()


def _worker_for(env: dict[str, str]) -> tuple[_Worker, bool]:
    """A free live worker for ``env`` (started if needed) and whether it is shared (kept for later jobs).

    A worker that is busy in another thread is not waited for: the job gets a worker of its own.
    """
    key = _key(env)
    with _WORKERS_LOCK:
        if key not in _WORKERS:
            _adopt(key)
        w = _WORKERS.get(key)
        if w is not None and w.lock.acquire(blocking=False):
            if w.alive():
                return w, True
            w.lock.release()
            del _WORKERS[key]
            w.close()
            w = None
        if w is None:
            w = _Worker(env)
            w.lock.acquire()
            _WORKERS[key] = w
            return w, True
    w = _Worker(env)
    w.lock.acquire()
    return w, False


def _discard(w: _Worker) -> None:
    with _WORKERS_LOCK:
        for k, v in list(_WORKERS.items()):
            if v is w:
                del _WORKERS[k]
    w.close()


def workers() -> dict[tuple[tuple[str, str], ...], _Worker]:
    """The verification processes kept for later jobs, by environment (a copy): which process holds the
    device, for diagnostics, and what the reuse of one process per environment is tested on."""
    with _WORKERS_LOCK:
        return dict(_WORKERS)


def processes_started() -> int:
    """How many verification processes this process has started: one per environment, not one per job."""
    return _stats["started"]


def close_workers(*, at_exit: bool = False) -> None:
    """End every worker of this process (at exit; tests call it to start from none)."""
    with _WORKERS_LOCK:
        ws = list(_WORKERS.values())
        _WORKERS.clear()
    for w in ws:
        w.close(at_exit=at_exit)


@atexit.register
def _close_at_exit() -> None:
    close_workers(at_exit=True)



def worker_env(x64: bool | None) -> dict[str, str]:
    """The environment a verification process gets: this process's, with the x64 mode in force here
    (``None``: not known yet, the environment's own) and the compilation cache's directory
    (``SMTDIMS_JAX_CACHE_DIR``; see :func:`compile_cache_dir`)."""
    env = dict(os.environ)
    if x64:  # the artifact's dtypes need the same mode there
        env["JAX_ENABLE_X64"] = "1"
    env.pop("SMTDIMS_JAX_CACHE_DIR", None)
    cache = compile_cache_dir()
    if cache is not None:
        env["SMTDIMS_JAX_CACHE_DIR"] = cache
    return env


def start(env: dict[str, str], *, early: bool = False) -> None:
    """Start the verification process for ``env`` without waiting for it, unless a live one for ``env``
    is kept (or busy in another thread: it is warm). A dead or worn-out one is replaced. ``early``: this
    process has not imported JAX yet (:func:`start_before_jax`; the job adopts it by what JAX set there)."""
    key = _key(env)
    old: _Worker | None = None
    with _WORKERS_LOCK:
        if key not in _WORKERS and any(x.early and x.alive() for x in _WORKERS.values()):
            return  # one started before JAX was imported here: the job adopts it, or ends it (_adopt)
        w = _WORKERS.get(key)
        if w is not None:
            if not w.lock.acquire(blocking=False):  # another thread's job runs on it: it is warm
                return
            try:
                if w.alive():
                    return
                del _WORKERS[key]
                old = w
            finally:
                w.lock.release()
        _WORKERS[key] = _Worker(env)
        _WORKERS[key].early = early
    if old is not None:
        old.close()


def start_before_jax() -> None:
    """:func:`start` for this process's environment, from a command line that has not imported JAX yet
    (``smtdims export``: the process imports JAX while this one does). Never raises: an early start is
    an optimisation, and :func:`.fresh.locate` reports a process that cannot start, with its cause.
    Where JAX is imported already (a program calling the command line's ``main``), nothing is started
    here: the pipeline's own ``prestart`` knows the x64 mode and whether this process holds a TPU."""
    if "jax" in sys.modules:
        return
    try:
        before = _stats["started"]
        start(worker_env(None), early=True)
        _stats["before_jax"] += _stats["started"] - before
    except Exception:  # noqa: BLE001 - see the docstring
        return

"""The fresh process: deserialize, compile and run the artifact where smtdims was never imported."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from smtdims import options

from ._common import Progress
from .report import FAIL, PASS, SKIP, RejectionCheck

_WORKER = Path(__file__).with_name("_verify_worker.py")
_SHAPE_ERRORS = ("Input shapes do not match the", "Shape mismatch for args")


def _pack(arrays: Sequence[np.ndarray], f: Any) -> list[dict[str, Any]]:
    leaves = []
    for a in arrays:
        a = np.ascontiguousarray(a)
        data = a.tobytes()
        leaves.append({"dtype": a.dtype.name, "shape": list(a.shape), "offset": f.tell(), "nbytes": len(data)})
        f.write(data)
    return leaves


def _unpack(blob: bytes, leaves: Sequence[dict[str, Any]]) -> list[np.ndarray]:
    return [
        np.frombuffer(blob[x["offset"]: x["offset"] + x["nbytes"]], dtype=jnp.dtype(x["dtype"])).reshape(x["shape"])
        for x in leaves
    ]


# -- the fresh process ------------------------------------------------------------------------------------
IDLE_S = 120.0  # a worker with no job for this long exits (it holds JAX: about 150 MiB)
MAX_JOBS = 32  # then it is replaced, so that what JAX keeps between jobs stays bounded
_stats = {"started": 0}


class _Worker:
    """A stock-JAX interpreter that runs verification jobs one after another (``--serve``).

    Its first job pays for importing JAX (1.5 s of CPU here); later ones deserialize, compile and run
    their artifact in the same interpreter, where smtdims was still never imported (each job reports
    ``sys.modules``). Another environment (``JAX_ENABLE_X64``, ``JAX_PLATFORMS``...) gets its own.
    """

    def __init__(self, env: dict[str, str]):
        self.dir = tempfile.mkdtemp(prefix="smtdims-verify-worker-")
        shutil.copy(_WORKER, os.path.join(self.dir, "worker.py"))  # run from here: sys.path holds nothing of ours
        self.err = open(os.path.join(self.dir, "stderr.txt"), "w+")
        try:
            self.proc = subprocess.Popen([sys.executable, "worker.py", "--serve", str(IDLE_S)], cwd=self.dir,
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err, text=True,
                                         env=env)
        except BaseException:  # nothing started: leave no directory behind
            self.err.close()
            shutil.rmtree(self.dir, ignore_errors=True)
            raise
        self.jobs = 0
        self.lock = threading.Lock()
        _stats["started"] += 1

    def alive(self) -> bool:
        return self.proc.poll() is None and self.jobs < MAX_JOBS

    def close(self) -> None:
        """End the worker (closing its input ends its loop) and remove its directory."""
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
            self.proc.wait(timeout=2)
        except (OSError, ValueError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()
        self.err.close()
        shutil.rmtree(self.dir, ignore_errors=True)


# What changes without changing what a job does: pytest sets PYTEST_CURRENT_TEST for every test (a
# worker keyed on it was started once per test). A worker keeps the value it started with.
_VOLATILE = frozenset({"PYTEST_CURRENT_TEST"})
_WORKERS: dict[tuple[tuple[str, str], ...], _Worker] = {}
_WORKERS_LOCK = options.fork_safe(threading.Lock())
if hasattr(os, "register_at_fork"):  # a forked child starts with none: the parent's pipes are the parent's
    os.register_at_fork(after_in_child=_WORKERS.clear)


def _worker_for(env: dict[str, str]) -> tuple[_Worker, bool]:
    """A free live worker for ``env`` (started if needed) and whether it is shared (kept for later jobs).

    A worker that is busy in another thread is not waited for: the job gets a worker of its own.
    """
    key = tuple(sorted((k, v) for k, v in env.items() if k not in _VOLATILE))
    with _WORKERS_LOCK:
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


@atexit.register
def close_workers() -> None:
    """End every worker of this process (at exit; tests call it to start from none)."""
    with _WORKERS_LOCK:
        ws = list(_WORKERS.values())
        _WORKERS.clear()
    for w in ws:
        w.close()


def _run_job(w: _Worker, d: str, total: int, say: Progress, timeout: float) -> tuple[str, str | None]:
    """Hand job directory ``d`` to ``w`` and follow its progress: ``(state, stderr)``, where ``state`` is
    ``"done"``, ``"unstarted"`` (the worker was gone before it took the job: retry on another) or
    ``"died"`` (it ended during the job: killed by the timeout, or crashed), with its stderr."""
    token = f"{os.getpid()}-{w.jobs}-{id(d)}"
    w.jobs += 1
    w.err.seek(0, os.SEEK_END)
    err_at = w.err.tell()
    fired: list[bool] = []

    def kill() -> None:
        fired.append(True)
        w.proc.kill()

    timer = threading.Timer(timeout, kill)
    timer.start()
    started = False
    try:
        assert w.proc.stdin is not None and w.proc.stdout is not None
        try:
            w.proc.stdin.write(f"{token} {d}\n")
            w.proc.stdin.flush()
        except OSError:  # it exited while idle (its idle time, a signal): nothing of the job ran
            return "unstarted", None
        for line in w.proc.stdout:
            try:
                ev = json.loads(line)
            except ValueError:  # the artifact's own output (jax.debug.print...)
                continue
            if not isinstance(ev, dict):
                continue
            if ev.get("started") == token:
                started = True
            elif ev.get("done") == token:
                return "done", None
            elif "sample" in ev:
                s = ev["sample"]
                if s == "outside":
                    say(f"outside-spec shape {ev.get('phase')}: calling, expecting a shape error")
                else:
                    say(f"sample {s}/{total}: {'compiling' if ev.get('phase') == 'compile' else 'running'}")
    finally:
        timer.cancel()
    w.proc.wait()
    if not started and not fired:
        return "unstarted", None
    w.err.seek(err_at)
    why = f"timed out after {timeout:g} s" if fired else f"exited with {w.proc.returncode}"
    return "died", f"the verification process {why} before writing results:\n{w.err.read()[-4000:]}"


def run_fresh_process(artifact: bytes, samples: Sequence[Sequence[np.ndarray]], reject: Sequence[Sequence[np.ndarray]],
                      say: Progress, timeout: float = 900.0) -> tuple[dict[str, Any], list[list[np.ndarray] | None]]:
    """Deserialize, compile and run ``artifact`` in an interpreter that never imports smtdims.

    The interpreter is kept for the next job with the same environment (``_Worker``); it inherits
    this process's environment (JAX_PLATFORMS...).
    """
    with tempfile.TemporaryDirectory(prefix="smtdims-verify-") as d:
        job: dict[str, Any] = {"samples": [], "reject": []}
        with open(os.path.join(d, "inputs.bin"), "wb") as f:
            for i, leaves in enumerate(samples, 1):
                job["samples"].append({"index": i, "inputs": _pack(leaves, f)})
            job["reject"] = [{"inputs": _pack(leaves, f)} for leaves in reject]
        Path(d, "artifact.bin").write_bytes(artifact)
        Path(d, "job.json").write_text(json.dumps(job))
        env = dict(os.environ)
        if jax.config.jax_enable_x64:  # the artifact's dtypes need the same mode there
            env["JAX_ENABLE_X64"] = "1"
        for _attempt in range(2):  # a worker found gone before it took the job: once more, on a new one
            w, shared = _worker_for(env)
            say("fresh process: " + ("reusing" if w.jobs else "starting") +
                f" {Path(sys.executable).name} (deserialize, compile, run without smtdims)")
            state = "died"
            try:
                state, stderr = _run_job(w, d, len(samples), say, timeout)
            finally:
                w.lock.release()
                if state != "done" or not shared:
                    _discard(w)
            if state != "unstarted":
                break
        result_path = Path(d, "result.json")
        if state != "done" or not result_path.exists():
            raise RuntimeError(stderr or "the verification process wrote no results")
        result = json.loads(result_path.read_text())
        blob = Path(d, "outputs.bin").read_bytes()
        outs = [None if s["outputs"] is None else [x.copy() for x in _unpack(blob, s["outputs"])]
                for s in result["samples"]]
        return result, outs


def _rejection(shapes: tuple[tuple[int, ...], ...], why: str, r: dict[str, Any] | None) -> RejectionCheck:
    """Classify what the fresh process did with an outside-spec shape."""
    if r is None:
        return RejectionCheck(shapes, why, SKIP, "not run")
    errors = r.get("errors") or []
    text = "\n".join(errors)
    if not r["rejected"]:
        return RejectionCheck(shapes, why, FAIL, "accepted", "the artifact compiled and ran a shape outside its specification")
    for p in _SHAPE_ERRORS:  # the assertion's own message, wherever in the cause chain it surfaced
        at = text.find(p)
        if at >= 0:
            return RejectionCheck(shapes, why, PASS, "shape assertion", text[at:])
    if r["stage"] in ("lower", "compile") and "refin" in text:
        cause = errors[-1]
        detail = cause[cause.find("error: ") + 7:] if "error: " in cause else cause
        return RejectionCheck(shapes, why, PASS, "shape refinement", detail)
    return RejectionCheck(shapes, why, FAIL, "other error", text)

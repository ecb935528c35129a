"""Where the artifact runs: one process holds the device and runs the artifact beside its reference.

One process at a time may hold a TPU (a second one fails at once: "libtpu multi-process lockfile"),
so the pipeline's own process stays off the accelerator (:func:`keep_off_accelerator`, or for the
length of one verification when it has started no backend yet) and a fresh interpreter that never
imports smtdims holds it: it starts JAX's backend, says which device it got (or why it got none),
then runs each job's samples twice, JAX's own run of the function (``jax.jit(fn)`` exported at the
sample's concrete shapes) and the artifact, on the same device. A pass there proves the artifact
runs on stock JAX, on the target.

When this process already holds a device no other process may open (it started a TPU backend), the
job runs here instead (:data:`IN_PROCESS`), the same code (``_verify_worker.main``), and the report
says that the fresh-process guarantee was not checked. Nothing that did not run is a failure: a
process that could not start, crashed or timed out leaves its samples "not run", with the cause.

Its time is the fix loop's main cost, so the process is started early and kept:
- :func:`prestart` starts it without waiting (its JAX import and backend start overlap the caller's
  exports and traces); :func:`locate` and :func:`run_on_device` then find it warm. One per
  environment per process, kept for every round of a fix and every step of auto (:data:`IDLE_S`,
  :data:`MAX_JOBS`). The process as a process (start, keep, end) is :mod:`.worker_proc`, which
  imports no JAX: ``smtdims export`` starts it from there before this process imports JAX.
- In it, a sample's reference and artifact compile side by side where there are two cores, and a
  program compiled once is not compiled again in that process (see ``_verify_worker``).
- JAX's persistent compilation cache holds its compiles between runs (a second run of the same model
  compiles nothing): in :func:`compile_cache_dir`, ``$XDG_CACHE_HOME`` (else ``~/.cache``) then
  ``smtdims/jax-cache``; ``SMTDIMS_COMPILE_CACHE=0`` turns it off, ``SMTDIMS_COMPILE_CACHE=/a/dir``
  puts it elsewhere; a directory that cannot be made means no cache, never a failure.
- Ctrl-C: a worker in the middle of a job is killed at once (it reads nothing until the job ends, so
  waiting for it to leave by itself only delays the end of the run); an idle one leaves when its
  input closes.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import sys
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from smtdims.engines import tempdirs

from ..jax_internals import started_backends
from ..seam import stock_jax
from ._common import Progress
from .report import FAIL, PASS, SKIP, Check, RejectionCheck
from .worker_proc import (  # noqa: F401 - the process's own names, read here by tests and the CLI
    _WORKER,
    _WORKERS,
    _WORKERS_LOCK,
    EXCLUSIVE,
    FRESH,
    IDLE_S,
    IN_PROCESS,
    MAX_JOBS,
    START_TIMEOUT_S,
    Device,
    _discard,
    _Worker,
    _worker_for,
    close_workers,
    compile_cache_dir,
    processes_started,
    start,
    worker_env,
    workers,
)

_SHAPE_ERRORS = ("Input shapes do not match the", "Shape mismatch for args")


def pack_arrays(arrays: Sequence[np.ndarray], f: Any) -> list[dict[str, Any]]:
    """Write ``arrays``' bytes to ``f``; each one's dtype, shape and place (what :func:`unpack_arrays` reads)."""
    leaves = []
    for a in arrays:
        a = np.asarray(a, order="C")  # not ascontiguousarray: it makes a 0-d array (a scalar argument) 1-d
        data = a.tobytes()
        leaves.append({"dtype": a.dtype.name, "shape": list(a.shape), "offset": f.tell(), "nbytes": len(data)})
        f.write(data)
    return leaves


def unpack_arrays(blob: bytes, leaves: Sequence[dict[str, Any]]) -> list[np.ndarray]:
    """The arrays :func:`pack_arrays` wrote (views of ``blob``), rank 0 included."""
    return [
        np.frombuffer(blob[x["offset"]: x["offset"] + x["nbytes"]], dtype=jnp.dtype(x["dtype"])).reshape(x["shape"])
        for x in leaves
    ]


# -- keeping this process off the accelerator -------------------------------------------------------------
_PINNED = {"cpu": False}  # keep_off_accelerator() was called: this process never uses the accelerator


def keep_off_accelerator() -> bool:
    """Keep this process on the CPU for good, leaving the accelerator to the verification process.

    For a program whose only use of the accelerator is verification (the ``smtdims export`` and
    ``smtdims verify`` commands call it first): the verification process then keeps the device
    between calls instead of opening it for each (several seconds on a TPU). Call it before anything
    starts a JAX backend; returns False (and changes nothing) when one has already started.
    """
    if started_backends():
        return False
    jax.config.update("jax_platforms", "cpu")
    _PINNED["cpu"] = True
    return True


def keeps_off_accelerator() -> bool:
    """Whether :func:`keep_off_accelerator` pinned this process to the CPU."""
    return _PINNED["cpu"]


@contextlib.contextmanager
def off_accelerator() -> Iterator[None]:
    """This process on the CPU for the block, when it has started no backend yet and is not pinned.

    Exporting (lowering asks for a default device) would otherwise start every backend here, the TPU
    included, and hold it: then no verification process could open it. Afterwards the backends are
    cleared and ``jax_platforms`` restored, so that the program's next JAX call starts them as it would
    have. A process that already started its backends keeps them (it holds what it holds).
    """
    if _PINNED["cpu"] or started_backends():
        yield
        return
    before = jax.config.jax_platforms
    jax.config.update("jax_platforms", "cpu")
    try:
        yield
    finally:
        jax.config.update("jax_platforms", before)
        import jax.extend.backend as backend

        backend.clear_backends()
        jax.clear_caches()


# -- the device process -----------------------------------------------------------------------------------
def job_env() -> dict[str, str]:
    """The environment a verification process gets (:func:`.worker_proc.worker_env`, with the x64 mode
    in force here)."""
    return worker_env(bool(jax.config.jax_enable_x64))


def prestart(env: dict[str, str] | None = None) -> None:
    """Start the verification process for ``env`` (this process's, by default) without waiting for it.

    Its JAX import and backend start (seconds) then overlap the caller's exports and traces, and the
    next :func:`locate` or :func:`run_on_device` for the same environment finds it warm. Cheap and
    idempotent: nothing happens where a live worker for the environment is kept (or busy in another
    thread), nor where this process holds an exclusive device (jobs run here). Never raises: a process
    that cannot be started is left for :func:`locate` to report, with its cause.
    """
    try:
        if started_backends() & EXCLUSIVE:
            return
        start(job_env() if env is None else env)
    except Exception:  # noqa: BLE001 - an early start is an optimisation; locate() reports what fails
        return


def release_exclusive() -> None:
    """End the workers that hold a device one process at a time may hold, unless this process is pinned
    to the CPU: after a verification the program may want its TPU back."""
    if _PINNED["cpu"]:
        return
    with _WORKERS_LOCK:
        held = [w for w in _WORKERS.values() if w._device is not None and w._device.platform in EXCLUSIVE]
    for w in held:
        if w.lock.acquire(blocking=False):  # one that another thread uses is left to that thread
            w.lock.release()
            _discard(w)


def locate(env: dict[str, str] | None = None) -> Device:
    """Where a verification job would run now, and on what device (starts the worker, which starts its backend).

    A process that started a TPU backend holds the chip: its jobs run here (:data:`IN_PROCESS`).
    """
    held = started_backends() & EXCLUSIVE
    if held:
        d = jax.devices()[0]
        return Device(IN_PROCESS, d.platform, d.device_kind, jax.__version__)
    env = job_env() if env is None else env
    w, shared = _worker_for(env)
    try:
        dev = w.device()
    finally:
        w.lock.release()
    if not dev.usable or not shared:
        _discard(w)
    return dev


# Stock JAX's deserialize parses the artifact's symbolic shapes, and its decision procedure is exponential
# in nested max/floordiv (a VALID-conv U-Net's crops: minutes for two levels); a user's program that loads
# the artifact waits as long. Past this many seconds the load is stopped and said (:data:`SLOW_LOAD`).
LOAD_LIMIT_S = 15.0
SLOW_LOAD = "stock JAX's export.deserialize of the artifact ran past"


def slow_load(not_run: str) -> bool:
    """Whether a verification that did not run stopped at stock JAX's load of the artifact (:data:`LOAD_LIMIT_S`)."""
    return SLOW_LOAD in not_run


def _run_job(w: _Worker, d: str, total: int, say: Progress, timeout: float) -> tuple[str, str | None]:
    """Hand job directory ``d`` to ``w`` and follow its progress: ``(state, stderr)``, where ``state`` is
    ``"done"``, ``"unstarted"`` (the worker was gone before it took the job: retry on another) or
    ``"died"`` (it ended during the job: killed by the timeout or by a load past :data:`LOAD_LIMIT_S`, or
    crashed), with its stderr."""
    token = f"{os.getpid()}-{w.jobs}-{id(d)}"
    w.jobs += 1
    w.err.seek(0, os.SEEK_END)
    err_at = w.err.tell()
    fired: list[bool] = []
    slow: list[bool] = []

    def kill() -> None:
        fired.append(True)
        w.proc.kill()

    def kill_slow() -> None:
        slow.append(True)
        w.proc.kill()

    timer = threading.Timer(timeout, kill)
    timer.start()
    load_timer: threading.Timer | None = None
    started = False
    w.busy = True  # until its end is read: a Ctrl-C meanwhile kills it (see _Worker.close)
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
            elif ev.get("phase") == "deserialize" and "sample" not in ev:
                say("loading the artifact with stock JAX (export.deserialize)")
                load_timer = threading.Timer(LOAD_LIMIT_S, kill_slow)
                load_timer.start()
            elif ev.get("phase") == "deserialized" and load_timer is not None:
                load_timer.cancel()
            elif ev.get("done") == token:
                w.busy = False
                return "done", None
            elif "sample" in ev:
                s = ev["sample"]
                if s == "outside":
                    say(f"outside-spec shape {ev.get('phase')}: compiling, expecting a shape error")
                else:
                    say(f"sample {s}/{total}: {_PHASES.get(ev.get('phase'), 'running')}")
    finally:
        timer.cancel()
        if load_timer is not None:
            load_timer.cancel()
    w.proc.wait()
    if slow:
        return "died", (f"{SLOW_LOAD} {LOAD_LIMIT_S:g} s: stock JAX's decision procedure on the artifact's symbolic "
                        "shapes (nested max/floordiv, where sizes small enough make arrays empty) takes as long in "
                        "every program that loads it; lower bounds on the sizes, under which those clamps resolve, "
                        "make the shapes plain")
    if not started and not fired:
        return "unstarted", None
    w.err.seek(err_at)
    why = f"timed out after {timeout:g} s" if fired else f"exited with {w.proc.returncode}"
    return "died", f"the verification process {why} before writing results:\n{w.err.read()[-4000:]}"


_PHASES = {"reference": "reference (jax.jit of the function)", "compile": "compiling the artifact", "run": "running"}


@dataclass
class DeviceRun:
    """What the device process reported: ``device`` (where, on what, or why not), the raw ``result``
    (per sample: times and errors), the artifact's and the reference's outputs per sample."""

    device: Device
    result: dict[str, Any] = field(default_factory=dict)
    outputs: list[list[np.ndarray] | None] = field(default_factory=list)
    references: list[list[np.ndarray] | None] = field(default_factory=list)
    failure: str = ""  # the process died or wrote nothing: why (then nothing ran)


def _in_process_main(say: Progress, total: int) -> Any:
    """The device process's ``main``, loaded into this process, its progress events turned into ``say``."""
    spec = importlib.util.spec_from_file_location("_smtdims_verify_job", _WORKER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    def events(**ev: Any) -> None:
        if ev.get("sample") == "outside":
            say(f"outside-spec shape {ev.get('phase')}: compiling, expecting a shape error")
        elif "sample" in ev:
            say(f"sample {ev['sample']}/{total}: {_PHASES.get(ev.get('phase'), 'running')}")

    module._say = events
    return module.main


def run_on_device(artifact: bytes, samples: Sequence[Sequence[np.ndarray]],
                  reject: Sequence[tuple[Sequence[tuple[str, tuple[int, ...]]], Sequence[np.ndarray] | None]],
                  say: Progress, timeout: float = 900.0, *, references: Sequence[bytes | None] = (),
                  env: dict[str, str] | None = None) -> DeviceRun:
    """Run ``artifact`` (and each sample's reference) where the device is: a fresh process unless this
    process holds an exclusive device. ``reject``: per outside-spec probe its avals (dtype, shape) and
    its inputs (None: too large to allocate; the probe then only lowers and compiles)."""
    with tempdirs.TemporaryDirectory("verify") as d:
        job: dict[str, Any] = {"samples": [], "reject": []}
        with open(os.path.join(d, "inputs.bin"), "wb") as f:
            for i, leaves in enumerate(samples, 1):
                ref = references[i - 1] if i - 1 < len(references) else None
                if ref is not None:
                    Path(d, f"ref_{i}.bin").write_bytes(ref)
                job["samples"].append({"index": i, "inputs": pack_arrays(leaves, f),
                                       "reference": f"ref_{i}.bin" if ref is not None else None})
            job["reject"] = [{"avals": [[dt, list(shape)] for dt, shape in avals],
                              "inputs": None if leaves is None else pack_arrays(leaves, f)} for avals, leaves in reject]
        Path(d, "artifact.bin").write_bytes(artifact)
        Path(d, "job.json").write_text(json.dumps(job))
        held = started_backends() & EXCLUSIVE
        if held:
            dev = locate()
            say(f"{dev.platform}: this process holds it (one process at a time may): running the samples here, "
                "with smtdims uninstalled")
            with stock_jax():  # the artifact runs on stock JAX's code here too
                _in_process_main(say, len(samples))(d)
            return _read(d, dev, "")
        env = job_env() if env is None else env
        dev = Device(FRESH, cause="did not start")
        stderr: str | None = None
        for _attempt in range(2):  # a worker found gone before it took the job: once more, on a new one
            w, shared = _worker_for(env)
            state = "died"
            try:
                say("verification process: " + ("reusing" if w.jobs else "starting")
                    + f" {Path(sys.executable).name} (stock JAX, no smtdims; it holds the device)")
                dev = w.device()
                if not dev.usable:
                    state = "unusable"
                    break
                say(f"verification process: {dev.platform} ({dev.kind}); deserialize, compile, run")
                state, stderr = _run_job(w, d, len(samples), say, timeout)
            finally:
                w.lock.release()
                if state != "done" or not shared:
                    _discard(w)
            if state != "unstarted":
                break
        if not dev.usable:
            return DeviceRun(dev, failure=dev.why_not())
        if state != "done" or not Path(d, "result.json").exists():
            return DeviceRun(dev, failure=stderr or "the verification process wrote no results")
        return _read(d, dev, "")


def _read(d: str, dev: Device, failure: str) -> DeviceRun:
    result_path = Path(d, "result.json")
    if not result_path.exists():
        return DeviceRun(dev, failure=failure or "the verification process wrote no results")
    result = json.loads(result_path.read_text())
    blob = Path(d, "outputs.bin").read_bytes() if Path(d, "outputs.bin").exists() else b""

    def arrays(leaves: Any) -> list[np.ndarray] | None:
        return None if leaves is None else [x.copy() for x in unpack_arrays(blob, leaves)]

    return DeviceRun(dev, result, [arrays(s.get("outputs")) for s in result.get("samples", [])],
                     [arrays(s.get("ref_outputs")) for s in result.get("samples", [])], failure)


def run_fresh_process(artifact: bytes, samples: Sequence[Sequence[np.ndarray]], reject: Sequence[Sequence[np.ndarray]],
                      say: Progress, timeout: float = 900.0) -> tuple[dict[str, Any], list[list[np.ndarray] | None]]:
    """Deserialize, compile and run ``artifact`` in an interpreter that never imports smtdims: ``(result,
    outputs)``; raises RuntimeError when the process could not run it (the cause in the message)."""
    probes = [([(np.asarray(x).dtype.name, tuple(np.shape(x))) for x in leaves], leaves) for leaves in reject]
    run = run_on_device(artifact, samples, probes, say, timeout)
    if run.failure:
        raise RuntimeError(run.failure)
    return run.result, run.outputs


def rejection_check(shapes: tuple[tuple[int, ...], ...], why: str, r: dict[str, Any] | None) -> RejectionCheck:
    """Classify what the fresh process did with an outside-spec shape."""
    if r is None:
        return RejectionCheck(shapes, why, SKIP, "not run")
    errors = r.get("errors") or []
    text = "\n".join(errors)
    if not r["rejected"]:
        ran = "compiled and ran" if r.get("ran", True) else "compiled (not run: too large for the sample budget)"
        return RejectionCheck(shapes, why, FAIL, "accepted", f"the artifact {ran} a shape outside its specification")
    for p in _SHAPE_ERRORS:  # the assertion's own message, wherever in the cause chain it surfaced
        at = text.find(p)
        if at >= 0:
            return RejectionCheck(shapes, why, PASS, "shape assertion", text[at:])
    if r["stage"] in ("lower", "compile") and ("refin" in text or "invalid tensor dimension size" in text):
        # refused while compiling for the shape: its refinement failed, or a dimension the artifact
        # computes from it is negative (a conv front end's frames below its window); it never runs there
        cause = errors[-1]
        detail = cause[cause.find("error: ") + 7:] if "error: " in cause else cause
        return RejectionCheck(shapes, why, PASS, "shape refinement", detail)
    return RejectionCheck(shapes, why, FAIL, "other error", text)


def not_run_cause(run: DeviceRun) -> str:
    """Why the samples of a device run that failed did not run: its time limit, or the crash in a line."""
    text = run.failure.strip()
    if slow_load(text):
        return text
    if "timed out" in text.splitlines()[0] if text else False:
        return text.splitlines()[0].rstrip(":")
    lines = [x for x in text.splitlines() if x.strip()]
    return ("the verification process crashed: " + lines[0].rstrip(":")
            + (f" ... {lines[-1].strip()}" if len(lines) > 1 else "")) if lines else "the verification process crashed"


def process_check(dev: Device, run: DeviceRun | None, not_run: str) -> Check:
    """The "fresh process" check: where the samples ran, and whether smtdims stayed out of that process."""
    if not_run:
        return Check("fresh process", SKIP, f"not run: {not_run}")
    if dev.where == IN_PROCESS:
        return Check("fresh process", SKIP, f"this process holds the {dev.platform} (one process at a time may): the "
                     "samples ran here with smtdims uninstalled, so 'runs on stock JAX alone' was not checked; call "
                     "export_and_verify before the program uses the device, or use `smtdims verify`")
    stray = run.result.get("smtdims_loaded") if run is not None else None
    if run is not None and run.result.get("fatal"):
        lines = [x for x in run.result["fatal"].strip().splitlines() if x.strip()]
        return Check("fresh process", FAIL, lines[0] + (f" ... {lines[-1].strip()}" if len(lines) > 1 else ""))
    if stray:
        return Check("fresh process", FAIL, f"smtdims was imported there: {stray}")
    return Check("fresh process", PASS, f"stock jax {dev.jax_version} on {dev.platform}, smtdims not imported")

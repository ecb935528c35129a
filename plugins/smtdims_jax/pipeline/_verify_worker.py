"""The device half of the export pipeline: run the artifact beside JAX's own run of the function.

Run as a script, never imported by the pipeline, so that neither ``smtdims`` nor
``smtdims_jax`` is loaded here: a pass proves the artifact needs nothing but JAX. It imports
only the standard library, NumPy and JAX. This process is the one that holds the device: on a
TPU only one process at a time may, so the pipeline's own process stays off it and everything
that runs on the chip (the artifact and the reference) runs here, side by side.

- ``python _verify_worker.py --serve IDLE_S`` first starts JAX's backend and says so on stdout:
  ``{"ready": {"jax_version", "platform", "device", "devices"}}``, or
  ``{"unavailable": {"cause", "error"}}`` and exits (``cause``: ``"device busy"`` when another
  process holds the device, ``"backend unavailable"`` otherwise). Then it runs jobs one after
  another: it reads a line ``TOKEN JOBDIR``, answers ``{"started": TOKEN}``, runs the job and
  answers ``{"done": TOKEN}``; it exits at end of input (its parent is gone) or after ``IDLE_S``
  seconds without a job;
- ``python _verify_worker.py JOBDIR`` runs one job and exits.
The pipeline may also load this file by path and call :func:`main` in its own process, when that
process already holds the device (the same code either way).

Protocol (all files in JOBDIR, written by :mod:`smtdims_jax.pipeline.fresh`):
- ``artifact.bin``: ``Exported.serialize()`` bytes of the symbolic export;
- ``job.json``: ``{"samples": [{"index": i, "inputs": [LEAF, ...], "reference": "ref_i.bin" | null}],
  "reject": [{"avals": [[dtype, shape], ...], "inputs": [LEAF, ...] | null}]}`` where a LEAF is
  ``{"dtype": name, "shape": [...], "offset": o, "nbytes": n}`` into ``inputs.bin``; a reference is
  ``jax.jit(fn)`` exported at the sample's concrete shapes (how ``jit`` traces it);
- progress: one JSON object per line on stdout (``{"sample": i, "phase": "compile"}``);
- result: ``result.json`` with per-sample times, errors and output leaves (data in ``outputs.bin``).

Compiles are the cost here (two per sample: the reference and the artifact), so:
- where the machine has two cores or more, a sample's reference and artifact compile side by side
  (two threads: XLA's compile releases the interpreter), then run one after the other; the times
  per sample keep their meaning (``compile_s``/``ref_compile_s``: that compile's own time,
  ``run_s``/``ref_run_s``: that run's), the wall time of a sample is about the larger compile;
- a compiled program is kept for the life of the process (:data:`CACHE_SIZE` of them, least recently
  used first out): the same reference bytes, or the same artifact at the same input shapes and dtypes,
  compile once, however many rounds of a fix verify them again (``compile_cached``/``ref_compile_cached``
  say so; the compile time is then the look-up's);
- run as a server, the worker turns on JAX's persistent compilation cache when its environment
  names a directory (``SMTDIMS_JAX_CACHE_DIR``, set by the pipeline from ``SMTDIMS_COMPILE_CACHE``),
  so that a second run of the same model compiles nothing. Loaded into the pipeline's own process
  (:func:`main` called there), it changes none of that process's settings and compiles in one thread.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
import time
import traceback
from collections import OrderedDict

# What JAX says when another process holds the device (a TPU: one process at a time).
_BUSY = ("multi-process lockfile", "already in use", "TPU is in use", "Device or resource busy")


CACHE_SIZE = 64  # compiled programs kept (each holds its executable: bounded, least recently used out)
_COMPILED: OrderedDict = OrderedDict()  # key -> compiled program; for the life of this process
_DESERIALIZED: OrderedDict = OrderedDict()  # sha256 of the bytes -> Exported
_LOCK = threading.Lock()
# Compile the reference and the artifact side by side: set by serve() and the one-job command where
# the machine has two cores (not when the pipeline loads main() into its own process, whose
# installation of smtdims is process-wide and whose threads are its own).
_PARALLEL = {"on": False}


def _say(**event: object) -> None:
    print(json.dumps(event), flush=True)


def _remember(table: OrderedDict, key: object, value: object) -> None:
    with _LOCK:
        table[key] = value
        table.move_to_end(key)
        while len(table) > CACHE_SIZE:
            table.popitem(last=False)


def _recall(table: OrderedDict, key: object) -> object:
    with _LOCK:
        value = table.get(key)
        if value is not None:
            table.move_to_end(key)
        return value


def _deserialize(data: bytes, export) -> tuple:
    """``(Exported, sha256 of data)``, deserialized once per process for the same bytes."""
    digest = hashlib.sha256(data).hexdigest()
    exp = _recall(_DESERIALIZED, digest)
    if exp is None:
        exp = export.deserialize(bytearray(data))
        _remember(_DESERIALIZED, digest, exp)
    return exp, digest


def use_compilation_cache(environ: dict | None = None) -> str | None:
    """Turn on JAX's persistent compilation cache in the directory the environment names
    (``SMTDIMS_JAX_CACHE_DIR``), every compile kept however short or small; the directory, or None
    (none named, or JAX refused it: no cache, never a failure)."""
    path = (os.environ if environ is None else environ).get("SMTDIMS_JAX_CACHE_DIR", "")
    if not path:
        return None
    try:
        import jax

        jax.config.update("jax_compilation_cache_dir", path)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    except Exception:  # noqa: BLE001 - a cache that cannot be used is no cache, not a failed verification
        return None
    return path


def _load_leaves(blob: bytes, leaves: list[dict], np, jnp) -> list:
    out = []
    for leaf in leaves:
        dtype = jnp.dtype(leaf["dtype"])
        data = blob[leaf["offset"]: leaf["offset"] + leaf["nbytes"]]
        out.append(np.frombuffer(data, dtype=dtype).reshape(leaf["shape"]).copy())
    return out


def _error_text(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}"


def classify(error: str) -> str:
    """Why a backend did not start: ``"device busy"`` (another process holds it) or ``"backend unavailable"``."""
    return "device busy" if any(p in error for p in _BUSY) else "backend unavailable"


def start_backend(before: dict | None = None) -> dict:
    """Start JAX's default backend here: ``{"ready": ...}`` or ``{"unavailable": ...}``. The ready line says
    which environment variables JAX's import and backend start set here (``env_added``): a parent that
    started this process before it imported JAX itself finds this process's environment as its own.
    ``before``: the environment before anything here imported JAX."""
    t0 = time.perf_counter()
    before = dict(os.environ) if before is None else before
    try:
        import jax

        devices = jax.devices()
        d = devices[0]
        added = {k: v for k, v in os.environ.items() if before.get(k) != v}
        return {"ready": {"jax_version": jax.__version__, "platform": d.platform, "device": d.device_kind,
                          "devices": len(devices), "start_s": round(time.perf_counter() - t0, 3),
                          "env_added": added}}
    except Exception as err:  # noqa: BLE001 - every way a backend fails to start is reported, not raised
        text = _error_text(err)
        return {"unavailable": {"cause": classify(text), "error": text}}


def _write(out_file, outs, np, jax) -> list:
    leaves = []
    for x in jax.tree_util.tree_leaves(outs):
        a = np.asarray(x)
        data = a.tobytes()
        leaves.append({"dtype": str(a.dtype), "shape": list(a.shape), "offset": out_file.tell(), "nbytes": len(data)})
        out_file.write(data)
    return leaves


def main(jobdir: str) -> int:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax import export

    with open(os.path.join(jobdir, "job.json")) as f:
        job = json.load(f)
    with open(os.path.join(jobdir, "inputs.bin"), "rb") as f:
        blob = f.read()
    device = jax.devices()[0]
    result: dict = {
        "jax_version": jax.__version__,
        "device": f"{device.platform}: {device.device_kind}",
        "platform": device.platform,
        "samples": [],
        "reject": [],
    }
    out_file = open(os.path.join(jobdir, "outputs.bin"), "wb")
    try:
        t0 = time.perf_counter()
        _say(phase="deserialize")  # the parent times it: stock JAX may take minutes on nested max/floordiv shapes
        with open(os.path.join(jobdir, "artifact.bin"), "rb") as f:
            exp, exp_hash = _deserialize(f.read(), export)
        result["deserialize_s"] = time.perf_counter() - t0
        _say(phase="deserialized")
        result["platforms"] = list(exp.platforms)
        where = f"{device.platform}:{device.device_kind}"

        def compile_(ex, digest: str, leaves: list, entry: dict, key: str) -> tuple | None:
            """Compile ``ex`` for ``leaves``' shapes (once per process: see the cache above): ``(compiled,
            args, kwargs)``, or None with the error in ``entry`` (a failing sample is a result)."""
            try:
                args, kwargs = jax.tree_util.tree_unflatten(ex.in_tree, [jax.device_put(x) for x in leaves])
                t0 = time.perf_counter()
                ck = (digest, where, tuple((str(x.dtype), tuple(x.shape)) for x in leaves))
                compiled = _recall(_COMPILED, ck)
                entry[f"{key}compile_cached"] = compiled is not None
                if compiled is None:
                    compiled = jax.jit(ex.call).lower(*args, **kwargs).compile()
                    _remember(_COMPILED, ck, compiled)
                entry[f"{key}compile_s"] = time.perf_counter() - t0
                return compiled, args, kwargs
            except Exception as err:
                entry[f"{key}error"] = _error_text(err)
                return None

        def run(got: tuple, entry: dict, key: str) -> None:
            compiled, args, kwargs = got
            try:
                t0 = time.perf_counter()
                outs = jax.block_until_ready(compiled(*args, **kwargs))
                entry[f"{key}run_s"] = time.perf_counter() - t0
                entry[f"{key}outputs"] = _write(out_file, outs, np, jax)
            except Exception as err:
                entry[f"{key}error"] = _error_text(err)

        def compile_ref(name: str, leaves: list, entry: dict, got: list) -> None:
            """The reference's compile (``got[0]``); one that fails did not run here: said so in
            ``ref_error``, not a verdict on the artifact."""
            try:
                with open(os.path.join(jobdir, name), "rb") as f:
                    ref, ref_hash = _deserialize(f.read(), export)
                got[0] = compile_(ref, ref_hash, leaves, entry, "ref_")
            except Exception as err:
                entry["ref_error"] = _error_text(err)

        for sample in job["samples"]:
            i = sample["index"]
            entry: dict = {"index": i, "compile_s": None, "run_s": None, "outputs": None, "error": None,
                           "ref_outputs": None, "ref_error": None}
            result["samples"].append(entry)
            leaves = _load_leaves(blob, sample["inputs"], np, jnp)
            ref_got: list = [None]
            side: threading.Thread | None = None
            if sample.get("reference"):
                _say(sample=i, phase="reference")
                if _PARALLEL["on"]:
                    side = threading.Thread(target=compile_ref, name="compile-reference", daemon=True,
                                            args=(sample["reference"], leaves, entry, ref_got))
                    side.start()
                else:
                    compile_ref(sample["reference"], leaves, entry, ref_got)
                    if ref_got[0] is not None:
                        run(ref_got[0], entry, "ref_")
            _say(sample=i, phase="compile")
            got = compile_(exp, exp_hash, leaves, entry, "")
            if side is not None:
                side.join()
                if ref_got[0] is not None:
                    run(ref_got[0], entry, "ref_")
            if got is not None:
                _say(sample=i, phase="run")
                run(got, entry, "")
            ref_got[0] = got = None  # the inputs and outputs of a sample are not kept past it
        for k, reject in enumerate(job.get("reject", [])):
            _say(sample="outside", phase=str(k + 1))
            rej: dict = {"rejected": False, "stage": None, "errors": [], "ran": False}
            result["reject"].append(rej)
            stage = "lower"
            try:
                # Abstract shapes first: JAX's shape checks run while lowering and compiling, so a shape of
                # any size is judged without allocating it; data only to run what compiled.
                avals = [jax.ShapeDtypeStruct(tuple(shape), jnp.dtype(dt)) for dt, shape in reject["avals"]]
                args, kwargs = jax.tree_util.tree_unflatten(exp.in_tree, avals)
                lowered = jax.jit(exp.call).lower(*args, **kwargs)
                stage = "compile"
                compiled = lowered.compile()
                stage = "run"
                if reject.get("inputs") is not None:
                    args, kwargs = jax.tree_util.tree_unflatten(exp.in_tree, _load_leaves(blob, reject["inputs"], np, jnp))
                    jax.block_until_ready(compiled(*args, **kwargs))
                    rej["ran"] = True
            except Exception as err:
                chain: list[str] = []
                e: BaseException | None = err
                while e is not None and len(chain) < 5:
                    chain.append(_error_text(e))
                    e = e.__cause__
                rej.update(rejected=True, stage=stage, errors=chain)
    except Exception as err:
        result["fatal"] = _error_text(err) + "\n" + traceback.format_exc()
    finally:
        out_file.close()
        # Proof that the artifact ran on stock JAX: nothing of smtdims was ever imported here.
        result["smtdims_loaded"] = sorted(m for m in sys.modules if m.split(".")[0] in ("smtdims", "smtdims_jax"))
        with open(os.path.join(jobdir, "result.json"), "w") as f:
            json.dump(result, f)
    return 0


def _lifeline() -> None:
    """End this process as soon as the pipeline's process is gone, mid-job included (it would otherwise
    finish a compile on the device first): a process whose parent ended is adopted by another, so its
    parent's pid changes. A thread polls it; XLA's compile and run release the interpreter."""
    import threading

    parent = os.getppid()

    def wait() -> None:
        while os.getppid() == parent:
            time.sleep(0.2)
        os._exit(0)

    threading.Thread(target=wait, name="verify-lifeline", daemon=True).start()


def serve(idle_s: float) -> int:
    import select

    before = dict(os.environ)  # what JAX's import sets is said in the ready line (start_backend)
    _lifeline()
    _PARALLEL["on"] = (os.cpu_count() or 1) >= 2
    use_compilation_cache()
    started = start_backend(before)
    _say(**started)
    if "ready" not in started:
        return 0
    while True:
        ready = os.name == "nt" or select.select([sys.stdin], [], [], idle_s)[0]  # no select on Windows pipes
        if not ready:  # idle: give the memory (and the device) back; the pipeline starts another when it needs one
            return 0
        line = sys.stdin.readline()
        if not line:  # end of input: the pipeline's process is gone
            return 0
        token, _, jobdir = line.rstrip("\n").partition(" ")
        _say(started=token)
        main(jobdir)
        _say(done=token)


if __name__ == "__main__":
    if sys.argv[1] == "--serve":
        sys.exit(serve(float(sys.argv[2])))
    _PARALLEL["on"] = (os.cpu_count() or 1) >= 2
    use_compilation_cache()
    sys.exit(main(sys.argv[1]))

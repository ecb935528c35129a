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
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback

# What JAX says when another process holds the device (a TPU: one process at a time).
_BUSY = ("multi-process lockfile", "already in use", "TPU is in use", "Device or resource busy")


def _say(**event: object) -> None:
    print(json.dumps(event), flush=True)


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


def start_backend() -> dict:
    """Start JAX's default backend here: ``{"ready": ...}`` or ``{"unavailable": ...}``."""
    t0 = time.perf_counter()
    try:
        import jax

        devices = jax.devices()
        d = devices[0]
        return {"ready": {"jax_version": jax.__version__, "platform": d.platform, "device": d.device_kind,
                          "devices": len(devices), "start_s": round(time.perf_counter() - t0, 3)}}
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
        with open(os.path.join(jobdir, "artifact.bin"), "rb") as f:
            exp = export.deserialize(bytearray(f.read()))
        result["deserialize_s"] = time.perf_counter() - t0
        result["platforms"] = list(exp.platforms)

        def run(ex, leaves: list, entry: dict, key: str) -> None:
            """Compile and run ``ex`` on ``leaves`` (device arrays of this process's default device)."""
            args, kwargs = jax.tree_util.tree_unflatten(ex.in_tree, [jax.device_put(x) for x in leaves])
            t0 = time.perf_counter()
            compiled = jax.jit(ex.call).lower(*args, **kwargs).compile()
            entry[f"{key}compile_s"] = time.perf_counter() - t0
            if not key:
                _say(sample=entry["index"], phase="run")
            t0 = time.perf_counter()
            outs = jax.block_until_ready(compiled(*args, **kwargs))
            entry[f"{key}run_s"] = time.perf_counter() - t0
            entry[f"{key}outputs"] = _write(out_file, outs, np, jax)

        for sample in job["samples"]:
            i = sample["index"]
            entry: dict = {"index": i, "compile_s": None, "run_s": None, "outputs": None, "error": None,
                           "ref_outputs": None, "ref_error": None}
            result["samples"].append(entry)
            leaves = _load_leaves(blob, sample["inputs"], np, jnp)
            if sample.get("reference"):
                _say(sample=i, phase="reference")
                try:
                    with open(os.path.join(jobdir, sample["reference"]), "rb") as f:
                        ref = export.deserialize(bytearray(f.read()))
                    run(ref, leaves, entry, "ref_")
                except Exception as err:  # the reference did not run here: said so, not a verdict on the artifact
                    entry["ref_error"] = _error_text(err)
            _say(sample=i, phase="compile")
            try:
                run(exp, leaves, entry, "")
            except Exception as err:  # a failing sample is a result, not a crash
                entry["error"] = _error_text(err)
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

    _lifeline()
    started = start_backend()
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
    sys.exit(main(sys.argv[1]))

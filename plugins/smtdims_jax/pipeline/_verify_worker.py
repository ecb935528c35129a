"""Fresh-process half of the export pipeline: deserialize, compile and run an artifact on stock JAX.

Run as a script, never imported by the pipeline, so that neither ``smtdims`` nor
``smtdims_jax`` is loaded here: a pass proves the artifact needs nothing but JAX. It imports
only the standard library, NumPy and JAX.

- ``python _verify_worker.py JOBDIR`` runs one job and exits;
- ``python _verify_worker.py --serve IDLE_S`` runs jobs one after another: it reads a line
  ``TOKEN JOBDIR`` from stdin, answers ``{"started": TOKEN}``, runs the job and answers
  ``{"done": TOKEN}``; it exits at end of input (its parent is gone) or after ``IDLE_S``
  seconds without a job. Importing JAX is most of a small job's cost (1.5 s of CPU), which the
  jobs after the first do not pay; each job deserializes and compiles its artifact afresh.

Protocol (all files in JOBDIR, written by :mod:`smtdims_jax.pipeline.fresh`):
- ``artifact.bin``: ``Exported.serialize()`` bytes;
- ``job.json``: ``{"samples": [{"index": i, "inputs": [LEAF, ...]}], "reject": [{"inputs": [...]}, ...]}``
  where a LEAF is ``{"dtype": name, "shape": [...], "offset": o, "nbytes": n}`` into ``inputs.bin``;
- progress: one JSON object per line on stdout (``{"sample": i, "phase": "compile"}``);
- result: ``result.json`` with per-sample times, errors and output leaves (data in ``outputs.bin``).
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback


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

        def call_args(leaves: list) -> tuple[tuple, dict]:
            return jax.tree_util.tree_unflatten(exp.in_tree, leaves)

        for sample in job["samples"]:
            i = sample["index"]
            entry: dict = {"index": i, "compile_s": None, "run_s": None, "outputs": None, "error": None}
            result["samples"].append(entry)
            try:
                args, kwargs = call_args(_load_leaves(blob, sample["inputs"], np, jnp))
                _say(sample=i, phase="compile")
                t0 = time.perf_counter()
                compiled = jax.jit(exp.call).lower(*args, **kwargs).compile()
                entry["compile_s"] = time.perf_counter() - t0
                _say(sample=i, phase="run")
                t0 = time.perf_counter()
                outs = jax.block_until_ready(compiled(*args, **kwargs))
                entry["run_s"] = time.perf_counter() - t0
                leaves = []
                for x in jax.tree_util.tree_leaves(outs):
                    a = np.asarray(x)
                    data = a.tobytes()
                    leaves.append({"dtype": str(a.dtype), "shape": list(a.shape), "offset": out_file.tell(),
                                   "nbytes": len(data)})
                    out_file.write(data)
                entry["outputs"] = leaves
            except Exception as err:  # a failing sample is a result, not a crash
                entry["error"] = _error_text(err)
        for k, reject in enumerate(job.get("reject", [])):
            _say(sample="outside", phase=str(k + 1))
            rej: dict = {"rejected": False, "stage": None, "errors": []}
            result["reject"].append(rej)
            stage = "lower"
            try:
                args, kwargs = call_args(_load_leaves(blob, reject["inputs"], np, jnp))
                lowered = jax.jit(exp.call).lower(*args, **kwargs)
                stage = "compile"
                compiled = lowered.compile()
                stage = "run"
                jax.block_until_ready(compiled(*args, **kwargs))
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


def serve(idle_s: float) -> int:
    import select

    while True:
        ready = os.name == "nt" or select.select([sys.stdin], [], [], idle_s)[0]  # no select on Windows pipes
        if not ready:  # idle: give the memory back; the pipeline starts another when it needs one
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

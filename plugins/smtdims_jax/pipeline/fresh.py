"""The fresh process: deserialize, compile and run the artifact where smtdims was never imported."""

from __future__ import annotations

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
def run_fresh_process(artifact: bytes, samples: Sequence[Sequence[np.ndarray]], reject: Sequence[Sequence[np.ndarray]],
                      say: Progress, timeout: float = 900.0) -> tuple[dict[str, Any], list[list[np.ndarray] | None]]:
    """Deserialize, compile and run ``artifact`` in a new interpreter that never imports smtdims.

    The worker script is copied into a private directory and run from there, so its
    ``sys.path`` holds nothing of this project; it inherits the environment (JAX_PLATFORMS...).
    """
    with tempfile.TemporaryDirectory(prefix="smtdims-verify-") as d:
        job: dict[str, Any] = {"samples": [], "reject": []}
        with open(os.path.join(d, "inputs.bin"), "wb") as f:
            for i, leaves in enumerate(samples, 1):
                job["samples"].append({"index": i, "inputs": _pack(leaves, f)})
            job["reject"] = [{"inputs": _pack(leaves, f)} for leaves in reject]
        Path(d, "artifact.bin").write_bytes(artifact)
        Path(d, "job.json").write_text(json.dumps(job))
        shutil.copy(_WORKER, os.path.join(d, "worker.py"))
        say(f"fresh process: starting {Path(sys.executable).name} (deserialize, compile, run without smtdims)")
        with open(os.path.join(d, "stderr.txt"), "w+") as err:
            env = dict(os.environ)
            if jax.config.jax_enable_x64:  # the artifact's dtypes need the same mode there
                env["JAX_ENABLE_X64"] = "1"
            proc = subprocess.Popen([sys.executable, "worker.py", d], cwd=d, stdout=subprocess.PIPE, stderr=err,
                                    stdin=subprocess.DEVNULL, text=True, env=env)
            timer = threading.Timer(timeout, proc.kill)
            timer.start()
            try:
                assert proc.stdout is not None
                for line in proc.stdout:
                    try:
                        ev = json.loads(line)
                    except ValueError:
                        continue
                    s = ev.get("sample")
                    total = len(samples)
                    if s == "outside":
                        say(f"outside-spec shape {ev.get('phase')}: calling, expecting a shape error")
                    else:
                        say(f"sample {s}/{total}: {'compiling' if ev.get('phase') == 'compile' else 'running'}")
                rc = proc.wait()
            finally:
                timer.cancel()
            err.seek(0)
            stderr = err.read()
        result_path = Path(d, "result.json")
        if not result_path.exists():
            why = "timed out" if rc < 0 else f"exited with {rc}"
            raise RuntimeError(f"the verification process {why} before writing results:\n{stderr[-4000:]}")
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

"""The artifact's sidecar: what :func:`~.verify.verify_artifact` needs beside the artifact.

``export_and_verify(..., out=PATH)`` writes the artifact and, beside it, ``PATH.smtdims.json``: the
specification (in_avals, constraints: a serialized ``Exported`` of jax 0.10.2 does not keep the
scope's constraints) and the shapes it was verified on (the samples, the outside-spec probes).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

FORMAT = 1
SUFFIX = ".smtdims.json"


def sidecar_path(artifact: str | os.PathLike[str]) -> Path:
    return Path(f"{os.fspath(artifact)}{SUFFIX}")


def exported_aval_text(a: Any) -> str:
    return f"{np.dtype(a.dtype).name}[{', '.join(str(d) for d in a.shape)}]"


def write_sidecar(artifact: str | os.PathLike[str], exp: Any, plan: Any, constraints: Sequence[str]) -> Path:
    """The specification and the verified shapes beside ``artifact`` (see the module docstring)."""
    data = {
        "smtdims_sidecar": FORMAT,
        "in_avals": [exported_aval_text(a) for a in exp.in_avals],
        "constraints": list(constraints),
        "platforms": list(exp.platforms),
        "samples": [{"valuation": env, "why": list(why)} for env, why in plan.chosen],
        "outside": [{"shapes": [list(x) for x in shapes], "why": why} for shapes, why in plan.outside],
    }
    path = sidecar_path(artifact)
    path.write_text(json.dumps(data, indent=1))
    return path


def read_sidecar(artifact: str | os.PathLike[str]) -> dict[str, Any] | None:
    path = sidecar_path(artifact)
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
    except ValueError as err:
        raise ValueError(f"{path}: not a smtdims sidecar ({err}); remove it to choose the shapes again") from None
    if not isinstance(data, dict) or data.get("smtdims_sidecar") != FORMAT:
        raise ValueError(f"{path}: not a smtdims sidecar of format {FORMAT}; remove it to choose the shapes again")
    return data

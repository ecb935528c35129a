"""What a notebook's code cells show, normalised: how ``tests/docs/test_notebook.py`` tells stale outputs
from a fresh run, and how ``scripts/notebook.sh`` decides whether to write the notebook at all.

Normalisation: pictures (``image/*``) are left out, since their bytes depend on the matplotlib and
freetype builds, not on smtdims; object addresses (``at 0x7f...``) and durations (``0.52 s``,
``13 ms``, ``0.7s``) are masked; consecutive stream chunks are joined (the kernel may split one
print). Everything else must match exactly. A run whose normalised outputs equal the committed
ones leaves the file untouched, so regenerating an unchanged notebook leaves ``git status`` clean
(a wall time in an output differs on every run).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

_ADDRESS = re.compile(r" at 0x[0-9a-f]+")
_DURATION = re.compile(r"\b\d+(\.\d+)? ?(ms|s)\b")


def visible_outputs(nb: Any) -> list[tuple[str, str, str]]:
    """``(cell id, kind, text)`` of everything the code cells show, normalised for comparison."""
    out: list[tuple[str, str, str]] = []
    for c in nb.cells:
        if c.cell_type != "code":
            continue
        for o in c.outputs:
            if o.output_type == "stream":
                if out and out[-1][0] == c.id and out[-1][1] == o.name:
                    out[-1] = (c.id, o.name, out[-1][2] + o.text)
                else:
                    out.append((c.id, o.name, o.text))
            elif o.output_type in ("display_data", "execute_result"):
                for k, v in sorted(o.data.items()):
                    if not k.startswith("image/"):
                        out.append((c.id, k, v if isinstance(v, str) else "".join(v)))
            elif o.output_type == "error":
                out.append((c.id, "error", o.ename))
    return [(cid, kind, _DURATION.sub("<t>", _ADDRESS.sub(" at 0x", text))) for cid, kind, text in out]


def stale_outputs(committed: Any, executed: Any) -> str:
    """A diff of what the committed notebook shows against a fresh execution ("" when current)."""
    import difflib

    a, b = visible_outputs(committed), visible_outputs(executed)
    if a == b:
        return ""
    flat = lambda xs: [f"[{cid} {kind}] {line}" for cid, kind, text in xs for line in text.splitlines()]  # noqa: E731
    return "\n".join(difflib.unified_diff(flat(a), flat(b), "committed", "executed now", lineterm="", n=1))


def write_if_changed(path: Path, executed: Any) -> bool:
    """Write ``executed`` to ``path`` unless what it shows equals what the notebook at ``path`` shows
    (normalised as above, cell sources equal too); whether it wrote."""
    import nbformat

    if path.exists():
        committed = nbformat.read(path, as_version=4)
        same_cells = [(c.cell_type, c.source) for c in committed.cells] == [(c.cell_type, c.source) for c in executed.cells]
        if same_cells and not stale_outputs(committed, executed):
            return False
    nbformat.write(executed, path)
    return True

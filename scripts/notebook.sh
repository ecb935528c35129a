#!/usr/bin/env bash
# One command: execute notebooks/constraint_debugging.ipynb in .venv and save its outputs in place
# (commit the result, so the pictures show when browsing the repository).
#   bash scripts/notebook.sh [NOTEBOOK...]
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
  echo "scripts/notebook.sh: no .venv; create it with: python3 -m venv .venv && .venv/bin/pip install -e '.[test]'" >&2
  exit 1
fi
if [ "$#" -eq 0 ]; then
  set -- notebooks/constraint_debugging.ipynb
fi
export JAX_PLATFORMS=cpu MPLBACKEND=module://matplotlib_inline.backend_inline PYTHONHASHSEED=0
exec .venv/bin/python - "$@" <<'PY'
"""Execute each notebook with a kernel running this interpreter; write outputs in place.

nbclient directly (not `jupyter nbconvert`, which .venv need not have); no timing metadata.
A notebook whose outputs show the same as before (tools/notebook_outputs.py: durations, object
addresses and pictures aside) is left untouched, so a run on an unchanged tree leaves git status clean.
"""
import json
import pathlib
import sys
import tempfile

import nbformat
from nbclient import NotebookClient

sys.path.insert(0, "tools")
from notebook_outputs import write_if_changed  # noqa: E402

with tempfile.TemporaryDirectory() as tmp:
    # A kernel spec for the running interpreter, whatever "python3" means on this machine.
    spec = pathlib.Path(tmp, "kernels", "smtdims-notebook")
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "smtdims (.venv)", "language": "python",
    }))
    import os

    os.environ["JUPYTER_PATH"] = tmp + os.pathsep + os.environ.get("JUPYTER_PATH", "")
    for name in sys.argv[1:]:
        path = pathlib.Path(name).resolve()
        nb = nbformat.read(path, as_version=4)
        NotebookClient(nb, timeout=600, kernel_name="smtdims-notebook", record_timing=False,
                       resources={"metadata": {"path": str(path.parent)}}).execute()
        nb.metadata.pop("widgets", None)
        nbformat.validate(nb)
        if write_if_changed(path, nb):
            print(f"{name}: executed, outputs written, {path.stat().st_size // 1024} KiB")
        else:
            print(f"{name}: executed, outputs unchanged (durations, addresses and pictures aside): left as it is")
PY

"""``tools/fuzz.py`` as a module for the tests that drive it (it is a script, not a package)."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def _load():
    spec = importlib.util.spec_from_file_location("smtdims_fuzz", Path(__file__).parent.parent / "tools" / "fuzz.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


FUZZ = _load()

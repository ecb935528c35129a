"""``python -m smtdims.cli``: the same command line as ``python -m smtdims`` and ``smtdims``."""

from __future__ import annotations

import sys

from .dispatch import main

if __name__ == "__main__":
    sys.exit(main())

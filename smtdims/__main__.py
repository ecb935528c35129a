"""``python -m smtdims``: the same command line as the ``smtdims`` console script
(``python -m smtdims run script.py [ARGS...]`` included)."""

from __future__ import annotations

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())

"""``python -m smtdims``: the same command line as the ``smtdims`` console script."""

from __future__ import annotations

import sys

from .cli import main

sys.exit(main())

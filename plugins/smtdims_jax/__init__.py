"""smtdims for jax.export: install the reasoner at JAX's decision seam.

Importing this package imports JAX; the private-API surface lives in :mod:`.adapter`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from smtdims.reasoner import CONFIG

from .adapter import (
    SUPPORTED_JAX,
    add_listener,
    install,
    installed_options,
    is_installed,
    remove_listener,
    scope_constraints,
    to_ir,
    uninstall,
)


@contextmanager
def enabled(*, budget: int | None = None, equality: bool = True) -> Iterator[None]:
    """Install smtdims for the block only; restores whatever state was there before."""
    was = installed_options() if is_installed() else None
    budget_before = CONFIG.budget
    install(budget=budget, equality=equality)
    try:
        yield
    finally:
        CONFIG.budget = budget_before
        if was is None:
            uninstall()
        else:
            install(equality=was.get("equality", True))


__all__ = [
    "SUPPORTED_JAX", "add_listener", "enabled", "install", "installed_options", "is_installed",
    "remove_listener", "scope_constraints", "to_ir", "uninstall",
]

"""smtdims for jax.export: install the reasoner at JAX's decision seam.

Importing this package imports JAX; the private-API surface lives in :mod:`.adapter`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from smtdims import options

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
def enabled(*, budget: int | None = None, deadline: float | None = None, equality: bool = True) -> Iterator[None]:
    """Install smtdims for the block only; restores whatever state was there before.

    ``budget``/``deadline`` apply to this block (this thread or task) only.
    """
    was = installed_options() if is_installed() else None
    install(equality=equality)
    try:
        with options.scoped(budget=budget, deadline=deadline):
            yield
    finally:
        if was is None:
            uninstall()
        else:
            install(equality=was.get("equality", True))


__all__ = [
    "SUPPORTED_JAX", "add_listener", "enabled", "install", "installed_options", "is_installed",
    "remove_listener", "scope_constraints", "to_ir", "uninstall",
]

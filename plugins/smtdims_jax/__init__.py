"""smtdims for jax.export: install the reasoner at JAX's decision seam.

Importing this package imports JAX. JAX's private names are taken in :mod:`.jax_internals` only;
:mod:`.seam` installs smtdims there, :mod:`.conversion` turns JAX's dimensions into smtdims' IR,
:mod:`.equality` answers ``==``, :mod:`.hints` and :mod:`.inconclusive` explain JAX's errors.
"""

from __future__ import annotations

from .conversion import scope_constraints, to_ir
from .jax_internals import SUPPORTED_JAX
from .listeners import add_listener, remove_listener
from .seam import enabled, install, installed_options, is_installed, stock_jax, uninstall

__all__ = [
    "SUPPORTED_JAX", "add_listener", "enabled", "install", "installed_options", "is_installed",
    "remove_listener", "scope_constraints", "stock_jax", "to_ir", "uninstall",
]

"""smtdims: exact, provable reasoning about JAX symbolic dimensions, backed by Z3.

The reasoner (this package) does not import JAX; the jax.export integration
(``install``, ``uninstall``, ``enabled``, ``is_installed``, ``export_and_verify``, ``verify_artifact``,
``VerificationReport``, ``audit``, ``AuditReport``) is loaded on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

from . import host, options
from .api import bounds, decide, symbolic_dim_bounds
from .constraints import Constraint, ConstraintSet
from .diagnostics import ConstraintReport, check_constraints
from .errors import (
    ParseError,
    PossibleDivisionByZeroError,
    ScopeMismatchError,
    SmtdimsError,
    UnsatisfiableConstraintsError,
    UnsupportedJaxError,
)
from .explain import Explanation, Fix, explain
from .expr import Expr
from .options import DEFAULT_DEADLINE
from .parser import parse_constraint, parse_expr
from .reasoner import DEFAULT_BUDGET, reset_stats, stats
from .results import Bounds, Decision

__version__ = "0.1.0"

_JAX_API = ("install", "uninstall", "enabled", "is_installed")
_PIPELINE_API = ("export_and_verify", "verify_artifact", "VerificationReport")
_AUDIT_API = ("audit", "AuditReport")
_LAZY = _JAX_API + _PIPELINE_API + _AUDIT_API


def __getattr__(name: str) -> Any:
    # JAX is imported only when a JAX-facing name is first used.
    if name in _JAX_API:
        import smtdims_jax

        return getattr(smtdims_jax, name)
    if name in _PIPELINE_API:
        from smtdims_jax import pipeline

        return getattr(pipeline, name)
    if name in _AUDIT_API:
        from smtdims_jax import audit as audit_module

        return getattr(audit_module, name)
    raise AttributeError(f"module 'smtdims' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


# The core never imports JAX; the first JAX object handed to it loads the adapter, which
# registers JAX as the host (see smtdims.host).
host.register_loader(host.looks_like_jax, lambda: importlib.import_module("smtdims_jax"))


__all__ = [
    "DEFAULT_BUDGET", "DEFAULT_DEADLINE", "AuditReport", "Bounds", "Constraint", "ConstraintReport", "ConstraintSet", "Decision",
    "Explanation", "Expr", "Fix", "ParseError", "PossibleDivisionByZeroError", "ScopeMismatchError",
    "SmtdimsError", "UnsatisfiableConstraintsError", "UnsupportedJaxError", "VerificationReport", "audit",
    "bounds", "check_constraints", "decide", "enabled", "explain", "export_and_verify", "verify_artifact", "install",
    "is_installed", "options", "parse_constraint", "parse_expr", "reset_stats", "stats", "symbolic_dim_bounds",
    "uninstall",
]

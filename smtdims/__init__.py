"""smtdims: exact, provable reasoning about JAX symbolic dimensions, backed by Z3.

The reasoner (this package) does not import JAX; the jax.export integration
(``install``, ``uninstall``, ``enabled``, ``is_installed``) is loaded on first use.
"""

from __future__ import annotations

from typing import Any

from .api import bounds, decide, symbolic_dim_bounds
from .audit import AuditReport, audit
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
from .parser import parse_constraint, parse_expr
from .reasoner import DEFAULT_BUDGET, reset_stats, stats
from .results import Bounds, Decision

__version__ = "0.1.0"

_JAX_API = ("install", "uninstall", "enabled", "is_installed")
_PIPELINE_API = ("export_and_verify", "VerificationReport")


def __getattr__(name: str) -> Any:
    # JAX is imported only when a JAX-facing name is first used.
    if name in _JAX_API:
        import smtdims_jax

        return getattr(smtdims_jax, name)
    if name in _PIPELINE_API:
        from smtdims_jax import pipeline

        return getattr(pipeline, name)
    raise AttributeError(f"module 'smtdims' has no attribute {name!r}")


__all__ = [
    "DEFAULT_BUDGET", "AuditReport", "Bounds", "Constraint", "ConstraintReport", "ConstraintSet", "Decision",
    "Explanation", "Expr", "Fix", "ParseError", "PossibleDivisionByZeroError", "ScopeMismatchError",
    "SmtdimsError", "UnsatisfiableConstraintsError", "UnsupportedJaxError", "VerificationReport", "audit",
    "bounds", "check_constraints", "decide", "enabled", "explain", "export_and_verify", "install",
    "is_installed", "parse_constraint", "parse_expr", "reset_stats", "stats", "symbolic_dim_bounds",
    "uninstall",
]

"""smtdims: exact, provable reasoning about JAX symbolic dimensions, backed by Z3.

The reasoner (this package) does not import JAX; the jax.export integration
(``install``, ``uninstall``, ``enabled``, ``is_installed``) is loaded on first use.
"""

from __future__ import annotations

from typing import Any

from .api import bounds, decide, symbolic_dim_bounds
from .constraints import Constraint, ConstraintSet
from .errors import (
    ParseError,
    PossibleDivisionByZeroError,
    ScopeMismatchError,
    SmtdimsError,
    UnsatisfiableConstraintsError,
    UnsupportedJaxError,
)
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
    "DEFAULT_BUDGET", "Bounds", "Constraint", "ConstraintSet", "Decision", "Expr", "ParseError",
    "PossibleDivisionByZeroError", "ScopeMismatchError", "SmtdimsError", "UnsatisfiableConstraintsError",
    "UnsupportedJaxError", "VerificationReport", "bounds", "decide", "enabled", "export_and_verify",
    "install", "is_installed", "parse_constraint", "parse_expr", "reset_stats", "stats",
    "symbolic_dim_bounds", "uninstall",
]

"""smtdims: exact, provable reasoning about JAX symbolic dimensions, backed by Z3.

The reasoner (this package) does not import JAX, nor any plugin; the jax.export integration
(``install``, ``uninstall``, ``enabled``, ``is_installed``, ``export_and_verify``, ``verify_artifact``,
``VerificationReport``, ``audit``, ``AuditReport``) is the plugin's, found through entry points
(:mod:`smtdims.plugins`) and loaded on first use.
"""

from __future__ import annotations

from typing import Any

from . import host, options, plugins
from .answers.diagnostics import ConstraintReport, check_constraints
from .answers.explain import Explanation, explain
from .answers.fixes import Fix
from .api import bounds, decide, symbolic_dim_bounds
from .errors import (
    ParseError,
    PossibleDivisionByZeroError,
    ScopeMismatchError,
    SmtdimsError,
    UnsatisfiableConstraintsError,
    UnsupportedJaxError,
)
from .lang.constraints import Constraint, ConstraintSet
from .lang.expr import Expr
from .lang.parser import parse_constraint, parse_expr
from .lang.results import Bounds, Decision
from .options import DEFAULT_DEADLINE
from .reasoner import DEFAULT_BUDGET, reset_stats, stats

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # A plugin's part of the API (smtdims.install, smtdims.audit, ...: the group smtdims.api of
    # pyproject.toml) is imported on first use, so JAX only then; dunder probes never read the table.
    entry = None if name.startswith("__") else plugins.find(plugins.API, name)
    if entry is None:
        raise AttributeError(f"module 'smtdims' has no attribute {name!r}")
    return entry.load()


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(plugins.entries(plugins.API)))


def _load_jax_host() -> None:
    entry = plugins.find(plugins.HOSTS, "jax")
    if entry is not None:
        entry.load()


# The core never imports JAX; the first JAX object handed to it loads the host the plugin declares
# (the group smtdims.hosts), which registers JAX as the host (see smtdims.host).
host.register_loader(host.looks_like_jax, _load_jax_host)


__all__ = [
    "DEFAULT_BUDGET", "DEFAULT_DEADLINE", "AuditReport", "Bounds", "Constraint", "ConstraintReport", "ConstraintSet", "Decision",
    "Explanation", "Expr", "Fix", "ParseError", "PossibleDivisionByZeroError", "ScopeMismatchError",
    "SmtdimsError", "UnsatisfiableConstraintsError", "UnsupportedJaxError", "VerificationReport", "audit",
    "bounds", "check_constraints", "decide", "enabled", "explain", "export_and_verify", "verify_artifact", "install",
    "is_installed", "options", "parse_constraint", "parse_expr", "reset_stats", "stats", "symbolic_dim_bounds",
    "uninstall",
]
